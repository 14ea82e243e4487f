/**
 * A handler's progress (migration 11) and its durable steps (migration 30). Written by the run's owner only: the
 * statements are fenced on the worker and the claim token, like every owner statement, so a run whose claim
 * was lost writes nothing. Progress changes no indexed column (a HOT update) and no status, so the row trigger
 * stays quiet; it notifies `task_progress` itself, with the task's id as payload (listeners re-read the row).
 */
import { statement } from './sql.js';

/**
 * What an owner's write of a run names to prove it still holds the run: the task, the worker and the claim it
 * holds. Progress and durable steps (`ctx.step`) are fenced through {@link runFenceSql}, so a change of the fence
 * (another claim token) is made here once for both.
 */
export interface RunFence {
  id: string;
  workerId: string;
  /** The claim token (see OwnedTask). */
  token: string;
}

/**
 * The fence predicate on `horsies_tasks t`, with the task id, worker id and claim token in the given
 * parameters: found by primary key (`|| ''` keeps the in-flight index out of it), RUNNING, and held by that
 * worker's claim.
 */
export function runFenceSql(id: string, workerId: string, token: string): string {
  return `t.id = ${id} AND t.status || '' = 'RUNNING' AND t.claimed_by_worker_id || '' = ${workerId}
       AND t.claim_token = ${token}::uuid`;
}

/** Step results stored for a task, in the order they were stored. */
export const TaskStepList = statement<
  { taskId: string },
  { name: string; result: unknown; attempt: number; created_at: Date }
>(
  'TaskStepList',
  `SELECT name, result, attempt, created_at FROM {{schema}}.horsies_task_steps WHERE task_id = $1 ORDER BY seq`,
  ({ taskId }) => [taskId],
);

/**
 * Stores one step's result (JSON text) for a run that still holds its claim; no row when the fence refuses it
 * (or a step of that name is stored already).
 */
export const TaskStepSave = statement<
  RunFence & { name: string; seq: number; result: string },
  { name: string }
>(
  'TaskStepSave',
  `INSERT INTO {{schema}}.horsies_task_steps (task_id, name, seq, result, attempt)
   SELECT t.id, $4, $5, $6::jsonb, t.attempt FROM {{schema}}.horsies_tasks t
   WHERE ${runFenceSql('$1', '$2', '$3')}
   ON CONFLICT (task_id, name) DO NOTHING
   RETURNING name`,
  ({ id, workerId, token, name, seq, result }) => [id, workerId, token, name, seq, result],
);

/** Sets a running task's progress (`value`: JSON text) and notifies `channel`; no row when the claim is gone. */
export const TaskProgressSet = statement<
  RunFence & { value: string; channel: string },
  { id: string; progress_at: Date }
>(
  'TaskProgressSet',
  `WITH updated AS (
     UPDATE {{schema}}.horsies_tasks t
     SET progress = $4::jsonb, progress_at = now(), progress_attempt = t.attempt
     -- Found by primary key, fenced on the claim.
     WHERE ${runFenceSql('$1', '$2', '$3')}
     RETURNING t.id, t.progress_at
   )
   SELECT u.id, u.progress_at FROM updated u, LATERAL (SELECT pg_notify($5, u.id)) n`,
  ({ id, workerId, token, value, channel }) => [id, workerId, token, value, channel],
);
