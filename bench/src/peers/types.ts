/**
 * The one interface every peer adapter implements. A scenario only talks to a {@link Subject} (a peer at one
 * set of settings) and the {@link PeerSession} it opens; adding a peer or a variant is adding a Subject.
 */
import type { PostgresEnv } from '../env/postgres.js';
import type { RedisEnv } from '../env/redis.js';

/** The shared servers. */
export interface BenchEnv {
  postgres: PostgresEnv;
  /** Null when no redis-server is available. */
  redis: RedisEnv | null;
}

/**
 * Crash-recovery thresholds, the same for every peer that has such a mechanism: how long a dead worker's
 * claim stays valid, how often the recovery check runs, and how often an idle worker polls.
 */
export interface RecoverySettings {
  leaseMs: number;
  checkIntervalMs: number;
  pollIntervalMs: number;
}

/** What the no-op handler reports to the harness. */
export interface WorkerHooks {
  /** Called first thing in every handler run with the task's sequence number. */
  onStart(seq: number): void;
  /** When set, the handler awaits it before returning (the recovery child never lets it resolve). */
  hold?: () => Promise<void>;
}

export interface RunningWorker {
  /** Graceful stop: no new claims, running handlers finish. */
  stop(): Promise<void>;
}

/** A connection to one peer's store, for one sample. */
export interface PeerSession {
  /** Enqueues tasks `first`..`first + count - 1` with the peer's batch API, `chunk` tasks per call. */
  enqueueBatch(first: number, count: number, chunk: number): Promise<void>;
  /** Sends one task with the peer's single-send API. */
  sendOne(seq: number): Promise<void>;
  /**
   * Starts a worker at the subject's settings (and the recovery thresholds, when given) in this process, running
   * up to `concurrency` handlers at once ({@link CONCURRENCY} when not given).
   */
  startWorker(hooks: WorkerHooks, recovery?: RecoverySettings, concurrency?: number): Promise<RunningWorker>;
  /** Tasks waiting to run, as the store says. */
  countQueued(): Promise<number>;
  /** Tasks finished successfully, as the store says (see {@link Subject.finished}). */
  countFinished(): Promise<number>;
  /**
   * Tasks not finished yet (in any state before its last), where the store can say so more cheaply than
   * {@link countFinished} (through an index of unfinished work, not a count of everything finished). A drain's clock
   * stops when this reaches 0, and {@link countFinished} then confirms, off the clock, that all of them succeeded.
   */
  countLeft?(): Promise<number>;
  /** Closes every pool and connection the session opened. */
  close(): Promise<void>;
}

export interface Subject {
  /** Unique name in tables and on the command line, e.g. `graphile-worker-best`. */
  id: string;
  /** The npm package measured (for its version), e.g. `graphile-worker`. */
  peer: string;
  /** True for horsies' own subjects: the tables compare them with the best of the others. */
  isHorsies: boolean;
  /**
   * True for a reference point that is not a queue (see peers/floor.ts): measured only by the scenarios that say
   * so (`Scenario.baselines`), compared with horsies' subjects on lines of their own, never the best peer.
   */
  baseline?: boolean;
  /** Which server it needs. */
  store: 'postgres' | 'redis';
  /** The settings used, and what they trade off, in one or two sentences. */
  settings: string;
  /** What "finished in the store" means for this peer. */
  finished: string;
  /** Crash recovery: null when measured, otherwise why it is not. */
  recoveryNote: { skip: string } | null;
  /** Wipes the subject's store (its schema, or the Redis keys). */
  reset(env: BenchEnv): Promise<void>;
  /** Connects to an existing store, creating its tables if missing. */
  open(env: BenchEnv, recovery?: RecoverySettings): Promise<PeerSession>;
}

/** The payload every peer carries: a sequence number. */
export interface NoopPayload {
  seq: number;
}

/** The shared no-op handler body: report the start, optionally hold, return null. */
export async function runNoop(hooks: WorkerHooks | null, seq: number): Promise<null> {
  hooks?.onStart(seq);
  if (hooks?.hold) await hooks.hold();
  return null;
}

export const CONCURRENCY = 10;

/** Splits `first..first+count-1` into chunks of at most `chunk` sequence numbers. */
export function* chunks(first: number, count: number, chunk: number): Generator<number[]> {
  const size = Math.max(1, Math.min(chunk, count));
  for (let start = first; start < first + count; start += size) {
    const end = Math.min(first + count, start + size);
    yield Array.from({ length: end - start }, (_, i) => start + i);
  }
}
