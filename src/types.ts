/**
 * Leaf module: the public data shapes shared by every role. Imports nothing else of ours.
 */

/** Every status a task row can hold, stored as text in `horsies_tasks.status`. */
export const TASK_STATUSES = [
  'PENDING',
  'CLAIMED',
  'RUNNING',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
  'EXPIRED',
] as const;

/** The lifecycle status of a task (see docs/state-machine.md). */
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** Statuses a task never leaves on its own (only an explicit resubmit moves it back to PENDING). */
export const TERMINAL_STATUSES: readonly TaskStatus[] = ['COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED'];

/** True when `status` is one of {@link TERMINAL_STATUSES}. */
export function isTerminalStatus(status: TaskStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

/** A NUL character, or a UTF-16 surrogate without its pair. */
// eslint-disable-next-line no-control-regex -- NUL is the character looked for
const UNSTORABLE_CHARACTER = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * True when PostgreSQL can store `text` as it is: no NUL character (text and jsonb refuse it) and no lone
 * surrogate (which has no UTF-8 form: jsonb refuses its escape, and text would get U+FFFD in its place). (Internal.)
 */
export function isStorableText(text: string): boolean {
  return !UNSTORABLE_CHARACTER.test(text);
}

/** Earliest and latest instants stored as timestamps: years 1 to 9999, the range ISO 8601 writes in four digits. */
const FIRST_STORABLE_MS = Date.parse('0001-01-01T00:00:00.000Z');
const LAST_STORABLE_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * True when `value` is a valid Date PostgreSQL can store and the library can write as ISO 8601 text: years 1 to
 * 9999. JavaScript's dates reach back to 271821 BC, past PostgreSQL's 4713 BC, and years past 9999 take an
 * extended form (`+010000-...`) that a timestamp's text input does not read. (Internal.)
 */
export function isStorableDate(value: unknown): value is Date {
  if (!(value instanceof Date)) return false;
  const ms = value.getTime();
  return ms >= FIRST_STORABLE_MS && ms <= LAST_STORABLE_MS;
}

/**
 * True when `value` is a promise or another thenable: what a Standard Schema validator or a handler may return
 * instead of its answer. (Internal; awaiting only these spares a turn of the microtask queue per call.)
 */
export function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** A value JSON can carry without loss: what task inputs and results are made of. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Outcome of one finished execution attempt, as stored in `horsies_task_attempts.outcome`. */
export type AttemptOutcome = 'COMPLETED' | 'FAILED' | 'WORKER_FAILURE';

/** One durable step of a task (`ctx.step()`): its name, its stored result and the attempt that stored it. */
export interface TaskStep {
  name: string;
  result: JsonValue;
  attempt: number;
  storedAt: Date;
}

/** The public view of one row of `horsies_task_attempts`. */
export interface TaskAttempt {
  /** 1-based attempt number. */
  attempt: number;
  outcome: AttemptOutcome;
  /** Whether a retry was scheduled after this attempt. */
  willRetry: boolean;
  startedAt: Date | null;
  finishedAt: Date;
  errorCode: string | null;
  errorMessage: string | null;
  /** Worker-level failure reason (null for domain errors and successes). */
  failedReason: string | null;
  workerId: string | null;
  workerHostname: string | null;
  workerPid: number | null;
  workerProcessName: string | null;
}

/** The public view of one row of `horsies_tasks`, as returned by `app.getTask(id)`. */
export interface TaskInfo {
  id: string;
  taskName: string;
  queueName: string;
  priority: number;
  status: TaskStatus;
  /** The stored input (the `kwargs` column). */
  input: JsonValue;
  /** When `send()` was called; never changes. */
  sentAt: Date;
  /** When the task becomes claimable; moves forward on retry. */
  enqueuedAt: Date;
  claimedAt: Date | null;
  startedAt: Date | null;
  completedAt: Date | null;
  failedAt: Date | null;
  /** When the task reached any terminal status. */
  finishedAt: Date | null;
  /** The stored result envelope, `{ ok: value }` or `{ err: { code, message, data } }`, once terminal. */
  result: JsonValue | null;
  errorCode: string | null;
  failedReason: string | null;
  claimedByWorkerId: string | null;
  /** Incremented by every claim; statements that act as the owner name it (fencing). */
  claimGeneration: number;
  claimExpiresAt: Date | null;
  goodUntil: Date | null;
  /** Retries used of the current budget (reset by a resubmit). */
  retryCount: number;
  maxRetries: number;
  nextRetryAt: Date | null;
  /** Execution attempts so far, over all resubmits (the number of the latest attempt). */
  attemptCount: number;
  /** How many times the task was resubmitted from a terminal status. */
  resubmitCount: number;
  resubmittedAt: Date | null;
  /** When a cancel was requested (a RUNNING task finishes CANCELLED once its handler stops). */
  cancelRequestedAt: Date | null;
  idempotencyKey: string | null;
  /** The group the task was sent in (the `group` send option), or null. */
  group: string | null;
  /**
   * Why a PENDING task has not started, when `getTask` can tell: `scheduled for …`, `retry scheduled for …`,
   * `queue "…" is paused`, `rate limited until … (queue:… or task:…)`, `group "…" at its limit (n of N in flight)`.
   * Null when nothing holds it back but a free worker slot, and for other statuses; absent from task lists.
   */
  waiting?: string | null;
  /**
   * The `dedupe` or `debounce` key it was sent with and its scope (`debounce` for a debounce); `held` is false once
   * the task released the key (see docs/capacity.md). Null for a task sent without one.
   */
  dedupe: { key: string; scope: 'pending' | 'running' | 'finished' | 'debounce'; held: boolean } | null;
  workerHostname: string | null;
  workerPid: number | null;
  workerProcessName: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** The workflow node the task runs for (its workflow's id, the node's id and index), or null. */
  workflow: { id: string; nodeId: string; nodeIndex: number } | null;
  /** The latest progress its handler reported (`ctx.progress()`), or null if it reported none. */
  progress: TaskProgress | null;
  /** Present when requested with `{ attempts: true }`, ordered by attempt number. */
  attempts?: TaskAttempt[];
  /** Present when requested with `{ steps: true }`: the results its runs stored with `ctx.step()`, in order. */
  steps?: TaskStep[];
}

/** A task's latest progress report. */
export interface TaskProgress {
  /** The value the handler reported. */
  value: JsonValue;
  /** When it was written (database clock). */
  at: Date;
  /** The attempt that reported it: a retry starts over, so a value of an earlier attempt may be stale. */
  attempt: number;
}
