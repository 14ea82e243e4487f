/**
 * The statements of an idle worker's hand-off registration (`horsies_idle_slots`, migration 27): the single send
 * (`TaskInsertOne`) hands a task due now to a worker registered here, claimed and started for it in the insert's
 * transaction, and tells the worker on its own channel. The worker registers the free slots it reserved for its
 * queues after a claim pass that found them empty, renews the registration once half its slots are taken (one
 * statement replaces it), and takes it back, with the ids handed to it, before it claims again and when it stops.
 */
import { statement } from './sql.js';
import type { ClaimAndStartRow, WorkerIdentity } from './tasks.js';

/** Parameters of {@link IdleRegister}. */
export interface IdleRegisterParams {
  /** The queues whose sends may be handed over (at least one): the free slots are one count for all of them. */
  queues: string[];
  taskNames: string[];
  free: number;
  /** The session-level advisory lock the worker holds on its LISTEN connection while it lives. */
  lockKey: string;
  channel: string;
  /** Names this registration in the notifications of its hand-offs. */
  token: number;
  leaseMs: number;
  worker: WorkerIdentity;
  /** Renewing: the new registration keeps the slots the old one had left, and `free` is the slots added. */
  carry: boolean;
}

/** A row of {@link IdleRegister}: what the registration it replaced had left. */
export interface IdleRegisterRow {
  /** Slots the replaced registration had not handed out (0 when there was none). */
  left: number;
  /** The tasks its sends handed over. */
  handed: string[];
}

/**
 * Registers the worker's free slots for its queues (the row is keyed by the first), replacing in the same statement
 * any registration it had, so that a renewal leaves no moment without one for a send to find. Returns what the
 * replaced registration had left and handed over.
 */
export const IdleRegister = statement<IdleRegisterParams, IdleRegisterRow>(
  'IdleRegister',
  `WITH old AS (
     DELETE FROM {{schema}}.horsies_idle_slots WHERE worker_id = $2 RETURNING free, handed
   )
   INSERT INTO {{schema}}.horsies_idle_slots AS i
     (queue_name, queue_names, worker_id, task_names, free, lock_key, channel, token, lease_ms, worker_hostname,
      worker_pid, worker_process_name)
   SELECT ($1::text[])[1], $1::text[], $2, $3::text[],
          $4 + CASE WHEN $12 THEN COALESCE((SELECT sum(o.free) FROM old o), 0) ELSE 0 END,
          $5::bigint, $6, $7, $8, $9, $10, $11
   RETURNING (SELECT COALESCE(sum(o.free), 0) FROM old o)::int AS left,
             ARRAY(SELECT h FROM old o, unnest(o.handed) AS h) AS handed`,
  (p) => [
    p.queues,
    p.worker.workerId,
    p.taskNames,
    p.free,
    p.lockKey,
    p.channel,
    p.token,
    p.leaseMs,
    p.worker.hostname,
    p.worker.pid,
    p.worker.processName,
    p.carry,
  ],
);

/** A row of {@link IdleTake}: a registration taken back, and the tasks its sends handed over. */
export interface IdleTakeRow {
  queue_name: string;
  handed: string[];
}

/** Takes back every registration of the worker (waiting for a send that is taking one of its slots). */
export const IdleTake = statement<{ workerId: string }, IdleTakeRow>(
  'IdleTake',
  `DELETE FROM {{schema}}.horsies_idle_slots WHERE worker_id = $1 RETURNING queue_name, handed`,
  (p) => [p.workerId],
);

/**
 * The tasks running under this worker's claim that it does not know of: handed over by sends whose notification
 * it never got (its LISTEN connection dropped), or named by a registration it took back. `ids` narrows the search
 * to those tasks (null: every task the worker's claim holds, but `known`).
 */
export const TaskHandedRows = statement<
  { workerId: string; ids: string[] | null; known: string[] },
  ClaimAndStartRow
>(
  'TaskHandedRows',
  `SELECT t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count, t.max_retries,
          t.attempt, t.enqueued_at, t.workflow_id, t.workflow_node, t.workflow_node_id, t.trace_context, t.status,
          t.started_at, t.claim_token
   FROM {{schema}}.horsies_tasks t
   WHERE t.claimed AND t.claimed_by_worker_id = $1 AND t.status = 'RUNNING' AND t.workflow_id IS NULL
     AND ($2::text[] IS NULL OR t.id = ANY ($2::text[])) AND NOT t.id = ANY ($3::text[])`,
  (p) => [p.workerId, p.ids, p.known],
);
