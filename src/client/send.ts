/**
 * The send path: validate every task of a call before anything is stored, then insert them all in one statement
 * and sort out repeats (same id or idempotency key, same payload: the existing task) from mismatches.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { v7 as uuidv7 } from 'uuid';
import type { Database, Queryable } from '../db/Database.js';
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
import { payloadDigest, toCanonicalJson } from './json.js';

/** Options of one send. */
export interface SendOptions {
  /** Run no sooner than this many milliseconds from now (database clock). */
  delayMs?: number;
  /** Run no sooner than this time. Exclusive with `delayMs`. */
  runAt?: Date;
  /** Deadline: if the task has not started by then, it expires and never runs. */
  goodUntil?: Date;
  /** 1–100, lower runs first. Default: the task's priority. */
  priority?: number;
  /** Queue to send to. Default: the task's queue. Must be one of the app's queues. */
  queue?: string;
  /** Explicit task id (at most 36 characters). Sending the same id again with the same input returns that task. */
  id?: string;
  /** Idempotency key (at most 255 characters): like `id`, but the task still gets a generated id. */
  idempotencyKey?: string;
}

/** Options that apply to a whole send call. */
export interface SendCallOptions {
  /** Run the insert on this connection, inside the caller's transaction: if it rolls back, no task exists. */
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
}

/** Validates one input and its options; returns the row to insert. Throws a typed error on the first bad item. */
export async function prepareTask(
  ctx: SendContext,
  target: SendTarget,
  input: unknown,
  options: SendOptions = {},
): Promise<TaskInsert> {
  checkOptions(ctx, target, options);
  const result = await target.schema['~standard'].validate(input);
  if (result.issues) throw new InputValidationError(target.name, result.issues.map(toIssue));
  const kwargs = toCanonicalJson(input, 'input');
  const size = Buffer.byteLength(kwargs);
  if (size > ctx.maxPayloadBytes) throw new PayloadTooLargeError(target.name, size, ctx.maxPayloadBytes);
  const queueName = options.queue ?? target.queue;
  return {
    id: options.id ?? uuidv7(),
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
    maxRetries: target.maxRetries,
    retentionMs: target.retentionMs ?? ctx.queueRetentionMs.get(queueName) ?? null,
    taskOptions: target.taskOptions,
  };
}

/**
 * Inserts prepared tasks in one statement. Returns the id of the task that now stands for each item, in order:
 * the new task, or the existing one when the id or key was already taken with the same payload.
 */
export async function insertTasks(db: Database, tasks: TaskInsert[], tx?: Queryable): Promise<string[]> {
  if (tasks.length === 0) return [];
  checkRepeatsWithinCall(tasks);
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
  const problems: ConfigProblem[] = [];
  const problem = (field: string, value: unknown, message: string): void => {
    problems.push({ field, value, message });
  };
  const { delayMs, runAt, goodUntil, priority, queue, id, idempotencyKey } = options;
  if (delayMs !== undefined && (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0)) {
    problem('delayMs', delayMs, 'must be a finite number >= 0');
  }
  if (runAt !== undefined && !isValidDate(runAt)) problem('runAt', runAt, 'must be a valid Date');
  if (runAt !== undefined && delayMs !== undefined)
    problem('runAt', runAt, 'give delayMs or runAt, not both');
  if (goodUntil !== undefined && !isValidDate(goodUntil))
    problem('goodUntil', goodUntil, 'must be a valid Date');
  if (priority !== undefined && (!Number.isInteger(priority) || priority < 1 || priority > 100)) {
    problem('priority', priority, 'must be an integer from 1 to 100');
  }
  if (id !== undefined && (typeof id !== 'string' || id.length === 0 || id.length > 36)) {
    problem('id', id, 'must be a string of 1 to 36 characters');
  }
  if (
    idempotencyKey !== undefined &&
    (typeof idempotencyKey !== 'string' || idempotencyKey.length === 0 || idempotencyKey.length > 255)
  ) {
    problem('idempotencyKey', idempotencyKey, 'must be a string of 1 to 255 characters');
  }
  if (queue !== undefined && !ctx.queues.includes(queue))
    throw new UnknownQueueError(String(queue), ctx.queues);
  if (problems.length > 0) throw new SendOptionsError(target.name, problems);
}

function isValidDate(value: unknown): boolean {
  return value instanceof Date && !Number.isNaN(value.getTime());
}

function toIssue(issue: StandardSchemaV1.Issue): ValidationIssue {
  return {
    message: issue.message,
    path: (issue.path ?? []).map((segment) => {
      const key = typeof segment === 'object' ? segment.key : segment;
      return typeof key === 'number' ? key : String(key);
    }),
  };
}
