/**
 * Capacity statements: the lock and counts behind exact caps, pausing queues, and the per-queue overview.
 *
 * A capped claim runs in one transaction: take the cap's advisory transaction lock, count what is in flight
 * (with a snapshot taken after the lock, so every earlier holder's claims are visible), claim at most the room
 * left, commit (which releases the lock). Without caps no lock is taken and claimers never wait on each other.
 */
import { statement } from './Database.js';

/** Takes the advisory transaction lock named by `key` (held until commit). */
export const CapLock = statement<{ key: string }, Record<string, never>>(
  'CapLock',
  `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
  ({ key }) => [key],
);

/** What is in flight, cluster-wide and in one queue. A claim counts while its lease has not expired. */
export interface CapUsageRow {
  cluster_in_flight: number;
  cluster_running: number;
  queue_in_flight: number;
  queue_running: number;
}

/** Counts in-flight and running tasks, over all queues and in `queue`. */
export const CapUsage = statement<{ queue: string }, CapUsageRow>(
  'CapUsage',
  `SELECT count(*) FILTER (WHERE status = 'RUNNING' OR claim_expires_at > now())::int AS cluster_in_flight,
          count(*) FILTER (WHERE status = 'RUNNING')::int AS cluster_running,
          count(*) FILTER (WHERE queue_name = $1 AND (status = 'RUNNING' OR claim_expires_at > now()))::int
            AS queue_in_flight,
          count(*) FILTER (WHERE queue_name = $1 AND status = 'RUNNING')::int AS queue_running
   FROM {{schema}}.horsies_tasks
   WHERE claimed`,
  ({ queue }) => [queue],
);

/** Pauses or resumes a queue. */
export const QueueSetPaused = statement<
  { queue: string; paused: boolean },
  { queue_name: string; paused: boolean }
>(
  'QueueSetPaused',
  `INSERT INTO {{schema}}.horsies_queue_state (queue_name, paused, paused_at, updated_at)
   VALUES ($1, $2, CASE WHEN $2 THEN now() END, now())
   ON CONFLICT (queue_name) DO UPDATE
   SET paused = EXCLUDED.paused,
       paused_at = CASE WHEN EXCLUDED.paused THEN COALESCE({{schema}}.horsies_queue_state.paused_at, now()) END,
       updated_at = now()
   RETURNING queue_name, paused`,
  ({ queue, paused }) => [queue, paused],
);

/** One queue's overview row. */
export interface QueueOverviewRow {
  queue_name: string;
  paused: boolean;
  pending: number;
  claimed: number;
  running: number;
  completed: number;
  failed: number;
  cancelled: number;
  expired: number;
  /** PENDING tasks whose name no live worker serving the queue has registered. */
  no_worker: number;
}

/**
 * Counts by status for every queue that has tasks or a stored state, plus how many PENDING tasks no live worker
 * (a snapshot within `liveWithinMs`) has registered for that queue.
 */
export const QueueOverview = statement<{ liveWithinMs: number }, QueueOverviewRow>(
  'QueueOverview',
  `WITH live AS (
     SELECT DISTINCT ON (worker_id) worker_id, queues, task_names
     FROM {{schema}}.horsies_worker_states
     WHERE snapshot_at > now() - $1 * interval '1 millisecond'
     ORDER BY worker_id, snapshot_at DESC
   ), served AS (
     SELECT DISTINCT q AS queue_name, n AS task_name
     FROM live, unnest(live.queues) q, unnest(live.task_names) n
   ), counts AS (
     SELECT queue_name,
            count(*) FILTER (WHERE status = 'PENDING')::int AS pending,
            count(*) FILTER (WHERE status = 'CLAIMED')::int AS claimed,
            count(*) FILTER (WHERE status = 'RUNNING')::int AS running,
            count(*) FILTER (WHERE status = 'COMPLETED')::int AS completed,
            count(*) FILTER (WHERE status = 'FAILED')::int AS failed,
            count(*) FILTER (WHERE status = 'CANCELLED')::int AS cancelled,
            count(*) FILTER (WHERE status = 'EXPIRED')::int AS expired
     FROM {{schema}}.horsies_tasks GROUP BY queue_name
   ), orphans AS (
     SELECT t.queue_name, count(*)::int AS no_worker
     FROM {{schema}}.horsies_tasks t
     WHERE NOT t.claimed AND t.finished_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM served s WHERE s.queue_name = t.queue_name AND s.task_name = t.task_name)
     GROUP BY t.queue_name
   )
   SELECT q.queue_name, COALESCE(s.paused, false) AS paused,
          COALESCE(c.pending, 0) AS pending, COALESCE(c.claimed, 0) AS claimed, COALESCE(c.running, 0) AS running,
          COALESCE(c.completed, 0) AS completed, COALESCE(c.failed, 0) AS failed,
          COALESCE(c.cancelled, 0) AS cancelled, COALESCE(c.expired, 0) AS expired,
          COALESCE(o.no_worker, 0) AS no_worker
   FROM (SELECT queue_name FROM counts UNION SELECT queue_name FROM {{schema}}.horsies_queue_state) q
   LEFT JOIN counts c USING (queue_name)
   LEFT JOIN {{schema}}.horsies_queue_state s USING (queue_name)
   LEFT JOIN orphans o USING (queue_name)
   ORDER BY q.queue_name`,
  ({ liveWithinMs }) => [liveWithinMs],
);

/** The (queue, task name) pairs some live worker serves. */
export const ServedTaskNames = statement<{ liveWithinMs: number }, { queue_name: string; task_name: string }>(
  'ServedTaskNames',
  `SELECT DISTINCT q AS queue_name, n AS task_name
   FROM (
     SELECT DISTINCT ON (worker_id) queues, task_names
     FROM {{schema}}.horsies_worker_states
     WHERE snapshot_at > now() - $1 * interval '1 millisecond'
     ORDER BY worker_id, snapshot_at DESC
   ) live, unnest(live.queues) q, unnest(live.task_names) n`,
  ({ liveWithinMs }) => [liveWithinMs],
);
