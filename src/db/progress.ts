/**
 * A handler's progress (migration 11). Written by the run's owner only: the statement is fenced on the worker and
 * the claim generation, like every owner statement, so a run whose claim was lost writes nothing. It changes no
 * indexed column (a HOT update) and no status, so the row trigger stays quiet; it notifies `task_progress` itself,
 * with the task's id as payload (listeners re-read the row).
 */
import { statement } from './sql.js';

/** Sets a running task's progress (`value`: JSON text) and notifies `channel`; no row when the claim is gone. */
export const TaskProgressSet = statement<
  { id: string; workerId: string; generation: number; value: string; channel: string },
  { id: string; progress_at: Date }
>(
  'TaskProgressSet',
  `WITH updated AS (
     UPDATE {{schema}}.horsies_tasks t
     SET progress = $4::jsonb, progress_at = now(), progress_attempt = t.attempt
     -- Found by primary key (|| '' keeps the in-flight index out of it), fenced on the claim.
     WHERE t.id = $1 AND t.status || '' = 'RUNNING' AND t.claimed_by_worker_id || '' = $2
       AND t.claim_generation = $3
     RETURNING t.id, t.progress_at
   )
   SELECT u.id, u.progress_at FROM updated u, LATERAL (SELECT pg_notify($5, u.id)) n`,
  ({ id, workerId, generation, value, channel }) => [id, workerId, generation, value, channel],
);
