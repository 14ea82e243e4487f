/**
 * Flow control on the claim side: rate limiters (per queue and per task name) and per-group limits.
 *
 * - A queue with a limiter (its own `rateLimit`, or a task of it with one) or a `maxConcurrencyPerGroup` claims
 *   through {@link claim} (`horsies_claim_limited`): at most the room the limiters have left, and with a group
 *   limit at most that many tasks of a group in flight, groups taken in turn. The tasks the worker has free slots
 *   for start in the claim itself (which then locks the limiters' rows and records those starts). Other queues
 *   never come here.
 * - A rate-limited task claimed without a start (prefetched, or behind a soft cap) starts through {@link start}
 *   (`horsies_start_limited`): one statement locks the limiters' rows, grants what their windows have room for,
 *   starts those tasks and records the starts at the start's own time. A start is the transition to RUNNING: a
 *   claim handed back, a task expired or a workflow task handed back at its start uses nothing. The rest come back
 *   deferred, with the time to try again.
 * - A run that an upstream throttled pauses every limiter of its task ({@link pause}).
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type { TaskDefinition } from '../client/TaskDefinition.js';
import type { QueueConfig, RateLimit } from '../client/config.js';
import type { Database, Queryable } from '../db/Database.js';
import { RateLimiterPause, TaskClaimLimited, TaskStartLimited } from '../db/flow.js';
import type { LimiterSpec } from '../db/flow.js';
import { inClaimOrder, startingTasks } from '../db/tasks.js';
import type { ClaimAndStartRow, ClaimParams, ClaimedTaskRow, TaskStartRow } from '../db/tasks.js';

/** What {@link FlowGuard.start} did with a batch of one limiter set. */
export interface LimitedStart {
  /** The tasks it tried to start, and their start rows (a task missing from `rows` was lost). */
  started: ClaimedTaskRow[];
  rows: TaskStartRow[];
  /** The tasks the limiters had no room for, still CLAIMED, and when to try them again. */
  deferred: ClaimedTaskRow[];
  retryAt: Date | null;
}

/** Settings of a {@link FlowGuard}. */
export interface FlowSettings {
  queues: ReadonlyMap<string, QueueConfig>;
  tasks: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>;
  /** Starts wait for their WAL flush (see WorkerConfig.claims.synchronousStarts). */
  synchronousStarts: boolean;
  workerId: string;
}

/** Applies one app's rate limiters and group limits. */
export class FlowGuard {
  private readonly queueLimiters = new Map<string, LimiterSpec>();
  private readonly taskLimiters = new Map<string, LimiterSpec>();
  private readonly groupLimits = new Map<string, number>();
  /** Queues that claim through {@link claim}. */
  private readonly limitedQueues = new Set<string>();

  constructor(
    private readonly db: Database,
    private readonly settings: FlowSettings,
    private readonly logger: Logger,
  ) {
    for (const q of settings.queues.values()) {
      if (q.rateLimit) this.queueLimiters.set(q.name, spec(`queue:${q.name}`, q.rateLimit));
      if (q.maxConcurrencyPerGroup !== undefined) this.groupLimits.set(q.name, q.maxConcurrencyPerGroup);
    }
    for (const t of settings.tasks.values()) {
      if (t.policies.rateLimit) this.taskLimiters.set(t.name, spec(`task:${t.name}`, t.policies.rateLimit));
    }
    for (const q of settings.queues.keys()) {
      const taskLimited = [...settings.tasks.values()].some(
        (t) => t.policies.queue === q && this.taskLimiters.has(t.name),
      );
      if (this.queueLimiters.has(q) || this.groupLimits.has(q) || taskLimited) this.limitedQueues.add(q);
    }
  }

  /** True when claims from `queue` go through {@link claim}. */
  applies(queue: string): boolean {
    return this.limitedQueues.has(queue);
  }

  /** True when the queue limits the tasks of a group in flight, so that a finish frees room for another. */
  limitsGroups(queue: string): boolean {
    return this.groupLimits.has(queue);
  }

  /** True when the start of a task of this queue and name goes through {@link start}. */
  gatesStart(queue: string, taskName: string): boolean {
    return this.queueLimiters.has(queue) || this.taskLimiters.has(taskName);
  }

  /** The limiters of a task, sorted by key (the order their rows are locked in). */
  limitersOf(queue: string, taskName: string): LimiterSpec[] {
    const found = [this.queueLimiters.get(queue), this.taskLimiters.get(taskName)];
    return found.filter((l): l is LimiterSpec => l !== undefined).sort((a, b) => (a.key < b.key ? -1 : 1));
  }

  /**
   * Claims from a limited queue, starting up to `start` of the tasks at once (0 within a cap's transaction, `on`:
   * those start through the dispatcher). Task names with a limiter of their own are claimed one name per statement
   * (each against its own limiter and the queue's); the other names together against the queue's limiter alone.
   * Rows in claim order.
   */
  async claim(params: ClaimParams, start: number, on?: Queryable): Promise<ClaimAndStartRow[]> {
    const { queue, taskNames } = params;
    const groupLimit = this.groupLimits.get(queue) ?? null;
    const own = taskNames.filter((n) => this.taskLimiters.has(n));
    const shared = taskNames.filter((n) => !this.taskLimiters.has(n));
    const batches: string[][] = shared.length > 0 ? [shared, ...own.map((n) => [n])] : own.map((n) => [n]);
    const claimed: ClaimAndStartRow[] = [];
    let starts = start;
    for (const names of batches) {
      const limit = params.limit - claimed.length;
      if (limit <= 0) break;
      const first = names[0] as string;
      const limiters =
        names.length === 1 && this.taskLimiters.has(first)
          ? this.limitersOf(queue, first)
          : this.limitersOf(queue, '');
      const rows = await this.db.run(
        TaskClaimLimited,
        {
          ...params,
          taskNames: names,
          limit,
          limiters,
          groupLimit,
          start: starts,
          waitForFlush: this.settings.synchronousStarts,
        },
        on,
      );
      starts -= rows.filter((r) => r.status === 'RUNNING').length;
      claimed.push(...rows);
    }
    return inClaimOrder(claimed);
  }

  /** Starts claimed tasks under their limiters: one statement per set of limiters, in the order given. */
  async start(tasks: ClaimedTaskRow[]): Promise<LimitedStart[]> {
    const bySet = new Map<string, { limiters: LimiterSpec[]; tasks: ClaimedTaskRow[] }>();
    for (const task of tasks) {
      const limiters = this.limitersOf(task.queue_name, task.task_name);
      const key = limiters.map((l) => l.key).join('\n');
      const entry = bySet.get(key) ?? { limiters, tasks: [] };
      entry.tasks.push(task);
      bySet.set(key, entry);
    }
    const results: LimitedStart[] = [];
    for (const { limiters, tasks: batch } of bySet.values()) {
      const rows = await this.startOnce(limiters, batch);
      const deferredIds = new Set(rows.filter((r) => r.status === 'DEFERRED').map((r) => r.id));
      const retryAt = rows.find((r) => r.status === 'DEFERRED')?.started_at ?? null;
      results.push({
        started: batch.filter((t) => !deferredIds.has(t.id)),
        rows: rows
          .filter((r) => r.status !== 'DEFERRED')
          .map((r) => ({ ...r, status: r.status as TaskStartRow['status'], attempt: r.attempt ?? 0 })),
        deferred: batch.filter((t) => deferredIds.has(t.id)),
        retryAt,
      });
    }
    return results;
  }

  private startOnce(limiters: LimiterSpec[], tasks: ClaimedTaskRow[]) {
    return this.db.run(TaskStartLimited, {
      limiters,
      workerId: this.settings.workerId,
      tasks: startingTasks(tasks),
      waitForFlush: this.settings.synchronousStarts,
    });
  }

  /**
   * An upstream throttled a run of `task`: none of its limiters starts anything for `retryAfterMs`, on any
   * worker. A failure is logged, not thrown: the task is retried at that time regardless.
   */
  async pause(task: ClaimedTaskRow, retryAfterMs: number): Promise<void> {
    const limiters = this.limitersOf(task.queue_name, task.task_name);
    if (limiters.length === 0) return;
    try {
      await this.db.run(RateLimiterPause, { limiters, afterMs: retryAfterMs });
    } catch (error) {
      this.logger.error(
        { err: error, taskId: task.id },
        'pausing the rate limiters of a throttled task failed',
      );
    }
  }
}

function spec(key: string, limit: RateLimit): LimiterSpec {
  return { key, maxStarts: limit.max, intervalMs: limit.intervalMs };
}
