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
import { TaskFindByIdsOrKeys, TaskInsertMany } from '../db/tasks.js';
import type { TaskInsert } from '../db/tasks.js';
import {
  InputValidationError,
  PayloadMismatchError,
  PayloadTooLargeError,
  SendOptionsError,
  UnknownQueueError,
} from '../errors.js';
import type { ConfigProblem, ValidationIssue } from '../errors.js';
import type { HorsiesMetrics } from '../metrics/Metrics.js';
import type { TaskTracer } from '../tracing/TaskTracer.js';
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
   * The time recorded as the task's `sent_at`. Default: the database's `now()` at the insert. The scheduler sets
   * it to the slot a task stands for, which may be earlier than the insert.
   */
  sentAt?: Date;
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
 * counts them. Returns the ids as {@link insertTasks} does.
 */
export async function sendPrepared(
  ctx: SendContext,
  target: SendTarget,
  tasks: TaskInsert[],
  tx?: Queryable,
): Promise<string[]> {
  const span =
    ctx.tracer && tasks.length > 0 ? ctx.tracer.startSend(sendQueue(tasks), target.name, tasks.length) : null;
  if (span?.carrier) for (const task of tasks) task.traceContext = span.carrier;
  let ids: string[];
  try {
    ids = await insertTasks(ctx.db, tasks, tx);
  } catch (error) {
    span?.fail(error);
    throw error;
  }
  span?.end(ids);
  countSent(ctx, target, tasks);
  return ids;
}

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
  return toTaskInsert(ctx, target, input, options, isPromise(result) ? await result : result);
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
      tasks[index] = toTaskInsert(ctx, target, item.input, item, isPromise(result) ? await result : result);
    } catch (error) {
      if (error instanceof Error) error.message = `sendMany item ${index}: ${error.message}`;
      throw error;
    }
  }
  return tasks;
}

function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown }).then === 'function';
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
    delayMs: Math.round(options.delayMs ?? 0),
    runAt: options.runAt ?? null,
    goodUntil: options.goodUntil ?? null,
    // The digest only matters when a repeat is possible: an explicit id or idempotency key.
    enqueueSha:
      options.id !== undefined || options.idempotencyKey !== undefined
        ? payloadDigest(target.name, kwargs)
        : null,
    idempotencyKey: options.idempotencyKey ?? null,
    groupKey: options.group ?? null,
    sentAt: options.sentAt ?? null,
    maxRetries: target.maxRetries,
    retentionMs: target.retentionMs ?? ctx.queueRetentionMs.get(queueName) ?? null,
    taskOptions: target.taskOptions,
  };
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
 * Inserts prepared tasks in one statement. Returns the id of the task that now stands for each item, in order:
 * the new task, or the existing one when the id or key was already taken with the same payload.
 */
export async function insertTasks(db: Database, tasks: TaskInsert[], tx?: Queryable): Promise<string[]> {
  if (tasks.length === 0) return [];
  const shape = tasks.length >= MIN_COPY_TASKS ? copyShape(tasks) : null;
  if (shape !== null && (tx === undefined || canCopyOn(tx))) {
    await copyTasks(db, tasks, shape, tx);
    return tasks.map((t) => t.id);
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

function isValidDate(value: unknown): boolean {
  return value instanceof Date && !Number.isNaN(value.getTime());
}

/** A Standard Schema issue as a {@link ValidationIssue}. */
export function toIssue(issue: StandardSchemaV1.Issue): ValidationIssue {
  return {
    message: issue.message,
    path: (issue.path ?? []).map((segment) => {
      const key = typeof segment === 'object' ? segment.key : segment;
      return typeof key === 'number' ? key : String(key);
    }),
  };
}
