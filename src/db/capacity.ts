/**
 * Capacity statements: the lock and counts behind exact caps, pausing queues, and the per-queue overview.
 *
 * A capped claim takes the cap's advisory transaction lock, counts what is in flight (with a snapshot taken after
 * the lock, so every earlier holder's claims are visible), claims at most the room left and commits (which releases
 * the lock), all in one statement. Without caps no lock is taken and claimers never wait on each other.
 */
import { statement } from './sql.js';
import { TaskClaim, TaskClaimAndStart, TaskStartMany, claimAndStartSql } from './tasks.js';
import type {
  ClaimAndStartParams,
  ClaimAndStartRow,
  ClaimParams,
  ClaimedTaskRow,
  StartingTask,
  TaskStartRow,
} from './tasks.js';

/** A cap: its advisory lock and the limits that apply. */
export interface CapLimits {
  /** Names the cap's advisory transaction lock (one per cluster cap, or per capped queue). */
  key: string;
  /** The cluster-wide cap, when the app sets one. */
  clusterCap: number | null;
  /** The queue's `maxConcurrency`, when it sets one. */
  queueCap: number | null;
  /** May be held beyond the caps (soft mode's `prefetchBuffer`, for claims). */
  extra: number;
}

/**
 * Takes the cap's advisory transaction lock (held until commit) and returns the room left under the caps for
 * `queue`, counted after the lock was granted (`routines/horsies_cap_room.sql`): RUNNING tasks only with
 * `running` (a soft mode's start), otherwise everything in flight (a claim). In a transaction, what follows it up
 * to the commit runs under the lock.
 */
export const CapRoom = statement<CapLimits & { queue: string; running: boolean }, { room: number }>(
  'CapRoom',
  `SELECT {{schema}}.horsies_cap_room($1, $2, $3, $4, $5, $6) AS room`,
  (p) => [p.key, p.queue, p.clusterCap, p.queueCap, p.extra, p.running],
);

/**
 * A row of a claim or start within a cap: the room it found, with a task it claimed or started (all null, in the
 * one row it returns, when it took none).
 */
export type CappedRow<R> = { room: number } & { [K in keyof R]: R[K] | null };

/** The tasks of rows within a cap (a row with the room alone carries none). */
export function rowsWithinCap<R extends { id: string }>(rows: CappedRow<R>[]): R[] {
  return rows.filter((r) => r.id !== null) as unknown as R[];
}

/**
 * A claim (as `TaskClaim`) of at most the room left under a cap, in one statement: its limit is the cap's room,
 * counted under the cap's lock, and it commits, releasing the lock, as it returns. Every row carries the room it
 * found (see {@link CappedRow}).
 */
export const TaskClaimWithinCap = statement<ClaimParams & { cap: CapLimits }, CappedRow<ClaimedTaskRow>>(
  'TaskClaimWithinCap',
  `SELECT r.room, c.*
   FROM (SELECT {{schema}}.horsies_cap_room($9, $1, $10, $11, $12, false) AS room OFFSET 0) r
   LEFT JOIN LATERAL {{schema}}.horsies_claim_tasks($1, $2::text[], LEAST($3, r.room), $4, $5, $6, $7, $8) c ON true`,
  (p) => [...TaskClaim.values(p), p.cap.key, p.cap.clusterCap, p.cap.queueCap, p.cap.extra],
);

/**
 * Soft mode: the start (as `TaskStartMany`) of as many of `tasks`, in order, as a cap leaves room to run, counted
 * under the cap's lock (RUNNING tasks only), in one statement. Every row carries the room; when nothing started,
 * one row with the room alone (`id` null). The tasks past the room were not offered to the start.
 */
export const TaskStartWithinCap = statement<
  { workerId: string; tasks: StartingTask[]; waitForFlush?: boolean; queue: string; cap: CapLimits },
  CappedRow<TaskStartRow>
>(
  'TaskStartWithinCap',
  `SELECT r.room, s.*
   FROM (SELECT {{schema}}.horsies_cap_room($6, $7, $8, $9, $10, true) AS room OFFSET 0) r
   LEFT JOIN LATERAL {{schema}}.horsies_start_tasks(
     $1, ($2::text[])[1:r.room], ($3::text[])[1:r.room], $4, $5::text[]) s ON true`,
  (p) => [...TaskStartMany.values(p), p.cap.key, p.queue, p.cap.clusterCap, p.cap.queueCap, p.cap.extra],
);

/**
 * A claim that starts (as `TaskClaimAndStart`) of at most the room left under a cap whose starts are not gated (hard
 * mode), in one statement, as {@link TaskClaimWithinCap}, whose rows carry the room as its do.
 */
export const TaskClaimAndStartWithinCap = statement<
  ClaimAndStartParams & { cap: CapLimits },
  CappedRow<ClaimAndStartRow>
>(
  'TaskClaimAndStartWithinCap',
  claimAndStartSql('$3', '{{schema}}.horsies_cap_room($13, $1, $14, $15, $16, false)'),
  (p) => [...TaskClaimAndStart.values(p), p.cap.key, p.cap.clusterCap, p.cap.queueCap, p.cap.extra],
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

/**
 * Whether anything names the queue: a stored state, a task in any state, or a live worker serving it. Each task
 * check walks a partial index (`horsies_tasks_claim_idx`, `horsies_tasks_in_flight_idx`,
 * `horsies_tasks_finished_queue_idx`), so a name nothing knows (a typo) costs no scan of the table.
 */
export const QueueKnown = statement<{ queue: string; liveWithinMs: number }, { known: boolean }>(
  'QueueKnown',
  `SELECT EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state WHERE queue_name = $1)
       OR EXISTS (SELECT 1 FROM {{schema}}.horsies_tasks
                  WHERE queue_name = $1 AND NOT claimed AND finished_at IS NULL)
       OR EXISTS (SELECT 1 FROM {{schema}}.horsies_tasks WHERE queue_name = $1 AND claimed)
       OR EXISTS (SELECT 1 FROM {{schema}}.horsies_tasks WHERE queue_name = $1 AND finished_at IS NOT NULL)
       OR EXISTS (SELECT 1 FROM {{schema}}.horsies_worker_states
                  WHERE snapshot_at > now() - $2 * interval '1 millisecond' AND $1 = ANY (queues)) AS known`,
  ({ queue, liveWithinMs }) => [queue, liveWithinMs],
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
