/**
 * A million tasks for the dashboard's index proof (test/dashboard/explain.test.ts) and timings
 * (scripts/dashboard-queries.ts), and the page queries both run over them.
 *
 * The mix, per 1,000 rows: 30 PENDING (2 of them scheduled an hour ahead, 1 retrying), 1 RUNNING, 50 FAILED
 * (four common error codes and a rare one), 10 CANCELLED, 5 EXPIRED, the rest COMPLETED. Eight task names and
 * four queues share the rows evenly, beside a rare task name (20 rows), a rare queue (30 rows) and a rare error
 * code (10 rows): the filters whose first page a plain newest-first walk would have to scan the table for.
 * Finished rows span 30 days, newest first, about 1,400 in the last hour.
 */
import type { Statement } from '../src/db/sql.js';
import {
  DashboardDeadLetterGroups,
  DashboardDeadLetterPage,
  DashboardFinishedPage,
  DashboardFinishedPageByError,
  DashboardFinishedPageByName,
  DashboardFinishedPageByQueue,
  DashboardHeartbeats,
  DashboardInFlightPage,
  DashboardInFlightStats,
  DashboardLeaders,
  DashboardPendingPage,
  DashboardPendingPageByQueue,
  DashboardPendingStats,
  DashboardQueueStates,
  DashboardRecentFinished,
  DashboardRetryingPage,
  DashboardThroughput,
  DashboardWorkerStops,
  DashboardWorkers,
} from '../src/db/dashboard.js';
import {
  DashboardWorkflowGraph,
  DashboardWorkflowNode,
  DashboardWorkflowSpans,
} from '../src/db/dashboard.js';
import {
  DashboardGroupLimits,
  DashboardGroupsInFlight,
  DashboardHeldKeys,
  DashboardRateLimiters,
} from '../src/db/flow.js';
import { WorkflowGet } from '../src/db/workflows.js';
import { AttemptListByTask, TaskGet } from '../src/db/tasks.js';

/** Runs SQL with `{{schema}}` replaced by the quoted schema name. */
export type SchemaQuery = (sql: string, values?: unknown[]) => Promise<unknown[]>;

/** Inserts `n` tasks (default 1,000,000) with the mix above, plus worker snapshots, then VACUUM ANALYZE. */
export async function fillTasks(query: SchemaQuery, n = 1_000_000): Promise<void> {
  await query(
    `INSERT INTO {{schema}}.horsies_tasks
       (id, task_name, queue_name, status, sent_at, enqueued_at, claimed, claimed_by_worker_id, claimed_at,
        claim_generation, started_at, completed_at, failed_at, finished_at, error_code, result, attempt, retry_count,
        max_retries, next_retry_at)
     -- Ids in time order like the library's UUIDv7 ids (row 1 is the newest), written in key order.
     SELECT '01900000-0000-7000-8000-' || lpad(to_hex($1::int - g.i), 12, '0'), g.task_name, g.queue_name, g.status,
            g.at - interval '2 seconds', g.at - interval '1 second',
            g.status = 'RUNNING', CASE WHEN g.status = 'RUNNING' THEN 'w-' || (g.i % 4) END,
            CASE WHEN g.status = 'RUNNING' THEN g.at END, CASE WHEN g.status = 'RUNNING' THEN 1 ELSE 0 END,
            CASE WHEN g.status = 'RUNNING' THEN g.at END,
            CASE WHEN g.status = 'COMPLETED' THEN g.at END,
            CASE WHEN g.status = 'FAILED' THEN g.at END,
            CASE WHEN g.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') THEN g.at END,
            g.error_code,
            CASE WHEN g.status = 'COMPLETED' THEN '{"ok": 1}'::jsonb
                 WHEN g.error_code IS NOT NULL THEN jsonb_build_object('err', jsonb_build_object('code', g.error_code))
            END,
            CASE WHEN g.status IN ('PENDING', 'EXPIRED', 'CANCELLED') THEN g.retry_count ELSE 1 + g.retry_count END,
            g.retry_count, 3,
            CASE WHEN g.retry_count > 0 THEN g.at END
     FROM (
       SELECT s.i, s.status,
              CASE WHEN s.i % 50000 = 7 THEN 'rare.task' ELSE 'task_' || (s.i % 8) END AS task_name,
              CASE WHEN s.i % 33333 = 5 THEN 'rareq' ELSE (ARRAY['default', 'emails', 'reports', 'media'])[s.i % 4 + 1] END
                AS queue_name,
              CASE WHEN s.status = 'FAILED' AND s.i % 100000 = 40 THEN 'E_RARE'
                   WHEN s.status = 'FAILED' THEN (ARRAY['E_TIMEOUT', 'E_HTTP', 'E_DB', 'E_VALIDATION'])[s.i % 4 + 1]
                   WHEN s.status = 'CANCELLED' THEN 'TASK_CANCELLED'
                   WHEN s.status = 'EXPIRED' THEN 'TASK_EXPIRED'
              END AS error_code,
              CASE WHEN s.i % 1000 = 2 THEN 1 ELSE 0 END AS retry_count,
              CASE WHEN s.status = 'PENDING' AND s.i % 1000 < 3 THEN now() + (s.i % 3600) * interval '1 second'
                   WHEN s.status = 'PENDING' THEN now() - (s.i % 3600) * interval '1 second'
                   WHEN s.status = 'RUNNING' THEN now() - (s.i % 60) * interval '1 second'
                   ELSE now() - s.i * interval '2592 milliseconds'
              END AS at
       FROM (
         SELECT i, CASE WHEN i % 1000 < 30 THEN 'PENDING'
                        WHEN i % 1000 = 30 THEN 'RUNNING'
                        WHEN i % 1000 <= 80 THEN 'FAILED'
                        WHEN i % 1000 <= 90 THEN 'CANCELLED'
                        WHEN i % 1000 <= 95 THEN 'EXPIRED'
                        ELSE 'COMPLETED' END AS status
         FROM generate_series(1, $1::int) i
       ) s
     ) g`,
    [n],
  );
  await query(
    `INSERT INTO {{schema}}.horsies_worker_states (worker_id, snapshot_at, hostname, pid, queues, tasks_running)
     SELECT 'w-' || (i % 4), now() - (i * 5) * interval '1 second', 'host', 1000 + i % 4,
            ARRAY['default', 'emails', 'reports', 'media'], 10
     FROM generate_series(1, 20000) i`,
  );
  await fillWorkflows(query);
  await query(`VACUUM ANALYZE {{schema}}.horsies_tasks`);
  await query(`VACUUM ANALYZE {{schema}}.horsies_worker_states`);
  await query(`VACUUM ANALYZE {{schema}}.horsies_workflows`);
  await query(`VACUUM ANALYZE {{schema}}.horsies_workflow_tasks`);
}

/** The id of the large workflow {@link fillWorkflows} makes, and of one of its small ones. */
export const BIG_WORKFLOW_ID = '01900000-0000-7000-9000-000000000000';
export const SMALL_WORKFLOW_ID = '01900000-0000-7000-9000-000000000001';

/**
 * Workflows beside the tasks: 200 finished runs of 100 nodes and one of 5,000, each node a chain link (it waits
 * for the one before) linked to one of the tasks above, so the graph and timeline reads look tasks up by key.
 */
async function fillWorkflows(query: SchemaQuery): Promise<void> {
  await query(
    `INSERT INTO {{schema}}.horsies_workflows
       (id, name, status, definition_sha, nodes_total, nodes_terminal, root_workflow_id, sent_at, started_at,
        completed_at)
     SELECT w.id, 'bench.flow', 'COMPLETED', 'sha', w.n, w.n, w.id, now() - interval '1 hour',
            now() - interval '1 hour', now()
     FROM (SELECT '01900000-0000-7000-9000-' || lpad(to_hex(i), 12, '0') AS id, CASE WHEN i = 0 THEN 5000 ELSE 100 END AS n
           FROM generate_series(0, 200) i) w`,
  );
  await query(
    `INSERT INTO {{schema}}.horsies_workflow_tasks
       (workflow_id, node_index, node_id, task_name, queue_name, priority, dependencies, input_template, status,
        task_id, enqueued_at, completed_at)
     SELECT w.id, k, 'n' || k, 'task_' || (k % 8), 'default', 100,
            CASE WHEN k = 0 THEN '{}'::int[] ELSE ARRAY[k - 1] END, '{}'::jsonb, 'COMPLETED',
            '01900000-0000-7000-8000-' || lpad(to_hex(1 + (w.i * 5000 + k) % 900000), 12, '0'),
            now() - interval '1 hour', now()
     FROM (SELECT i, '01900000-0000-7000-9000-' || lpad(to_hex(i), 12, '0') AS id, CASE WHEN i = 0 THEN 5000 ELSE 100 END AS n
           FROM generate_series(0, 200) i) w,
          generate_series(0, w.n - 1) k`,
  );
}

/** One query a page runs, with the index it must use. */
export interface PageQuery {
  page: string;
  what: string;
  statement: Statement<never, unknown>;
  params: unknown;
  /**
   * The plan must use one of these indexes (empty: a small table, any plan is fine). Where a value is common the
   * planner may rightly walk the time index instead of the value's own.
   */
  indexes: string[];
}

const filter = {
  statuses: null,
  queue: null,
  taskName: null,
  errorCode: null,
  from: null,
  to: null,
  limit: 51,
  afterFinishedAt: null,
  afterId: null,
};
const pending = {
  queue: null,
  taskName: null,
  from: null,
  to: null,
  view: 'all',
  limit: 51,
  afterQueue: null,
  afterPriority: null,
  afterEnqueuedAt: null,
  afterId: null,
};

function q(
  page: string,
  what: string,
  statement: unknown,
  params: unknown,
  indexes: string | string[] | null,
): PageQuery {
  const list = indexes === null ? [] : Array.isArray(indexes) ? indexes : [indexes];
  return { page, what, statement: statement as Statement<never, unknown>, params, indexes: list };
}

/** The page queries, over the rows of {@link fillTasks}; `taskId` is any task's id (for the detail page). */
export function pageQueries(taskId: string): PageQuery[] {
  const hourAgo = new Date(Date.now() - 3_600_000);
  const weekAgo = new Date(Date.now() - 7 * 86_400_000);
  return [
    q('overview, queues', 'pending per queue', DashboardPendingStats, {}, 'horsies_tasks_claim_idx'),
    q('overview, queues', 'in flight per queue', DashboardInFlightStats, {}, 'horsies_tasks_in_flight_idx'),
    q(
      'overview, queues',
      'finished last hour',
      DashboardRecentFinished,
      { windowMs: 3_600_000 },
      'horsies_tasks_finished_idx',
    ),
    q(
      'overview',
      'throughput per minute',
      DashboardThroughput,
      { windowMs: 3_600_000, bucketMs: 60_000 },
      'horsies_tasks_finished_idx',
    ),
    q(
      'overview, workers',
      'latest snapshots',
      DashboardWorkers,
      { withinMs: 600_000 },
      'horsies_worker_states_snapshot_at_idx',
    ),
    q('overview, workers', 'stopped workers', DashboardWorkerStops, { withinMs: 600_000, limit: 100 }, null),
    q('overview', 'leaders', DashboardLeaders, {}, null),
    q('queues', 'queue states', DashboardQueueStates, {}, null),
    q('tasks', 'pending', DashboardPendingPage, pending, 'horsies_tasks_claim_idx'),
    q(
      'tasks',
      'pending, queue emails',
      DashboardPendingPageByQueue,
      { ...pending, queue: 'emails' },
      'horsies_tasks_claim_idx',
    ),
    q(
      'tasks',
      'pending, rare queue',
      DashboardPendingPageByQueue,
      { ...pending, queue: 'rareq' },
      'horsies_tasks_claim_idx',
    ),
    q(
      'tasks',
      'scheduled',
      DashboardPendingPage,
      { ...pending, view: 'scheduled' },
      'horsies_tasks_claim_idx',
    ),
    q(
      'tasks',
      'retrying',
      DashboardRetryingPage,
      { ...pending, afterEnqueuedAt: null, afterId: null },
      'horsies_tasks_retrying_idx',
    ),
    q(
      'tasks',
      'running',
      DashboardInFlightPage,
      { ...filter, afterClaimedAt: null },
      'horsies_tasks_in_flight_idx',
    ),
    q(
      'tasks',
      'completed',
      DashboardFinishedPage,
      { ...filter, statuses: ['COMPLETED'] },
      'horsies_tasks_finished_idx',
    ),
    q(
      'tasks',
      'completed, page 2',
      DashboardFinishedPage,
      {
        ...filter,
        statuses: ['COMPLETED'],
        afterFinishedAt: new Date(Date.now() - 130_000).toISOString(),
        afterId: 'f',
      },
      'horsies_tasks_finished_idx',
    ),
    q(
      'tasks',
      'all finished, last week to yesterday',
      DashboardFinishedPage,
      { ...filter, from: weekAgo, to: new Date(Date.now() - 86_400_000) },
      'horsies_tasks_finished_idx',
    ),
    q(
      'tasks',
      'completed, queue emails',
      DashboardFinishedPageByQueue,
      { ...filter, statuses: ['COMPLETED'], queue: 'emails' },
      ['horsies_tasks_finished_queue_idx', 'horsies_tasks_finished_idx'],
    ),
    q(
      'tasks',
      'finished, rare queue',
      DashboardFinishedPageByQueue,
      { ...filter, queue: 'rareq' },
      'horsies_tasks_finished_queue_idx',
    ),
    q(
      'tasks',
      'completed, task_3',
      DashboardFinishedPageByName,
      { ...filter, statuses: ['COMPLETED'], taskName: 'task_3' },
      ['horsies_tasks_finished_name_idx', 'horsies_tasks_finished_idx'],
    ),
    q(
      'tasks',
      'finished, rare task name',
      DashboardFinishedPageByName,
      { ...filter, taskName: 'rare.task' },
      'horsies_tasks_finished_name_idx',
    ),
    q(
      'tasks',
      'failed',
      DashboardDeadLetterPage,
      { ...filter, statuses: ['FAILED'] },
      'horsies_tasks_dead_letter_idx',
    ),
    q(
      'tasks',
      'expired',
      DashboardDeadLetterPage,
      { ...filter, statuses: ['EXPIRED'] },
      'horsies_tasks_dead_letter_idx',
    ),
    q(
      'tasks',
      'dead letters (failed, cancelled, expired)',
      DashboardDeadLetterPage,
      { ...filter, statuses: ['FAILED', 'CANCELLED', 'EXPIRED'] },
      'horsies_tasks_dead_letter_idx',
    ),
    q(
      'tasks',
      'failed, error E_HTTP',
      DashboardFinishedPageByError,
      { ...filter, statuses: ['FAILED'], errorCode: 'E_HTTP' },
      'horsies_tasks_dead_letter_error_idx',
    ),
    q(
      'tasks',
      'failed, rare error code',
      DashboardFinishedPageByError,
      { ...filter, statuses: ['FAILED'], errorCode: 'E_RARE' },
      ['horsies_tasks_dead_letter_error_idx', 'horsies_tasks_error_code_idx'],
    ),
    q(
      'tasks',
      'failed, last hour',
      DashboardDeadLetterPage,
      { ...filter, statuses: ['FAILED'], from: hourAgo },
      ['horsies_tasks_dead_letter_idx', 'horsies_tasks_finished_idx'],
    ),
    q('task', 'task by id', TaskGet, { id: taskId }, 'horsies_tasks_pkey'),
    q('task', 'attempts', AttemptListByTask, { taskId }, 'horsies_task_attempts_task_attempt_key'),
    q(
      'task',
      'heartbeats',
      DashboardHeartbeats,
      { taskId, limit: 20 },
      'horsies_heartbeats_task_role_sent_idx',
    ),
    q('dead letters', 'failed groups', DashboardDeadLetterGroups, {}, 'horsies_tasks_dead_letter_idx'),
    q('queues, flow', 'rate limiters', DashboardRateLimiters, { limit: 101 }, null),
    q('queues, flow', 'group limits', DashboardGroupLimits, { limit: 101 }, null),
    q(
      'queues, flow',
      'groups in flight',
      DashboardGroupsInFlight,
      { queue: null, limit: 101 },
      'horsies_tasks_group_in_flight_idx',
    ),
    q(
      'queues, flow',
      'groups in flight, one queue',
      DashboardGroupsInFlight,
      { queue: 'emails', limit: 101 },
      'horsies_tasks_group_in_flight_idx',
    ),
    q(
      'queues, flow',
      'keys held',
      DashboardHeldKeys,
      { queue: null, limit: 101 },
      'horsies_tasks_dedupe_key_idx',
    ),
    q(
      'queues, flow',
      'keys held, one queue',
      DashboardHeldKeys,
      { queue: 'emails', limit: 101 },
      'horsies_tasks_dedupe_key_idx',
    ),
    q('workflow', 'workflow by id', WorkflowGet, { id: BIG_WORKFLOW_ID }, null),
    ...[BIG_WORKFLOW_ID, SMALL_WORKFLOW_ID].flatMap((workflowId) => {
      const size = workflowId === BIG_WORKFLOW_ID ? '5,000 nodes' : '100 nodes';
      // Each node's task by its key: the index of the task table, never a scan or a hash of it.
      return [
        q('workflow', `graph, ${size}`, DashboardWorkflowGraph, { workflowId }, 'horsies_tasks_pkey'),
        q('workflow', `timeline, ${size}`, DashboardWorkflowSpans, { workflowId }, 'horsies_tasks_pkey'),
      ];
    }),
    q(
      'workflow',
      'one node',
      DashboardWorkflowNode,
      { workflowId: BIG_WORKFLOW_ID, nodeIndex: 4999 },
      'horsies_workflow_tasks_pkey',
    ),
  ];
}
