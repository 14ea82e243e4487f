/**
 * How prepared tasks are stored: the choice between COPY and INSERT, and the sorting out of repeats (same id or
 * idempotency key, same payload: the existing task) from mismatches, and of dedupe and debounce keys held by
 * other tasks. Kept apart from the send path so that validation and tracing there, and the statements and their
 * retry rounds here, can each be read on one screen.
 */
import type { Database, Queryable } from '../db/Database.js';
import { canCopyOn, copyShape, copyTasks } from '../db/taskCopy.js';
import { TaskFindByIdsOrKeys, TaskInsertKeyed, TaskInsertMany, TaskInsertOne } from '../db/tasks.js';
import type { TaskInsert } from '../db/tasks.js';
import { PayloadMismatchError } from '../errors.js';

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
