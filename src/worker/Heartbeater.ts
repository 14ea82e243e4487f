/**
 * Heartbeats for the tasks a worker holds, one statement per role for all of them: claimer heartbeats for
 * CLAIMED tasks (which also renew their claim lease) every `claimerIntervalMs`, runner heartbeats for RUNNING
 * tasks every `runnerIntervalMs`. Each beat is fenced on the claim generation; a task missing from the answer
 * was lost (reclaimed, cancelled before start, finished by the reaper), and the worker is told.
 */
import type { Database } from '../db/Database.js';
import { HeartbeatInsertMany } from '../db/liveness.js';
import type { HeartbeatRole } from '../db/liveness.js';
import type { OwnedTask, WorkerIdentity } from '../db/tasks.js';

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

/** What the heartbeater calls back into. */
export interface HeartbeaterHooks {
  /** The tasks to beat for, per role. */
  owned(role: HeartbeatRole): OwnedTask[];
  /** Tasks sent in a beat but no longer owned in the database. */
  onLost(role: HeartbeatRole, ids: string[]): void;
  onError(error: unknown): void;
}

/** Sends a worker's heartbeats. */
export class Heartbeater {
  private timers: NodeJS.Timeout[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly db: Database,
    private readonly options: HeartbeaterOptions,
    private readonly hooks: HeartbeaterHooks,
  ) {}

  /** One beat for one role. Resolves to the ids confirmed as still owned. */
  async runOnce(role: HeartbeatRole): Promise<string[]> {
    const tasks = this.hooks.owned(role);
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
    if (lost.length > 0) this.hooks.onLost(role, lost);
    return [...confirmed];
  }

  /** Starts both timers. */
  start(): void {
    if (this.timers.length > 0) return;
    const every = (role: HeartbeatRole, ms: number): NodeJS.Timeout => {
      const timer = setInterval(() => {
        const beat = this.runOnce(role).catch((error: unknown) => this.hooks.onError(error));
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
