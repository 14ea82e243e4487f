/**
 * Where time comes from. Every time the library compares with lives in the database (`now()`), so workers on
 * several machines agree; a {@link Clock} lets tests (and tools that replay time) pin that instant instead.
 *
 * Statements that compare with the clock take an optional `now` parameter: null means the database clock.
 * Services take a Clock and pass `clock.now()` to those statements.
 */

/** A source of "now" for statements and services. */
export interface Clock {
  /** The instant to use, or null for the database's own `now()`. */
  now(): Date | null;
}

/** The default: the database clock. */
export const databaseClock: Clock = { now: () => null };

/** A clock that stands still until moved (tests). */
export class ManualClock implements Clock {
  private current: Date;

  constructor(start: Date = new Date()) {
    this.current = new Date(start);
  }

  now(): Date {
    return new Date(this.current);
  }

  /** Sets the clock to `instant`. */
  set(instant: Date): void {
    this.current = new Date(instant);
  }

  /** Moves the clock forward by `ms` (backward when negative). */
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}
