/**
 * Factories: rows of `horsies_tasks` and `horsies_task_attempts` in any state, inserted directly with SQL (and
 * satisfying the table's CHECK constraints), so maintenance, operations and the CLI can be tested without
 * running a worker.
 */
import type { TaskStatus } from '../../src/types.js';
import type { TestSchema } from './db.js';

/** The task rows to make. Times are relative to the database clock. */
export interface TaskSpec {
  taskName: string;
  status?: TaskStatus;
  queue?: string;
  /** Terminal statuses: how long ago the task finished. Default 1 s. */
  finishedAgoMs?: number;
  /** Terminal statuses: the exact finish time (wins over `finishedAgoMs`). */
  finishedAt?: Date;
  /** Default: BOOM for FAILED, TASK_CANCELLED / TASK_EXPIRED for those statuses, else none. */
  errorCode?: string | null;
  retentionMs?: number | null;
  /** Positive: in the past; negative: in the future; null/undefined: none. */
  purgeAfterAgoMs?: number | null;
  /** Positive: in the past; negative: in the future; null/undefined: none. */
  goodUntilAgoMs?: number | null;
  /** How long ago it was sent (and enqueued). Default: 1 s before it finished, or 1 s ago. */
  sentAgoMs?: number;
  attempt?: number;
  /** How many rows to insert (ids are generated). Default 1. */
  count?: number;
}

const TERMINAL: TaskStatus[] = ['COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED'];
const DEFAULT_CODES: Partial<Record<TaskStatus, string>> = {
  FAILED: 'BOOM',
  CANCELLED: 'TASK_CANCELLED',
  EXPIRED: 'TASK_EXPIRED',
};

/** Inserts tasks in the given state. Returns their ids. */
export async function insertTasks(t: TestSchema, spec: TaskSpec): Promise<string[]> {
  const status = spec.status ?? 'PENDING';
  const terminal = TERMINAL.includes(status);
  const claimed = status === 'CLAIMED' || status === 'RUNNING';
  const finishedAgo = terminal ? (spec.finishedAgoMs ?? 1000) : null;
  const errorCode = spec.errorCode === undefined ? (DEFAULT_CODES[status] ?? null) : spec.errorCode;
  const result =
    status === 'COMPLETED'
      ? { ok: 'done' }
      : terminal
        ? { err: { code: errorCode ?? 'BOOM', message: 'made by the test' } }
        : null;
  const rows = await t.query<{ id: string }>(
    `INSERT INTO {{schema}}.horsies_tasks
       (id, task_name, queue_name, status, sent_at, enqueued_at, claimed, claimed_by_worker_id, claimed_at,
        claim_generation, claim_token, started_at, completed_at, failed_at, finished_at, error_code, result, attempt,
        retention_ms, purge_after, good_until)
     SELECT gen_random_uuid()::text, $1::text, $2::text, $3::text,
            COALESCE(now() - $4::bigint * interval '1 millisecond', COALESCE(f.fin, now()) - interval '1 second'),
            COALESCE(now() - $4::bigint * interval '1 millisecond', COALESCE(f.fin, now()) - interval '1 second'),
            $5::boolean,
            CASE WHEN $5::boolean THEN 'w-test' END,
            CASE WHEN $5::boolean THEN now() END,
            CASE WHEN $5::boolean THEN 1 ELSE 0 END,
            CASE WHEN $5::boolean THEN gen_random_uuid() END,
            CASE WHEN $3::text = 'RUNNING' THEN now() END,
            CASE WHEN $3::text = 'COMPLETED' THEN f.fin END,
            CASE WHEN $3::text = 'FAILED' THEN f.fin END,
            f.fin,
            $7::text, $8::jsonb, $9::int,
            $10::bigint,
            now() - $11::bigint * interval '1 millisecond',
            now() - $12::bigint * interval '1 millisecond'
     FROM generate_series(1, $13::int),
          LATERAL (SELECT CASE WHEN $14::boolean
                          THEN COALESCE($15::timestamptz, now() - $6::bigint * interval '1 millisecond')
                          END AS fin) f
     RETURNING id`,
    [
      spec.taskName,
      spec.queue ?? 'default',
      status,
      spec.sentAgoMs ?? null,
      claimed,
      finishedAgo,
      errorCode,
      result === null ? null : JSON.stringify(result),
      spec.attempt ?? (status === 'PENDING' || status === 'CLAIMED' || status === 'EXPIRED' ? 0 : 1),
      spec.retentionMs ?? null,
      spec.purgeAfterAgoMs ?? null,
      spec.goodUntilAgoMs ?? null,
      spec.count ?? 1,
      terminal,
      spec.finishedAt ?? null,
    ],
  );
  return rows.map((r) => r.id);
}

/** Inserts one task in the given state. Returns its id. */
export async function insertTask(t: TestSchema, spec: TaskSpec): Promise<string> {
  const [id] = await insertTasks(t, { ...spec, count: 1 });
  return id!;
}

/** Adds a finished attempt row (started and finished an hour ago) to a task. */
export async function insertAttempt(
  t: TestSchema,
  taskId: string,
  attempt: number,
  outcome: 'COMPLETED' | 'FAILED',
): Promise<void> {
  await t.query(
    `INSERT INTO {{schema}}.horsies_task_attempts (task_id, attempt, outcome, started_at, finished_at, error_code)
     VALUES ($1, $2, $3, now() - interval '1 hour', now() - interval '1 hour', $4)`,
    [taskId, attempt, outcome, outcome === 'COMPLETED' ? null : 'BOOM'],
  );
}

/**
 * Requests a task's cancel the way no listener hears of: the update runs with triggers off for its session
 * (`session_replication_role = replica`), so no notification goes out and only the completion's fence sees it.
 */
export async function requestCancelSilently(t: TestSchema, taskId: string): Promise<void> {
  const side = await t.pool.connect();
  try {
    await side.query("SET session_replication_role = 'replica'");
    await side.query(`UPDATE "${t.schema}".horsies_tasks SET cancel_requested_at = now() WHERE id = $1`, [
      taskId,
    ]);
    await side.query("SET session_replication_role = 'origin'");
  } finally {
    side.release();
  }
}

/** The factories bound to one test schema. */
export function factoriesFor(t: TestSchema) {
  return {
    insertTasks: (spec: TaskSpec): Promise<string[]> => insertTasks(t, spec),
    insertTask: (spec: TaskSpec): Promise<string> => insertTask(t, spec),
    insertAttempt: (taskId: string, attempt: number, outcome: 'COMPLETED' | 'FAILED'): Promise<void> =>
      insertAttempt(t, taskId, attempt, outcome),
    requestCancelSilently: (taskId: string): Promise<void> => requestCancelSilently(t, taskId),
  };
}
