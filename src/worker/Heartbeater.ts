/**
 * Heartbeats for the tasks a worker holds, one statement per role for all of them: claimer heartbeats for
 * CLAIMED tasks (which also renew their claim lease) every `claimerIntervalMs`, runner heartbeats for RUNNING
 * tasks every `runnerIntervalMs`. Each beat is fenced on the claim token; a task missing from the answer
 * was lost (reclaimed, cancelled before start, finished by the reaper), and the worker is told.
 */
import type { Database } from '../db/Database.js';
import { HeartbeatInsertMany } from '../db/liveness.js';
import type { HeartbeatRole } from '../db/liveness.js';
import type { WorkerIdentity } from '../db/tasks.js';
import type { WorkerSink } from './events.js';
import type { SlotLedger } from './SlotLedger.js';

/** Settings of a {@link Heartbeater}. */
export interface HeartbeaterOptions {
  identity: WorkerIdentity;
  claimerIntervalMs: number;
  runnerIntervalMs: number;
  /** Lease set by each claimer heartbeat. */
  leaseMs: number;
  /** Claims older than this are no longer renewed. */
  maxClaimAgeMs: number;
}

/** Sends a worker's heartbeats. */
export class Heartbeater {
  private timers: NodeJS.Timeout[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly db: Database,
    private readonly options: HeartbeaterOptions,
    /** The tasks to beat for, per role. */
    private readonly held: Pick<SlotLedger, 'owned'>,
    /** Told of tasks sent in a beat but no longer owned in the database. */
    private readonly sink: Pick<WorkerSink, 'onLost' | 'fail'>,
  ) {}

  /** One beat for one role. Resolves to the ids confirmed as still owned. */
  async runOnce(role: HeartbeatRole): Promise<string[]> {
    const tasks = this.held.owned(role);
    if (tasks.length === 0) return [];
    const rows = await this.db.run(HeartbeatInsertMany, {
      worker: this.options.identity,
      role,
      tasks,
      leaseMs: this.options.leaseMs,
      maxClaimAgeMs: this.options.maxClaimAgeMs,
    });
    const confirmed = new Set(rows.map((r) => r.id));
    const lost = tasks.filter((t) => !confirmed.has(t.id)).map((t) => t.id);
    if (lost.length > 0) this.sink.onLost(role, lost);
    return [...confirmed];
  }

  /** Starts both timers. */
  start(): void {
    if (this.timers.length > 0) return;
    const every = (role: HeartbeatRole, ms: number): NodeJS.Timeout => {
      const timer = setInterval(() => {
        const beat = this.runOnce(role).catch((error: unknown) => this.sink.fail('heartbeat failed', error));
        this.inFlight.add(beat);
        void beat.finally(() => this.inFlight.delete(beat));
      }, ms);
      timer.unref();
      return timer;
    };
    this.timers = [
      every('claimer', this.options.claimerIntervalMs),
      every('runner', this.options.runnerIntervalMs),
    ];
  }

  /** Stops the timers and waits for beats under way. Idempotent. */
  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    await Promise.allSettled([...this.inFlight]);
  }
}
