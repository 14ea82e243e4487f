/**
 * Flow-control statements of the claim side (migration 14): rate limiters and per-group limits. Only queues and
 * tasks that have such a limit ever run these; the plain claim and start (`tasks.ts`) are untouched.
 *
 * A rate limiter is a row of `horsies_rate_limiters` keyed `queue:<name>` or `task:<name>`, holding the starts of
 * its last interval. Every statement that starts tasks under it locks the row, grants, starts and records in that
 * one statement, so the limit is exact cluster-wide on the tasks' `started_at`: the claim for the tasks it starts
 * at once, `horsies_start_limited` for tasks claimed earlier. A claim that starts nothing reads the room without a
 * lock (so a worker claims no more than could start now).
 */
import { statement } from './sql.js';
import { TaskStartMany } from './tasks.js';
import type { ClaimAndStartRow, ClaimParams, StartingTask, TaskStartRow } from './tasks.js';

/** One limiter as a statement takes it: its key and its settings. */
export interface LimiterSpec {
  key: string;
  maxStarts: number;
  intervalMs: number;
}

function limiterArrays(limiters: readonly LimiterSpec[]): [string[], number[], number[]] {
  return [limiters.map((l) => l.key), limiters.map((l) => l.maxStarts), limiters.map((l) => l.intervalMs)];
}

/**
 * PENDING → CLAIMED for up to `limit` tasks of one queue, the first `start` of them written RUNNING at once, under
 * the `limiters` (sorted by key by the caller) and with `groupLimit` at most that many tasks of one group in flight,
 * groups taken in turn (`routines/horsies_claim_limited.sql`). A claim that starts nothing takes at most the
 * limiters' room read without a lock; one that starts tasks locks the limiters' rows, takes at most their room and
 * records its starts. Rows come back in no particular order.
 */
export const TaskClaimLimited = statement<
  ClaimParams & {
    limiters: readonly LimiterSpec[];
    groupLimit: number | null;
    start: number;
    waitForFlush: boolean;
  },
  ClaimAndStartRow
>(
  'TaskClaimLimited',
  `SELECT * FROM {{schema}}.horsies_claim_limited($1, $2::text[], $3, $4, $5, $6, $7, $8, $9::text[], $10::int[],
     $11::int[], $12, $13, $14)`,
  ({ queue, taskNames, limit, leaseMs, worker, limiters, groupLimit, start, waitForFlush }) => [
    queue,
    taskNames,
    limit,
    leaseMs,
    worker.workerId,
    worker.hostname,
    worker.pid,
    worker.processName,
    ...limiterArrays(limiters),
    groupLimit,
    start,
    waitForFlush,
  ],
);

/** A row of {@link TaskStartLimited}: a start row, or DEFERRED with the time the limiters have room again. */
export interface LimitedStartRow {
  id: string;
  status: TaskStartRow['status'] | 'DEFERRED';
  attempt: number | null;
  /** The start's time; for a DEFERRED row, when to try again. */
  started_at: Date | null;
}

/**
 * Starts claimed tasks (in the order given) under the `limiters` (sorted by key by the caller): as many as all of
 * them have room for, as `TaskStartMany` does, and DEFERRED rows for the rest (`horsies_start_limited`).
 */
export const TaskStartLimited = statement<
  {
    limiters: readonly LimiterSpec[];
    workerId: string;
    tasks: StartingTask[];
    waitForFlush: boolean;
  },
  LimitedStartRow
>(
  'TaskStartLimited',
  `SELECT * FROM {{schema}}.horsies_start_limited($1::text[], $2::int[], $3::int[], $4, $5::text[], $6::text[], $7,
     $8::text[])`,
  ({ limiters, ...start }) => [...limiterArrays(limiters), ...TaskStartMany.values(start)],
);

/** No start under these limiters for `afterMs` from the database's now (unless a later pause stands). */
export const RateLimiterPause = statement<
  { limiters: readonly LimiterSpec[]; afterMs: number },
  Record<string, never>
>(
  'RateLimiterPause',
  `SELECT {{schema}}.horsies_rate_pause($1::text[], $2::int[], $3::int[], $4)`,
  ({ limiters, afterMs }) => [...limiterArrays(limiters), afterMs],
);

/** A limiter's state as `horsies queues list` and `getTask` show it. */
export interface RateLimiterRow {
  limiter_key: string;
  max_starts: number;
  interval_ms: number;
  /** Starts within the last interval. */
  used: number;
  paused_until: Date | null;
  /** When the limiter has room again (now or earlier when it has room). */
  free_at: Date;
}

// A limiter row r's starts within its interval (as u.used, joined laterally), and when it has room again: the
// later of its pause and, when full, the time the oldest start that keeps it full leaves the window (NULL when
// neither applies).
const LIMITER_USED = `SELECT COALESCE(sum(w.n), 0) AS used FROM unnest(r.window_at, r.window_count) AS w(at, n)
     WHERE w.at > now() - r.interval_ms * interval '1 millisecond'`;
const LIMITER_FREE_AT = `GREATEST(r.paused_until, CASE WHEN u.used >= r.max_starts THEN (
       SELECT min(x.at) + r.interval_ms * interval '1 millisecond'
       FROM (SELECT w.at, sum(w.n) OVER (ORDER BY w.at DESC) AS newer
             FROM unnest(r.window_at, r.window_count) AS w(at, n)
             WHERE w.at > now() - r.interval_ms * interval '1 millisecond') x
       WHERE x.newer >= r.max_starts) END)`;

/** Every limiter's state, or only those named in `keys` when given. */
export const RateLimiterList = statement<{ keys: string[] | null }, RateLimiterRow>(
  'RateLimiterList',
  `SELECT r.limiter_key, r.max_starts, r.interval_ms, u.used::int AS used, r.paused_until,
          GREATEST(now(), ${LIMITER_FREE_AT}) AS free_at
   FROM {{schema}}.horsies_rate_limiters r
   CROSS JOIN LATERAL (${LIMITER_USED}) u
   WHERE $1::text[] IS NULL OR r.limiter_key = ANY ($1::text[])
   ORDER BY r.limiter_key`,
  ({ keys }) => [keys],
);

/** A queue's group limit, as last declared by a worker. */
export interface GroupLimitRow {
  queue_name: string;
  group_limit: number;
  /** Groups with tasks in flight in the queue, and how many of them are at the limit. */
  busy_groups: number;
  full_groups: number;
}

/** Every queue's group limit with its groups in flight. */
export const GroupLimitList = statement<Record<string, never>, GroupLimitRow>(
  'GroupLimitList',
  `SELECT g.queue_name, g.group_limit, count(b.group_key)::int AS busy_groups,
          count(b.group_key) FILTER (WHERE b.n >= g.group_limit)::int AS full_groups
   FROM {{schema}}.horsies_group_limits g
   LEFT JOIN LATERAL (
     SELECT t.group_key, count(*) AS n FROM {{schema}}.horsies_tasks t
     WHERE t.claimed AND t.group_key IS NOT NULL AND t.queue_name = g.queue_name
       AND (t.status = 'RUNNING' OR t.claim_expires_at > now())
     GROUP BY t.group_key
   ) b ON true
   GROUP BY g.queue_name, g.group_limit
   ORDER BY g.queue_name`,
  () => [],
);

/** Why one PENDING task waits, as far as flow control goes. */
export interface TaskFlowRow {
  /** The database's clock. */
  now: Date;
  /** Its queue is paused. */
  paused: boolean;
  /** The group's limit in the task's queue and its tasks in flight (null when the queue has no group limit). */
  group_limit: number | null;
  group_in_flight: number | null;
  /** The latest time one of the task's limiters has room again, when that is later than now. */
  limited_until: Date | null;
  limited_by: string | null;
}

/** State of a task's queue (paused), group and limiters (keys `queue:<queue>` and `task:<name>`). */
export const TaskFlowState = statement<
  { queue: string; taskName: string; group: string | null },
  TaskFlowRow
>(
  'TaskFlowState',
  `SELECT now() AS now,
          EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = $1 AND q.paused) AS paused,
          g.group_limit,
          CASE WHEN g.group_limit IS NOT NULL AND $3::text IS NOT NULL THEN (
            SELECT count(*)::int FROM {{schema}}.horsies_tasks t
            WHERE t.claimed AND t.group_key IS NOT NULL AND t.queue_name = $1 AND t.group_key = $3
              AND (t.status = 'RUNNING' OR t.claim_expires_at > now())) END AS group_in_flight,
          l.free_at AS limited_until, l.limiter_key AS limited_by
   FROM (SELECT 1) one
   LEFT JOIN {{schema}}.horsies_group_limits g ON g.queue_name = $1
   LEFT JOIN LATERAL (
     SELECT r.limiter_key,
            ${LIMITER_FREE_AT} AS free_at
     FROM {{schema}}.horsies_rate_limiters r
     CROSS JOIN LATERAL (${LIMITER_USED}) u
     WHERE r.limiter_key IN ('queue:' || $1, 'task:' || $2)
     ORDER BY 2 DESC NULLS LAST
     LIMIT 1
   ) l ON l.free_at > now()`,
  ({ queue, taskName, group }) => [queue, taskName, group],
);

/** A limiter as the dashboard's flow view lists it: {@link RateLimiterRow} with when its row last changed. */
export interface DashboardLimiterRow extends RateLimiterRow {
  updated_at: Date;
}

/** The first `limit` limiters by key (`horsies_rate_limiters_pkey`; one row per limited queue or task). */
export const DashboardRateLimiters = statement<{ limit: number }, DashboardLimiterRow>(
  'DashboardRateLimiters',
  `SELECT r.limiter_key, r.max_starts, r.interval_ms, u.used::int AS used, r.paused_until,
          GREATEST(now(), ${LIMITER_FREE_AT}) AS free_at, r.updated_at
   FROM {{schema}}.horsies_rate_limiters r
   CROSS JOIN LATERAL (${LIMITER_USED}) u
   ORDER BY r.limiter_key
   LIMIT $1`,
  ({ limit }) => [limit],
);

/** Every queue's group limit, as last declared by a worker (`horsies_group_limits_pkey`). */
export const DashboardGroupLimits = statement<
  { limit: number },
  { queue_name: string; group_limit: number; updated_at: Date }
>(
  'DashboardGroupLimits',
  `SELECT queue_name, group_limit, updated_at FROM {{schema}}.horsies_group_limits ORDER BY queue_name LIMIT $1`,
  ({ limit }) => [limit],
);

/** One group's tasks in flight in one queue. */
export interface GroupInFlightRow {
  queue_name: string;
  group_key: string;
  /** CLAIMED tasks whose lease holds and RUNNING ones: what the group limit counts. */
  in_flight: number;
  running: number;
  /** The queue's group limit, or null when it has none. */
  group_limit: number | null;
}

/**
 * Groups with tasks in flight, the busiest first, `limit` of them, in one queue or all: read through
 * `horsies_tasks_group_in_flight_idx`, which holds the claimed tasks that carry a group (no more than the workers'
 * slots and prefetch), counted as the group limit counts them.
 */
export const DashboardGroupsInFlight = statement<{ queue: string | null; limit: number }, GroupInFlightRow>(
  'DashboardGroupsInFlight',
  `SELECT t.queue_name, t.group_key, count(*)::int AS in_flight,
          count(*) FILTER (WHERE t.status = 'RUNNING')::int AS running, g.group_limit
   FROM {{schema}}.horsies_tasks t
   LEFT JOIN {{schema}}.horsies_group_limits g ON g.queue_name = t.queue_name
   WHERE t.claimed AND t.group_key IS NOT NULL AND ($1::text IS NULL OR t.queue_name = $1)
     AND (t.status = 'RUNNING' OR t.claim_expires_at > now())
   GROUP BY t.queue_name, t.group_key, g.group_limit
   ORDER BY in_flight DESC, t.queue_name, t.group_key
   LIMIT $2`,
  ({ queue, limit }) => [queue, limit],
);

/** A dedupe or debounce key held by a task. */
export interface HeldKeyRow {
  id: string;
  task_name: string;
  queue_name: string;
  dedupe_key: string;
  dedupe_scope: 'pending' | 'debounce' | 'running' | 'finished';
  status: string;
  sent_at: Date;
  /** When the task is due (a debounced task: the last send plus its delay). */
  enqueued_at: Date;
  finished_at: Date | null;
  /** A `finished` holder: the end of its window (its key is released by the first send after it). */
  held_until: Date | null;
}

/**
 * Keys held now, by task name and key, the first `limit` of them, in one queue or all: a walk of
 * `horsies_tasks_dedupe_key_idx`, the unique index over exactly the held keys, in its own order.
 */
export const DashboardHeldKeys = statement<{ queue: string | null; limit: number }, HeldKeyRow>(
  'DashboardHeldKeys',
  `SELECT id, task_name, queue_name, dedupe_key, dedupe_scope, status, sent_at, enqueued_at, finished_at,
          finished_at + dedupe_window_ms * interval '1 millisecond' AS held_until
   FROM {{schema}}.horsies_tasks
   WHERE dedupe_held AND ($1::text IS NULL OR queue_name = $1)
   ORDER BY task_name, dedupe_key
   LIMIT $2`,
  ({ queue, limit }) => [queue, limit],
);
