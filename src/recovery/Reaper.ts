/**
 * Maintenance: the reaper. Recovers tasks whose worker went silent.
 *
 * - CLAIMED with no claimer heartbeat for `claimedStaleThresholdMs` → PENDING (claim cleared). Safe: the task's
 *   code never ran.
 * - RUNNING with no runner heartbeat for `runningStaleThresholdMs` → an attempt row with outcome
 *   `WORKER_FAILURE` and code `WORKER_CRASHED`, then a retry (back to PENDING with the policy's delay) if the
 *   task's stored retry policy lists `WORKER_CRASHED` and retries remain, else FAILED.
 *
 * Staleness is judged on the database clock, from the latest heartbeat of the role sent by the task's current
 * holder, else from `claimed_at` / `started_at`. Each task is locked and re-checked before it changes, and the
 * writes are fenced on the claim generation, so a worker that is alive after all loses nothing but its claim.
 */
import { databaseClock } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Database } from '../db/Database.js';
import { TaskLockStaleRunning, TaskRequeueStaleClaimed } from '../db/liveness.js';
import type { StaleRunningRow } from '../db/liveness.js';
import { TaskFinishMany } from '../db/tasks.js';
import type { FinishHook, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import { decideRetry, storedRetryPolicy } from '../retry.js';
import type { RandomSource } from '../retry.js';
import type { ResolvedRecoveryConfig } from './config.js';
import type { MaintenanceService } from './Maintainer.js';

/** What one reaper pass did. */
export interface ReaperResult {
  /** Stale CLAIMED tasks put back to PENDING. */
  requeued: string[];
  /** Stale RUNNING tasks scheduled for a retry. */
  retried: string[];
  /** Stale RUNNING tasks failed with `WORKER_CRASHED`. */
  failed: string[];
}

/** Injected collaborators of a {@link Reaper}; all optional. */
export interface ReaperOptions {
  /** Staleness is judged at this clock's now. Default: the database clock. */
  clock?: Clock;
  /** Random source for backoff jitter. Default Math.random. */
  random?: RandomSource;
  /** Called with the outcomes the reaper wrote, after they commit (the same hook the worker's finishes take). */
  afterFinish?: FinishHook;
  /** Follows what each pass did, by task (metrics): stale claims requeued, stale runs retried or failed. */
  observer?: ReaperObserver;
}

/** A task the reaper acted on, with what metrics label it by. */
export interface ReapedTask {
  id: string;
  task_name: string;
  queue_name: string;
}

/** Follows the reaper's passes. */
export interface ReaperObserver {
  /** Stale CLAIMED tasks went back to PENDING. */
  requeued(tasks: ReapedTask[]): void;
  /** Stale RUNNING tasks got their `WORKER_CRASHED` verdict: PENDING for a retry, else FAILED. */
  reaped(tasks: (ReapedTask & { status: string })[]): void;
}

/** Finds and recovers tasks of dead workers. */
export class Reaper implements MaintenanceService<ReaperResult> {
  readonly name = 'reaper';
  private readonly clock: Clock;
  private readonly random: RandomSource;

  constructor(
    private readonly db: Database,
    private readonly config: ResolvedRecoveryConfig,
    private readonly options: ReaperOptions = {},
  ) {
    this.clock = options.clock ?? databaseClock;
    this.random = options.random ?? Math.random;
  }

  async runOnce(): Promise<ReaperResult> {
    const result: ReaperResult = { requeued: [], retried: [], failed: [] };
    const limit = this.config.retentionBatchSize;
    if (this.config.autoRequeueStaleClaimed) {
      for (let i = 0; i < this.config.retentionMaxBatchesPerRun; i += 1) {
        const rows = await this.db.run(TaskRequeueStaleClaimed, {
          thresholdMs: this.config.claimedStaleThresholdMs,
          limit,
          now: this.clock.now(),
        });
        result.requeued.push(...rows.map((r) => r.id));
        if (rows.length > 0) this.options.observer?.requeued(rows);
        if (rows.length < limit) break;
      }
    }
    if (this.config.autoFailStaleRunning) {
      for (let i = 0; i < this.config.retentionMaxBatchesPerRun; i += 1) {
        const batch = await this.reapRunning(limit);
        if (batch.length > 0) await this.options.afterFinish?.(batch);
        for (const row of batch) (row.status === 'PENDING' ? result.retried : result.failed).push(row.id);
        if (batch.length < limit) break;
      }
    }
    return result;
  }

  private async reapRunning(limit: number): Promise<TaskFinishRow[]> {
    const reaped = await this.db.transaction(async (client) => {
      const stale = await this.db.run(
        TaskLockStaleRunning,
        { thresholdMs: this.config.runningStaleThresholdMs, limit, now: this.clock.now() },
        client,
      );
      if (stale.length === 0) return { stale, written: [] };
      const written = await this.db.run(
        TaskFinishMany,
        { tasks: stale.map((row) => this.verdict(row)) },
        client,
      );
      return { stale, written };
    });
    const observer = this.options.observer;
    if (observer && reaped.written.length > 0) {
      const names = new Map(reaped.stale.map((r) => [r.id, r]));
      observer.reaped(
        reaped.written.flatMap((w) => {
          const row = names.get(w.id);
          return row
            ? [{ id: w.id, task_name: row.task_name, queue_name: row.queue_name, status: w.status }]
            : [];
        }),
      );
    }
    return reaped.written;
  }

  private verdict(row: StaleRunningRow): TaskFinish {
    const decision = decideRetry(
      storedRetryPolicy(row.task_options),
      { code: 'WORKER_CRASHED', retryCount: row.retry_count, maxRetries: row.max_retries },
      this.random,
    );
    const message = `no runner heartbeat from ${row.claimed_by_worker_id} for ${this.config.runningStaleThresholdMs} ms`;
    return {
      id: row.id,
      workerId: row.claimed_by_worker_id,
      token: row.claim_token,
      status: decision.retry ? 'RETRY' : 'FAILED',
      result: JSON.stringify({ err: { code: 'WORKER_CRASHED', message } }),
      errorCode: 'WORKER_CRASHED',
      errorMessage: message,
      failedReason: 'worker stopped sending heartbeats while the task ran',
      retryDelayMs: decision.retry ? decision.delayMs : 0,
      crashed: true,
    };
  }
}
