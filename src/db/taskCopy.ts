/**
 * Bulk insert of new tasks with `COPY ... FROM STDIN`. PostgreSQL parses COPY rows far more cheaply than an
 * `INSERT ... SELECT` over a JSON parameter, and the rows stream in while the server is still storing the ones
 * before them. It is one statement, so the statement-level insert trigger still sends one notification per queue,
 * and it runs on the caller's connection when the send is part of the caller's transaction.
 *
 * COPY cannot skip or report rows whose id or key is taken, so it only carries tasks that cannot conflict
 * (generated ids, no idempotency key); and it cannot compute `now() + delay`, so every task of a copy either runs
 * at the statement's `now()` or names its own `runAt`. Other sends take the `INSERT ... ON CONFLICT` path.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Database, Queryable } from './Database.js';
import { renderSql } from './sql.js';
import type { TaskInsert, TraceCarrier } from './tasks.js';

/** The optional columns a copy carries, each only when some task has a value for it. */
interface OptionalColumns {
  traced: boolean;
  grouped: boolean;
}

/** Which enqueue time the rows of a copy state: none (the column default, `now()`), or each task's `runAt`. */
export type CopyShape = 'now' | 'runAt';

const COLUMNS =
  'id, task_name, queue_name, priority, kwargs, good_until, max_retries, retention_ms, task_options';

/** About 64 KiB of row text per CopyData message: large enough to keep per-message costs small. */
const CHUNK_CHARS = 64 * 1024;

const NULL = '\\N';
const SPECIAL = /[\\\t\n\r]/;
const SPECIALS = /[\\\t\n\r]/g;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/**
 * The shape a copy of `tasks` would take, or null when they must go through `INSERT ... ON CONFLICT`: one of them
 * named an id or idempotency key (only those carry a payload digest) or its own `sentAt`, has a delay, or some
 * name a `runAt` and others do not.
 */
export function copyShape(tasks: readonly TaskInsert[]): CopyShape | null {
  let withRunAt = 0;
  for (const task of tasks) {
    // COPY writes no sent_at (the column default): a task that names its own goes through the INSERT.
    // Nor can a task with a dedupe or debounce key: its conflicts are resolved by TaskInsertKeyed.
    if (task.enqueueSha !== null || task.idempotencyKey !== null || task.sentAt || task.dedupeKey)
      return null;
    if (task.runAt !== null) withRunAt += 1;
    else if (task.delayMs !== 0) return null;
  }
  if (withRunAt === 0) return 'now';
  return withRunAt === tasks.length ? 'runAt' : null;
}

/**
 * Whether a copy can run on `tx`: it needs a node-postgres client (a `Client` or a pool's client) to stream on.
 * A pool, or another object that only runs queries, is not one.
 */
export function canCopyOn(tx: Queryable): boolean {
  return tx instanceof pg.Client;
}

/**
 * Copies `tasks` into `horsies_tasks` in one COPY statement: on `tx` when given (it must pass
 * {@link canCopyOn}), otherwise on a client of the pool, where the statement commits on its own: all the tasks or
 * none of them.
 */
export async function copyTasks(
  db: Database,
  tasks: readonly TaskInsert[],
  shape: CopyShape,
  tx?: Queryable,
): Promise<void> {
  // The tasks of one send share its trace context: the column is copied only when they carry one. So is the
  // group key column, only when some task names a group.
  const traced = tasks.some((t) => t.traceContext);
  const grouped = tasks.some((t) => t.groupKey);
  const sql = renderSql(copySql(shape, traced, grouped), db.schema);
  const columns = { traced, grouped };
  if (tx !== undefined) {
    await streamRows(tx as pg.Client, sql, tasks, shape, columns);
    return;
  }
  const client = await db.pool.connect();
  // A connection lost during the copy fails the copy; its error event must not reach the process (a checked-out
  // client has no listener of the pool's).
  let broken: Error | undefined;
  const onError = (error: Error): void => {
    broken ??= error;
  };
  client.on('error', onError);
  try {
    await streamRows(client, sql, tasks, shape, columns);
  } catch (error) {
    // A copy that failed part-way is not worth a guess at the connection's state: it is closed, not reused.
    broken ??= error instanceof Error ? error : new Error(String(error));
    throw error;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

function copySql(shape: CopyShape, traced: boolean, grouped: boolean): string {
  const columns =
    `${COLUMNS}${shape === 'runAt' ? ', enqueued_at' : ''}${traced ? ', trace_context' : ''}` +
    (grouped ? ', group_key' : '');
  return `COPY {{schema}}.horsies_tasks (${columns}) FROM STDIN`;
}

async function streamRows(
  client: pg.ClientBase,
  sql: string,
  tasks: readonly TaskInsert[],
  shape: CopyShape,
  columns: OptionalColumns,
): Promise<void> {
  await pipeline(Readable.from(rowChunks(tasks, shape, columns)), client.query(copyFrom(sql)));
}

// Rows are written lazily, a chunk at a time, so that writing them overlaps with the server storing earlier ones.
function* rowChunks(
  tasks: readonly TaskInsert[],
  shape: CopyShape,
  { traced, grouped }: OptionalColumns,
): Generator<string> {
  // The tasks of one send share one trace context object: it is written out once.
  const traces = new Map<TraceCarrier, string>();
  let chunk = '';
  for (const task of tasks) {
    const trace = traced ? `\t${traceText(task, traces)}` : '';
    chunk += copyRow(
      task,
      shape,
      grouped ? `${trace}\t${task.groupKey ? text(task.groupKey) : NULL}` : trace,
    );
    if (chunk.length >= CHUNK_CHARS) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk.length > 0) yield chunk;
}

/**
 * One task as a line of COPY's text format, in the order of {@link COLUMNS}; `tail` holds the optional fields
 * that end the line (trace context, group key), each with its leading tab.
 */
function copyRow(task: TaskInsert, shape: CopyShape, tail: string): string {
  const line =
    `${text(task.id)}\t${text(task.taskName)}\t${text(task.queueName)}\t${task.priority}\t${text(task.kwargs)}\t` +
    `${task.goodUntil === null ? NULL : task.goodUntil.toISOString()}\t${task.maxRetries}\t` +
    `${task.retentionMs ?? NULL}\t${task.taskOptions === null ? NULL : text(task.taskOptions)}`;
  return shape === 'runAt' ? `${line}\t${(task.runAt as Date).toISOString()}${tail}\n` : `${line}${tail}\n`;
}

/** A task's trace context as a COPY field (JSON text), or NULL; `seen` keeps those already written. */
function traceText(task: TaskInsert, seen: Map<TraceCarrier, string>): string {
  const carrier = task.traceContext;
  if (!carrier) return NULL;
  let field = seen.get(carrier);
  if (field === undefined) {
    field = text(JSON.stringify(carrier));
    seen.set(carrier, field);
  }
  return field;
}

/** A value escaped for COPY's text format: backslash, tab, newline and carriage return. */
function text(value: string): string {
  return SPECIAL.test(value) ? value.replace(SPECIALS, (ch) => ESCAPES[ch] as string) : value;
}
