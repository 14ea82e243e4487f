/**
 * Operating schedules on the database: list them with their state, trigger one run now, pause and resume. Pause
 * and resume are stored on the schedule's row, so every scheduler obeys them at its next pass.
 */
import type { Database } from '../db/Database.js';
import {
  ScheduleStateInsertPaused,
  ScheduleStateList,
  ScheduleStateRecordTrigger,
  ScheduleStateSetPaused,
} from '../db/schedules.js';
import { HorsiesError } from '../errors.js';
import type { Schedule } from './declare.js';
import { describePattern } from './patterns.js';
import type { ScheduleInfo } from './ScheduleInfo.js';

export type { ScheduleInfo } from './ScheduleInfo.js';

/**
 * Every schedule with a state row, plus the declared ones that have none yet, by name. With `schedules` (the
 * declared ones), rows of undeclared schedules are marked orphaned; without, `declared` and `orphaned` are null.
 */
export async function listSchedules(
  db: Database,
  options: { schedules?: readonly Schedule[] } = {},
): Promise<ScheduleInfo[]> {
  const rows = await db.run(ScheduleStateList, {});
  const declared = options.schedules ? new Map(options.schedules.map((s) => [s.name, s])) : null;
  const infos: ScheduleInfo[] = rows.map((row) => {
    const schedule = declared?.get(row.schedule_name);
    return {
      ...describe(row.schedule_name, schedule, declared !== null),
      paused: row.paused,
      nextRunAt: row.next_run_at,
      lastRunAt: row.last_run_at,
      lastTaskId: row.last_task_id,
      lastTaskStatus: row.last_task_status,
      runCount: row.run_count,
      lastError: row.last_error,
      lastErrorAt: row.last_error_at,
    };
  });
  const stored = new Set(rows.map((r) => r.schedule_name));
  for (const schedule of options.schedules ?? []) {
    if (stored.has(schedule.name)) continue;
    infos.push({
      ...describe(schedule.name, schedule, true),
      paused: false,
      nextRunAt: null,
      lastRunAt: null,
      lastTaskId: null,
      lastTaskStatus: null,
      runCount: 0,
      lastError: null,
      lastErrorAt: null,
    });
  }
  return infos.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function describe(
  name: string,
  schedule: Schedule | undefined,
  known: boolean,
): Pick<ScheduleInfo, 'name' | 'declared' | 'orphaned' | 'enabled' | 'task' | 'pattern' | 'timezone'> {
  return {
    name,
    declared: known ? schedule !== undefined : null,
    orphaned: known ? schedule === undefined : null,
    enabled: schedule?.enabled ?? null,
    task: schedule?.task.name ?? null,
    pattern: schedule ? describePattern(schedule.pattern) : null,
    timezone: schedule?.timezone ?? null,
  };
}

/**
 * Sends one run of a schedule now, outside its slots: a task with a generated id and the schedule's input, queue
 * and priority, recorded as the schedule's last run in the same transaction. The slots are not moved. Works on a
 * paused or disabled schedule too (an operator asked for it).
 */
export async function triggerSchedule(db: Database, schedule: Schedule): Promise<{ taskId: string }> {
  return db.transaction(async (client) => {
    const task = await schedule.task.send(schedule.input as never, {
      queue: schedule.queue,
      priority: schedule.priority,
      tx: client,
    });
    await db.run(ScheduleStateRecordTrigger, { name: schedule.name, taskId: task.id }, client);
    return { taskId: task.id };
  });
}

/** Pauses a schedule: no scheduler sends its slots until it is resumed. See {@link setSchedulePaused}. */
export function pauseSchedule(
  db: Database,
  name: string,
  options: { declared?: readonly string[] } = {},
): Promise<void> {
  return setSchedulePaused(db, name, true, options);
}

/**
 * Resumes a paused schedule: it fires next at its first slot after the resume (slots that fell in the pause are
 * not sent late). See {@link setSchedulePaused}.
 */
export function resumeSchedule(
  db: Database,
  name: string,
  options: { declared?: readonly string[] } = {},
): Promise<void> {
  return setSchedulePaused(db, name, false, options);
}

/**
 * Pauses or resumes a schedule by name. A schedule with no state row yet (declared, never passed over) gets one
 * when `declared` lists it; otherwise an unknown name throws a HorsiesError with code `SCHEDULE_NOT_FOUND`, so a
 * typo does not create a row.
 */
export async function setSchedulePaused(
  db: Database,
  name: string,
  paused: boolean,
  options: { declared?: readonly string[] } = {},
): Promise<void> {
  const [row] = await db.run(ScheduleStateSetPaused, { name, paused });
  if (row) return;
  if (options.declared?.includes(name)) {
    await db.run(ScheduleStateInsertPaused, { name, paused });
    return;
  }
  throw new HorsiesError(
    'SCHEDULE_NOT_FOUND',
    `no schedule "${name}" in the database${options.declared ? ' or the app' : ' (give the app module if it has not run yet)'}`,
  );
}
