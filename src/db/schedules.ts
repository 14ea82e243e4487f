/**
 * Statements on `horsies_schedule_state`, one row per schedule. The row is also the schedule's lock: a scheduler
 * that sends a slot holds it `FOR UPDATE` from the check to the state update, in the transaction that inserts the
 * slot's task, so two schedulers (or one that died half-way) never send a slot twice. Times the scheduler compares
 * with are computed in the library from one `now` per pass; `updated_at` is the database's own.
 */
import { statement } from './sql.js';

/** A row of `horsies_schedule_state`. */
export interface ScheduleStateRow {
  schedule_name: string;
  last_run_at: Date | null;
  /** The next slot to send; null until a scheduler computes it (new, resumed or re-enabled schedules). */
  next_run_at: Date | null;
  last_task_id: string | null;
  run_count: number;
  /** Hash of the pattern and time zone the next run was computed from. */
  config_hash: string | null;
  paused: boolean;
  /** The last send that failed, until a send succeeds. */
  last_error: string | null;
  last_error_at: Date | null;
  updated_at: Date;
}

/** A state row with the status of its last task (null when that task is gone or there is none). */
export interface ScheduleStateListRow extends ScheduleStateRow {
  last_task_status: string | null;
}

/** The database's clock, read once per scheduler pass when no clock is injected. */
export const ClockNowGet = statement<Record<string, never>, { now: Date }>(
  'ClockNowGet',
  'SELECT now() AS now',
  () => [],
);

/** The state rows of the given schedules, unlocked: a pass reads them to find the few that need work. */
export const ScheduleStateGetMany = statement<{ names: string[] }, ScheduleStateRow>(
  'ScheduleStateGetMany',
  `SELECT * FROM {{schema}}.horsies_schedule_state WHERE schedule_name = ANY($1::text[])`,
  ({ names }) => [names],
);

/** Every state row, with the status of its last task, by name. */
export const ScheduleStateList = statement<Record<string, never>, ScheduleStateListRow>(
  'ScheduleStateList',
  `SELECT s.*, t.status AS last_task_status
   FROM {{schema}}.horsies_schedule_state s
   LEFT JOIN {{schema}}.horsies_tasks t ON t.id = s.last_task_id
   ORDER BY s.schedule_name`,
  () => [],
);

/**
 * Locks a schedule's row for the rest of the transaction, skipping it when another scheduler holds it: that one
 * is sending the schedule's slots. No row when it is locked or does not exist.
 */
export const ScheduleStateLock = statement<{ name: string }, ScheduleStateRow>(
  'ScheduleStateLock',
  `SELECT * FROM {{schema}}.horsies_schedule_state WHERE schedule_name = $1 FOR UPDATE SKIP LOCKED`,
  ({ name }) => [name],
);

/**
 * Creates the row of a schedule seen for the first time, with its first slot. Returns nothing when the row
 * exists already (another scheduler created it, or holds it locked).
 */
export const ScheduleStateInsert = statement<
  { name: string; configHash: string; nextRunAt: Date | null },
  ScheduleStateRow
>(
  'ScheduleStateInsert',
  `INSERT INTO {{schema}}.horsies_schedule_state (schedule_name, next_run_at, config_hash)
   VALUES ($1, $2, $3)
   ON CONFLICT (schedule_name) DO NOTHING
   RETURNING *`,
  ({ name, configHash, nextRunAt }) => [name, nextRunAt, configHash],
);

/** Sets the next run without sending anything: a new pattern or zone, or a schedule resumed or re-enabled. */
export const ScheduleStateReset = statement<
  { name: string; configHash: string | null; nextRunAt: Date | null },
  ScheduleStateRow
>(
  'ScheduleStateReset',
  `UPDATE {{schema}}.horsies_schedule_state
   SET next_run_at = $2, config_hash = $3, updated_at = now()
   WHERE schedule_name = $1
   RETURNING *`,
  ({ name, configHash, nextRunAt }) => [name, nextRunAt, configHash],
);

/** Records the slots just sent (in the same transaction as their tasks) and the next slot; clears the error. */
export const ScheduleStateAdvance = statement<
  { name: string; lastRunAt: Date; lastTaskId: string; runs: number; nextRunAt: Date | null },
  ScheduleStateRow
>(
  'ScheduleStateAdvance',
  `UPDATE {{schema}}.horsies_schedule_state
   SET last_run_at = $2, last_task_id = $3, run_count = run_count + $4, next_run_at = $5,
       last_error = NULL, last_error_at = NULL, updated_at = now()
   WHERE schedule_name = $1
   RETURNING *`,
  ({ name, lastRunAt, lastTaskId, runs, nextRunAt }) => [name, lastRunAt, lastTaskId, runs, nextRunAt],
);

/** Records a failed send. The next run stays where it was, so the slot is tried again at the next pass. */
export const ScheduleStateRecordError = statement<{ name: string; error: string; now?: Date | null }, never>(
  'ScheduleStateRecordError',
  `UPDATE {{schema}}.horsies_schedule_state
   SET last_error = $2, last_error_at = coalesce($3::timestamptz, now()), updated_at = now()
   WHERE schedule_name = $1`,
  ({ name, error, now }) => [name, error, now ?? null],
);

/**
 * Records a run triggered by hand, outside the slots: the last run and task, one more run. The row is created when
 * the schedule has none yet (its next run is then computed by the next scheduler pass).
 */
export const ScheduleStateRecordTrigger = statement<
  { name: string; taskId: string; now?: Date | null },
  ScheduleStateRow
>(
  'ScheduleStateRecordTrigger',
  `INSERT INTO {{schema}}.horsies_schedule_state AS s (schedule_name, last_run_at, last_task_id, run_count)
   VALUES ($1, coalesce($3::timestamptz, now()), $2, 1)
   ON CONFLICT (schedule_name) DO UPDATE
   SET last_run_at = excluded.last_run_at, last_task_id = excluded.last_task_id, run_count = s.run_count + 1,
       updated_at = now()
   RETURNING *`,
  ({ name, taskId, now }) => [name, taskId, now ?? null],
);

/**
 * Pauses or resumes a schedule that has a row. Resuming clears the next run, so the scheduler computes it from
 * the time of the resume: slots that fell in the pause are not sent late. Resuming a schedule that was not paused
 * changes nothing.
 */
export const ScheduleStateSetPaused = statement<{ name: string; paused: boolean }, ScheduleStateRow>(
  'ScheduleStateSetPaused',
  `UPDATE {{schema}}.horsies_schedule_state
   SET paused = $2,
       next_run_at = CASE WHEN paused AND NOT $2 THEN NULL ELSE next_run_at END,
       updated_at = now()
   WHERE schedule_name = $1
   RETURNING *`,
  ({ name, paused }) => [name, paused],
);

/** Creates the row of a declared schedule that has none yet, paused or not (pause before its first pass). */
export const ScheduleStateInsertPaused = statement<{ name: string; paused: boolean }, ScheduleStateRow>(
  'ScheduleStateInsertPaused',
  `INSERT INTO {{schema}}.horsies_schedule_state AS s (schedule_name, paused)
   VALUES ($1, $2)
   ON CONFLICT (schedule_name) DO UPDATE
   SET paused = excluded.paused,
       next_run_at = CASE WHEN s.paused AND NOT excluded.paused THEN NULL ELSE s.next_run_at END,
       updated_at = now()
   RETURNING *`,
  ({ name, paused }) => [name, paused],
);
