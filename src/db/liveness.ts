/**
 * Liveness statements: heartbeats (which also renew claim leases), handing claims back, the reaper's
 * requeue of stale claims and lock of stale runs, leader election, and worker snapshots.
 *
 * The reaper's statements judge staleness at `now` when given (an injected clock), else at the database's
 * `now()`. Heartbeats and elections always use the database clock: they are what staleness is judged from.
 */
import { statement } from './sql.js';
import type { OwnedTask, WorkerIdentity } from './tasks.js';

/** A heartbeat's role: `claimer` for CLAIMED tasks, `runner` for RUNNING ones. */
export type HeartbeatRole = 'claimer' | 'runner';

/**
 * Records one heartbeat per task this worker still owns in the role's status (fenced on the claim token), in
 * one statement. Claimer heartbeats also renew the claim lease, unless the claim is older than `maxClaimAgeMs`.
 * Returns the ids still owned; a task missing from the result was reclaimed, cancelled or finished elsewhere.
 */
export const HeartbeatInsertMany = statement<
  { worker: WorkerIdentity; role: HeartbeatRole; tasks: OwnedTask[]; leaseMs: number; maxClaimAgeMs: number },
  { id: string }
>(
  'HeartbeatInsertMany',
  `WITH owned AS (
     -- By primary key ($1), each row's claim token matched as 'id:token' ($2): no join with the input.
     SELECT t.id, t.claimed_at FROM {{schema}}.horsies_tasks t
     WHERE t.id = ANY ($1::text[]) AND (t.id || ':' || t.claim_token) = ANY ($2::text[])
       -- Not indexable on purpose (|| ''): found by primary key, not by scanning the in-flight index.
       AND t.claimed_by_worker_id || '' = $3
       AND t.status || '' = CASE WHEN $4::text = 'claimer' THEN 'CLAIMED' ELSE 'RUNNING' END
   ), renewed AS (
     UPDATE {{schema}}.horsies_tasks t
     SET claim_expires_at = now() + $7 * interval '1 millisecond'
     WHERE $4::text = 'claimer'
       AND t.id = ANY (ARRAY(SELECT id FROM owned WHERE claimed_at > now() - $8 * interval '1 millisecond'))
   ), sent AS (
     INSERT INTO {{schema}}.horsies_heartbeats (task_id, sender_id, role, hostname, pid)
     SELECT id, $3, $4, $5, $6 FROM owned
   )
   SELECT id FROM owned`,
  ({ worker, role, tasks, leaseMs, maxClaimAgeMs }) => [
    tasks.map((t) => t.id),
    tasks.map((t) => `${t.id}:${t.token}`),
    worker.workerId,
    role,
    worker.hostname,
    worker.pid,
    leaseMs,
    maxClaimAgeMs,
  ],
);

/** CLAIMED → PENDING for tasks this worker claimed but will not start (at shutdown). No attempt. */
export const TaskReleaseClaimed = statement<{ workerId: string; tasks: OwnedTask[] }, { id: string }>(
  'TaskReleaseClaimed',
  `WITH input AS (
     SELECT * FROM unnest($2::text[], $3::uuid[]) AS i(id, token)
   )
   UPDATE {{schema}}.horsies_tasks t
   SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL,
       claim_expires_at = NULL, updated_at = now()
   FROM input i
   WHERE t.id = i.id AND t.status = 'CLAIMED' AND t.claimed_by_worker_id = $1 AND t.claim_token = i.token
   RETURNING t.id`,
  ({ workerId, tasks }) => [workerId, tasks.map((t) => t.id), tasks.map((t) => t.token)],
);

/**
 * The reaper's first case: CLAIMED tasks with no claimer heartbeat from their claimer for `thresholdMs` (and
 * claimed longer ago than that) go back to PENDING. Safe: their code never ran. Rows are locked and re-checked
 * before the change; a claim that started or got a heartbeat meanwhile is left alone.
 */
export const TaskRequeueStaleClaimed = statement<
  { thresholdMs: number; limit: number; now?: Date | null },
  { id: string; task_name: string; queue_name: string }
>(
  'TaskRequeueStaleClaimed',
  `WITH stale AS (
     SELECT t.id FROM {{schema}}.horsies_tasks t
     WHERE t.claimed AND t.status = 'CLAIMED'
       AND t.claimed_at < coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
       AND NOT EXISTS (
         SELECT 1 FROM {{schema}}.horsies_heartbeats h
         WHERE h.task_id = t.id AND h.role = 'claimer' AND h.sender_id = t.claimed_by_worker_id
           AND h.sent_at >= t.claimed_at AND h.sent_at >= coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
       )
     ORDER BY t.claimed_at
     LIMIT $2
     FOR UPDATE OF t SKIP LOCKED
   )
   UPDATE {{schema}}.horsies_tasks t
   SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL,
       claim_expires_at = NULL, updated_at = now()
   WHERE t.id = ANY (ARRAY(SELECT id FROM stale))
   RETURNING t.id, t.task_name, t.queue_name`,
  ({ thresholdMs, limit, now }) => [thresholdMs, limit, now ?? null],
);

/** A RUNNING task whose runner went silent, locked for the reaper's verdict. */
export interface StaleRunningRow {
  id: string;
  task_name: string;
  queue_name: string;
  claimed_by_worker_id: string;
  /** Null on a claim made before migration 32. */
  claim_token: string | null;
  retry_count: number;
  max_retries: number;
  task_options: unknown;
  started_at: Date;
}

/**
 * The reaper's second case, first step: locks RUNNING tasks with no runner heartbeat from their runner for
 * `thresholdMs` (and started longer ago than that). Run inside a transaction; the verdict is then written with
 * the finish statement on the same connection, so the rows cannot change in between.
 */
export const TaskLockStaleRunning = statement<
  { thresholdMs: number; limit: number; now?: Date | null },
  StaleRunningRow
>(
  'TaskLockStaleRunning',
  `SELECT t.id, t.task_name, t.queue_name, t.claimed_by_worker_id, t.claim_token, t.retry_count,
          t.max_retries, t.task_options, t.started_at
   FROM {{schema}}.horsies_tasks t
   WHERE t.claimed AND t.status = 'RUNNING'
     AND t.started_at < coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
     AND NOT EXISTS (
       SELECT 1 FROM {{schema}}.horsies_heartbeats h
       WHERE h.task_id = t.id AND h.role = 'runner' AND h.sender_id = t.claimed_by_worker_id
         AND h.sent_at >= t.started_at AND h.sent_at >= coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
     )
   ORDER BY t.started_at
   LIMIT $2
   FOR UPDATE OF t SKIP LOCKED`,
  ({ thresholdMs, limit, now }) => [thresholdMs, limit, now ?? null],
);

/**
 * Takes or renews the lease of a leader role. Succeeds when nobody holds it, the holder's lease expired, or the
 * caller already holds it. Returns the row when the caller is (still) the leader, nothing otherwise.
 */
export const LeaderAttemptElect = statement<
  { name: string; candidateId: string; ttlMs: number },
  { leader_id: string; elected_at: Date; expires_at: Date }
>(
  'LeaderAttemptElect',
  `INSERT INTO {{schema}}.horsies_leaders AS l (name, leader_id, elected_at, renewed_at, expires_at)
   VALUES ($1, $2, now(), now(), now() + $3 * interval '1 millisecond')
   ON CONFLICT (name) DO UPDATE
   SET leader_id = EXCLUDED.leader_id,
       elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE now() END,
       renewed_at = now(),
       expires_at = EXCLUDED.expires_at
   WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < now()
   RETURNING leader_id, elected_at, expires_at`,
  ({ name, candidateId, ttlMs }) => [name, candidateId, ttlMs],
);

/** Gives up a leader role, if the caller holds it. */
export const LeaderResign = statement<{ name: string; leaderId: string }, { name: string }>(
  'LeaderResign',
  `DELETE FROM {{schema}}.horsies_leaders WHERE name = $1 AND leader_id = $2 RETURNING name`,
  ({ name, leaderId }) => [name, leaderId],
);

/** One snapshot of a worker, for monitoring (the seed's columns). */
export interface WorkerSnapshot {
  worker: WorkerIdentity;
  processes: number;
  queues: string[];
  tasksRunning: number;
  tasksClaimed: number;
  memoryUsageMb: number;
  cpuPercent: number;
  memoryPercent: number;
  maxClaimBatch: number;
  maxClaimPerWorker: number;
  clusterWideCap: number | null;
  queuePriorities: Record<string, number>;
  queueMaxConcurrency: Record<string, number | null>;
  recoveryConfig: unknown;
  workerStartedAt: Date;
  /** Task names the worker has registered (to tell which PENDING tasks no worker can run). */
  taskNames: string[];
}

/** What a worker's stop record keeps of it. */
export interface WorkerStop {
  workerId: string;
  hostname: string | null;
  pid: number | null;
  queues: string[];
  workerStartedAt: Date;
}

/**
 * A clean stop: deletes the worker's snapshots (it neither runs nor serves any task, and nothing about it is
 * stale; `horsies_worker_states_worker_snapshot_idx`) and writes its stop record (`horsies_worker_stops`, migration
 * 31), in one statement, so a reader sees the worker either live or stopped.
 */
export const WorkerStopRecord = statement<WorkerStop, never>(
  'WorkerStopRecord',
  `WITH gone AS (DELETE FROM {{schema}}.horsies_worker_states WHERE worker_id = $1)
   INSERT INTO {{schema}}.horsies_worker_stops (worker_id, hostname, pid, queues, worker_started_at, stopped_at)
   VALUES ($1, $2, $3, $4, $5, now())
   ON CONFLICT (worker_id) DO UPDATE
   SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
       worker_started_at = EXCLUDED.worker_started_at, stopped_at = EXCLUDED.stopped_at`,
  (w) => [w.workerId, w.hostname, w.pid, w.queues, w.workerStartedAt],
);

/** Inserts one worker snapshot. */
export const WorkerStateInsert = statement<WorkerSnapshot, { id: string }>(
  'WorkerStateInsert',
  `INSERT INTO {{schema}}.horsies_worker_states
     (worker_id, hostname, pid, processes, queues, tasks_running, tasks_claimed, memory_usage_mb, cpu_percent,
      memory_percent, max_claim_batch, max_claim_per_worker, cluster_wide_cap, queue_priorities,
      queue_max_concurrency, recovery_config, worker_started_at, task_names)
   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
   RETURNING id`,
  (s) => [
    s.worker.workerId,
    s.worker.hostname,
    s.worker.pid,
    s.processes,
    s.queues,
    s.tasksRunning,
    s.tasksClaimed,
    s.memoryUsageMb,
    s.cpuPercent,
    s.memoryPercent,
    s.maxClaimBatch,
    s.maxClaimPerWorker,
    s.clusterWideCap,
    JSON.stringify(s.queuePriorities),
    JSON.stringify(s.queueMaxConcurrency),
    JSON.stringify(s.recoveryConfig),
    s.workerStartedAt,
    s.taskNames,
  ],
);
