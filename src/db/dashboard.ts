/**
 * The dashboard's reads. Each page query is a named statement that one index serves, so a page stays fast with
 * millions of rows (test/dashboard/explain.test.ts proves it with EXPLAIN on a million tasks):
 *
 * - Pending tasks, in claim order: `horsies_tasks_claim_idx` (keyset on its four columns).
 * - Claimed and running tasks: `horsies_tasks_in_flight_idx` (a small set, sorted after the scan).
 * - Finished tasks, newest first: `horsies_tasks_finished_idx`; with a queue, a task name or an error code, the
 *   index that leads with that column (`horsies_tasks_finished_queue_idx`, `..._finished_name_idx`,
 *   `..._dead_letter_error_idx`); the dead-letter statuses alone, `horsies_tasks_dead_letter_idx`. Keyset on
 *   (finished_at, id). Which one a list uses is decided per request, and the dashboard runs these statements
 *   unprepared, so the planner sees the value: a common queue or name is walked faster through the time index.
 * - Retrying tasks, by their next attempt: `horsies_tasks_retrying_idx`.
 *
 * Optional filters use COALESCE bounds or `IS NULL OR` guards on columns the chosen index does not lead with, so
 * a generic plan of the prepared statement walks the same index as a custom one. Counts of finished tasks cover
 * the last hour (an all-time count of a retained table is a full scan); live counts are exact.
 */
import { statement } from './sql.js';
import type { WorkflowNodeGraphRow } from './workflows.js';

/** One row of a task list: the columns a list shows (no input or result). */
export interface TaskListRow {
  id: string;
  task_name: string;
  queue_name: string;
  priority: number;
  status: string;
  sent_at: Date;
  enqueued_at: Date;
  claimed_at: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
  error_code: string | null;
  attempt: number;
  retry_count: number;
  max_retries: number;
  next_retry_at: Date | null;
  claimed_by_worker_id: string | null;
  resubmit_count: number;
  /** The row's time in the list's order at full (microsecond) precision, for the next page's cursor. */
  sort_at: string;
}

const LIST_COLUMNS = `id, task_name, queue_name, priority, status, sent_at, enqueued_at, claimed_at, started_at,
          finished_at, error_code, attempt, retry_count, max_retries, next_retry_at, claimed_by_worker_id,
          resubmit_count`;

/** Filters every task list takes. Null matches everything. */
export interface TaskListFilter {
  statuses: string[] | null;
  queue: string | null;
  taskName: string | null;
  errorCode: string | null;
  /** Inclusive lower bound on the list's time (finished_at for finished tasks, enqueued_at for others). */
  from: Date | null;
  /** Exclusive upper bound on the list's time. */
  to: Date | null;
  limit: number;
}

/** Position after the last row of a page of finished tasks (null: first page). */
export interface FinishedCursor {
  /** `sort_at` of the last row shown (text: a JavaScript Date would drop the microseconds). */
  afterFinishedAt: string | null;
  afterId: string | null;
}

type FinishedParams = TaskListFilter & FinishedCursor;

function finishedValues(p: FinishedParams): unknown[] {
  return [p.statuses, p.queue, p.taskName, p.errorCode, p.from, p.to, p.afterFinishedAt, p.afterId, p.limit];
}

/**
 * A page of finished tasks, newest first. `lead` is the condition that picks the index (it names the index's
 * leading column or the dead-letter predicate); the other filters are guards checked on the rows the walk meets.
 */
function finishedPage(name: string, lead: string): ReturnType<typeof statement<FinishedParams, TaskListRow>> {
  return statement<FinishedParams, TaskListRow>(
    name,
    `SELECT ${LIST_COLUMNS}, finished_at::text AS sort_at
     FROM {{schema}}.horsies_tasks
     WHERE finished_at IS NOT NULL${lead}
       AND finished_at >= COALESCE($5::timestamptz, '-infinity')
       AND finished_at < COALESCE($6::timestamptz, 'infinity')
       AND (finished_at, id) < (COALESCE($7::timestamptz, 'infinity'), COALESCE($8::text, ''))
       AND ($1::text[] IS NULL OR status = ANY ($1::text[]))
       AND ($2::text IS NULL OR queue_name = $2)
       AND ($3::text IS NULL OR task_name = $3)
       AND ($4::text IS NULL OR error_code = $4)
     ORDER BY finished_at DESC, id DESC
     LIMIT $9`,
    finishedValues,
  );
}

/** Finished tasks, any filter but the ones below: walks `horsies_tasks_finished_idx`. */
export const DashboardFinishedPage = finishedPage('DashboardFinishedPage', '');
/** Finished tasks of one queue (`$2` set): `horsies_tasks_finished_queue_idx`. */
export const DashboardFinishedPageByQueue = finishedPage(
  'DashboardFinishedPageByQueue',
  ' AND queue_name = $2',
);
/** Finished tasks of one task name (`$3` set): `horsies_tasks_finished_name_idx`. */
export const DashboardFinishedPageByName = finishedPage('DashboardFinishedPageByName', ' AND task_name = $3');
/**
 * Dead letters with one error code (`$4` set; completed tasks have none): `horsies_tasks_dead_letter_error_idx`,
 * or `horsies_tasks_error_code_idx` for a rare code.
 */
export const DashboardFinishedPageByError = finishedPage(
  'DashboardFinishedPageByError',
  ' AND completed_at IS NULL AND error_code = $4',
);
/** FAILED, CANCELLED and EXPIRED tasks (the dead-letter set): `horsies_tasks_dead_letter_idx`. */
export const DashboardDeadLetterPage = finishedPage('DashboardDeadLetterPage', ' AND completed_at IS NULL');

/** Which PENDING tasks a pending list shows. */
export type PendingView = 'all' | 'ready' | 'scheduled';

/** Position after the last row of a page of pending tasks, in claim order (null: first page). */
export interface PendingCursor {
  afterQueue: string | null;
  afterPriority: number | null;
  afterEnqueuedAt: string | null;
  afterId: string | null;
}

type PendingParams = Omit<TaskListFilter, 'statuses' | 'errorCode'> & PendingCursor & { view: PendingView };

function pendingPage(name: string, lead: string): ReturnType<typeof statement<PendingParams, TaskListRow>> {
  return statement<PendingParams, TaskListRow>(
    name,
    `SELECT ${LIST_COLUMNS}, enqueued_at::text AS sort_at
     FROM {{schema}}.horsies_tasks
     -- PENDING, in the terms of horsies_tasks_claim_idx's predicate.
     WHERE NOT claimed AND finished_at IS NULL${lead}
       AND (queue_name, priority, enqueued_at, id)
           > (COALESCE($5::text, ''), COALESCE($6::int, 0), COALESCE($7::timestamptz, '-infinity'),
              COALESCE($8::text, ''))
       AND ($1::text IS NULL OR queue_name = $1)
       AND ($2::text IS NULL OR task_name = $2)
       AND enqueued_at >= COALESCE($3::timestamptz, '-infinity')
       AND enqueued_at < COALESCE($4::timestamptz, 'infinity')
       AND CASE $9::text
             WHEN 'ready' THEN enqueued_at <= now()
             WHEN 'scheduled' THEN enqueued_at > now() AND retry_count = 0
             ELSE true
           END
     ORDER BY queue_name, priority, enqueued_at, id
     LIMIT $10`,
    (p) => [
      p.queue,
      p.taskName,
      p.from,
      p.to,
      p.afterQueue,
      p.afterPriority,
      p.afterEnqueuedAt,
      p.afterId,
      p.view,
      p.limit,
    ],
  );
}

/** PENDING tasks in claim order (queue, priority, enqueue time): `horsies_tasks_claim_idx`. */
export const DashboardPendingPage = pendingPage('DashboardPendingPage', '');
/** PENDING tasks of one queue (`$1` set), in claim order: `horsies_tasks_claim_idx` from that queue on. */
export const DashboardPendingPageByQueue = pendingPage('DashboardPendingPageByQueue', ' AND queue_name = $1');

/** Position after the last row of a page of retrying tasks (null: first page). */
export interface RetryingCursor {
  afterEnqueuedAt: string | null;
  afterId: string | null;
}

/**
 * PENDING tasks that wait for a retry, by the time of their next attempt (a retry sets `enqueued_at` to it):
 * `horsies_tasks_retrying_idx`.
 */
export const DashboardRetryingPage = statement<
  Omit<TaskListFilter, 'statuses' | 'errorCode'> & RetryingCursor,
  TaskListRow
>(
  'DashboardRetryingPage',
  `SELECT ${LIST_COLUMNS}, enqueued_at::text AS sort_at
   FROM {{schema}}.horsies_tasks
   WHERE retry_count > 0 AND NOT claimed AND finished_at IS NULL
     AND (enqueued_at, id) > (COALESCE($6::timestamptz, '-infinity'), COALESCE($7::text, ''))
     AND ($1::text IS NULL OR queue_name = $1)
     AND ($2::text IS NULL OR task_name = $2)
     AND enqueued_at >= COALESCE($3::timestamptz, '-infinity')
     AND enqueued_at < COALESCE($4::timestamptz, 'infinity')
   ORDER BY enqueued_at, id
   LIMIT $5`,
  (p) => [p.queue, p.taskName, p.from, p.to, p.limit, p.afterEnqueuedAt, p.afterId],
);

/** Position after the last row of a page of claimed or running tasks (null: first page). */
export interface InFlightCursor {
  afterClaimedAt: string | null;
  afterId: string | null;
}

/** CLAIMED and RUNNING tasks, most recently claimed first: `horsies_tasks_in_flight_idx`. */
export const DashboardInFlightPage = statement<
  Omit<TaskListFilter, 'errorCode'> & InFlightCursor,
  TaskListRow
>(
  'DashboardInFlightPage',
  `SELECT ${LIST_COLUMNS}, claimed_at::text AS sort_at
   FROM {{schema}}.horsies_tasks
   WHERE claimed
     AND (claimed_at, id) < (COALESCE($7::timestamptz, 'infinity'), COALESCE($8::text, ''))
     AND ($1::text[] IS NULL OR status = ANY ($1::text[]))
     AND ($2::text IS NULL OR queue_name = $2)
     AND ($3::text IS NULL OR task_name = $3)
     AND claimed_at >= COALESCE($4::timestamptz, '-infinity')
     AND claimed_at < COALESCE($5::timestamptz, 'infinity')
   ORDER BY claimed_at DESC, id DESC
   LIMIT $6`,
  (p) => [p.statuses, p.queue, p.taskName, p.from, p.to, p.limit, p.afterClaimedAt, p.afterId],
);

/** Per queue: PENDING tasks, how many wait for a later time, and the oldest ready one. */
export interface PendingStatsRow {
  queue_name: string;
  pending: number;
  scheduled: number;
  oldest_ready_at: Date | null;
}

/** PENDING counts per queue, read from `horsies_tasks_claim_idx` alone (an index-only scan). */
export const DashboardPendingStats = statement<Record<string, never>, PendingStatsRow>(
  'DashboardPendingStats',
  `SELECT queue_name,
          count(*)::int AS pending,
          count(*) FILTER (WHERE enqueued_at > now())::int AS scheduled,
          min(enqueued_at) FILTER (WHERE enqueued_at <= now()) AS oldest_ready_at
   FROM {{schema}}.horsies_tasks
   WHERE NOT claimed AND finished_at IS NULL
   GROUP BY queue_name`,
  () => [],
);

/** Per queue: CLAIMED and RUNNING tasks. */
export const DashboardInFlightStats = statement<
  Record<string, never>,
  { queue_name: string; claimed: number; running: number }
>(
  'DashboardInFlightStats',
  `SELECT queue_name,
          count(*) FILTER (WHERE status = 'CLAIMED')::int AS claimed,
          count(*) FILTER (WHERE status = 'RUNNING')::int AS running
   FROM {{schema}}.horsies_tasks
   WHERE claimed
   GROUP BY queue_name`,
  () => [],
);

/** Per queue and terminal status: tasks finished within the last `windowMs`. */
export const DashboardRecentFinished = statement<
  { windowMs: number },
  { queue_name: string; status: string; count: number }
>(
  'DashboardRecentFinished',
  `SELECT queue_name, status, count(*)::int AS count
   FROM {{schema}}.horsies_tasks
   WHERE finished_at IS NOT NULL AND finished_at >= now() - $1 * interval '1 millisecond'
   GROUP BY queue_name, status`,
  ({ windowMs }) => [windowMs],
);

/** One bucket of the throughput chart. */
export interface ThroughputRow {
  bucket: Date;
  completed: number;
  failed: number;
  other: number;
}

/** Finished tasks per `bucketMs` over the last `windowMs` (buckets with none are absent). */
export const DashboardThroughput = statement<{ windowMs: number; bucketMs: number }, ThroughputRow>(
  'DashboardThroughput',
  `SELECT date_bin($2 * interval '1 millisecond', finished_at, TIMESTAMPTZ '2000-01-01') AS bucket,
          count(*) FILTER (WHERE status = 'COMPLETED')::int AS completed,
          count(*) FILTER (WHERE status = 'FAILED')::int AS failed,
          count(*) FILTER (WHERE status IN ('CANCELLED', 'EXPIRED'))::int AS other
   FROM {{schema}}.horsies_tasks
   WHERE finished_at IS NOT NULL AND finished_at >= now() - $1 * interval '1 millisecond'
   GROUP BY 1
   ORDER BY 1`,
  ({ windowMs, bucketMs }) => [windowMs, bucketMs],
);

/** A worker's latest snapshot, with its age. */
export interface WorkerRow {
  worker_id: string;
  snapshot_at: Date;
  age_ms: number;
  hostname: string | null;
  pid: number | null;
  processes: number | null;
  queues: string[] | null;
  task_names: string[] | null;
  tasks_running: number | null;
  tasks_claimed: number | null;
  memory_usage_mb: number | null;
  cpu_percent: number | null;
  memory_percent: number | null;
  max_claim_batch: number | null;
  max_claim_per_worker: number | null;
  cluster_wide_cap: number | null;
  queue_priorities: Record<string, number> | null;
  queue_max_concurrency: Record<string, number | null> | null;
  worker_started_at: Date | null;
}

/** The latest snapshot of every worker that sent one within `withinMs`: `horsies_worker_states_snapshot_at_idx`. */
export const DashboardWorkers = statement<{ withinMs: number }, WorkerRow>(
  'DashboardWorkers',
  `SELECT DISTINCT ON (worker_id)
          worker_id, snapshot_at, (extract(epoch FROM now() - snapshot_at) * 1000)::float8 AS age_ms, hostname, pid,
          processes, queues, task_names, tasks_running, tasks_claimed, memory_usage_mb, cpu_percent, memory_percent,
          max_claim_batch, max_claim_per_worker, cluster_wide_cap, queue_priorities, queue_max_concurrency,
          worker_started_at
   FROM {{schema}}.horsies_worker_states
   WHERE snapshot_at > now() - $1 * interval '1 millisecond'
   ORDER BY worker_id, snapshot_at DESC`,
  ({ withinMs }) => [withinMs],
);

/** A worker that stopped cleanly: its stop record. */
export interface WorkerStopRow {
  worker_id: string;
  stopped_at: Date;
  age_ms: number;
  hostname: string | null;
  pid: number | null;
  queues: string[] | null;
  worker_started_at: Date | null;
}

/** Workers that stopped within `withinMs`, the latest first, `limit` of them (`horsies_worker_stops_stopped_at_idx`). */
export const DashboardWorkerStops = statement<{ withinMs: number; limit: number }, WorkerStopRow>(
  'DashboardWorkerStops',
  `SELECT worker_id, stopped_at, (extract(epoch FROM now() - stopped_at) * 1000)::float8 AS age_ms, hostname, pid,
          queues, worker_started_at
   FROM {{schema}}.horsies_worker_stops
   WHERE stopped_at > now() - $1 * interval '1 millisecond'
   ORDER BY stopped_at DESC
   LIMIT $2`,
  ({ withinMs, limit }) => [withinMs, limit],
);

/** Elected roles (the maintenance leader) and whether their lease still holds. */
export const DashboardLeaders = statement<
  Record<string, never>,
  { name: string; leader_id: string; elected_at: Date; renewed_at: Date; expires_at: Date; live: boolean }
>(
  'DashboardLeaders',
  `SELECT name, leader_id, elected_at, renewed_at, expires_at, expires_at > now() AS live
   FROM {{schema}}.horsies_leaders ORDER BY name`,
  () => [],
);

/** Stored queue states (paused or not). */
export const DashboardQueueStates = statement<
  Record<string, never>,
  { queue_name: string; paused: boolean; paused_at: Date | null }
>(
  'DashboardQueueStates',
  `SELECT queue_name, paused, paused_at FROM {{schema}}.horsies_queue_state ORDER BY queue_name`,
  () => [],
);

/**
 * The dead-letter set (FAILED, CANCELLED, EXPIRED) grouped by task, queue and error code, read from
 * `horsies_tasks_dead_letter_idx` alone (an index-only scan: the grouped columns are included in it). Cancelled
 * and expired tasks show as their codes, TASK_CANCELLED and TASK_EXPIRED.
 */
export const DashboardDeadLetterGroups = statement<
  Record<string, never>,
  { task_name: string; queue_name: string; error_code: string | null; count: number; last_failed_at: Date }
>(
  'DashboardDeadLetterGroups',
  `SELECT task_name, queue_name, error_code, count(*)::int AS count, max(finished_at) AS last_failed_at
   FROM {{schema}}.horsies_tasks
   WHERE finished_at IS NOT NULL AND completed_at IS NULL
   GROUP BY task_name, queue_name, error_code
   ORDER BY count(*) DESC, task_name, queue_name, error_code
   LIMIT 200`,
  () => [],
);

/** The latest heartbeats of one task: `horsies_heartbeats_task_role_sent_idx`. */
export const DashboardHeartbeats = statement<
  { taskId: string; limit: number },
  { role: string; sender_id: string; sent_at: Date; hostname: string | null; pid: number | null }
>(
  'DashboardHeartbeats',
  `SELECT role, sender_id, sent_at, hostname, pid
   FROM {{schema}}.horsies_heartbeats
   WHERE task_id = $1
   ORDER BY sent_at DESC
   LIMIT $2`,
  ({ taskId, limit }) => [taskId, limit],
);

/** One row of the workflow list: the columns a list shows (no params or result). */
export interface WorkflowListRow {
  id: string;
  name: string;
  status: string;
  error_code: string | null;
  nodes_total: number;
  nodes_terminal: number;
  parent_workflow_id: string | null;
  sent_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  /** `sent_at` at full (microsecond) precision, for the next page's cursor. */
  sort_at: string;
}

/**
 * Workflows, newest first, optionally of one status and name; keyset on (sent_at, id), the cursor's time as text
 * so no microsecond is lost between pages.
 */
export const DashboardWorkflowPage = statement<
  {
    status: string | null;
    name: string | null;
    /** Only the children of this run (served by horsies_workflows_parent_idx). */
    parent: string | null;
    afterSentAt: string | null;
    afterId: string | null;
    limit: number;
  },
  WorkflowListRow
>(
  'DashboardWorkflowPage',
  `SELECT id, name, status, error_code, nodes_total, nodes_terminal, parent_workflow_id, sent_at, started_at,
          completed_at, sent_at::text AS sort_at
   FROM {{schema}}.horsies_workflows
   WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR name = $2)
     AND ($6::text IS NULL OR parent_workflow_id = $6)
     AND (sent_at, id) < (COALESCE($3::timestamptz, 'infinity'), COALESCE($4::text, ''))
   ORDER BY sent_at DESC, id DESC
   LIMIT $5`,
  ({ status, name, parent, afterSentAt, afterId, limit }) => [
    status,
    name,
    afterSentAt,
    afterId,
    limit,
    parent,
  ],
);

/** A workflow node's stored wiring and times, for its detail panel. */
export interface WorkflowNodeDetailRow {
  node_index: number;
  node_id: string;
  input_template: unknown;
  result: unknown;
  enqueued_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
}

/** One node of a workflow by index: its input template (static part and references), result and times. */
export const DashboardWorkflowNode = statement<
  { workflowId: string; nodeIndex: number },
  WorkflowNodeDetailRow
>(
  'DashboardWorkflowNode',
  `SELECT node_index, node_id, input_template, result, enqueued_at, completed_at, created_at
   FROM {{schema}}.horsies_workflow_tasks
   WHERE workflow_id = $1 AND node_index = $2`,
  ({ workflowId, nodeIndex }) => [workflowId, nodeIndex],
);

/** A node's span on a workflow's timeline: when it was enqueued, its task claimed, started and finished. */
export interface WorkflowSpanRow {
  node_index: number;
  node_id: string;
  status: string;
  enqueued_at: Date | null;
  started_at: Date | null;
  finished_at: Date | null;
}

/**
 * A workflow's nodes as its graph is drawn (WorkflowNodeGraph's row), the task of each ENQUEUED node looked up by
 * its primary key: only such a node's shown status depends on its task (RUNNING while the task runs), so a
 * finished run reads no task row at all, and `task_status` is null for the other nodes. The lateral subquery with
 * `OFFSET 0` is not flattened into a join, so the plan stays one index lookup per such node: joined plainly, a run
 * of thousands of nodes was planned as a hash join over the whole task table (300 to 500 ms beside a million
 * tasks, against a few ms).
 */
export const DashboardWorkflowGraph = statement<{ workflowId: string }, WorkflowNodeGraphRow>(
  'DashboardWorkflowGraph',
  `SELECT n.node_index, n.node_id, n.task_name, n.dependencies, n.join_rule, n.min_success, n.allow_failed_deps,
          CASE WHEN n.status = 'ENQUEUED' AND t.status = 'RUNNING' THEN 'RUNNING' ELSE n.status END AS status,
          n.task_id, t.status AS task_status, n.error_code, n.subworkflow, n.child_workflow_id, n.wait_kind
   FROM {{schema}}.horsies_workflow_tasks n
   LEFT JOIN LATERAL (
     SELECT k.status FROM {{schema}}.horsies_tasks k WHERE n.status = 'ENQUEUED' AND k.id = n.task_id OFFSET 0
   ) t ON true
   WHERE n.workflow_id = $1
   ORDER BY n.node_index`,
  ({ workflowId }) => [workflowId],
);

/** One node of a workflow as {@link DashboardWorkflowGraph} reads it (`horsies_workflow_tasks_pkey`). */
export const DashboardWorkflowGraphNode = statement<
  { workflowId: string; nodeIndex: number },
  WorkflowNodeGraphRow
>(
  'DashboardWorkflowGraphNode',
  `SELECT n.node_index, n.node_id, n.task_name, n.dependencies, n.join_rule, n.min_success, n.allow_failed_deps,
          CASE WHEN n.status = 'ENQUEUED' AND t.status = 'RUNNING' THEN 'RUNNING' ELSE n.status END AS status,
          n.task_id, t.status AS task_status, n.error_code, n.subworkflow, n.child_workflow_id, n.wait_kind
   FROM {{schema}}.horsies_workflow_tasks n
   LEFT JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
   WHERE n.workflow_id = $1 AND n.node_index = $2`,
  ({ workflowId, nodeIndex }) => [workflowId, nodeIndex],
);

/** The ids of some nodes of a workflow, by index (`horsies_workflow_tasks_pkey`). */
export const DashboardWorkflowNodeIds = statement<
  { workflowId: string; nodeIndexes: number[] },
  { node_index: number; node_id: string }
>(
  'DashboardWorkflowNodeIds',
  `SELECT node_index, node_id FROM {{schema}}.horsies_workflow_tasks
   WHERE workflow_id = $1 AND node_index = ANY ($2::int[])`,
  ({ workflowId, nodeIndexes }) => [workflowId, nodeIndexes],
);

/**
 * Every node's span: the node row's times, its task's by primary key (a lateral lookup per node, as in
 * DashboardWorkflowGraph). A subworkflow node's span is that of its node row (enqueued when its child started,
 * done when the child ended).
 */
export const DashboardWorkflowSpans = statement<{ workflowId: string }, WorkflowSpanRow>(
  'DashboardWorkflowSpans',
  `SELECT n.node_index, n.node_id, n.status, COALESCE(n.enqueued_at, t.enqueued_at) AS enqueued_at,
          t.started_at, COALESCE(t.finished_at, n.completed_at) AS finished_at
   FROM {{schema}}.horsies_workflow_tasks n
   LEFT JOIN LATERAL (
     SELECT k.enqueued_at, k.started_at, k.finished_at
     FROM {{schema}}.horsies_tasks k WHERE k.id = n.task_id OFFSET 0
   ) t ON true
   WHERE n.workflow_id = $1
   ORDER BY n.node_index`,
  ({ workflowId }) => [workflowId],
);
