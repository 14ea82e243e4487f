/** Building blocks shared by the scenarios: a fresh store per sample, and the drain measurement. */
import type { PeerSession, RecoverySettings, RunningWorker, Subject, WorkerHooks } from '../peers/types.js';
import { acquireWithTimeout, closeQuietly, waitUntil, withTimeout } from '../time.js';
import { startContentionSampler } from './contention.js';
import type { ContentionSummary } from './contention.js';
import { startCostMeter } from './cost.js';
import type { RunContext } from './types.js';

/** The batch size used whenever a scenario pre-queues tasks (not measured). */
export const SETUP_CHUNK = 10_000;

/** Wipes the subject's store, opens a session, runs `fn`, closes the session and wipes the store again. */
export async function withSession<T>(
  subject: Subject,
  ctx: RunContext,
  fn: (session: PeerSession) => Promise<T>,
  recovery?: RecoverySettings,
): Promise<T> {
  await subject.reset(ctx.env);
  const session = await acquireWithTimeout(
    subject.open(ctx.env, recovery),
    120_000,
    `${subject.id}: open`,
    (s) => s.close(),
  );
  try {
    return await fn(session);
  } finally {
    await closeQuietly(`${subject.id} session`, () => session.close());
    await closeQuietly(`${subject.id} store reset`, () => subject.reset(ctx.env), 120_000);
  }
}

/** Starts a worker, runs `fn`, and stops the worker whatever happens. */
export async function withWorker<T>(
  session: PeerSession,
  subject: Subject,
  hooks: WorkerHooks,
  fn: (worker: RunningWorker) => Promise<T>,
  recovery?: RecoverySettings,
  concurrency?: number,
): Promise<T> {
  const worker = await acquireWithTimeout(
    session.startWorker(hooks, recovery, concurrency),
    60_000,
    `${subject.id}: worker start`,
    (w) => w.stop(),
  );
  try {
    return await fn(worker);
  } finally {
    await closeQuietly(`${subject.id} worker`, () => worker.stop());
  }
}

export interface DrainResult {
  /** Tasks finished in the store per second, from the worker's start to the poll that saw the target. */
  rate: number;
  elapsedMs: number;
  /** Finished tasks counted by that poll (the target, or slightly more when tasks remain). */
  finished: number;
  /** Handler runs seen in process by then. */
  handlerRuns: number;
  /** From the worker's start to the first handler run, and to the run that reached the target (the rest of
   * `elapsedMs` is the last outcomes' write and the poll that saw it). */
  firstRunMs: number | null;
  lastRunMs: number | null;
  /** What the contention sampler saw during the timed part, when asked for. */
  contention?: ContentionSummary;
  /** The timed part's cost per task, keyed as {@link costColumns} with the case's key, when asked for. */
  cost?: Record<string, number>;
}

/** Options of {@link measureDrain}; the defaults are the drain scenario's. */
export interface DrainOptions {
  /** Handlers at once (default: the subject's, 10). */
  concurrency?: number;
  /** Awaited by every handler before it returns (default: nothing, the no-op). */
  hold?: () => Promise<void>;
  /** Samples pg_stat_activity and pg_locks during the timed part (see contention.ts). */
  sampleContention?: boolean;
  /** Measures the timed part's cost per task (see cost.ts), keyed with this case key. */
  costKey?: string;
  /**
   * The clock stops when the store counts `target` tasks finished, never through {@link PeerSession.countLeft}:
   * for a store that keeps unfinished tasks behind the drained ones (the backlog scenario), where nothing left
   * never comes.
   */
  countFinished?: boolean;
}

/**
 * Starts a worker on a pre-queued store and times it until at least `target` tasks are finished in the store.
 * The handler count is watched in process (no load on the store); the store is polled only once the handlers
 * have run `target` times, every 5 ms, until it shows them finished (see {@link waitForDrain}).
 */
export async function measureDrain(
  session: PeerSession,
  subject: Subject,
  ctx: RunContext,
  target: number,
  timeoutMs: number,
  options: DrainOptions = {},
): Promise<DrainResult> {
  let runs = 0;
  let started = 0;
  let firstRunMs: number | null = null;
  let lastRunMs: number | null = null;
  const hooks: WorkerHooks = {
    onStart: () => {
      runs++;
      if (runs === 1) firstRunMs = performance.now() - started;
      if (runs === target) lastRunMs = performance.now() - started;
    },
  };
  if (options.hold) hooks.hold = options.hold;
  await ctx.env.postgres.checkpoint();
  const sampler = options.sampleContention ? await startContentionSampler(ctx.env.postgres) : null;
  try {
    const meter = options.costKey === undefined ? null : await startCostMeter(subject, ctx);
    started = performance.now();
    return await withWorker(
      session,
      subject,
      hooks,
      async () => {
        const { elapsedMs, finished } = await waitForDrain(
          session,
          subject,
          () => runs,
          started,
          target,
          timeoutMs,
          options.countFinished ?? false,
        );
        const result: DrainResult = {
          rate: (finished / elapsedMs) * 1000,
          elapsedMs,
          finished,
          handlerRuns: runs,
          firstRunMs,
          lastRunMs,
        };
        if (meter) result.cost = await meter.stop(finished, options.costKey!);
        if (sampler) result.contention = await sampler.stop();
        return result;
      },
      undefined,
      options.concurrency,
    );
  } finally {
    await sampler?.stop();
  }
}

/**
 * Waits until `runsSoFar()` reaches `target` (checked every 5 ms, no load on the store), then polls the store
 * every 5 ms until it shows `target` tasks finished: through {@link PeerSession.countLeft} where the peer has it
 * (the clock stops when nothing is left, and the finished tasks are counted after the clock), otherwise through
 * {@link PeerSession.countFinished} (also with `countFinished`). Returns the time from `started` to that poll, and
 * the count of finished tasks.
 */
export async function waitForDrain(
  session: PeerSession,
  subject: Subject,
  runsSoFar: () => number,
  started: number,
  target: number,
  timeoutMs: number,
  countFinished = false,
): Promise<{ elapsedMs: number; finished: number }> {
  await waitUntil(() => runsSoFar() >= target, {
    timeoutMs,
    intervalMs: 5,
    what: `${subject.id}: ${target} handler runs`,
  });
  const poll = {
    timeoutMs: Math.max(10_000, timeoutMs - (performance.now() - started)),
    intervalMs: 5,
    what: `${subject.id}: ${target} tasks finished in the store`,
  };
  let finished = 0;
  if (session.countLeft && !countFinished) {
    const countLeft = session.countLeft.bind(session);
    await waitUntil(async () => (await countLeft()) === 0, poll);
    const elapsedMs = performance.now() - started;
    finished = await session.countFinished();
    if (finished < target) {
      throw new Error(`${subject.id}: no task left unfinished, but only ${finished} of ${target} succeeded`);
    }
    return { elapsedMs, finished };
  }
  await waitUntil(async () => (finished = await session.countFinished()) >= target, poll);
  return { elapsedMs: performance.now() - started, finished };
}

/** Pre-queues `count` tasks with the batch API (setup, not measured) and checks the store holds them. */
export async function prequeue(
  session: PeerSession,
  subject: Subject,
  count: number,
  timeoutMs: number,
): Promise<number> {
  const started = performance.now();
  await withTimeout(
    session.enqueueBatch(0, count, SETUP_CHUNK),
    timeoutMs,
    `${subject.id}: pre-queue ${count} tasks`,
  );
  const queued = await session.countQueued();
  if (queued !== count)
    throw new Error(`${subject.id}: pre-queued ${count} tasks but the store has ${queued}`);
  return performance.now() - started;
}

export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}
