/**
 * Maintenance statements: expiry of PENDING tasks past their deadline and retention. Each works on a bounded
 * batch, so a large backlog is spread over many short statements instead of one long lock-holding one. Each
 * compares with `now` when given (an injected clock), else with the database's `now()`.
 */
import { statement } from './sql.js';

/** Parameters of the retention deletes: rows older than `olderThanMs` before `now` (database clock if null). */
export interface PruneParams {
  olderThanMs: number;
  limit: number;
  now?: Date | null;
}

/** PENDING → EXPIRED (`TASK_EXPIRED`, no attempt row) for up to `limit` tasks whose `good_until` passed. */
export const TaskExpireBatch = statement<
  { limit: number; now?: Date | null },
  {
    id: string;
    status: 'EXPIRED';
    workflow_id: string | null;
    workflow_node: number | null;
    task_name: string;
    queue_name: string;
  }
>(
  'TaskExpireBatch',
  `WITH batch AS (
     SELECT id FROM {{schema}}.horsies_tasks
     WHERE NOT claimed AND finished_at IS NULL AND good_until IS NOT NULL
       AND good_until <= coalesce($2::timestamptz, now())
     ORDER BY good_until
     LIMIT $1
     FOR UPDATE SKIP LOCKED
   )
   UPDATE {{schema}}.horsies_tasks t
   SET status = 'EXPIRED',
       finished_at = coalesce($2::timestamptz, now()),
       error_code = 'TASK_EXPIRED',
       failed_reason = 'good_until passed before the task was claimed',
       result = jsonb_build_object('err', jsonb_build_object(
         'code', 'TASK_EXPIRED', 'message', 'good_until passed before the task was claimed')),
       updated_at = now()
   -- Through an array, so each row is found by primary key (a join with the CTE can turn into a full scan).
   WHERE t.id = ANY (ARRAY(SELECT id FROM batch))
   RETURNING t.id, t.status, t.workflow_id, t.workflow_node, t.task_name, t.queue_name`,
  ({ limit, now }) => [limit, now ?? null],
);

/**
 * Deletes up to `limit` rows of `table` whose `at` is older than `olderThanMs`, picked by their `key` (the rows a
 * retention pass drains in batches).
 */
function pruneOlderThan(name: string, table: string, key: string, at: string) {
  return statement<PruneParams, { deleted: number }>(
    name,
    `WITH gone AS (
       DELETE FROM {{schema}}.${table} WHERE ${key} IN (
         SELECT ${key} FROM {{schema}}.${table}
         WHERE ${at} < coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
         LIMIT $2
       )
       RETURNING 1
     )
     SELECT count(*)::int AS deleted FROM gone`,
    ({ olderThanMs, limit, now }) => [olderThanMs, limit, now ?? null],
  );
}

/** Deletes up to `limit` heartbeats older than `olderThanMs`. */
export const HeartbeatPrune = pruneOlderThan('HeartbeatPrune', 'horsies_heartbeats', 'id', 'sent_at');

/** Deletes up to `limit` worker snapshots older than `olderThanMs`. */
export const WorkerStatePrune = pruneOlderThan(
  'WorkerStatePrune',
  'horsies_worker_states',
  'id',
  'snapshot_at',
);

/** Deletes up to `limit` worker stop records older than `olderThanMs` (`horsies_worker_stops_stopped_at_idx`). */
export const WorkerStopPrune = pruneOlderThan(
  'WorkerStopPrune',
  'horsies_worker_stops',
  'worker_id',
  'stopped_at',
);

/**
 * Deletes up to `limit` terminal tasks finished more than `olderThanMs` ago (their attempts cascade), except
 * COMPLETED tasks with a retention of their own, which {@link TaskPrunePurgeable} handles.
 */
export const TaskPruneFinished = statement<PruneParams, { deleted: number }>(
  'TaskPruneFinished',
  `WITH gone AS (
     DELETE FROM {{schema}}.horsies_tasks WHERE id IN (
       SELECT id FROM {{schema}}.horsies_tasks
       WHERE finished_at < coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
         AND (status <> 'COMPLETED' OR retention_ms IS NULL)
       ORDER BY finished_at
       LIMIT $2
       FOR UPDATE SKIP LOCKED
     )
     RETURNING 1
   )
   SELECT count(*)::int AS deleted FROM gone`,
  ({ olderThanMs, limit, now }) => [olderThanMs, limit, now ?? null],
);

/** Deletes up to `limit` COMPLETED tasks whose own retention ran out (`purge_after` passed). */
export const TaskPrunePurgeable = statement<{ limit: number; now?: Date | null }, { deleted: number }>(
  'TaskPrunePurgeable',
  `WITH gone AS (
     DELETE FROM {{schema}}.horsies_tasks WHERE id IN (
       SELECT id FROM {{schema}}.horsies_tasks
       WHERE purge_after <= coalesce($2::timestamptz, now())
       ORDER BY purge_after
       LIMIT $1
       FOR UPDATE SKIP LOCKED
     )
     RETURNING 1
   )
   SELECT count(*)::int AS deleted FROM gone`,
  ({ limit, now }) => [limit, now ?? null],
);

/**
 * The task table as PostgreSQL's statistics count it (a busy backend reports at most a second late, one that went
 * idle within ten seconds): `changed`, the running count of its rows updated other than in place (not HOT) or
 * deleted, each of which leaves index entries for vacuum; its dead and live rows; its last vacuum (manual or auto,
 * epoch ms); and whether this role may vacuum it: its owner (or a member of the owning role), or a role granted
 * MAINTAIN on it (PostgreSQL 17 and later). No row when the schema has no task table.
 */
export const TaskTableVacuumState = statement<
  { schema: string },
  { changed: number; dead: number; live: number; lastVacuum: number | null; permitted: boolean }
>(
  'TaskTableVacuumState',
  `SELECT (pg_stat_get_tuples_updated(c.oid) - pg_stat_get_tuples_hot_updated(c.oid)
           + pg_stat_get_tuples_deleted(c.oid))::float8 AS changed,
          pg_stat_get_dead_tuples(c.oid)::float8 AS dead,
          pg_stat_get_live_tuples(c.oid)::float8 AS live,
          (extract(epoch FROM greatest(pg_stat_get_last_vacuum_time(c.oid),
                                       pg_stat_get_last_autovacuum_time(c.oid))) * 1000)::float8 AS "lastVacuum",
          pg_has_role(c.relowner, 'MEMBER')
            OR CASE WHEN current_setting('server_version_num')::int >= 170000
                    THEN has_table_privilege(c.oid, 'MAINTAIN') ELSE false END AS permitted
   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = $1 AND c.relname = 'horsies_tasks'`,
  ({ schema }) => [schema],
);

/**
 * Vacuums the task table: its indexes always (INDEX_CLEANUP ON: PostgreSQL would otherwise skip them when few
 * pages hold dead rows, which is exactly when the claim index's dead head is what costs), never truncating it
 * (that takes a lock the hot path would wait for), and not at all while another vacuum of it runs.
 */
export const TaskTableVacuum = statement<Record<string, never>, never>(
  'TaskTableVacuum',
  `VACUUM (INDEX_CLEANUP ON, TRUNCATE OFF, SKIP_LOCKED) {{schema}}.horsies_tasks`,
  () => [],
);
