/**
 * Operator statements: listing tasks by filter, cancelling, and resubmitting terminal tasks (the dead-letter
 * set) back to PENDING.
 */
import { statement } from './sql.js';
import type { TaskRow } from './tasks.js';

/** Which tasks a list or bulk operation covers. Unset fields match everything. */
export interface TaskFilterParams {
  statuses: string[] | null;
  taskName: string | null;
  queue: string | null;
  errorCode: string | null;
  /** Inclusive lower bound on `finished_at`. */
  finishedAfter: Date | null;
  /** Exclusive upper bound on `finished_at`. */
  finishedBefore: Date | null;
}

const FILTER = `($1::text[] IS NULL OR status = ANY($1::text[]))
       AND ($2::text IS NULL OR task_name = $2)
       AND ($3::text IS NULL OR queue_name = $3)
       AND ($4::text IS NULL OR error_code = $4)
       AND ($5::timestamptz IS NULL OR finished_at >= $5)
       AND ($6::timestamptz IS NULL OR finished_at < $6)`;

function filterValues(f: TaskFilterParams): unknown[] {
  return [f.statuses, f.taskName, f.queue, f.errorCode, f.finishedAfter, f.finishedBefore];
}

/** Tasks matching a filter, most recently finished (or enqueued) first. */
export const TaskList = statement<TaskFilterParams & { limit: number; offset: number }, TaskRow>(
  'TaskList',
  `SELECT * FROM {{schema}}.horsies_tasks
   WHERE ${FILTER}
   ORDER BY COALESCE(finished_at, enqueued_at) DESC, id
   LIMIT $7 OFFSET $8`,
  (p) => [...filterValues(p), p.limit, p.offset],
);

/** Counts of tasks matching a filter, per status. */
export const TaskCountByFilter = statement<TaskFilterParams, { status: string; count: number }>(
  'TaskCountByFilter',
  `SELECT status, count(*)::int AS count FROM {{schema}}.horsies_tasks WHERE ${FILTER} GROUP BY status`,
  (p) => filterValues(p),
);

/**
 * Cancels one task: PENDING and CLAIMED become CANCELLED at once; RUNNING gets `cancel_requested_at` (the
 * update trigger tells the owning worker). Returns the status the task had, or no row if there is no such task.
 */
export const TaskCancel = statement<
  { id: string },
  {
    previous_status: string;
    workflow_id: string | null;
    workflow_node: number | null;
    task_name: string;
    queue_name: string;
  }
>(
  'TaskCancel',
  `WITH target AS (
     SELECT id, status, workflow_id, workflow_node, task_name, queue_name
     FROM {{schema}}.horsies_tasks WHERE id = $1 FOR UPDATE
   ), cancelled AS (
     UPDATE {{schema}}.horsies_tasks t
     SET status = 'CANCELLED',
         finished_at = now(),
         claimed = false,
         claim_expires_at = NULL,
         cancel_requested_at = now(),
         error_code = 'TASK_CANCELLED',
         failed_reason = 'cancelled before it started',
         result = jsonb_build_object('err', jsonb_build_object('code', 'TASK_CANCELLED', 'message', 'cancelled before it started')),
         updated_at = now()
     FROM target g
     WHERE t.id = g.id AND g.status IN ('PENDING', 'CLAIMED')
   ), requested AS (
     UPDATE {{schema}}.horsies_tasks t
     SET cancel_requested_at = COALESCE(t.cancel_requested_at, now()), updated_at = now()
     FROM target g
     WHERE t.id = g.id AND g.status = 'RUNNING'
   )
   SELECT status AS previous_status, workflow_id, workflow_node, task_name, queue_name FROM target`,
  ({ id }) => [id],
);

/** RUNNING tasks of a worker that have a cancel request (the backstop for a lost notification). */
export const TaskListCancelRequested = statement<{ workerId: string }, { id: string }>(
  'TaskListCancelRequested',
  `SELECT id FROM {{schema}}.horsies_tasks
   WHERE claimed_by_worker_id = $1 AND claimed AND cancel_requested_at IS NOT NULL AND status = 'RUNNING'`,
  ({ workerId }) => [workerId],
);

/**
 * Resubmits up to `limit` terminal tasks back to PENDING: given `ids`, those of them matching the filter;
 * otherwise any matching the filter. A fresh retry budget (`retry_count` 0), attempt numbers continue,
 * `resubmit_count` + 1; attempts are kept. Tasks resubmitted at or after `notResubmittedSince` are skipped, so a
 * bulk pass never picks up a task it already resubmitted (and that failed again). A `good_until` already
 * passed is cleared, or the task would only expire again.
 */
export const TaskResubmit = statement<
  TaskFilterParams & { ids: string[] | null; notResubmittedSince: Date | null; limit: number },
  { id: string }
>(
  'TaskResubmit',
  `WITH batch AS (
     SELECT id FROM {{schema}}.horsies_tasks
     WHERE ${FILTER}
       AND status IN ('FAILED', 'CANCELLED', 'EXPIRED')
       AND ($7::text[] IS NULL OR id = ANY($7::text[]))
       AND ($8::timestamptz IS NULL OR resubmitted_at IS NULL OR resubmitted_at < $8)
     ORDER BY finished_at, id
     LIMIT $9
     FOR UPDATE SKIP LOCKED
   )
   UPDATE {{schema}}.horsies_tasks t
   SET status = 'PENDING',
       enqueued_at = now(),
       claimed = false,
       claimed_at = NULL,
       claimed_by_worker_id = NULL,
       claim_expires_at = NULL,
       started_at = NULL,
       completed_at = NULL,
       failed_at = NULL,
       finished_at = NULL,
       result = NULL,
       error_code = NULL,
       failed_reason = NULL,
       retry_count = 0,
       next_retry_at = NULL,
       cancel_requested_at = NULL,
       purge_after = NULL,
       good_until = CASE WHEN t.good_until <= now() THEN NULL ELSE t.good_until END,
       resubmit_count = t.resubmit_count + 1,
       resubmitted_at = now(),
       updated_at = now()
   -- Through an array, so each row is found by primary key (a join with the CTE can turn into a full scan).
   WHERE t.id = ANY (ARRAY(SELECT id FROM batch))
   RETURNING t.id`,
  (p) => [...filterValues(p), p.ids, p.notResubmittedSince, p.limit],
);

/** The database clock (to fix a point in time for a multi-statement operation). */
export const ClockNow = statement<Record<string, never>, { now: Date }>(
  'ClockNow',
  `SELECT now() AS now`,
  () => [],
);
