/**
 * The statements of an idle worker's hand-off registration (`horsies_idle_slots`, migration 27): the single send
 * (`TaskInsertOne`) hands a task due now to a worker registered here, claimed and started for it in the insert's
 * transaction, and tells the worker on its own channel. The worker registers the free slots it reserved for its
 * queues, and takes the registration back, with the ids handed to it, before it claims again.
 */
import { statement } from './Database.js';
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
}

/**
 * Registers (or replaces) the worker's free slots for its queues (the row is keyed by the first); what was handed
 * to it and not taken stays listed.
 */
export const IdleRegister = statement<IdleRegisterParams, never>(
  'IdleRegister',
  `INSERT INTO {{schema}}.horsies_idle_slots AS i
     (queue_name, queue_names, worker_id, task_names, free, lock_key, channel, token, lease_ms, worker_hostname,
      worker_pid, worker_process_name)
   VALUES (($1::text[])[1], $1::text[], $2, $3::text[], $4, $5::bigint, $6, $7, $8, $9, $10, $11)
   ON CONFLICT (queue_name, worker_id) DO UPDATE
   SET queue_names = EXCLUDED.queue_names, task_names = EXCLUDED.task_names, free = EXCLUDED.free,
       lock_key = EXCLUDED.lock_key, channel = EXCLUDED.channel, token = EXCLUDED.token, lease_ms = EXCLUDED.lease_ms,
       registered_at = now()`,
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
          t.started_at
   FROM {{schema}}.horsies_tasks t
   WHERE t.claimed AND t.claimed_by_worker_id = $1 AND t.status = 'RUNNING' AND t.workflow_id IS NULL
     AND ($2::text[] IS NULL OR t.id = ANY ($2::text[])) AND NOT t.id = ANY ($3::text[])`,
  (p) => [p.workerId, p.ids, p.known],
);
