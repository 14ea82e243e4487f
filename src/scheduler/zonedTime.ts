/**
 * Wall-clock times in IANA time zones, on top of `Intl.DateTimeFormat` (no time zone data of our own). The one
 * rule the scheduler needs: a local time maps to the earliest instant that shows it; a local time that no instant
 * shows (the hour skipped when clocks go forward) maps to nothing.
 */

/** A local date and time, month 1-12, hour 0-23. */
export interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    });
    formatters.set(zone, format);
  }
  return format;
}

/** True when `zone` is an IANA time zone name this runtime knows (`UTC`, `Europe/Berlin`, ...). */
export function isValidTimeZone(zone: string): boolean {
  try {
    formatter(zone);
    return true;
  } catch {
    return false;
  }
}

/** The local time shown in `zone` at `instant` (milliseconds since the epoch; the milliseconds are dropped). */
export function wallTimeAt(instant: number, zone: string): WallTime {
  const wall: WallTime = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  let bc = false;
  for (const part of formatter(zone).formatToParts(instant)) {
    switch (part.type) {
      case 'year':
        wall.year = Number(part.value);
        break;
      case 'month':
        wall.month = Number(part.value);
        break;
      case 'day':
        wall.day = Number(part.value);
        break;
      case 'hour':
        wall.hour = Number(part.value);
        break;
      case 'minute':
        wall.minute = Number(part.value);
        break;
      case 'second':
        wall.second = Number(part.value);
        break;
      case 'era':
        bc = part.value.startsWith('B');
        break;
    }
  }
  if (bc) wall.year = 1 - wall.year;
  return wall;
}

/** The wall time read as if it were UTC, in milliseconds: the arithmetic form of a local time. */
export function wallTimeValue(wall: WallTime): number {
  return Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second);
}

/** Offset of `zone` from UTC at `instant`, in milliseconds (positive east of Greenwich). */
export function offsetAt(instant: number, zone: string): number {
  const whole = Math.floor(instant / 1000) * 1000;
  return wallTimeValue(wallTimeAt(whole, zone)) - whole;
}

const DAY_MS = 86_400_000;

/**
 * The earliest instant at which `zone` shows `wall`, or null when no instant does (a DST gap). An ambiguous
 * local time (clocks going back) has two instants; the earlier one is returned.
 *
 * The candidates are the wall time less each offset the zone has within a day of it. A zone changes its offset at
 * most once in such a window in practice, so the two offsets a day before and a day after cover every case.
 */
export function instantOf(wall: WallTime, zone: string): number | null {
  const value = wallTimeValue(wall);
  const before = offsetAt(value - DAY_MS, zone);
  const after = offsetAt(value + DAY_MS, zone);
  // The same offset on both sides: no change in between, so the local time exists once.
  if (before === after) return value - before;
  const offsets = [before, after];
  let best: number | null = null;
  for (const offset of offsets) {
    const candidate = value - offset;
    if (wallTimeValue(wallTimeAt(candidate, zone)) !== value) continue;
    if (best === null || candidate < best) best = candidate;
  }
  return best;
}
