/**
 * The send path: validate every task of a call before anything is stored (see `sendOptions.ts`), turn each item
 * into the row to insert, then store them all (see `insertTasks.ts`) within a send span, and count what was sent.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Database, Queryable } from '../db/Database.js';
import type { TaskInsert } from '../db/tasks.js';
import { InputValidationError, PayloadTooLargeError, toIssue } from '../errors.js';
import type { HorsiesMetrics } from '../metrics/Metrics.js';
import type { TaskTracer } from '../tracing/TaskTracer.js';
import { isPromiseLike } from '../types.js';
import { insertTasks } from './insertTasks.js';
import type { InsertOutcome } from './insertTasks.js';
import { payloadDigest, toCanonicalJson } from '../json.js';
import { checkOptions } from './sendOptions.js';
import type { DebounceOptions, SendOptions } from './sendOptions.js';
import { nextTaskId } from './taskIds.js';

/** Options that apply to a whole send call. */
export interface SendCallOptions {
  /**
   * Run the insert on this connection, inside the caller's transaction: if it rolls back, no task exists. A send
   * that throws (a payload mismatch, say) may have inserted its other items into that transaction: roll it back.
   */
  tx?: Queryable | undefined;
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
  checkOptions(target.name, ctx.queues, options);
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
      checkOptions(target.name, ctx.queues, item);
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
