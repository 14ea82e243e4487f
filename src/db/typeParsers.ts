/**
 * How the library's statements read their result columns: with `pg`'s default text parsers, whatever the
 * application has registered globally (`pg.types.setTypeParser`) for its own queries, which the statements would
 * otherwise follow: JSON read as text would fail every task's input, timestamps read as text every claim. Set per
 * statement (a query's `types`), so the application's queries keep its parsers.
 *
 * One default is replaced: `timestamptz`, read by a parser that takes PostgreSQL's usual output
 * ("2026-11-25 06:13:07.189123+00", DateStyle ISO) apart by position and hands anything else to `pg`'s. The values
 * are the same Dates; the claim's rows carry two timestamps each, and `pg`'s parser (a regular expression per value,
 * and another for the zone) was the largest single cost of reading them in a drain (bench/history.md,
 * nineteenth pass).
 */
import pg from 'pg';
import textParsers from 'pg-types/lib/textParsers.js';

const TIMESTAMPTZ_OID = 1184;

type Parser = (value: string) => unknown;

/** pg-types' text parsers as it registers them by default, kept apart from the global registry. */
const defaults = new Map<number, Parser>();
textParsers.init((oid, parser) => defaults.set(oid, parser));

// The fallback for texts the fast path leaves (which horsies' tables, whose times are finite, hold only for years
// before 1000 or after 9999).
const pgTimestamptz = defaults.get(TIMESTAMPTZ_OID)!;

const ZERO = 48;

/** The value of the `count` decimal digits at `at`, or -1 when one of them is not a digit. */
function digits(text: string, at: number, count: number): number {
  let value = 0;
  for (let i = at; i < at + count; i++) {
    const d = text.charCodeAt(i) - ZERO;
    if (d < 0 || d > 9) return -1;
    value = value * 10 + d;
  }
  return value;
}

/**
 * A `timestamptz` in PostgreSQL's ISO output: `YYYY-MM-DD HH:MM:SS[.f…]±HH[:MM[:SS]]`, a year from 1000 to 9999.
 * Anything else (infinity, BC, years of other lengths, other DateStyles) goes to `pg`'s parser, which also sets
 * what the fast path computes: the milliseconds as `1000 * parseFloat(fraction)`, the zone's offset subtracted.
 */
export function parseTimestamptz(text: string): unknown {
  const fast = isoTimestamptz(text);
  return fast === null ? pgTimestamptz(text) : fast;
}

/** The fast path alone: the Date of a text in the form above, or null for pg's parser. Exported for its tests. */
export function isoTimestamptz(text: string): Date | null {
  const length = text.length;
  if (
    length < 22 ||
    text.charCodeAt(4) !== 45 || // -
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(10) !== 32 || // space
    text.charCodeAt(13) !== 58 || // :
    text.charCodeAt(16) !== 58
  ) {
    return null;
  }
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  if (year < 1000 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return null;
  let at = 19;
  let ms = 0;
  if (text.charCodeAt(at) === 46) {
    // .
    const start = at;
    at += 1;
    while (at < length) {
      const d = text.charCodeAt(at) - ZERO;
      if (d < 0 || d > 9) break;
      at += 1;
    }
    if (at === start + 1) return null;
    ms = 1000 * parseFloat(text.slice(start, at));
  }
  const offset = zoneOffsetMs(text, at);
  if (offset === null) return null;
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms) - offset);
}

/** `±HH`, `±HH:MM` or `±HH:MM:SS` from `at` to the end, in ms; null for anything else. */
function zoneOffsetMs(text: string, at: number): number | null {
  const sign = text.charCodeAt(at);
  if (sign !== 43 && sign !== 45) return null; // + or -
  const rest = text.length - at - 1;
  if (rest !== 2 && rest !== 5 && rest !== 8) return null;
  let seconds = 0;
  // Hours, then minutes and seconds, each after a colon.
  for (let i = 0, unit = 3600; i < rest; i += 3, unit /= 60) {
    if (i > 0 && text.charCodeAt(at + i) !== 58) return null; // :
    const value = digits(text, at + i + 1, 2);
    if (value < 0) return null;
    seconds += value * unit;
  }
  return (sign === 45 ? -seconds : seconds) * 1000;
}

/** The parsers of the library's statements (a query's `types`); a type pg has no parser for is read as text. */
export const statementTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) =>
    format === 'binary'
      ? pg.types.getTypeParser(oid, 'binary')
      : oid === TIMESTAMPTZ_OID
        ? parseTimestamptz
        : (defaults.get(oid) ?? String)) as pg.CustomTypesConfig['getTypeParser'],
};
