/**
 * Operations on stored tasks: list by filter, cancel, and resubmit terminal tasks (the dead-letter set). Used by
 * the app's methods and the CLI.
 */
import { z } from 'zod';
import { QUEUE_NAME_PATTERN, parseConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import type { Database } from '../db/Database.js';
import { ClockNow, TaskCancel, TaskCountByFilter, TaskList, TaskResubmit } from '../db/admin.js';
import { QueueKnown, QueueOverview, QueueSetPaused, ServedTaskNames } from '../db/capacity.js';
import type { TaskFilterParams } from '../db/admin.js';
import { TASK_STATUSES } from '../types.js';
import type { TaskInfo, TaskStatus } from '../types.js';
import { toTaskInfo } from './taskInfo.js';
import { stepWorkflow } from '../workflow/step.js';

/** Which tasks to list or resubmit. Unset fields match everything. */
export interface TaskFilter {
  /** One status or several. */
  status?: TaskStatus | TaskStatus[] | undefined;
  taskName?: string | undefined;
  queue?: string | undefined;
  errorCode?: string | undefined;
  /** Finished at or after this time. */
  finishedAfter?: Date | undefined;
  /** Finished before this time. */
  finishedBefore?: Date | undefined;
}

/** What `cancel()` did. */
export interface CancelResult {
  id: string;
  /**
   * `cancelled`: it was PENDING or CLAIMED and is CANCELLED now. `cancel_requested`: it is RUNNING; its worker
   * stops the handler and finishes it CANCELLED. `already_finished`: it was terminal; nothing changed.
   * `not_found`: no such task.
   */
  outcome: 'cancelled' | 'cancel_requested' | 'already_finished' | 'not_found';
  /** The status before the call (null when not found). */
  previousStatus: TaskStatus | null;
}

/** What a resubmit did. */
export interface ResubmitResult {
  /** Ids put back to PENDING. */
  ids: string[];
}

const RESUBMITTABLE: TaskStatus[] = ['FAILED', 'CANCELLED', 'EXPIRED'];

const status = z.enum(TASK_STATUSES);
const filterSchema = z.strictObject({
  status: z.union([status, z.array(status).min(1)]).optional(),
  taskName: z.string().min(1).optional(),
  queue: z.string().min(1).optional(),
  errorCode: z.string().min(1).optional(),
  finishedAfter: z.date().optional(),
  finishedBefore: z.date().optional(),
});

function toParams(filter: TaskFilter | undefined): TaskFilterParams {
  const f = parseConfig('task filter', filterSchema, filter ?? {});
  return {
    statuses: f.status === undefined ? null : Array.isArray(f.status) ? f.status : [f.status],
    taskName: f.taskName ?? null,
    queue: f.queue ?? null,
    errorCode: f.errorCode ?? null,
    finishedAfter: f.finishedAfter ?? null,
    finishedBefore: f.finishedBefore ?? null,
  };
}

/** Tasks matching `filter`, most recently finished (or enqueued) first. */
export async function listTasks(
  db: Database,
  filter: TaskFilter = {},
  page: { limit?: number; offset?: number } = {},
): Promise<TaskInfo[]> {
  const { limit, offset } = parseConfig(
    'page',
    z.strictObject({
      limit: z.number().int().min(1).max(10_000).default(100),
      offset: z.number().int().min(0).default(0),
    }),
    page,
  );
  const rows = await db.run(TaskList, { ...toParams(filter), limit, offset });
  return rows.map((row) => toTaskInfo(row));
}

/** How many tasks match `filter`, per status (every status present, 0 where none). */
export async function countTasks(db: Database, filter: TaskFilter = {}): Promise<Record<TaskStatus, number>> {
  const counts = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
  for (const row of await db.run(TaskCountByFilter, toParams(filter)))
    counts[row.status as TaskStatus] = row.count;
  return counts;
}

/** Cancels one task (see {@link CancelResult}). */
export async function cancelTask(
  db: Database,
  id: string,
  /** Called when the task was cancelled at once (metrics). */
  onCancelled?: (task: { task_name: string; queue_name: string }) => void,
): Promise<CancelResult> {
  const [row] = await db.run(TaskCancel, { id });
  if (!row) return { id, outcome: 'not_found', previousStatus: null };
  const previousStatus = row.previous_status as TaskStatus;
  const outcome =
    previousStatus === 'PENDING' || previousStatus === 'CLAIMED'
      ? 'cancelled'
      : previousStatus === 'RUNNING'
        ? 'cancel_requested'
        : 'already_finished';
  if (outcome === 'cancelled') onCancelled?.(row);
  if (outcome === 'cancelled' && row.workflow_id !== null && row.workflow_node !== null) {
    // The task of a workflow node: the node fails TASK_CANCELLED now, not at the next recovery pass. If this
    // step fails, the cancel stands and the recovery pass redoes the step.
    await stepWorkflow(db, row.workflow_id, { nodes: [row.workflow_node] }).catch(() => undefined);
  }
  return { id, outcome, previousStatus };
}

/**
 * Puts terminal tasks (FAILED, CANCELLED, EXPIRED; default FAILED) back to PENDING with a fresh retry budget:
 * the given ids, or every task matching the filter, in batches of `batchSize`. Attempt numbers continue and
 * the attempt history is kept. A task this call already resubmitted is not picked again, even if it fails
 * again meanwhile.
 */
export async function resubmitTasks(
  db: Database,
  target: { ids: string[] } | (TaskFilter & { batchSize?: number }),
): Promise<ResubmitResult> {
  if ('ids' in target) {
    if (target.ids.length === 0) return { ids: [] };
    const rows = await db.run(TaskResubmit, {
      ...toParams({ status: RESUBMITTABLE }),
      ids: target.ids,
      notResubmittedSince: null,
      limit: target.ids.length,
    });
    return { ids: rows.map((r) => r.id) };
  }
  const { batchSize = 1000, ...filter } = target;
  const params = toParams({ ...filter, status: filter.status ?? 'FAILED' });
  const refused = params.statuses?.filter((s) => !RESUBMITTABLE.includes(s as TaskStatus)) ?? [];
  if (refused.length > 0) {
    throw new ConfigError('resubmit filter', [
      {
        field: 'status',
        value: refused,
        message: 'only FAILED, CANCELLED and EXPIRED tasks can be resubmitted',
      },
    ]);
  }
  const [clock] = await db.run(ClockNow, {});
  const ids: string[] = [];
  for (;;) {
    const rows = await db.run(TaskResubmit, {
      ...params,
      ids: null,
      notResubmittedSince: clock!.now,
      limit: batchSize,
    });
    ids.push(...rows.map((r) => r.id));
    if (rows.length < batchSize) break;
  }
  return { ids };
}

/** One queue's overview: counts by status, whether it is paused, and how many PENDING tasks no worker serves. */
export interface QueueInfo {
  queue: string;
  paused: boolean;
  counts: Record<TaskStatus, number>;
  /** PENDING tasks whose name no live worker serving this queue has registered (they wait, and may expire). */
  noWorker: number;
}

/** A worker counts as live while its latest snapshot is younger than this. */
export const LIVE_WORKER_WINDOW_MS = 30_000;

/** Every queue with tasks or a stored state. */
export async function listQueues(db: Database): Promise<QueueInfo[]> {
  const rows = await db.run(QueueOverview, { liveWithinMs: LIVE_WORKER_WINDOW_MS });
  return rows.map((r) => ({
    queue: r.queue_name,
    paused: r.paused,
    counts: {
      PENDING: r.pending,
      CLAIMED: r.claimed,
      RUNNING: r.running,
      COMPLETED: r.completed,
      FAILED: r.failed,
      CANCELLED: r.cancelled,
      EXPIRED: r.expired,
    },
    noWorker: r.no_worker,
  }));
}

/** Pauses (no new claims; running tasks finish) or resumes a queue, cluster-wide. */
export async function setQueuePaused(db: Database, queue: string, paused: boolean): Promise<void> {
  if (typeof queue !== 'string' || !QUEUE_NAME_PATTERN.test(queue)) {
    throw new ConfigError('queue', [{ field: 'queue', value: queue, message: 'is not a valid queue name' }]);
  }
  await db.run(QueueSetPaused, { queue, paused });
}

/** True when a stored state, a task or a live worker names the queue (operators' commands refuse others). */
export async function isKnownQueue(db: Database, queue: string): Promise<boolean> {
  const [row] = await db.run(QueueKnown, { queue, liveWithinMs: LIVE_WORKER_WINDOW_MS });
  return row?.known ?? false;
}

/** The (queue, task name) pairs that some live worker serves, as `queue\u0000name` keys. */
export async function servedTaskKeys(db: Database): Promise<Set<string>> {
  const rows = await db.run(ServedTaskNames, { liveWithinMs: LIVE_WORKER_WINDOW_MS });
  return new Set(rows.map((r) => `${r.queue_name}\u0000${r.task_name}`));
}
