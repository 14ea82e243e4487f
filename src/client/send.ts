/**
 * The send path: validate every task of a call before anything is stored, then insert them all in one statement
 * and sort out repeats (same id or idempotency key, same payload: the existing task) from mismatches. Bulk sends
 * of tasks that cannot repeat (generated ids, no idempotency key) are copied in instead (see `db/taskCopy.ts`).
 */
import { randomFillSync } from 'node:crypto';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { v7 as uuidv7 } from 'uuid';
import type { Database, Queryable } from '../db/Database.js';
import { canCopyOn, copyShape, copyTasks } from '../db/taskCopy.js';
import { TaskFindByIdsOrKeys, TaskInsertKeyed, TaskInsertMany, TaskInsertOne } from '../db/tasks.js';
import type { TaskInsert } from '../db/tasks.js';
import {
  InputValidationError,
  PayloadMismatchError,
  PayloadTooLargeError,
  SendOptionsError,
  UnknownQueueError,
  toIssue,
} from '../errors.js';
import type { ConfigProblem } from '../errors.js';
import type { HorsiesMetrics } from '../metrics/Metrics.js';
import type { TaskTracer } from '../tracing/TaskTracer.js';
import { isPromiseLike } from '../types.js';
import { payloadDigest, toCanonicalJson } from './json.js';

/** Options of one send. `Q` is the app's queue names (see `createApp`). */
export interface SendOptions<Q extends string = string> {
  /** Run no sooner than this many milliseconds from now (database clock). */
  delayMs?: number;
  /** Run no sooner than this time. Exclusive with `delayMs`. */
  runAt?: Date;
  /** Deadline: if the task has not started by then, it expires and never runs. */
  goodUntil?: Date;
  /** 1–100, lower runs first. Default: the task's priority. */
  priority?: number;
  /** Queue to send to. Default: the task's queue. Must be one of the app's queues. */
  queue?: Q;
  /** Explicit task id (at most 36 characters). Sending the same id again with the same input returns that task. */
  id?: string;
  /** Idempotency key (at most 255 characters): like `id`, but the task still gets a generated id. */
  idempotencyKey?: string;
  /**
   * The group the task belongs to, for example a tenant id (1 to 255 characters): queues can limit how many tasks
   * of one group run at once and take groups in turn (see docs/capacity.md). Default: no group.
   */
  group?: string;
  /**
   * Deduplication: while a task of this name holds `key` (see {@link DedupeOptions.scope}), this send stores
   * nothing and returns a handle to that task, with `deduplicated: true`. Exact under concurrent senders.
   * Not with `id`, `idempotencyKey` or `debounce`. See docs/capacity.md.
   */
  dedupe?: DedupeOptions;
  /**
   * Debounce: while a task of this name sent with the same debounce `key` is still PENDING (never claimed), this
   * send replaces that task's input with its own and moves its start to `delayMs` from now, and returns a handle
   * to it (`deduplicated: true`); otherwise it stores a new task that starts in `delayMs`. A burst of sends
   * closer together than `delayMs` runs once, with the last input. Not with `id`, `idempotencyKey`, `dedupe`,
   * `delayMs` or `runAt`. See docs/capacity.md.
   */
  debounce?: DebounceOptions;
  /**
   * The time recorded as the task's `sent_at`. Default: the database's `now()` at the insert. The scheduler sets
   * it to the slot a task stands for, which may be earlier than the insert.
   */
  sentAt?: Date;
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
  scope?: DedupeScope;
  /** With scope `finished` (and only then): how long after its end the task still holds the key, in ms (> 0). */
  windowMs?: number;
}

/** See {@link SendOptions.debounce}. */
export interface DebounceOptions {
  /** 1 to 255 characters; keys are per task name (shared with `dedupe` keys). */
  key: string;
  /** How long after the latest send of the burst the task starts, in ms (>= 0). */
  delayMs: number;
}

/** Options that apply to a whole send call. */
export interface SendCallOptions {
  /**
   * Run the insert on this connection, inside the caller's transaction: if it rolls back, no task exists. A send
   * that throws (a payload mismatch, say) may have inserted its other items into that transaction: roll it back.
   */
  tx?: Queryable;
}

/** What the send path needs to know about the task being sent. */
export interface SendTarget {
  name: string;
  queue: string;
  priority: number;
  schema: StandardSchemaV1;
  maxRetries: number;
  /** The task's own retention of completed rows, if it has one. */
  retentionMs: number | null;
  /** JSON text stored in `task_options` (the retry policy, for recovery), or null when there is none to store. */
  taskOptions: string | null;
}

/** What the send path needs to know about the app. */
export interface SendContext {
  db: Database;
  queues: readonly string[];
  /** Retention of completed rows per queue, for queues that set one. */
  queueRetentionMs: ReadonlyMap<string, number>;
  maxPayloadBytes: number;
  /** Counts the tasks sent; null when the app has no metrics. */
  metrics?: HorsiesMetrics | null;
  /** Spans for sends; null when tracing is off. */
  tracer?: TaskTracer | null;
}

/**
 * Stores prepared tasks (see {@link insertTasks}) within a send span whose trace context goes with them, and
 * counts the tasks it created. Returns what {@link insertTasks} returns.
 */
export async function sendPrepared(
  ctx: SendContext,
  target: SendTarget,
  tasks: TaskInsert[],
  tx?: Queryable,
): Promise<InsertOutcome> {
  const span =
    ctx.tracer && tasks.length > 0 ? ctx.tracer.startSend(sendQueue(tasks), target.name, tasks.length) : null;
  if (span?.carrier) for (const task of tasks) task.traceContext = span.carrier;
  let outcome: InsertOutcome;
  try {
    outcome = await insertTasks(ctx.db, tasks, tx);
  } catch (error) {
    span?.fail(error);
    throw error;
  }
  span?.end(outcome.ids);
  const { deduplicated } = outcome;
  countSent(ctx, target, deduplicated.size === 0 ? tasks : tasks.filter((_, i) => !deduplicated.has(i)));
  return outcome;
}

/** The task that stands for each item of a send, in order, and which items created none. */
export interface InsertOutcome {
  ids: string[];
  /**
   * Indexes of the items that created no task because a task held their deduplication or debounce key (another
   * item of the same call, or a stored task). A repeat of an id or idempotency key is not counted here.
   */
  deduplicated: ReadonlySet<number>;
}

const NONE: ReadonlySet<number> = new Set();

// The queue a send span names: the tasks' queue, or the first one's when they go to several.
function sendQueue(tasks: readonly TaskInsert[]): string {
  return (tasks[0] as TaskInsert).queueName;
}

/** Counts sent tasks in the app's metrics (one series per queue and task; a bulk send counts per queue). */
export function countSent(ctx: SendContext, target: SendTarget, tasks: readonly TaskInsert[]): void {
  const metrics = ctx.metrics;
  if (!metrics || tasks.length === 0) return;
  let queue = (tasks[0] as TaskInsert).queueName;
  let run = 0;
  for (const task of tasks) {
    if (task.queueName !== queue) {
      metrics.sent(queue, target.name, run);
      queue = task.queueName;
      run = 0;
    }
    run += 1;
  }
  metrics.sent(queue, target.name, run);
}

/** Validates one input and its options; returns the row to insert. Throws a typed error on bad input. */
export async function prepareTask(
  ctx: SendContext,
  target: SendTarget,
  input: unknown,
  options: SendOptions = {},
): Promise<TaskInsert> {
  checkOptions(ctx, target, options);
  const result = target.schema['~standard'].validate(input);
  return toTaskInsert(ctx, target, input, options, isPromiseLike(result) ? await result : result);
}

/** One item of a bulk send: its input and its own options. */
export type SendItem = { input: unknown } & SendOptions;

/**
 * Validates every item, in order; returns the rows to insert. Throws a typed error on the first bad item, its
 * message naming the item. A schema that validates synchronously (Standard Schema allows either) is not awaited:
 * an await per item would cost a bulk send more than the validation itself.
 */
export async function prepareTasks(
  ctx: SendContext,
  target: SendTarget,
  items: readonly SendItem[],
): Promise<TaskInsert[]> {
  const standard = target.schema['~standard'];
  const tasks = new Array<TaskInsert>(items.length);
  for (let index = 0; index < items.length; index += 1) {
    const item = items[index] as SendItem;
    try {
      checkOptions(ctx, target, item);
      const result = standard.validate(item.input);
      tasks[index] = toTaskInsert(
        ctx,
        target,
        item.input,
        item,
        isPromiseLike(result) ? await result : result,
      );
    } catch (error) {
      if (error instanceof Error) error.message = `sendMany item ${index}: ${error.message}`;
      throw error;
    }
  }
  return tasks;
}

function toTaskInsert(
  ctx: SendContext,
  target: SendTarget,
  input: unknown,
  options: SendOptions,
  result: StandardSchemaV1.Result<unknown>,
): TaskInsert {
  if (result.issues) throw new InputValidationError(target.name, result.issues.map(toIssue));
  const kwargs = toCanonicalJson(input, 'input');
  const size = Buffer.byteLength(kwargs);
  if (size > ctx.maxPayloadBytes) throw new PayloadTooLargeError(target.name, size, ctx.maxPayloadBytes);
  const queueName = options.queue ?? target.queue;
  return {
    id: options.id ?? nextTaskId(),
    taskName: target.name,
    queueName,
    priority: options.priority ?? target.priority,
    kwargs,
    delayMs: Math.round(options.debounce?.delayMs ?? options.delayMs ?? 0),
    runAt: options.runAt ?? null,
    goodUntil: options.goodUntil ?? null,
    // The digest only matters when a repeat is possible: an explicit id or idempotency key.
    enqueueSha:
      options.id !== undefined || options.idempotencyKey !== undefined
        ? payloadDigest(target.name, kwargs)
        : null,
    idempotencyKey: options.idempotencyKey ?? null,
    groupKey: options.group ?? null,
    ...(options.dedupe || options.debounce ? keyColumns(options) : {}),
    sentAt: options.sentAt ?? null,
    maxRetries: target.maxRetries,
    retentionMs: target.retentionMs ?? ctx.queueRetentionMs.get(queueName) ?? null,
    taskOptions: target.taskOptions,
  };
}

function keyColumns({ dedupe, debounce }: SendOptions): Partial<TaskInsert> {
  if (dedupe) {
    const scope = dedupe.scope ?? 'pending';
    return {
      dedupeKey: dedupe.key,
      dedupeScope: scope,
      dedupeWindowMs: scope === 'finished' ? Math.round(dedupe.windowMs as number) : null,
    };
  }
  return { dedupeKey: (debounce as DebounceOptions).key, dedupeScope: 'debounce', dedupeWindowMs: null };
}

/** Random bytes for {@link nextTaskId}, drawn for 256 ids at a time. */
const idRandomness = { bytes: new Uint8Array(0), offset: 0 };
/** The time and counter of the last generated id, as uuid's own `v7()` keeps them. */
const idClock = { msecs: Number.NEGATIVE_INFINITY, seq: 0 };

/**
 * A new UUIDv7 task id, greater than every id generated before it in this process, so the tasks of one bulk send
 * keep their order in the claim index. This is uuid's `v7()` with the same clock and counter rules, except that
 * the random bytes come from a pool: `v7()` draws them with one `crypto.getRandomValues` call per id, which costs
 * more than the rest of a bulk send's work on each task.
 */
function nextTaskId(): string {
  if (idRandomness.offset + 16 > idRandomness.bytes.length) {
    idRandomness.bytes = randomFillSync(new Uint8Array(16 * 256));
    idRandomness.offset = 0;
  }
  const random = idRandomness.bytes.subarray(idRandomness.offset, idRandomness.offset + 16);
  idRandomness.offset += 16;
  const now = Date.now();
  if (now > idClock.msecs) {
    idClock.msecs = now;
    idClock.seq = freshCounter(random);
  } else {
    idClock.seq = (idClock.seq + 1) | 0;
    if (idClock.seq === 0) idClock.msecs += 1;
  }
  return uuidv7({ msecs: idClock.msecs, seq: idClock.seq, random });
}

/** The counter a new millisecond starts from: 31 of the id's own random bytes, as uuid's `v7()` takes it. */
function freshCounter(random: Uint8Array): number {
  return new DataView(random.buffer, random.byteOffset, random.byteLength).getUint32(6) & 0x7fffffff;
}

/**
 * Smallest send that goes through COPY (when it can): below it, COPY's extra round trip costs more than the INSERT
 * statement's slower parsing saves.
 */
const MIN_COPY_TASKS = 64;

/**
 * Inserts prepared tasks. Returns the id of the task that now stands for each item, in order: the new task, the
 * existing one when the id or idempotency key was already taken with the same payload, or the task holding the
 * item's dedupe or debounce key (those items are listed in `deduplicated`). Tasks without such a key are stored
 * in one statement (a COPY or an INSERT); keyed tasks never go through COPY, which cannot resolve a conflict, but
 * through their own INSERT (in the same transaction as the others).
 */
export async function insertTasks(db: Database, tasks: TaskInsert[], tx?: Queryable): Promise<InsertOutcome> {
  if (tasks.length === 0) return { ids: [], deduplicated: NONE };
  if (!tasks.some((t) => t.dedupeKey)) return { ids: await insertUnkeyed(db, tasks, tx), deduplicated: NONE };
  const keyed = tasks.filter((t) => t.dedupeKey);
  const plain = tasks.filter((t) => !t.dedupeKey);
  const run = async (q: Queryable | undefined): Promise<InsertOutcome> => {
    const plainIds = plain.length > 0 ? await insertUnkeyed(db, plain, q) : [];
    const { ids: keyedIds, deduplicated: keyedDuplicates } = await insertKeyed(db, keyed, q);
    const ids: string[] = [];
    const deduplicated = new Set<number>();
    let k = 0;
    let p = 0;
    for (let index = 0; index < tasks.length; index += 1) {
      if ((tasks[index] as TaskInsert).dedupeKey) {
        if (keyedDuplicates.has(k)) deduplicated.add(index);
        ids.push(keyedIds[k++] as string);
      } else ids.push(plainIds[p++] as string);
    }
    return { ids, deduplicated };
  };
  // Keyed and other tasks take two statements: one transaction, so that a failure stores neither.
  if (tx === undefined && plain.length > 0) return db.transaction((client) => run(client));
  return run(tx);
}

/** How many times a keyed send meets an expired holder before it gives up (each time, it released one). */
const MAX_KEYED_ROUNDS = 5;

/**
 * Inserts keyed tasks (all with a dedupe or debounce key) through `TaskInsertKeyed`. Items of the call sharing a
 * key become one row: the first item's, carrying, when it is a debounce, the input and delay of the last debounce
 * item with that key; the others stand for the same task and count as deduplicated. A round that met an expired
 * `finished` holder released it; its tasks are sent again.
 */
async function insertKeyed(
  db: Database,
  tasks: TaskInsert[],
  tx: Queryable | undefined,
): Promise<InsertOutcome> {
  const byKey = new Map<string, { first: number; row: TaskInsert }>();
  const rows: TaskInsert[] = [];
  const owner = tasks.map((task, index) => {
    const key = task.dedupeKey as string;
    const seen = byKey.get(key);
    if (seen === undefined) {
      const row = { ...task };
      byKey.set(key, { first: index, row });
      rows.push(row);
      return index;
    }
    const { first, row } = seen;
    if (row.dedupeScope === 'debounce' && task.dedupeScope === 'debounce') {
      row.kwargs = task.kwargs;
      row.delayMs = task.delayMs;
    }
    return first;
  });
  const holders = new Map<string, string>();
  let pending = rows;
  for (let round = 0; pending.length > 0; round += 1) {
    if (round === MAX_KEYED_ROUNDS) {
      throw new Error(`deduplication keys still held by expired tasks after ${round} tries; send again`);
    }
    const held = new Map<string, string>();
    for (const r of await db.run(TaskInsertKeyed, { tasks: pending }, tx)) {
      if (r.dedupe_held) held.set(r.dedupe_key, r.id);
    }
    const again: TaskInsert[] = [];
    for (const row of pending) {
      const id = held.get(row.dedupeKey as string);
      if (id === undefined) again.push(row);
      else holders.set(row.dedupeKey as string, id);
    }
    pending = again;
  }
  const deduplicated = new Set<number>();
  const ids = tasks.map((task, index) => {
    const id = holders.get(task.dedupeKey as string) as string;
    if (owner[index] !== index || id !== task.id) deduplicated.add(index);
    return id;
  });
  return { ids, deduplicated };
}

// The send path of tasks without a dedupe or debounce key: COPY when it can, else INSERT ... ON CONFLICT.
async function insertUnkeyed(db: Database, tasks: TaskInsert[], tx?: Queryable): Promise<string[]> {
  const shape = tasks.length >= MIN_COPY_TASKS ? copyShape(tasks) : null;
  if (shape !== null && (tx === undefined || canCopyOn(tx))) {
    await copyTasks(db, tasks, shape, tx);
    return tasks.map((t) => t.id);
  }
  const only = tasks.length === 1 ? (tasks[0] as TaskInsert) : null;
  if (only !== null && only.enqueueSha === null) {
    // A generated id and no key: nothing to resolve (the digest is set exactly when an id or key is given). Only
    // a send of its own is handed to an idle worker: in a caller's transaction, the worker's registration would
    // stay locked until that transaction ends.
    await db.run(TaskInsertOne, { task: only, handoff: tx === undefined }, tx);
    return [only.id];
  }
  checkRepeatsWithinCall(tasks);
  // A task named by id or key may turn out to mismatch a stored one, and then the call must store nothing: the
  // insert and the check share a transaction (the caller's, or one of their own). A lone task needs none.
  const mayMismatch = tasks.length > 1 && tasks.some((t) => t.enqueueSha !== null);
  if (tx === undefined && mayMismatch) return db.transaction((client) => insertResolved(db, tasks, client));
  return insertResolved(db, tasks, tx);
}

// Inserts with ON CONFLICT DO NOTHING, then resolves each conflict to the stored task: a repeat (same payload)
// stands for the item, a different payload is a PayloadMismatchError.
async function insertResolved(
  db: Database,
  tasks: TaskInsert[],
  tx: Queryable | undefined,
): Promise<string[]> {
  const conflicts = new Map((await db.run(TaskInsertMany, { tasks }, tx)).map((r) => [r.requested_id, r]));
  if (conflicts.size === 0) return tasks.map((t) => t.id);
  // A conflict with a send that committed after this statement's snapshot: the row exists but was not visible.
  const unresolved = tasks.filter((t) => conflicts.has(t.id) && !conflicts.get(t.id)?.id);
  const late = unresolved.length > 0 ? await db.run(TaskFindByIdsOrKeys, idsAndKeys(unresolved), tx) : [];
  return tasks.map((task) => {
    const conflict = conflicts.get(task.id);
    if (!conflict) return task.id;
    const existing =
      conflict.id !== null
        ? { id: conflict.id, enqueue_sha: conflict.enqueue_sha }
        : late.find(
            (e) =>
              e.id === task.id || (task.idempotencyKey !== null && e.idempotency_key === task.idempotencyKey),
          );
    if (!existing) throw new Error(`task ${task.id} was neither inserted nor found; send it again`);
    if (existing.enqueue_sha !== task.enqueueSha) {
      throw new PayloadMismatchError(
        existing.id,
        task.idempotencyKey !== null ? `idempotency key "${task.idempotencyKey}"` : `id ${task.id}`,
      );
    }
    return existing.id;
  });
}

function idsAndKeys(tasks: TaskInsert[]): { ids: string[]; keys: string[] } {
  return {
    ids: tasks.map((t) => t.id),
    keys: tasks.flatMap((t) => (t.idempotencyKey === null ? [] : [t.idempotencyKey])),
  };
}

// Two items of one call with the same id or key: fine if identical, a mismatch otherwise (caught before the insert).
// Only items that named an id or key carry a digest; generated ids cannot repeat.
function checkRepeatsWithinCall(tasks: TaskInsert[]): void {
  const seen = new Map<string, string>();
  for (const task of tasks) {
    if (task.enqueueSha === null) continue;
    for (const key of [`id:${task.id}`, task.idempotencyKey === null ? null : `key:${task.idempotencyKey}`]) {
      if (key === null) continue;
      const sha = seen.get(key);
      if (sha === undefined) seen.set(key, task.enqueueSha);
      else if (sha !== task.enqueueSha) {
        throw new PayloadMismatchError(
          task.id,
          key.startsWith('id:') ? `id ${task.id}` : `idempotency key "${task.idempotencyKey}"`,
        );
      }
    }
  }
}

function checkOptions(ctx: SendContext, target: SendTarget, options: SendOptions): void {
  const problems = optionProblems(options);
  const { queue } = options;
  if (queue !== undefined && !ctx.queues.includes(queue))
    throw new UnknownQueueError(String(queue), ctx.queues);
  if (problems.length > 0) throw new SendOptionsError(target.name, problems);
}

// Plain pushes rather than a helper closure: this runs once per item of a bulk send.
function optionProblems(options: SendOptions): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const { delayMs, runAt, goodUntil, priority, id, idempotencyKey, sentAt, group } = options;
  if (delayMs !== undefined && (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0)) {
    problems.push({ field: 'delayMs', value: delayMs, message: 'must be a finite number >= 0' });
  }
  if (runAt !== undefined && !isValidDate(runAt)) {
    problems.push({ field: 'runAt', value: runAt, message: 'must be a valid Date' });
  }
  if (runAt !== undefined && delayMs !== undefined) {
    problems.push({ field: 'runAt', value: runAt, message: 'give delayMs or runAt, not both' });
  }
  if (goodUntil !== undefined && !isValidDate(goodUntil)) {
    problems.push({ field: 'goodUntil', value: goodUntil, message: 'must be a valid Date' });
  }
  if (sentAt !== undefined && !isValidDate(sentAt)) {
    problems.push({ field: 'sentAt', value: sentAt, message: 'must be a valid Date' });
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
  return problems;
}

/** Longest dedupe window: 100 years, far inside what a timestamp plus an interval can hold. */
const MAX_WINDOW_MS = 100 * 365.25 * 24 * 3600 * 1000;
/** Longest debounce delay: the insert carries delays as 32-bit integers. */
const MAX_DEBOUNCE_MS = 2 ** 31 - 1;

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

function isValidDate(value: unknown): boolean {
  return value instanceof Date && !Number.isNaN(value.getTime());
}
