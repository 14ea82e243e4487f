/**
 * The send options and their validation. Every option of every item is checked before anything is stored, so a
 * bad item fails the whole call without a round trip; this module is pure (no database, no clock), which lets
 * the rules be tested on their own and keeps the per-item cost of a bulk send to plain checks.
 */
import { SendOptionsError, UnknownQueueError } from '../errors.js';
import type { ConfigProblem } from '../errors.js';
import { isStorableDate, isStorableText } from '../types.js';

/** Options of one send. `Q` is the app's queue names (see `createApp`). */
export interface SendOptions<Q extends string = string> {
  /** Run no sooner than this many milliseconds from now (database clock); at most 2^31 - 1 (about 24.8 days). */
  delayMs?: number | undefined;
  /** Run no sooner than this time. Exclusive with `delayMs`. */
  runAt?: Date | undefined;
  /** Deadline: if the task has not started by then, it expires and never runs. */
  goodUntil?: Date | undefined;
  /** 1–100, lower runs first. Default: the task's priority. */
  priority?: number | undefined;
  /** Queue to send to. Default: the task's queue. Must be one of the app's queues. */
  queue?: Q | undefined;
  /** Explicit task id (at most 36 characters). Sending the same id again with the same input returns that task. */
  id?: string | undefined;
  /** Idempotency key (at most 255 characters): like `id`, but the task still gets a generated id. */
  idempotencyKey?: string | undefined;
  /**
   * The group the task belongs to, for example a tenant id (1 to 255 characters): queues can limit how many tasks
   * of one group run at once and take groups in turn (see docs/capacity.md). Default: no group.
   */
  group?: string | undefined;
  /**
   * Deduplication: while a task of this name holds `key` (see {@link DedupeOptions.scope}), this send stores
   * nothing and returns a handle to that task, with `deduplicated: true`. Exact under concurrent senders.
   * Not with `id`, `idempotencyKey` or `debounce`. See docs/capacity.md.
   */
  dedupe?: DedupeOptions | undefined;
  /**
   * Debounce: while a task of this name sent with the same debounce `key` is still PENDING (never claimed), this
   * send replaces that task's input with its own and moves its start to `delayMs` from now, and returns a handle
   * to it (`deduplicated: true`); otherwise it stores a new task that starts in `delayMs`. A burst of sends
   * closer together than `delayMs` runs once, with the last input. Not with `id`, `idempotencyKey`, `dedupe`,
   * `delayMs` or `runAt`. See docs/capacity.md.
   */
  debounce?: DebounceOptions | undefined;
  /**
   * The time recorded as the task's `sent_at`. Default: the database's `now()` at the insert. The scheduler sets
   * it to the slot a task stands for, which may be earlier than the insert.
   */
  sentAt?: Date | undefined;
}

/**
 * How long a task holds its deduplication key: `pending` (default) until it is first claimed; `running` until it
 * ends (any terminal status); `finished` until it ends and then for `windowMs` more.
 */
export type DedupeScope = 'pending' | 'running' | 'finished';

/** See {@link SendOptions.dedupe}. */
export interface DedupeOptions {
  /** 1 to 255 characters; keys are per task name. */
  key: string;
  /** Default `pending`. */
  scope?: DedupeScope | undefined;
  /** With scope `finished` (and only then): how long after its end the task still holds the key, in ms (> 0). */
  windowMs?: number | undefined;
}

/** See {@link SendOptions.debounce}. */
export interface DebounceOptions {
  /** 1 to 255 characters; keys are per task name (shared with `dedupe` keys). */
  key: string;
  /** How long after the latest send of the burst the task starts, in ms (>= 0). */
  delayMs: number;
}

/**
 * Checks one send's options: throws {@link UnknownQueueError} when `options.queue` is not one of `queues` (before
 * any other problem), else {@link SendOptionsError} listing every problem {@link optionProblems} finds.
 */
export function checkOptions(taskName: string, queues: readonly string[], options: SendOptions): void {
  const problems = optionProblems(options);
  const { queue } = options;
  if (queue !== undefined && !queues.includes(queue)) throw new UnknownQueueError(asText(queue), queues);
  if (problems.length > 0) throw new SendOptionsError(taskName, problems);
}

/**
 * Every problem with one send's options, in a fixed order (an empty list when they are valid). Values are checked
 * as they arrive at run time, whatever their declared type: callers from JavaScript can pass anything. The queue
 * is not checked here: only the app knows its queues (see {@link checkOptions}).
 */
export function optionProblems(options: SendOptions): ConfigProblem[] {
  // Plain pushes rather than a helper closure: this runs once per item of a bulk send.
  const problems: ConfigProblem[] = [];
  const { delayMs, runAt, goodUntil, priority, id, idempotencyKey, sentAt, group } = options;
  if (delayMs !== undefined && (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0)) {
    problems.push({ field: 'delayMs', value: delayMs, message: 'must be a finite number >= 0' });
  } else if (delayMs !== undefined && delayMs > MAX_DELAY_MS) {
    problems.push({
      field: 'delayMs',
      value: delayMs,
      message: `must be at most ${MAX_DELAY_MS} (about 24.8 days): give runAt for a later start`,
    });
  }
  if (runAt !== undefined && !isStorableDate(runAt)) {
    problems.push({ field: 'runAt', value: runAt, message: dateProblem(runAt) });
  }
  if (runAt !== undefined && delayMs !== undefined) {
    problems.push({ field: 'runAt', value: runAt, message: 'give delayMs or runAt, not both' });
  }
  if (goodUntil !== undefined && !isStorableDate(goodUntil)) {
    problems.push({ field: 'goodUntil', value: goodUntil, message: dateProblem(goodUntil) });
  }
  if (sentAt !== undefined && !isStorableDate(sentAt)) {
    problems.push({ field: 'sentAt', value: sentAt, message: dateProblem(sentAt) });
  }
  if (priority !== undefined && (!Number.isInteger(priority) || priority < 1 || priority > 100)) {
    problems.push({ field: 'priority', value: priority, message: 'must be an integer from 1 to 100' });
  }
  if (id !== undefined && (typeof id !== 'string' || id.length === 0 || id.length > 36)) {
    problems.push({ field: 'id', value: id, message: 'must be a string of 1 to 36 characters' });
  }
  if (options.dedupe !== undefined || options.debounce !== undefined) keyProblems(options, problems);
  if (
    idempotencyKey !== undefined &&
    (typeof idempotencyKey !== 'string' || idempotencyKey.length === 0 || idempotencyKey.length > 255)
  ) {
    problems.push({
      field: 'idempotencyKey',
      value: idempotencyKey,
      message: 'must be a string of 1 to 255 characters',
    });
  }
  if (group !== undefined && (typeof group !== 'string' || group.length === 0 || group.length > 255)) {
    problems.push({ field: 'group', value: group, message: 'must be a string of 1 to 255 characters' });
  }
  if (
    typeof id === 'string' ||
    typeof idempotencyKey === 'string' ||
    typeof group === 'string' ||
    options.dedupe ||
    options.debounce
  ) {
    textProblems(options, problems);
  }
  return problems;
}

/** Longest dedupe window: 100 years, far inside what a timestamp plus an interval can hold. */
const MAX_WINDOW_MS = 100 * 365.25 * 24 * 3600 * 1000;
/** Longest delay: the insert carries delays as 32-bit integers. */
const MAX_DELAY_MS = 2 ** 31 - 1;
/** Longest debounce delay: the same bound. */
const MAX_DEBOUNCE_MS = MAX_DELAY_MS;

const DEDUPE_SCOPES: readonly unknown[] = ['pending', 'running', 'finished'] satisfies DedupeScope[];

// The dedupe and debounce options: well formed, and not combined with options they cannot go with.
function keyProblems(options: SendOptions, problems: ConfigProblem[]): void {
  const { dedupe, debounce } = options;
  const isKey = (key: unknown): boolean => typeof key === 'string' && key.length > 0 && key.length <= 255;
  if (dedupe !== undefined && debounce !== undefined) {
    problems.push({ field: 'debounce', value: debounce, message: 'give dedupe or debounce, not both' });
  }
  for (const [field, value] of [
    ['id', options.id],
    ['idempotencyKey', options.idempotencyKey],
  ] as const) {
    if (value !== undefined) {
      problems.push({ field, value, message: `cannot be combined with ${dedupe ? 'dedupe' : 'debounce'}` });
    }
  }
  if (dedupe !== undefined) {
    if (typeof dedupe !== 'object' || dedupe === null) {
      problems.push({
        field: 'dedupe',
        value: dedupe,
        message: 'must be an object { key, scope?, windowMs? }',
      });
      return;
    }
    if (!isKey(dedupe.key)) {
      problems.push({
        field: 'dedupe.key',
        value: dedupe.key,
        message: 'must be a string of 1 to 255 characters',
      });
    }
    if (dedupe.scope !== undefined && !DEDUPE_SCOPES.includes(dedupe.scope)) {
      problems.push({
        field: 'dedupe.scope',
        value: dedupe.scope,
        message: "must be 'pending', 'running' or 'finished'",
      });
    }
    const { windowMs } = dedupe;
    if (dedupe.scope === 'finished') {
      if (
        typeof windowMs !== 'number' ||
        !Number.isFinite(windowMs) ||
        Math.round(windowMs) < 1 ||
        windowMs > MAX_WINDOW_MS
      ) {
        problems.push({
          field: 'dedupe.windowMs',
          value: windowMs,
          message: "must be a number from 1 to 100 years in ms with scope 'finished'",
        });
      }
    } else if (windowMs !== undefined) {
      problems.push({
        field: 'dedupe.windowMs',
        value: windowMs,
        message: "is given only with scope 'finished'",
      });
    }
  }
  if (debounce !== undefined) {
    if (typeof debounce !== 'object' || debounce === null) {
      problems.push({ field: 'debounce', value: debounce, message: 'must be an object { key, delayMs }' });
      return;
    }
    if (!isKey(debounce.key)) {
      problems.push({
        field: 'debounce.key',
        value: debounce.key,
        message: 'must be a string of 1 to 255 characters',
      });
    }
    const { delayMs } = debounce;
    if (
      typeof delayMs !== 'number' ||
      !Number.isFinite(delayMs) ||
      delayMs < 0 ||
      delayMs > MAX_DEBOUNCE_MS
    ) {
      problems.push({
        field: 'debounce.delayMs',
        value: delayMs,
        message: `must be a number from 0 to ${MAX_DEBOUNCE_MS} (about 24.8 days)`,
      });
    }
    for (const field of ['delayMs', 'runAt'] as const) {
      if (options[field] !== undefined) {
        problems.push({
          field,
          value: options[field],
          message: 'cannot be combined with debounce (give debounce.delayMs)',
        });
      }
    }
  }
}

// A valid Date out of the storable range gets its own message: "invalid" would puzzle whoever passed it.
function dateProblem(value: unknown): string {
  return value instanceof Date && !Number.isNaN(value.getTime())
    ? 'must be in the years 1 to 9999'
    : 'must be a valid Date';
}

// A value as text for a message; an object without a prototype has no toString.
function asText(value: unknown): string {
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

// The strings stored as text: PostgreSQL cannot hold a NUL character, and a lone surrogate has no UTF-8 form.
function textProblems(options: SendOptions, problems: ConfigProblem[]): void {
  const { dedupe, debounce } = options;
  const texts: [string, unknown][] = [
    ['id', options.id],
    ['idempotencyKey', options.idempotencyKey],
    ['group', options.group],
    ['dedupe.key', typeof dedupe === 'object' && dedupe !== null ? dedupe.key : undefined],
    ['debounce.key', typeof debounce === 'object' && debounce !== null ? debounce.key : undefined],
  ];
  for (const [field, value] of texts) {
    if (typeof value === 'string' && !isStorableText(value)) {
      problems.push({ field, value, message: 'must not hold a NUL character or a lone surrogate' });
    }
  }
}
