/**
 * One schedule with its state, as `horsies schedules list`, `app.listSchedules()` and the dashboard show it. Types
 * only, and imports nothing: the dashboard UI's contract (`src/dashboard/contract.ts`) names it for the browser.
 */

/**
 * One schedule as `horsies schedules list` shows it. Its times are Dates (`Time`), or, in the dashboard's JSON,
 * the ISO strings they become (`ScheduleInfo<string>`).
 */
export interface ScheduleInfo<Time = Date> {
  name: string;
  /** Declared in the code given to the listing (null when no declarations were given). */
  declared: boolean | null;
  /** Has a state row but is not declared: kept, never run, shown so an operator can tell. Null when unknown. */
  orphaned: boolean | null;
  /** The declared `enabled` (null when not declared). */
  enabled: boolean | null;
  /** Paused in the database (every scheduler obeys). */
  paused: boolean;
  /** The task it sends (null when not declared). */
  task: string | null;
  /** The pattern, described (null when not declared). */
  pattern: string | null;
  timezone: string | null;
  /** The next slot to send; null before a scheduler's first pass over it, and after a resume until the next. */
  nextRunAt: Time | null;
  /** The slot (or trigger time) of the last run. */
  lastRunAt: Time | null;
  lastTaskId: string | null;
  /** Status of the last run's task; null when there is none or it was deleted by retention. */
  lastTaskStatus: string | null;
  runCount: number;
  /** The last failed send, until a send succeeds. */
  lastError: string | null;
  lastErrorAt: Time | null;
}
