/**
 * Schedule patterns and the slots they produce. A slot is an instant (whole seconds) at which a schedule sends one
 * task. Calendar patterns (hourly, daily, weekly, monthly) name local times in the schedule's time zone: a local
 * time that does not exist (the hour skipped when clocks go forward) produces no slot, and one that exists twice
 * (clocks going back) produces one slot, at the earlier instant. Cron expressions go through `croner` with the
 * same two rules applied to its runs. Intervals are fixed durations counted from the Unix epoch, so every process
 * computes the same slots whatever its start time, and time zones do not move them.
 */
import { Cron } from 'croner';
import { instantOf, wallTimeAt, wallTimeValue } from './zonedTime.js';
import type { WallTime } from './zonedTime.js';

/** Days of the week, as weekly patterns name them. */
export const WEEKDAYS = [
  'sunday',
  'monday',
  'tuesday',
  'wednesday',
  'thursday',
  'friday',
  'saturday',
] as const;

/** A day of the week. */
export type Weekday = (typeof WEEKDAYS)[number];

/**
 * Every fixed duration, counted from 1970-01-01T00:00:00Z: `{ kind: 'interval', minutes: 15 }` fires at :00, :15,
 * :30 and :45 of every hour. The parts add up; the total must be at least one second.
 */
export interface IntervalPattern {
  kind: 'interval';
  seconds?: number | undefined;
  minutes?: number | undefined;
  hours?: number | undefined;
  days?: number | undefined;
}

/** Every hour of local time at `minute` (and `second`, default 0). */
export interface HourlyPattern {
  kind: 'hourly';
  minute: number;
  second?: number | undefined;
}

/** Every day at local time `at` (`HH:MM` or `HH:MM:SS`, 24-hour). */
export interface DailyPattern {
  kind: 'daily';
  at: string;
}

/** On the given days of the week at local time `at`. */
export interface WeeklyPattern {
  kind: 'weekly';
  days: Weekday[];
  at: string;
}

/** On day `day` (1-31) of every month at local time `at`; months without that day are skipped. */
export interface MonthlyPattern {
  kind: 'monthly';
  day: number;
  at: string;
}

/**
 * A cron expression of 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), as `croner`
 * reads it (names such as `MON` and `JAN`, steps, ranges, `L`; day of month and day of week match with OR).
 */
export interface CronPattern {
  kind: 'cron';
  expression: string;
}

/** When a schedule fires. */
export type SchedulePattern =
  IntervalPattern | HourlyPattern | DailyPattern | WeeklyPattern | MonthlyPattern | CronPattern;

/** The slots of a pattern in a time zone. */
export interface SlotRule {
  /** The first slot strictly after `after`, or null when there is none (a cron expression that ended). */
  next(after: Date): Date | null;
  /** The last slot at or before `notAfter`, or null when there is none. */
  previous(notAfter: Date): Date | null;
}

/** Matches `HH:MM` or `HH:MM:SS`, 24-hour. */
export const TIME_OF_DAY = /^([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?$/;

/** Milliseconds of an interval pattern. */
export function intervalMs(pattern: IntervalPattern): number {
  const { seconds = 0, minutes = 0, hours = 0, days = 0 } = pattern;
  return (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000;
}

/** Builds the slot rule of a (validated) pattern in `zone`. Throws on an invalid cron expression. */
export function slotRule(pattern: SchedulePattern, zone: string): SlotRule {
  switch (pattern.kind) {
    case 'interval':
      return intervalRule(intervalMs(pattern));
    case 'hourly':
      return calendarRule(zone, (day, direction) =>
        hours(direction).map((hour) => ({
          ...day,
          hour,
          minute: pattern.minute,
          second: pattern.second ?? 0,
        })),
      );
    case 'daily': {
      const time = timeOfDay(pattern.at);
      return calendarRule(zone, (day) => [{ ...day, ...time }]);
    }
    case 'weekly': {
      const time = timeOfDay(pattern.at);
      const days = new Set(pattern.days.map((d) => WEEKDAYS.indexOf(d)));
      return calendarRule(zone, (day) => (days.has(weekdayOf(day)) ? [{ ...day, ...time }] : []));
    }
    case 'monthly': {
      const time = timeOfDay(pattern.at);
      // Only the day itself carries a slot; the months without it (the 31st in April) have none.
      return calendarRule(zone, (day) => (day.day === pattern.day ? [{ ...day, ...time }] : []));
    }
    case 'cron':
      return cronRule(pattern.expression, zone);
  }
}

/** Checks a cron expression; returns the problem, or null when `croner` accepts it as 5 or 6 fields. */
export function cronProblem(expression: string, zone: string): string | null {
  try {
    cronOf(expression, zone);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

function cronOf(expression: string, zone: string): Cron {
  return new Cron(expression, { timezone: zone, mode: '5-or-6-parts', paused: true });
}

function intervalRule(periodMs: number): SlotRule {
  return {
    next: (after) => new Date((Math.floor(after.getTime() / periodMs) + 1) * periodMs),
    previous: (notAfter) => new Date(Math.floor(notAfter.getTime() / periodMs) * periodMs),
  };
}

type LocalDay = Pick<WallTime, 'year' | 'month' | 'day'>;
type Direction = 1 | -1;

const DAY_MS = 86_400_000;
/** How far a calendar rule looks for a slot: beyond any month that has a given day (February 29 aside). */
const SEARCH_DAYS = 4 * 366 + 31;

const HOURS_UP = Array.from({ length: 24 }, (_, h) => h);
const HOURS_DOWN = [...HOURS_UP].reverse();

function hours(direction: Direction): number[] {
  return direction === 1 ? HOURS_UP : HOURS_DOWN;
}

function timeOfDay(at: string): Pick<WallTime, 'hour' | 'minute' | 'second'> {
  const match = TIME_OF_DAY.exec(at);
  if (!match) throw new Error(`not a time of day: ${at}`);
  return { hour: Number(match[1]), minute: Number(match[2]), second: Number(match[3] ?? 0) };
}

function weekdayOf(day: LocalDay): number {
  return new Date(Date.UTC(day.year, day.month - 1, day.day)).getUTCDay();
}

function shiftDay(day: LocalDay, days: number): LocalDay {
  const date = new Date(Date.UTC(day.year, day.month - 1, day.day) + days * DAY_MS);
  return { year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate() };
}

/**
 * Largest jump back of a zone's clock that the search allows for: a local time more than this before the
 * reference's (after it, searching back) cannot be a slot after it (before it). Real zones jump by one hour, a
 * few historic ones by two.
 */
const MAX_SHIFT_MS = 3 * 3_600_000;

/**
 * A rule from the local times each local day carries (in the order of `direction`). The search walks local days
 * from a day before the reference (the zone's offset can put the reference's local day on either side of it) and
 * maps each local time to its instant, skipping the ones in a DST gap. Local times too far on the wrong side of the
 * reference's are passed over without asking the zone (that costs a few `Intl` calls each).
 */
function calendarRule(zone: string, timesOn: (day: LocalDay, direction: Direction) => WallTime[]): SlotRule {
  const search = (
    reference: Date,
    direction: Direction,
    accept: (instant: number) => boolean,
  ): Date | null => {
    const referenceWall = wallTimeAt(reference.getTime(), zone);
    const bound = wallTimeValue(referenceWall) - direction * MAX_SHIFT_MS;
    let day = shiftDay(referenceWall, -direction);
    for (let i = 0; i < SEARCH_DAYS; i += 1, day = shiftDay(day, direction)) {
      for (const wall of timesOn(day, direction)) {
        if ((wallTimeValue(wall) - bound) * direction < 0) continue;
        const instant = instantOf(wall, zone);
        if (instant !== null && accept(instant)) return new Date(instant);
      }
    }
    return null;
  };
  return {
    next: (after) => search(after, 1, (instant) => instant > after.getTime()),
    previous: (notAfter) => search(notAfter, -1, (instant) => instant <= notAfter.getTime()),
  };
}

/** Most croner runs looked at for one slot: runs it shifted out of a DST gap, or repeated in the hour after. */
const CRON_SKIPS = 1000;

/**
 * croner's runs, filtered by the two DST rules: it moves a fixed-time run out of a gap (02:30 becomes 03:00 on the
 * day clocks go forward), and it fires interval-like expressions on both occurrences of a repeated local time. A
 * run is kept only when the expression matches its local time and it is the earliest instant of that local time.
 */
function cronRule(expression: string, zone: string): SlotRule {
  const cron = cronOf(expression, zone);
  const valid = (run: Date): boolean => {
    if (!cron.match(run)) return false;
    return instantOf(wallTimeAt(run.getTime(), zone), zone) === run.getTime();
  };
  return {
    next: (after) => {
      let reference = after;
      for (let i = 0; i < CRON_SKIPS; i += 1) {
        const run = cron.nextRun(reference);
        if (run === null || valid(run)) return run;
        reference = run;
      }
      return null;
    },
    previous: (notAfter) => {
      // croner's previous runs are strictly before the reference; slots are whole seconds.
      let reference = new Date(Math.floor(notAfter.getTime() / 1000) * 1000 + 1000);
      for (let i = 0; i < CRON_SKIPS; i += 1) {
        const [run] = cron.previousRuns(1, reference);
        if (run === undefined || valid(run)) return run ?? null;
        reference = run;
      }
      return null;
    },
  };
}

/** The local time of `instant` in `zone`, as `YYYY-MM-DD HH:MM:SS` (for messages and listings). */
export function localTimeText(instant: Date, zone: string): string {
  const value = new Date(wallTimeValue(wallTimeAt(instant.getTime(), zone)));
  return value.toISOString().slice(0, 19).replace('T', ' ');
}

/** A short human description of a pattern, for listings. */
export function describePattern(pattern: SchedulePattern): string {
  switch (pattern.kind) {
    case 'interval':
      return `every ${intervalMs(pattern) / 1000}s`;
    case 'hourly':
      return `hourly at :${String(pattern.minute).padStart(2, '0')}${pattern.second ? `:${String(pattern.second).padStart(2, '0')}` : ''}`;
    case 'daily':
      return `daily at ${pattern.at}`;
    case 'weekly':
      return `weekly on ${pattern.days.join(',')} at ${pattern.at}`;
    case 'monthly':
      return `monthly on day ${pattern.day} at ${pattern.at}`;
    case 'cron':
      return `cron ${pattern.expression}`;
  }
}
