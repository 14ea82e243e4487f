/**
 * Statements on `horsies_tasks` and `horsies_task_attempts`. Every statement that acts as the owner of a task
 * (start, finish) is fenced: it names the worker and the claim token it holds, and changes nothing when a
 * later claim superseded it. Times come from the database clock.
 */
import { statement } from './sql.js';

/** A full row of `horsies_tasks` as node-postgres returns it. */
export interface TaskRow {
  id: string;
  task_name: string;
  queue_name: string;
  priority: number;
  args: unknown;
  kwargs: unknown;
  status: string;
  sent_at: Date;
  enqueued_at: Date;
  claimed_at: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
  failed_at: Date | null;
  finished_at: Date | null;
  result: unknown;
  failed_reason: string | null;
  error_code: string | null;
  claimed: boolean;
  claimed_by_worker_id: string | null;
  claim_generation: number;
  claim_token: string | null;
  claim_expires_at: Date | null;
  good_until: Date | null;
  attempt: number;
  retry_count: number;
  max_retries: number;
  next_retry_at: Date | null;
  task_options: unknown;
  worker_pid: number | null;
  worker_hostname: string | null;
  worker_process_name: string | null;
  enqueue_sha: string | null;
  idempotency_key: string | null;
  cancel_requested_at: Date | null;
  resubmit_count: number;
  resubmitted_at: Date | null;
  retention_ms: string | null;
  purge_after: Date | null;
  created_at: Date;
  updated_at: Date;
  /** The latest progress its handler reported (JSON), when, and in which attempt (migration 11). */
  progress: unknown;
  progress_at: Date | null;
  progress_attempt: number | null;
  /** The sender's trace context (migration 11); null when the sender traced nothing. */
  trace_context: TraceCarrier | null;
  /** The workflow and node the task runs for (null for a plain task), with the node's id. */
  workflow_id: string | null;
  workflow_node: number | null;
  workflow_node_id: string | null;
  /** The group the task belongs to (migration 13); null for none. */
  group_key: string | null;
  /** The deduplication or debounce key, its scope, the window, and whether the task still holds it (migration 13). */
  dedupe_key: string | null;
  dedupe_scope: DedupeScopeColumn | null;
  dedupe_window_ms: string | null;
  dedupe_held: boolean | null;
}

/** How long a task holds its key (`dedupe_scope`); see migration 13. */
export type DedupeScopeColumn = 'pending' | 'debounce' | 'running' | 'finished';

/** A row of `horsies_task_attempts`. */
export interface AttemptRow {
  task_id: string;
  attempt: number;
  outcome: string;
  will_retry: boolean;
  started_at: Date | null;
  finished_at: Date;
  error_code: string | null;
  error_message: string | null;
  failed_reason: string | null;
  worker_id: string | null;
  worker_hostname: string | null;
  worker_pid: number | null;
  worker_process_name: string | null;
}

/** One task to insert. `kwargs` is JSON text. */
export interface TaskInsert {
  id: string;
  taskName: string;
  queueName: string;
  priority: number;
  kwargs: string;
  /** Delay from the database's `now()`; ignored when `runAt` is set. */
  delayMs: number;
  runAt: Date | null;
  goodUntil: Date | null;
  /** Payload digest; set when the send named an id or idempotency key (a repeat is possible only then). */
  enqueueSha: string | null;
  idempotencyKey: string | null;
  /** The group the task belongs to (`group_key`); null or absent for none. */
  groupKey?: string | null;
  /**
   * A deduplication or debounce key (`dedupe_key`), its scope and, for the `finished` scope, its window; null or
   * absent for none. A keyed task goes through {@link TaskInsertKeyed}, never through the other insert paths.
   */
  dedupeKey?: string | null;
  dedupeScope?: DedupeScopeColumn | null;
  dedupeWindowMs?: number | null;
  /** The task's `sent_at`; null or absent for the database's `now()`. */
  sentAt?: Date | null;
  maxRetries: number;
  /** Retention of the row once COMPLETED; null for the app's default. */
  retentionMs: number | null;
  /** JSON text of the options recovery needs without the task's code (its retry policy), if any. */
  taskOptions: string | null;
  /** The sender's trace context, carried to every run of the task; null or absent when there is none. */
  traceContext?: TraceCarrier | null;
}

/** A W3C trace context as stored with a task: the `traceparent` header, and `tracestate` when there is one. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

/** Outcome of one insert: the task that now holds the id or key, and whether this statement created it. */
/** A task the insert did not create: its id or idempotency key was taken. */
export interface TaskInsertConflictRow {
  requested_id: string;
  /** Id of the stored task that holds the id or key (null if it was not visible to this statement). */
  id: string | null;
  enqueue_sha: string | null;
}

/**
 * Inserts many tasks in one statement and returns only the ones it did not insert (id or idempotency key
 * taken), each with the stored task's id and payload digest, so the caller can tell a repeat from a mismatch.
 * The tasks travel as one JSON array (`kwargs` and `task_options` embedded as JSON), which is much cheaper to
 * encode and parse than one array parameter per column.
 */
export const TaskInsertMany = statement<{ tasks: TaskInsert[] }, TaskInsertConflictRow>(
  'TaskInsertMany',
  // The statement is horsies_insert_tasks's (routines/horsies_insert_tasks.sql), which keeps its lookups on the
  // indexes.
  'SELECT * FROM {{schema}}.horsies_insert_tasks($1::json)',
  ({ tasks }) => [`[${tasks.map(insertJson).join(',')}]`],
);

// One task as JSON text; `kwargs` and `taskOptions` are JSON text already and are embedded as they are.
function insertJson(t: TaskInsert): string {
  return (
    `{"id":${JSON.stringify(t.id)},"task_name":${JSON.stringify(t.taskName)},` +
    `"queue_name":${JSON.stringify(t.queueName)},"priority":${t.priority},"kwargs":${t.kwargs},` +
    `"delay_ms":${t.delayMs},"run_at":${t.runAt ? JSON.stringify(t.runAt.toISOString()) : 'null'},` +
    `"good_until":${t.goodUntil ? JSON.stringify(t.goodUntil.toISOString()) : 'null'},` +
    `"enqueue_sha":${JSON.stringify(t.enqueueSha)},"idempotency_key":${JSON.stringify(t.idempotencyKey)},` +
    `"max_retries":${t.maxRetries},"retention_ms":${t.retentionMs ?? 'null'},"task_options":${t.taskOptions ?? 'null'}` +
    (t.sentAt ? `,"sent_at":${JSON.stringify(t.sentAt.toISOString())}` : '') +
    (t.groupKey ? `,"group_key":${JSON.stringify(t.groupKey)}` : '') +
    (t.traceContext ? `,"trace_context":${JSON.stringify(t.traceContext)}}` : '}')
  );
}

/**
 * Inserts one task that cannot repeat (a generated id, no idempotency key), the commonest send: its values as
 * parameters, without {@link TaskInsertMany}'s JSON and conflict lookup, which cost the client and the server
 * more than the insert itself for a single row. With `handoff`, a task due now goes straight to an idle worker
 * that registered a free slot for its queue, claimed and started for it (`routines/horsies_send_one.sql`); the
 * row says which worker (`handed_to`), or null when the task was inserted PENDING.
 */
export const TaskInsertOne = statement<{ task: TaskInsert; handoff: boolean }, { handed_to: string | null }>(
  'TaskInsertOne',
  `SELECT {{schema}}.horsies_send_one($1, $2, $3, $4, $5::jsonb, $6::timestamptz, $7::timestamptz, $8::int,
     $9::timestamptz, $10, $11, $12::jsonb, $13::jsonb, $14, $15) AS handed_to`,
  ({ task: t, handoff }) => [
    t.id,
    t.taskName,
    t.queueName,
    t.priority,
    t.kwargs,
    t.sentAt ?? null,
    t.runAt,
    t.delayMs,
    t.goodUntil,
    t.maxRetries,
    t.retentionMs,
    t.taskOptions,
    t.traceContext ? JSON.stringify(t.traceContext) : null,
    t.groupKey ?? null,
    handoff,
  ],
);

/** Finds the tasks holding these ids or idempotency keys (the re-check after a conflict with a concurrent send). */
export const TaskFindByIdsOrKeys = statement<
  { ids: string[]; keys: string[] },
  { id: string; idempotency_key: string | null; enqueue_sha: string | null }
>(
  'TaskFindByIdsOrKeys',
  `SELECT id, idempotency_key, enqueue_sha FROM {{schema}}.horsies_tasks
   WHERE id = ANY($1::text[]) OR idempotency_key = ANY($2::text[])`,
  ({ ids, keys }) => [ids, keys],
);

/** A row of {@link TaskInsertKeyed}: the task that holds a key after the statement. */
export interface TaskInsertKeyedRow {
  id: string;
  dedupe_key: string;
  /** False for an expired holder the statement released: its sender must insert again. */
  dedupe_held: boolean;
}

/**
 * Inserts tasks that carry a deduplication or debounce key (each key at most once among them; all of one task
 * name), in one statement, against the unique index of held keys (migration 13). A task whose key is held by
 * another task is not inserted; the holder comes back instead, and under its row lock, in the same statement:
 *
 * - a debounce send that meets a debounce holder replaces the holder's input and start time (the holder is PENDING
 *   and unclaimed: its key is released by its claim);
 * - a holder whose `finished` window has passed releases its key and comes back with `dedupe_held` false: the caller sends
 *   that task again, and then either inserts it or meets the task another sender inserted meanwhile;
 * - any other holder is returned unchanged (the row is locked and rewritten as it is, which is what lets the
 *   statement return a holder that committed after its snapshot).
 *
 * Each row returned has the inserted task's id when the send created it, the holder's otherwise.
 */
export const TaskInsertKeyed = statement<{ tasks: TaskInsert[] }, TaskInsertKeyedRow>(
  'TaskInsertKeyed',
  `WITH input AS (
     SELECT * FROM json_to_recordset($1::json)
       AS i(id text, task_name text, queue_name text, priority int, kwargs jsonb, delay_ms int, run_at timestamptz,
            good_until timestamptz, max_retries int, retention_ms bigint, task_options jsonb, sent_at timestamptz,
            trace_context jsonb, group_key text, dedupe_key text, dedupe_scope text, dedupe_window_ms bigint)
   )
   INSERT INTO {{schema}}.horsies_tasks AS t
     (id, task_name, queue_name, priority, kwargs, status, sent_at, enqueued_at, good_until, max_retries,
      retention_ms, task_options, trace_context, group_key, dedupe_key, dedupe_scope, dedupe_window_ms,
      dedupe_held)
   -- json_to_recordset reads a JSON null as SQL NULL: an input of null is the JSON value.
   SELECT id, task_name, queue_name, priority, COALESCE(kwargs, 'null'::jsonb), 'PENDING', COALESCE(sent_at, now()),
          COALESCE(run_at, now() + delay_ms * interval '1 millisecond'), good_until, max_retries, retention_ms,
          task_options, trace_context, group_key, dedupe_key, dedupe_scope, dedupe_window_ms, true
   FROM input
   ON CONFLICT (task_name, dedupe_key) WHERE dedupe_held DO UPDATE SET
     kwargs = CASE WHEN excluded.dedupe_scope = 'debounce' AND t.dedupe_scope = 'debounce'
                        AND NOT t.claimed AND t.finished_at IS NULL
                   THEN excluded.kwargs ELSE t.kwargs END,
     enqueued_at = CASE WHEN excluded.dedupe_scope = 'debounce' AND t.dedupe_scope = 'debounce'
                             AND NOT t.claimed AND t.finished_at IS NULL
                        THEN excluded.enqueued_at ELSE t.enqueued_at END,
     updated_at = CASE WHEN excluded.dedupe_scope = 'debounce' AND t.dedupe_scope = 'debounce'
                            AND NOT t.claimed AND t.finished_at IS NULL
                       THEN now() ELSE t.updated_at END,
     dedupe_held = NOT (t.dedupe_scope = 'finished' AND t.finished_at IS NOT NULL
                        AND t.finished_at + t.dedupe_window_ms * interval '1 millisecond' <= now())
   RETURNING t.id, t.dedupe_key, t.dedupe_held`,
  ({ tasks }) => [`[${tasks.map(keyedInsertJson).join(',')}]`],
);

// One keyed task as JSON text (see insertJson), with its key, scope and window.
function keyedInsertJson(t: TaskInsert): string {
  const json = insertJson(t);
  return (
    `${json.slice(0, -1)},"dedupe_key":${JSON.stringify(t.dedupeKey ?? null)},` +
    `"dedupe_scope":${JSON.stringify(t.dedupeScope ?? null)},"dedupe_window_ms":${t.dedupeWindowMs ?? 'null'}}`
  );
}

/** Who is claiming, for the identity columns. */
export interface WorkerIdentity {
  workerId: string;
  hostname: string;
  pid: number;
  processName: string;
}

/** A freshly claimed task, with what the worker needs to run it. */
export interface ClaimedTaskRow {
  id: string;
  task_name: string;
  queue_name: string;
  priority: number;
  kwargs: unknown;
  /** How many times the task was claimed. */
  claim_generation: number;
  /** Drawn at random by this claim: the fence of every statement of its owner (see OwnedTask). */
  claim_token: string;
  retry_count: number;
  max_retries: number;
  attempt: number;
  enqueued_at: Date;
  /** The sender's trace context, which the run continues (null when none was stored). */
  trace_context: TraceCarrier | null;
  /** The workflow and node the task runs for (null for a plain task); `workflow_node_id` is the node's id. */
  workflow_id: string | null;
  workflow_node: number | null;
  workflow_node_id: string | null;
}

/** Sorts claimed rows in claim order (priority, then enqueue time, then id): UPDATE ... RETURNING does not keep it. */
export function inClaimOrder<R extends ClaimedTaskRow>(rows: R[]): R[] {
  return rows.sort(
    (a, b) =>
      a.priority - b.priority ||
      a.enqueued_at.getTime() - b.enqueued_at.getTime() ||
      (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
  );
}

/** Parameters of a claim. */
export interface ClaimParams {
  queue: string;
  taskNames: string[];
  limit: number;
  leaseMs: number;
  worker: WorkerIdentity;
}

/**
 * PENDING → CLAIMED for up to `limit` tasks of one queue (unless it is paused) and the given names, in priority
 * then enqueue order, without waiting on other claimers (`routines/horsies_claim_tasks.sql`; `routines.ts`
 * checks that the installed routine is its file's).
 */
export const TaskClaim = statement<ClaimParams, ClaimedTaskRow>(
  'TaskClaim',
  `SELECT * FROM {{schema}}.horsies_claim_tasks($1, $2::text[], $3, $4, $5, $6, $7, $8)`,
  ({ queue, taskNames, limit, leaseMs, worker }) => [
    queue,
    taskNames,
    limit,
    leaseMs,
    worker.workerId,
    worker.hostname,
    worker.pid,
    worker.processName,
  ],
);

/** A row of {@link TaskClaimAndStart}: a claimed task, RUNNING when the claim started it, CLAIMED otherwise. */
export interface ClaimAndStartRow extends ClaimedTaskRow {
  status: 'CLAIMED' | 'RUNNING';
  /** When the claim started it (null or an earlier attempt's start for a task only claimed). */
  started_at: Date | null;
}

/** Parameters of {@link TaskClaimAndStart}. */
export type ClaimAndStartParams = ClaimParams & {
  start: number;
  waitForFlush?: boolean;
  notify?: DoneNotice;
};

/**
 * The text of {@link TaskClaimAndStart}, with `limit` as the claim's limit (`$3`); with `room`, an expression of
 * the room left under a cap, also the least of the two, and a `room` column on every row (one row with the room
 * alone and the task's columns null when nothing was claimed). With
 * `notify`, the claim also sends task_done notifications of outcomes written earlier (see TaskDoneNotify), delivered
 * at its commit: one round trip where two were. Only for a claim that does not wait for its WAL flush, so that it
 * holds the notification lock for a moment only.
 */
export function claimAndStartSql(limit: string, room?: string): string {
  const done = doneNotifySql('$11', '$12');
  const claim = (n: string): string =>
    `{{schema}}.horsies_claim_and_start($1, $2::text[], ${n}, $4, $5, $6, $7, $8, $9, $10)`;
  if (room === undefined) return `${done}\n   SELECT c.* FROM done, ${claim(limit)} c`;
  // The room first (OFFSET 0 keeps it a step of its own), then the claim of at most that many.
  return `${done}, r AS (SELECT ${room} AS room OFFSET 0)
   SELECT r.room, c.* FROM done, r LEFT JOIN LATERAL ${claim(`LEAST(${limit}, r.room)`)} c ON true`;
}

/**
 * A claim as {@link TaskClaim} that writes the first `start` of the claimed tasks (in claim order) RUNNING at
 * once, in the same row update and commit (`routines/horsies_claim_and_start.sql`); the others stay CLAIMED.
 * Rows come back in no particular order. The commit waits for its WAL flush only when it starts tasks and
 * `waitForFlush` is set (the routine's file says why that is safe).
 */
export const TaskClaimAndStart = statement<ClaimAndStartParams, ClaimAndStartRow>(
  'TaskClaimAndStart',
  claimAndStartSql('$3'),
  (params) => [
    ...TaskClaim.values(params),
    params.start,
    params.waitForFlush ?? true,
    params.notify?.channel ?? null,
    params.notify ? doneChunks(params.notify.ids) : [],
  ],
);

/**
 * A task the worker holds: its id and the claim token it got. Every statement of the owner is fenced on the token
 * (and the worker's id): drawn at random at each claim, it never repeats, even when a server crash undid the claim
 * and the task was claimed again (the claim generation then repeats, see migration 32).
 */
export interface OwnedTask {
  id: string;
  token: string;
}

/** A task to start: {@link OwnedTask}, and whether it runs for a workflow (checked for a stopped workflow). */
export interface StartingTask extends OwnedTask {
  /** Default false. */
  workflow?: boolean;
}

/** The tasks to start of claimed rows, as {@link TaskStartMany} and the starts under limits and caps take them. */
export function startingTasks(tasks: readonly ClaimedTaskRow[]): StartingTask[] {
  return tasks.map((t) => ({ id: t.id, token: t.claim_token, workflow: t.workflow_id !== null }));
}

/** A row of {@link TaskStartMany}'s result. */
export interface TaskStartRow {
  id: string;
  /** STOPPED: its workflow no longer runs (paused or cancelled); handed back to PENDING before it ran. */
  status: 'RUNNING' | 'EXPIRED' | 'STOPPED';
  attempt: number;
  started_at: Date | null;
}

/**
 * CLAIMED → RUNNING for tasks this worker still owns, counting a new attempt; or CLAIMED → EXPIRED
 * (`TASK_EXPIRED`, no attempt row) for those whose `good_until` passed while they were claimed. Tasks missing
 * from the result were reclaimed or cancelled meanwhile and must not run. Workflow tasks whose workflow no longer
 * runs come back STOPPED: handed back to PENDING, no attempt (`routines/horsies_start_tasks.sql`).
 * With `waitForFlush: false` the commit does not wait for the WAL flush (`routines/horsies_claim_and_start.sql` says what that risks).
 */
export const TaskStartMany = statement<
  { workerId: string; tasks: StartingTask[]; waitForFlush?: boolean },
  TaskStartRow
>(
  'TaskStartMany',
  `SELECT * FROM {{schema}}.horsies_start_tasks($1, $2::text[], $3::text[], $4, $5::text[])`,
  ({ workerId, tasks, waitForFlush }) => [
    workerId,
    tasks.map((t) => t.id),
    tasks.map((t) => `${t.id}:${t.token}`),
    waitForFlush ?? true,
    tasks.filter((t) => t.workflow).map((t) => t.id),
  ],
);

/** The outcome of one execution, as the worker (or the reaper) hands it over to be written. */
export interface TaskFinish {
  id: string;
  /** The worker that holds the claim; the write is fenced on it and on `token`. */
  workerId: string;
  /** The claim token (see {@link OwnedTask}); null only for the reaper's verdict on a claim made before migration 32. */
  token: string | null;
  /**
   * `RETRY` goes back to PENDING after `retryDelayMs` (or FAILED if that would pass `good_until`). `RELEASE`
   * hands the task back to PENDING as if this attempt never ran: no attempt row, attempt count restored.
   * `THROTTLED` (an upstream throttled the run) goes back to PENDING after `retryDelayMs` like a retry, with its
   * attempt row, but without counting against the task's retries.
   */
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'RETRY' | 'RELEASE' | 'THROTTLED';
  /** JSON text of the result envelope (ignored for RETRY and RELEASE). */
  result: string;
  errorCode: string | null;
  errorMessage: string | null;
  failedReason: string | null;
  /** Delay before the retry starts; 0 for outcomes that do not retry. */
  retryDelayMs: number;
  /** The worker died during the attempt (the reaper's verdict): the attempt row's outcome is WORKER_FAILURE. */
  crashed: boolean;
  /** The workflow the task runs for, when the finisher knows it (a worker's finish can then step it at once). */
  workflowId?: string | null;
}

/** What a finish turned into: the status written (a RETRY past `good_until` becomes FAILED). */
export interface TaskFinishRow {
  id: string;
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'PENDING';
  /** The workflow and node the task runs for, or null for a plain task. */
  workflow_id: string | null;
  workflow_node: number | null;
  /** Its workflow node was stepped in the finish's own transaction (see `TaskFinishStep`): no step follows. */
  stepped?: boolean;
}

/**
 * Runs after outcomes were committed (by a worker's completer or the reaper), with the rows written. Workflow
 * progression hangs here: the task's own outcome is durable first, the follow-up can always be redone.
 */
export type FinishHook = (written: EndedTaskRow[]) => Promise<void> | void;

/** A task whose status a statement just changed, with the workflow node it runs for (if any). */
export interface EndedTaskRow {
  id: string;
  /**
   * The status written; PENDING for a retry or a release, which end no workflow node; STOPPED for a workflow
   * task handed back at its start because its workflow stopped running (its step withdraws it).
   */
  status: string;
  workflow_id: string | null;
  workflow_node: number | null;
}

/**
 * Ends the attempt of many RUNNING tasks in one statement: COMPLETED, FAILED, CANCELLED, back to PENDING for a
 * retry (`retry_count + 1`, `next_retry_at` and `enqueued_at` moved by the delay), or released back to PENDING
 * unchanged. Each task's attempt row is written in the same (implicit) transaction, with `will_retry` set for
 * retries; the worker identity of the attempt is the one recorded at claim. A retry that would start at or after
 * `good_until` fails instead, and a task with a cancel request is cancelled rather than retried.
 * Fenced on worker and claim token, so a replay or a finisher that lost its claim changes nothing; the rows
 * returned are the tasks this call changed. With `unlessCancelRequested` (a transactional finish), a task with a
 * cancel request is fenced out as well: a completion must not commit over a cancel.
 */
export const TaskFinishMany = statement<
  { tasks: TaskFinish[]; unlessCancelRequested?: boolean; notifyLater?: boolean },
  TaskFinishRow
>(
  'TaskFinishMany',
  // A routine (routines/horsies_finish_tasks.sql) so that its plan is made once per connection: as a statement of its own, a batch
  // of one outcome was planned anew at every call (1.5 ms of planning for 0.7 ms of execution).
  `SELECT * FROM {{schema}}.horsies_finish_tasks($1::text[], $2::text[], $3::int[], $4::text[], $5::jsonb[],
     $6::text[], $7::text[], $8::text[], $9::int[], $10::bool[], $11::bool, $12::bool, $13::uuid[])`,
  ({ tasks, unlessCancelRequested, notifyLater }) => {
    const c = finishColumns(tasks);
    return [
      c.ids,
      c.workerIds,
      // The generations are for the workers of 0.1, which pass no tokens.
      null,
      c.statuses,
      c.results,
      c.errorCodes,
      c.errorMessages,
      c.failedReasons,
      c.retryDelaysMs,
      c.crashed,
      unlessCancelRequested ?? false,
      notifyLater ?? false,
      c.tokens,
    ];
  },
);

/**
 * A batch of finishes as the columns of a finish routine, in id order: rows are locked in input order, in id order
 * as a workflow cancel locks them, so that the two never wait on each other in a cycle.
 */
export function finishColumns(given: readonly TaskFinish[]) {
  const tasks = [...given].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return {
    ids: tasks.map((t) => t.id),
    workerIds: tasks.map((t) => t.workerId),
    statuses: tasks.map((t) => t.status),
    results: tasks.map((t) => t.result),
    errorCodes: tasks.map((t) => t.errorCode),
    errorMessages: tasks.map((t) => t.errorMessage),
    failedReasons: tasks.map((t) => t.failedReason),
    retryDelaysMs: tasks.map((t) => t.retryDelayMs),
    crashed: tasks.map((t) => t.crashed),
    tokens: tasks.map((t) => t.token),
  };
}

/**
 * The finish of one task inside its handler's transaction (`ctx.transaction`), sent with the COMMIT right behind
 * it: {@link TaskFinishMany} as it is (its fence too), followed by a check that raises {@link FINISH_FENCED} when
 * it changed no row (routines/horsies_finish_found.sql). The error aborts the transaction, so the COMMIT behind it
 * rolls the handler's writes back: they never commit without their outcome. Returns the rows of TaskFinishMany.
 */
export const TaskFinishHeld = statement<
  { tasks: TaskFinish[]; unlessCancelRequested?: boolean; notifyLater?: boolean },
  TaskFinishRow
>(
  'TaskFinishHeld',
  // The second branch has no FROM: its condition is evaluated exactly once, after the finish has run.
  `WITH finished AS MATERIALIZED (${TaskFinishMany.sql})
   SELECT * FROM finished
   UNION ALL
   SELECT NULL, NULL, NULL, NULL WHERE {{schema}}.horsies_finish_found(EXISTS (SELECT FROM finished))`,
  TaskFinishMany.values,
);

/** The SQLSTATE of {@link TaskFinishHeld} when its fence finds nothing: the claim is lost or a cancel stands. */
export const FINISH_FENCED = 'HR001';

/**
 * A `done` CTE (one row) that sends task_done notifications: on channel `channel`, the payloads of parameter `ids`
 * ({@link doneChunks}). A statement that joins it delivers them at its commit.
 */
export function doneNotifySql(channel: string, ids: string): string {
  return `WITH done AS (SELECT count(pg_notify(${channel}, chunk)) FROM unnest(${ids}::text[]) AS chunk)`;
}

/** Task ids as task_done notification payloads: comma-separated, as many per notification as fit. */
export function doneChunks(ids: readonly string[]): string[] {
  const chunks: string[] = [];
  let chunk = '';
  for (const id of ids) {
    if (chunk.length + id.length + 1 > 7_000) {
      chunks.push(chunk);
      chunk = '';
    }
    chunk = chunk === '' ? id : `${chunk},${id}`;
  }
  if (chunk !== '') chunks.push(chunk);
  return chunks;
}

/** task_done notifications to send: the channel and the ids of tasks whose outcomes are written. */
export interface DoneNotice {
  channel: string;
  ids: string[];
}

/**
 * The `task_done` notifications of tasks whose finish was written with `notifyLater`, sent after its commit (see
 * `DoneNotices` in the worker, which also lets a claim carry them). A transaction that sends a notification holds a
 * lock that serializes the commits of every such transaction in the database until its WAL is flushed; this one
 * writes nothing, so it holds that lock only for a moment.
 */
export const TaskDoneNotify = statement<DoneNotice, Record<string, never>>(
  'TaskDoneNotify',
  `SELECT pg_notify($1, chunk) FROM unnest($2::text[]) AS chunk`,
  ({ channel, ids }) => [channel, doneChunks(ids)],
);

/** The options stored with a task at send (its retry policy), read for a workflow node's override. */
export const TaskOptionsGet = statement<{ id: string }, { task_options: unknown }>(
  'TaskOptionsGet',
  `SELECT task_options FROM {{schema}}.horsies_tasks WHERE id = $1`,
  ({ id }) => [id],
);

/** One task row by id. */
export const TaskGet = statement<{ id: string }, TaskRow>(
  'TaskGet',
  // The node id is stored with the task since migration 12; older rows look it up (the last column of a name wins).
  `SELECT t.*, CASE WHEN t.workflow_id IS NOT NULL AND t.workflow_node_id IS NULL THEN (
            SELECT n.node_id FROM {{schema}}.horsies_workflow_tasks n
            WHERE n.node_key = t.workflow_id || ':' || t.workflow_node) ELSE t.workflow_node_id END AS workflow_node_id
   FROM {{schema}}.horsies_tasks t WHERE t.id = $1`,
  ({ id }) => [id],
);

/** Status and result of many tasks (result waiters re-read with this after a notification or a poll). */
export const TaskGetOutcomes = statement<
  { ids: string[] },
  { id: string; status: string; result: unknown; error_code: string | null; failed_reason: string | null }
>(
  'TaskGetOutcomes',
  `SELECT id, status, result, error_code, failed_reason FROM {{schema}}.horsies_tasks WHERE id = ANY($1::text[])`,
  ({ ids }) => [ids],
);

/** The attempts of one task, in order. */
export const AttemptListByTask = statement<{ taskId: string }, AttemptRow>(
  'AttemptListByTask',
  `SELECT task_id, attempt, outcome, will_retry, started_at, finished_at, error_code, error_message, failed_reason,
          worker_id, worker_hostname, worker_pid, worker_process_name
   FROM {{schema}}.horsies_task_attempts WHERE task_id = $1 ORDER BY attempt`,
  ({ taskId }) => [taskId],
);
