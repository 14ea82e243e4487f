/**
 * Statements on `horsies_workflows` and `horsies_workflow_tasks`. Every statement that changes a workflow's
 * nodes runs inside a transaction that first locks the workflow's row ({@link WorkflowLock}): one lock order,
 * workflow before nodes before tasks, everywhere.
 */
import { statement } from './sql.js';
import { doneChunks, doneNotifySql, finishColumns } from './tasks.js';
import type {
  ClaimAndStartRow,
  DoneNotice,
  TaskFinish,
  TaskFinishRow,
  TraceCarrier,
  WorkerIdentity,
} from './tasks.js';

/** Workflow statuses, as stored (the table's CHECK). */
export const WORKFLOW_STATUSES = [
  'PENDING',
  'RUNNING',
  'PAUSED',
  'COMPLETED',
  'FAILED',
  'CANCELLED',
] as const;
/** A workflow status, as stored. */
export type WorkflowStatus = (typeof WORKFLOW_STATUSES)[number];
/** Node statuses, as stored. */
export type WorkflowNodeStatus =
  'PENDING' | 'READY' | 'ENQUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'SKIPPED';

/** A row of `horsies_workflows`. */
export interface WorkflowRow {
  id: string;
  name: string;
  status: WorkflowStatus;
  on_error: 'fail' | 'pause';
  output_index: number | null;
  success_policy: { cases: number[][]; optional: number[] } | null;
  definition_sha: string;
  params: unknown;
  result: unknown;
  error_code: string | null;
  nodes_total: number;
  nodes_terminal: number;
  parent_workflow_id: string | null;
  parent_node_index: number | null;
  root_workflow_id: string;
  depth: number;
  sent_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** One workflow to insert. */
export interface WorkflowInsert {
  id: string;
  name: string;
  onError: 'fail' | 'pause';
  outputIndex: number | null;
  /** JSON text, or null. */
  successPolicy: string | null;
  definitionSha: string;
  /** JSON text. */
  params: string;
  nodesTotal: number;
  /** For a child workflow: the node of the parent that runs it, and the root of the tree. */
  parent?: { workflowId: string; nodeIndex: number; rootId: string; depth: number } | null;
  /** The starter's trace context, which the run's tasks carry; a child workflow takes its parent's. */
  traceContext?: TraceCarrier | null;
}

/**
 * Inserts a RUNNING workflow, unless one with that id exists. Returns the stored row's id and definition digest
 * either way, and whether this statement created it.
 */
export const WorkflowInsert = statement<
  WorkflowInsert,
  { id: string; definition_sha: string; created: boolean }
>(
  'WorkflowInsert',
  `WITH inserted AS (
     INSERT INTO {{schema}}.horsies_workflows
       (id, name, status, on_error, output_index, success_policy, definition_sha, params, nodes_total,
        root_workflow_id, parent_workflow_id, parent_node_index, depth, started_at, trace_context)
     VALUES ($1::text, $2, 'RUNNING', $3, $4, $5::jsonb, $6, $7::jsonb, $8, COALESCE($11::text, $1::text),
             $9::text, $10::int, COALESCE($12::int, 0), now(),
             COALESCE($13::jsonb, (SELECT p.trace_context FROM {{schema}}.horsies_workflows p WHERE p.id = $9::text)))
     ON CONFLICT (id) DO NOTHING
     RETURNING id, definition_sha
   )
   SELECT id, definition_sha, true AS created FROM inserted
   UNION ALL
   SELECT id, definition_sha, false FROM {{schema}}.horsies_workflows
   WHERE id = $1::text AND NOT EXISTS (SELECT 1 FROM inserted)`,
  (w) => [
    w.id,
    w.name,
    w.onError,
    w.outputIndex,
    w.successPolicy,
    w.definitionSha,
    w.params,
    w.nodesTotal,
    w.parent?.workflowId ?? null,
    w.parent?.nodeIndex ?? null,
    w.parent?.rootId ?? null,
    w.parent?.depth ?? null,
    w.traceContext ? JSON.stringify(w.traceContext) : null,
  ],
);

/** One node to insert. */
export interface WorkflowNodeInsert {
  index: number;
  nodeId: string;
  taskName: string;
  queueName: string;
  priority: number;
  dependencies: number[];
  dependents: number[];
  join: 'all' | 'any' | 'quorum';
  minSuccess: number | null;
  allowFailedDeps: boolean;
  /** JSON text of the input template. */
  inputTemplate: string;
  maxRetries: number;
  /** JSON text, or null. */
  taskOptions: string | null;
  goodUntil: Date | null;
  status: 'PENDING' | 'READY';
  /** For a node that runs a whole workflow: the registered name of that workflow; else null. */
  subworkflow: string | null;
  // Absent on nodes that do not wait, so that their definitions' digests stay as they were before waits existed.
  /** For a node that runs no task but waits: for a signal or event, or until a time (a sleep). */
  waitKind?: 'signal' | 'sleep' | null;
  /** The signal or event name a `signal` wait node waits for. */
  waitName?: string | null;
  /** A signal's timeout or a sleep's length, in milliseconds. */
  waitTimeoutMs?: number | null;
  /** The end of a sleep given as a time. */
  waitUntil?: Date | null;
}

/** Inserts the nodes of a new workflow. */
export const WorkflowNodeInsertMany = statement<{ workflowId: string; nodes: WorkflowNodeInsert[] }, never>(
  'WorkflowNodeInsertMany',
  `INSERT INTO {{schema}}.horsies_workflow_tasks
     (workflow_id, node_index, node_id, task_name, queue_name, priority, dependencies, dependents, join_rule,
      min_success, allow_failed_deps, input_template, max_retries, task_options, good_until, status, subworkflow,
      wait_kind, wait_name, wait_timeout_ms, wait_until)
   SELECT $1, n.node_index, n.node_id, n.task_name, n.queue_name, n.priority,
          ARRAY(SELECT jsonb_array_elements_text(n.dependencies)::int),
          ARRAY(SELECT jsonb_array_elements_text(n.dependents)::int),
          n.join_rule, n.min_success, n.allow_failed_deps, n.input_template, n.max_retries, n.task_options,
          n.good_until, n.status, n.subworkflow, n.wait_kind, n.wait_name, n.wait_timeout_ms, n.wait_until
   FROM jsonb_to_recordset($2::jsonb) AS n(node_index int, node_id text, task_name text, queue_name text,
          priority int, dependencies jsonb, dependents jsonb, join_rule text, min_success int,
          allow_failed_deps bool, input_template jsonb, max_retries int, task_options jsonb,
          good_until timestamptz, status text, subworkflow text, wait_kind text, wait_name text,
          wait_timeout_ms bigint, wait_until timestamptz)`,
  ({ workflowId, nodes }) => [
    workflowId,
    JSON.stringify(
      nodes.map((n) => ({
        node_index: n.index,
        node_id: n.nodeId,
        task_name: n.taskName,
        queue_name: n.queueName,
        priority: n.priority,
        dependencies: n.dependencies,
        dependents: n.dependents,
        join_rule: n.join,
        min_success: n.minSuccess,
        allow_failed_deps: n.allowFailedDeps,
        input_template: JSON.parse(n.inputTemplate) as unknown,
        max_retries: n.maxRetries,
        task_options: n.taskOptions === null ? null : (JSON.parse(n.taskOptions) as unknown),
        good_until: n.goodUntil?.toISOString() ?? null,
        status: n.status,
        subworkflow: n.subworkflow,
        wait_kind: n.waitKind ?? null,
        wait_name: n.waitName ?? null,
        wait_timeout_ms: n.waitTimeoutMs ?? null,
        wait_until: n.waitUntil?.toISOString() ?? null,
      })),
    ),
  ],
);

/**
 * READY → ENQUEUED for the given nodes, each linked to a new task inserted in the same statement with the
 * node's task name, queue, priority, retry budget and options, and its resolved input. Nodes no longer READY
 * are left alone (and get no task).
 */
export const WorkflowNodeEnqueue = statement<
  { workflowId: string; nodes: { index: number; taskId: string; kwargs: string }[] },
  { node_index: number; task_id: string }
>(
  'WorkflowNodeEnqueue',
  `WITH input AS (
     SELECT * FROM json_to_recordset($2::json) AS i(node_index int, task_id text, kwargs jsonb)
   ), linked AS (
     UPDATE {{schema}}.horsies_workflow_tasks n
     SET status = 'ENQUEUED', task_id = i.task_id, enqueued_at = now(), updated_at = now()
     FROM input i
     WHERE n.node_key = $1 || ':' || i.node_index AND n.status = 'READY' AND n.subworkflow IS NULL
       AND n.wait_kind IS NULL
     RETURNING n.node_index, n.node_id, n.task_id, n.task_name, n.queue_name, n.priority, n.max_retries,
               -- json_to_recordset reads a JSON null as SQL NULL: an input of null is the JSON value.
               n.task_options, n.good_until, COALESCE(i.kwargs, 'null'::jsonb) AS kwargs
   ), inserted AS (
     INSERT INTO {{schema}}.horsies_tasks
       (id, task_name, queue_name, priority, kwargs, status, enqueued_at, good_until, max_retries, task_options,
        workflow_id, workflow_node, workflow_node_id, trace_context)
     SELECT task_id, task_name, queue_name, priority, kwargs, 'PENDING', now(), good_until, max_retries,
            task_options, $1, node_index, node_id,
            -- Every node's task carries the trace context of the workflow's start (migration 11).
            (SELECT w.trace_context FROM {{schema}}.horsies_workflows w WHERE w.id = $1)
     FROM linked
     RETURNING id
   )
   SELECT l.node_index, l.task_id FROM linked l`,
  ({ workflowId, nodes }) => [
    workflowId,
    `[${nodes.map((n) => `{"node_index":${n.index},"task_id":${JSON.stringify(n.taskId)},"kwargs":${n.kwargs}}`).join(',')}]`,
  ],
);

/**
 * Locks a workflow's row for one step; every change to its nodes happens under this lock. With `waitForFlush`
 * false the transaction's commit does not wait for the WAL flush: a step that a server crash undoes is redone by
 * the recovery pass (the tasks' own outcomes, which it follows, were flushed).
 */
export const WorkflowLock = statement<{ id: string; waitForFlush: boolean }, WorkflowRow>(
  'WorkflowLock',
  `SELECT w.* FROM {{schema}}.horsies_workflows w,
     LATERAL (SELECT set_config('synchronous_commit',
                CASE WHEN $2::bool THEN current_setting('synchronous_commit') ELSE 'off' END, true)) c
   WHERE w.id = $1
   FOR UPDATE OF w`,
  ({ id, waitForFlush }) => [id, waitForFlush],
);

/** What the server-side step did to one workflow, and what it left to the caller. */
export interface WorkflowStepRow {
  workflow_id: string;
  /** The workflow's status after the step (null: no such workflow). */
  status: WorkflowStatus | null;
  /** Nodes that turned terminal (settled from their tasks, or skipped). */
  settled: number;
  /** Nodes enqueued. */
  enqueued: number;
  /** True when nothing was done: the caller runs the whole step (a paused workflow, or one that pauses on error). */
  fallback: boolean;
  /** Subworkflow and wait nodes that became READY: the caller starts them. */
  ready: number[];
  /** A child workflow that ended in this step: the parent's node that runs it. */
  parent_id: string | null;
  parent_node: number | null;
  /** The tasks the step started for the calling worker (see {@link StepSlots}), as JSON: {@link startedRows}. */
  started: StartedStepJson[];
}

/**
 * Free slots of the worker that runs a step, reserved for it: the ready nodes the step enqueues take them, their
 * tasks inserted RUNNING for this worker (eager dispatch: routines/horsies_workflow_step.sql says when).
 */
export interface StepSlots {
  slots: number;
  /** The worker's queues whose starts nothing meters (no cap, rate limit or group limit). */
  queues: string[];
  /** The tasks it may start. */
  taskNames: string[];
  worker: WorkerIdentity;
  leaseMs: number;
}

/** A task a step started, as the routine returns it (times as ISO strings). */
type StartedStepJson = Omit<ClaimAndStartRow, 'status' | 'enqueued_at' | 'started_at'> & {
  enqueued_at: string;
  started_at: string;
};

/** The tasks a step started, as a claim that starts returns them. */
export function startedRows(rows: readonly WorkflowStepRow[]): ClaimAndStartRow[] {
  return rows.flatMap((row) =>
    row.started.map((t) => ({
      ...t,
      status: 'RUNNING' as const,
      enqueued_at: new Date(t.enqueued_at),
      started_at: new Date(t.started_at),
    })),
  );
}

/**
 * The workflow step of many workflows in one round trip (routines/horsies_workflow_step.sql): each workflow
 * locked (in id order), its named nodes settled, the dependents evaluated with the skip cascade, the READY task
 * nodes enqueued with their inputs resolved, and the workflow advanced or finished (notified on `channel`). With
 * `waitForFlush` false the commit does not wait for the WAL flush (see {@link WorkflowLock}). With `notify` (only
 * then: see `claimAndStartSql`), the step also sends task_done notifications of outcomes written earlier, at its
 * commit, as a claim does: the step that follows a finish carries that finish's notifications.
 */
export const WorkflowStepMany = statement<
  {
    steps: { workflowId: string; nodes: number[] }[];
    channel: string;
    waitForFlush: boolean;
    eager: StepSlots | null;
    notify?: DoneNotice;
  },
  WorkflowStepRow
>(
  'WorkflowStepMany',
  `${doneNotifySql('$6', '$7')}
   SELECT s.* FROM done, {{schema}}.horsies_workflow_step($1::text[], $2::int[], $3::text, $4::bool, $5::jsonb) s`,
  ({ steps, channel, waitForFlush, eager, notify }) => {
    // One entry per node; a workflow named without nodes is one entry with a null node.
    const pairs = steps.flatMap((s): [string, number | null][] =>
      s.nodes.length === 0 ? [[s.workflowId, null]] : s.nodes.map((n) => [s.workflowId, n]),
    );
    return [
      pairs.map((p) => p[0]),
      pairs.map((p) => p[1]),
      channel,
      waitForFlush,
      slotsJson(eager),
      notify?.channel ?? null,
      notify ? doneChunks(notify.ids) : [],
    ];
  },
);

/** A step's slots as the routine reads them (`p_eager`). */
function slotsJson(eager: StepSlots | null): string | null {
  return eager === null
    ? null
    : JSON.stringify({
        slots: eager.slots,
        queues: eager.queues,
        task_names: eager.taskNames,
        worker_id: eager.worker.workerId,
        hostname: eager.worker.hostname,
        pid: eager.worker.pid,
        process_name: eager.worker.processName,
        lease_ms: eager.leaseMs,
      });
}

/** A row of {@link TaskFinishStep}: a written outcome (`step` null) or a stepped workflow (`id` null). */
export interface TaskFinishStepRow extends TaskFinishRow {
  step: WorkflowStepRow | null;
}

/**
 * A worker's batch of outcomes written with the step of their workflows in the same transaction
 * (routines/horsies_finish_and_step.sql): the workflows locked first (one that another transaction holds is
 * skipped, its nodes left unstepped), the outcomes written as {@link TaskFinishMany} writes them (their task_done
 * notifications left to the caller), then the nodes of the tasks that ended stepped as {@link WorkflowStepMany}
 * steps them, with `eager`. The commit waits for the WAL flush.
 */
export const TaskFinishStep = statement<
  { tasks: TaskFinish[]; channel: string; eager: StepSlots | null },
  TaskFinishStepRow
>(
  'TaskFinishStep',
  `SELECT * FROM {{schema}}.horsies_finish_and_step($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[],
     $6::text[], $7::text[], $8::int[], $9::bool[], $10::uuid[], $11::text, $12::jsonb)`,
  ({ tasks, channel, eager }) => {
    const c = finishColumns(tasks);
    return [
      c.ids,
      c.workerIds,
      c.statuses,
      c.results,
      c.errorCodes,
      c.errorMessages,
      c.failedReasons,
      c.retryDelaysMs,
      c.crashed,
      c.tokens,
      channel,
      slotsJson(eager),
    ];
  },
);

/** A node that just turned terminal. */
export interface SettledNodeRow {
  node_index: number;
  status: 'COMPLETED' | 'FAILED';
  dependents: number[];
}

/** SQL for the node keys of workflow $1 and the node indexes in the int[] parameter `param`. */
function nodeKeys(param: string): string {
  return `ARRAY(SELECT $1 || ':' || i FROM unnest(${param}::int[]) i)`;
}

/**
 * ENQUEUED or RUNNING → COMPLETED or FAILED for the named nodes whose task (child workflow, wait) ended, with the
 * outcome it stored or one made for it (routines/horsies_workflow_settle.sql, the one text of the settle, which the
 * server-side step calls too). A compare-and-set: a node already terminal is not changed again, so a replay is a
 * no-op.
 */
export const WorkflowNodeSettle = statement<{ workflowId: string; nodes: number[] }, SettledNodeRow>(
  'WorkflowNodeSettle',
  `SELECT * FROM {{schema}}.horsies_workflow_settle(${nodeKeys('$2')})`,
  ({ workflowId, nodes }) => [workflowId, nodes],
);

/**
 * {@link WorkflowNodeSettle} for every open node of the workflow (recovery), found through the open-nodes index.
 * Two statements rather than one with "$2 IS NULL OR ...": a generic plan of the latter scans every node of the
 * workflow on each step, which made a 2,000-node fan-out quadratic.
 */
export const WorkflowNodeSettleAll = statement<{ workflowId: string }, SettledNodeRow>(
  'WorkflowNodeSettleAll',
  `SELECT * FROM {{schema}}.horsies_workflow_settle(ARRAY(
     SELECT n.node_key FROM {{schema}}.horsies_workflow_tasks n
     WHERE n.workflow_id = $1 AND n.status IN ('ENQUEUED', 'RUNNING')))`,
  ({ workflowId }) => [workflowId],
);

/** A node whose counters moved, with its new status (changed only when it was PENDING and evaluation ran). */
export interface EvaluatedNodeRow {
  node_index: number;
  status: WorkflowNodeStatus;
  /** True when this statement moved it out of PENDING. */
  changed: boolean;
  dependents: number[];
  /** For a node that became READY: its input template and the state of the nodes it reads from. */
  input_template: unknown;
  upstream: Record<string, { status: string; result: unknown }> | null;
  /** The workflow a subworkflow node runs (its registered name), else null. */
  subworkflow: string | null;
  /** What a wait node waits for, else null. */
  wait_kind: 'signal' | 'sleep' | null;
}

/**
 * Adds the outcomes of dependencies that just turned terminal to each dependent's counters and, when `evaluate`
 * (the workflow runs), applies the join rule of every dependent still PENDING: READY, SKIPPED or still PENDING
 * (routines/horsies_workflow_evaluate.sql, the one text of the join rules, which the server-side step calls too).
 * A node that became READY comes with the state of the nodes its input reads from. Bumps of zero re-evaluate a
 * node as it stands (resume, recovery).
 */
export const WorkflowNodeEvaluate = statement<
  {
    workflowId: string;
    bumps: { index: number; completed: number; failed: number; skipped: number }[];
    evaluate: boolean;
  },
  EvaluatedNodeRow
>(
  'WorkflowNodeEvaluate',
  `SELECT e.node_index, e.status, e.changed, e.dependents, e.subworkflow, e.wait_kind, e.input_template,
          CASE WHEN e.input_template IS NOT NULL THEN (
            SELECT jsonb_object_agg(u.node_index, jsonb_build_object('status', u.status, 'result', u.result))
            FROM {{schema}}.horsies_workflow_tasks u
            WHERE u.node_key = ANY (ARRAY(
              SELECT $1 || ':' || (r ->> 'node') FROM jsonb_array_elements(e.input_template -> 'refs') r
              WHERE r ->> 'kind' <> 'param'))
          ) END AS upstream
   FROM {{schema}}.horsies_workflow_evaluate(${nodeKeys('$2')}, $3::int[], $4::int[], $5::int[], $6::bool, false) e`,
  ({ workflowId, bumps, evaluate }) => [
    workflowId,
    bumps.map((b) => b.index),
    bumps.map((b) => b.completed),
    bumps.map((b) => b.failed),
    bumps.map((b) => b.skipped),
    evaluate,
  ],
);

/**
 * Recounts the dependency counters of a workflow's PENDING nodes from their dependencies' statuses (recovery:
 * rows written by hand or by an interrupted older version). Returns the PENDING nodes.
 */
export const WorkflowNodeRecount = statement<{ workflowId: string }, { node_index: number }>(
  'WorkflowNodeRecount',
  `UPDATE {{schema}}.horsies_workflow_tasks n
   SET deps_completed = c.completed, deps_failed = c.failed, deps_skipped = c.skipped
   FROM (
     SELECT p.node_index,
            count(*) FILTER (WHERE d.status = 'COMPLETED')::int AS completed,
            count(*) FILTER (WHERE d.status = 'FAILED')::int AS failed,
            count(*) FILTER (WHERE d.status = 'SKIPPED')::int AS skipped
     FROM {{schema}}.horsies_workflow_tasks p
     LEFT JOIN {{schema}}.horsies_workflow_tasks d ON d.workflow_id = p.workflow_id AND d.node_index = ANY (p.dependencies)
     WHERE p.workflow_id = $1 AND p.status = 'PENDING'
     GROUP BY p.node_index
   ) c
   WHERE n.workflow_id = $1 AND n.node_index = c.node_index
   RETURNING n.node_index`,
  ({ workflowId }) => [workflowId],
);

/** READY nodes without a task (recovery), with what enqueuing them needs. */
export const WorkflowNodeListReady = statement<
  { workflowId: string },
  Pick<EvaluatedNodeRow, 'node_index' | 'input_template' | 'upstream' | 'subworkflow' | 'wait_kind'>
>(
  'WorkflowNodeListReady',
  `SELECT n.node_index, n.input_template, n.subworkflow, n.wait_kind, (
     SELECT jsonb_object_agg(u.node_index, jsonb_build_object('status', u.status, 'result', u.result))
     FROM {{schema}}.horsies_workflow_tasks u
     WHERE u.node_key = ANY (ARRAY(
       SELECT $1 || ':' || (r ->> 'node') FROM jsonb_array_elements(n.input_template -> 'refs') r
       WHERE r ->> 'kind' <> 'param'))
   ) AS upstream
   FROM {{schema}}.horsies_workflow_tasks n
   WHERE n.workflow_id = $1 AND n.status = 'READY'`,
  ({ workflowId }) => [workflowId],
);

/**
 * Moves a workflow's count of terminal nodes (or, with `recount`, counts them again from the node rows), and
 * sets its status when given.
 */
export const WorkflowAdvance = statement<
  { id: string; terminalDelta: number; status: WorkflowStatus | null; recount: boolean },
  { nodes_terminal: number; nodes_total: number; status: WorkflowStatus }
>(
  'WorkflowAdvance',
  `UPDATE {{schema}}.horsies_workflows w
   SET nodes_terminal = CASE WHEN $4::bool THEN (
         SELECT count(*)::int FROM {{schema}}.horsies_workflow_tasks n
         WHERE n.workflow_id = w.id AND n.status IN ('COMPLETED', 'FAILED', 'SKIPPED'))
       ELSE w.nodes_terminal + $2 END,
       status = COALESCE($3, w.status),
       updated_at = now()
   WHERE w.id = $1
   RETURNING w.nodes_terminal, w.nodes_total, w.status`,
  ({ id, terminalDelta, status, recount }) => [id, terminalDelta, status, recount],
);

/** A node as the completion of its workflow sees it. */
export interface NodeSummaryRow {
  node_index: number;
  node_id: string;
  status: WorkflowNodeStatus;
  error_code: string | null;
  /** The stored envelope, only for the nodes that can make up the workflow's result or error. */
  result: unknown;
  terminal: boolean;
}

/**
 * Every node of a workflow with its status; results only for the output node (or, without one, the terminal
 * nodes: nobody's dependency) and for failed nodes.
 */
export const WorkflowNodeSummaries = statement<
  { workflowId: string; outputIndex: number | null },
  NodeSummaryRow
>(
  'WorkflowNodeSummaries',
  `SELECT n.node_index, n.node_id, n.status, n.error_code, cardinality(n.dependents) = 0 AS terminal,
          CASE WHEN n.status = 'FAILED' OR n.node_index = $2 OR ($2 IS NULL AND cardinality(n.dependents) = 0)
               THEN n.result END AS result
   FROM {{schema}}.horsies_workflow_tasks n
   WHERE n.workflow_id = $1
   ORDER BY n.completed_at NULLS LAST, n.node_index`,
  ({ workflowId, outputIndex }) => [workflowId, outputIndex],
);

/**
 * Ends a workflow once (a compare-and-set from RUNNING or PAUSED) with its result envelope, and notifies
 * `<schema>:workflow_done` with its id so that waiters re-read it.
 */
export const WorkflowFinish = statement<
  { id: string; status: 'COMPLETED' | 'FAILED'; result: string; errorCode: string | null; channel: string },
  { id: string }
>(
  'WorkflowFinish',
  `WITH finished AS (
     UPDATE {{schema}}.horsies_workflows
     SET status = $2, result = $3::jsonb, error_code = $4, completed_at = now(), updated_at = now()
     WHERE id = $1 AND status IN ('RUNNING', 'PAUSED')
     RETURNING id
   )
   SELECT f.id FROM finished f, LATERAL (SELECT pg_notify($5, f.id)) n`,
  ({ id, status, result, errorCode, channel }) => [id, status, result, errorCode, channel],
);

/** Status and result of many workflows (result waiters). */
export const WorkflowGetOutcomes = statement<
  { ids: string[] },
  { id: string; status: WorkflowStatus; result: unknown; error_code: string | null }
>(
  'WorkflowGetOutcomes',
  `SELECT id, status, result, error_code FROM {{schema}}.horsies_workflows WHERE id = ANY ($1::text[])`,
  ({ ids }) => [ids],
);

/** One workflow by id. */
export const WorkflowGet = statement<{ id: string }, WorkflowRow>(
  'WorkflowGet',
  `SELECT * FROM {{schema}}.horsies_workflows WHERE id = $1`,
  ({ id }) => [id],
);

// A node's row says ENQUEUED until its task ends (no second write per start on the hot path); readers show it
// RUNNING while the task runs.
const SHOWN_STATUS = `CASE WHEN n.status = 'ENQUEUED' AND t.status = 'RUNNING' THEN 'RUNNING' ELSE n.status END AS status`;

/** A node as handles and the CLI show it: `status` is RUNNING while its task runs (stored as ENQUEUED). */
export interface WorkflowNodeRow {
  node_index: number;
  node_id: string;
  task_name: string;
  queue_name: string;
  dependencies: number[];
  join_rule: 'all' | 'any' | 'quorum';
  min_success: number | null;
  status: WorkflowNodeStatus;
  task_id: string | null;
  task_status: string | null;
  result: unknown;
  error_code: string | null;
  enqueued_at: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
}

/** The nodes of a workflow, in index order, each with its task's status and start. */
export const WorkflowNodeList = statement<{ workflowId: string }, WorkflowNodeRow>(
  'WorkflowNodeList',
  `SELECT n.node_index, n.node_id, n.task_name, n.queue_name, n.dependencies, n.join_rule, n.min_success,
          ${SHOWN_STATUS}, n.task_id, t.status AS task_status, n.result, n.error_code, n.enqueued_at, t.started_at,
          n.completed_at
   FROM {{schema}}.horsies_workflow_tasks n
   LEFT JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
   WHERE n.workflow_id = $1
   ORDER BY n.node_index`,
  ({ workflowId }) => [workflowId],
);

/** Workflows, newest first, optionally of one status and name; keyset pagination on (sent_at, id). */
export const WorkflowList = statement<
  {
    status: WorkflowStatus | null;
    name: string | null;
    before: { sentAt: Date; id: string } | null;
    limit: number;
  },
  WorkflowRow
>(
  'WorkflowList',
  `SELECT * FROM {{schema}}.horsies_workflows
   WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR name = $2)
     AND ($3::timestamptz IS NULL OR (sent_at, id) < ($3::timestamptz, $4::text))
   ORDER BY sent_at DESC, id DESC
   LIMIT $5`,
  ({ status, name, before, limit }) => [status, name, before?.sentAt ?? null, before?.id ?? null, limit],
);

/**
 * The child workflows of one run (those its subworkflow nodes started), newest first, optionally of one status
 * and name; keyset pagination on (sent_at, id) as {@link WorkflowList}.
 */
export const WorkflowListChildren = statement<
  {
    parentId: string;
    status: WorkflowStatus | null;
    name: string | null;
    before: { sentAt: Date; id: string } | null;
    limit: number;
  },
  WorkflowRow
>(
  'WorkflowListChildren',
  `SELECT * FROM {{schema}}.horsies_workflows
   WHERE parent_workflow_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR name = $3)
     AND ($4::timestamptz IS NULL OR (sent_at, id) < ($4::timestamptz, $5::text))
   ORDER BY sent_at DESC, id DESC
   LIMIT $6`,
  ({ parentId, status, name, before, limit }) => [
    parentId,
    status,
    name,
    before?.sentAt ?? null,
    before?.id ?? null,
    limit,
  ],
);

/**
 * Workflows that look stuck, for the recovery pass: untouched for `graceMs`, oldest first. Live ones (RUNNING,
 * PAUSED) in every shape a lost step can leave; cancelled ones with a node still open whose task (or child
 * workflow) ended without the node following.
 */
export const WorkflowListStale = statement<
  { graceMs: number; limit: number; now?: Date | null },
  { id: string }
>(
  'WorkflowListStale',
  `SELECT w.id FROM {{schema}}.horsies_workflows w
   WHERE (w.status IN ('RUNNING', 'PAUSED')
          -- horsies_workflows_cancelled_open_idx: a cancel leaves the nodes of running tasks open
          OR (w.status = 'CANCELLED' AND w.nodes_terminal < w.nodes_total))
     AND w.updated_at < coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
     AND (
       -- every node terminal, but the workflow never finished (or a cancelled one's count is behind)
       (w.status <> 'CANCELLED' AND w.nodes_terminal >= w.nodes_total)
       OR NOT EXISTS (
         SELECT 1 FROM {{schema}}.horsies_workflow_tasks n
         WHERE n.workflow_id = w.id AND n.status IN ('PENDING', 'READY', 'ENQUEUED', 'RUNNING'))
       OR EXISTS (
         SELECT 1 FROM {{schema}}.horsies_workflow_tasks n
         LEFT JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
         WHERE n.workflow_id = w.id AND n.status IN ('PENDING', 'READY', 'ENQUEUED', 'RUNNING')
           AND (
             -- a task that ended (or vanished) without its node following
             (n.status IN ('ENQUEUED', 'RUNNING') AND n.subworkflow IS NULL AND n.wait_kind IS NULL
               AND (t.id IS NULL OR (t.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
                                     AND t.finished_at < coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond')))
             -- a child workflow that ended (or vanished) without its parent node following
             OR (n.status IN ('ENQUEUED', 'RUNNING') AND n.subworkflow IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM {{schema}}.horsies_workflows c
                   WHERE c.id = n.child_workflow_id
                     AND (c.completed_at IS NULL
                          OR c.completed_at >= coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond')))
             -- a paused workflow's task that never ran and was not withdrawn
             OR (w.status = 'PAUSED' AND n.status = 'ENQUEUED' AND n.subworkflow IS NULL
                 AND NOT t.claimed AND t.finished_at IS NULL AND t.attempt = 0)
             -- a READY node that never got its task
             OR (w.status = 'RUNNING' AND n.status = 'READY')
             -- a PENDING node whose dependencies are all terminal
             OR (w.status = 'RUNNING' AND n.status = 'PENDING' AND NOT EXISTS (
                   SELECT 1 FROM {{schema}}.horsies_workflow_tasks d
                   WHERE d.workflow_id = w.id AND d.node_index = ANY (n.dependencies)
                     AND d.status NOT IN ('COMPLETED', 'FAILED', 'SKIPPED')))
           )
       )
     )
   ORDER BY w.updated_at
   LIMIT $2`,
  ({ graceMs, limit, now }) => [graceMs, limit, now ?? null],
);

/** Deletes up to `limit` terminal workflows (their nodes cascade) finished more than `olderThanMs` ago. */
export const WorkflowPruneFinished = statement<
  { olderThanMs: number; limit: number; now?: Date | null },
  { deleted: number }
>(
  'WorkflowPruneFinished',
  `WITH gone AS (
     DELETE FROM {{schema}}.horsies_workflows WHERE id IN (
       SELECT id FROM {{schema}}.horsies_workflows
       WHERE completed_at < coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
         AND parent_workflow_id IS NULL
       ORDER BY completed_at
       LIMIT $2
       FOR UPDATE SKIP LOCKED
     )
     RETURNING 1
   )
   SELECT count(*)::int AS deleted FROM gone`,
  ({ olderThanMs, limit, now }) => [olderThanMs, limit, now ?? null],
);

/** A node as `horsies workflows show` draws it: its place in the graph, its status and its task's, no results. */
export interface WorkflowNodeGraphRow {
  node_index: number;
  node_id: string;
  task_name: string;
  dependencies: number[];
  join_rule: 'all' | 'any' | 'quorum';
  min_success: number | null;
  allow_failed_deps: boolean;
  status: WorkflowNodeStatus;
  task_id: string | null;
  task_status: string | null;
  error_code: string | null;
  /** The workflow a subworkflow node runs (null: the node runs a task). */
  subworkflow: string | null;
  /** The child workflow a subworkflow node started, once it has one. */
  child_workflow_id: string | null;
  /** What a wait node waits for (read by the dashboard's graph; absent elsewhere). */
  wait_kind?: 'signal' | 'sleep' | null;
}

/**
 * The nodes of a workflow in index order, with their dependencies, join rules and their tasks' statuses (or, for
 * a subworkflow node, the child workflow it started); without inputs and results, so a workflow of 10,000 nodes
 * reads in one cheap statement.
 */
export const WorkflowNodeGraph = statement<{ workflowId: string }, WorkflowNodeGraphRow>(
  'WorkflowNodeGraph',
  `SELECT n.node_index, n.node_id, n.task_name, n.dependencies, n.join_rule, n.min_success, n.allow_failed_deps,
          ${SHOWN_STATUS}, n.task_id, t.status AS task_status, n.error_code, n.subworkflow, n.child_workflow_id
   FROM {{schema}}.horsies_workflow_tasks n
   LEFT JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
   WHERE n.workflow_id = $1
   ORDER BY n.node_index`,
  ({ workflowId }) => [workflowId],
);

/** Locks the children of the given workflows, in id order (a tree is locked level by level, parents first). */
export const WorkflowLockChildren = statement<{ parentIds: string[] }, WorkflowRow>(
  'WorkflowLockChildren',
  `SELECT * FROM {{schema}}.horsies_workflows
   WHERE parent_workflow_id = ANY ($1::text[])
   ORDER BY id
   FOR UPDATE`,
  ({ parentIds }) => [parentIds],
);

/** Sets the status of the given workflows that are in one of `from` (pause, resume). Returns the ids changed. */
export const WorkflowSetStatus = statement<
  { ids: string[]; from: WorkflowStatus[]; to: WorkflowStatus },
  { id: string }
>(
  'WorkflowSetStatus',
  `UPDATE {{schema}}.horsies_workflows SET status = $3, updated_at = now()
   WHERE id = ANY ($1::text[]) AND status = ANY ($2::text[])
   RETURNING id`,
  ({ ids, from, to }) => [ids, from, to],
);

/**
 * Gives back the nodes of stopped (paused) workflows whose task never ran and is not claimed: the task row is
 * deleted (it has no attempt) and its node goes back to READY, to be enqueued afresh on resume. A task claimed
 * meanwhile is left to its start, which hands it back (STOPPED), after which the next step withdraws it. Tasks
 * that ran before (a retry waiting) stay PENDING and linked; the claim skips them while the workflow is not
 * RUNNING.
 */
export const WorkflowWithdrawPending = statement<
  { ids: string[] },
  { workflow_id: string; node_index: number }
>(
  'WorkflowWithdrawPending',
  `WITH held AS (
     SELECT n.node_key, n.task_id FROM {{schema}}.horsies_workflow_tasks n
     JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
     WHERE n.workflow_id = ANY ($1::text[]) AND n.status = 'ENQUEUED' AND n.subworkflow IS NULL
       AND NOT t.claimed AND t.finished_at IS NULL AND t.attempt = 0
   ), gone AS (
     DELETE FROM {{schema}}.horsies_tasks t USING held h
     WHERE t.id = h.task_id AND NOT t.claimed AND t.finished_at IS NULL AND t.attempt = 0
     RETURNING t.id
   )
   UPDATE {{schema}}.horsies_workflow_tasks n
   SET status = 'READY', task_id = NULL, enqueued_at = NULL, updated_at = now()
   FROM held h
   WHERE n.node_key = h.node_key AND h.task_id IN (SELECT id FROM gone)
   RETURNING n.workflow_id, n.node_index`,
  ({ ids }) => [ids],
);

/**
 * Wakes workers for the PENDING tasks of resumed workflows (retries held while they were paused): the same
 * notifications a new task sends, once per queue.
 */
export const WorkflowWakeHeld = statement<{ ids: string[]; schema: string }, { queue_name: string }>(
  'WorkflowWakeHeld',
  `SELECT q.queue_name FROM (
     SELECT DISTINCT t.queue_name FROM {{schema}}.horsies_workflow_tasks n
     JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
     WHERE n.workflow_id = ANY ($1::text[]) AND n.status = 'ENQUEUED' AND NOT t.claimed AND t.finished_at IS NULL
   ) q,
   LATERAL (SELECT pg_notify($2 || ':task_new', q.queue_name),
                   pg_notify($2 || ':task_queue_' || q.queue_name, '')) n`,
  ({ ids, schema }) => [ids, schema],
);

/**
 * Locks the tasks of the open nodes of the given workflows in id order, before a cancel changes them: a batch
 * of outcomes ({@link TaskFinishMany}) and a start lock their tasks in id order too, so a cancel racing them
 * waits rather than deadlocks.
 */
export const WorkflowTasksLock = statement<{ ids: string[] }, { id: string }>(
  'WorkflowTasksLock',
  `SELECT t.id FROM {{schema}}.horsies_tasks t
   WHERE t.id IN (SELECT n.task_id FROM {{schema}}.horsies_workflow_tasks n
                  WHERE n.workflow_id = ANY ($1::text[]) AND n.status IN ('ENQUEUED', 'RUNNING')
                    AND n.task_id IS NOT NULL)
   ORDER BY t.id
   -- The lock the UPDATE that follows takes: heartbeats' foreign-key checks (KEY SHARE) pass it.
   FOR NO KEY UPDATE OF t`,
  ({ ids }) => [ids],
);

/**
 * Cancels workflows (a tree, locked by the caller, with {@link WorkflowTasksLock}): each CANCELLED with `WORKFLOW_CANCELLED` (notified on
 * `<schema>:workflow_done`); their tasks that had not started CANCELLED (`TASK_CANCELLED`) and those running
 * asked to stop (`cancel_requested_at`, which notifies their worker); every node not started, and every node
 * whose task was cancelled or whose child workflow is cancelled with it, SKIPPED with `WORKFLOW_CANCELLED`. A
 * task that is running keeps its node open: if it still returns, the next step records its result.
 */
export const WorkflowCancelMany = statement<
  { ids: string[]; channel: string },
  { id: string; tasks_cancelled: number; tasks_stopping: number; nodes_skipped: number }
>(
  'WorkflowCancelMany',
  `WITH open AS (
     SELECT n.task_id FROM {{schema}}.horsies_workflow_tasks n
     WHERE n.workflow_id = ANY ($1::text[]) AND n.status IN ('ENQUEUED', 'RUNNING') AND n.task_id IS NOT NULL
   ), tasks AS (
     -- One UPDATE for both cases: a task that starts while this waits for its row is re-checked as RUNNING
     -- and asked to stop, rather than missed.
     UPDATE {{schema}}.horsies_tasks t
     SET status = CASE WHEN t.status IN ('PENDING', 'CLAIMED') THEN 'CANCELLED' ELSE t.status END,
         finished_at = CASE WHEN t.status IN ('PENDING', 'CLAIMED') THEN now() ELSE t.finished_at END,
         claimed = CASE WHEN t.status IN ('PENDING', 'CLAIMED') THEN false ELSE t.claimed END,
         claim_expires_at = CASE WHEN t.status IN ('PENDING', 'CLAIMED') THEN NULL ELSE t.claim_expires_at END,
         cancel_requested_at = COALESCE(t.cancel_requested_at, now()),
         error_code = CASE WHEN t.status IN ('PENDING', 'CLAIMED') THEN 'TASK_CANCELLED' ELSE t.error_code END,
         failed_reason = CASE WHEN t.status IN ('PENDING', 'CLAIMED') THEN 'its workflow was cancelled before it started'
                              ELSE t.failed_reason END,
         result = CASE WHEN t.status IN ('PENDING', 'CLAIMED') THEN jsonb_build_object('err', jsonb_build_object(
                    'code', 'TASK_CANCELLED', 'message', 'its workflow was cancelled before it started'))
                  ELSE t.result END,
         updated_at = now()
     WHERE t.id IN (SELECT task_id FROM open) AND t.status IN ('PENDING', 'CLAIMED', 'RUNNING')
     RETURNING t.id, t.status, t.workflow_id
   ), skipped AS (
     UPDATE {{schema}}.horsies_workflow_tasks n
     SET status = 'SKIPPED',
         result = jsonb_build_object('err', jsonb_build_object(
           'code', 'WORKFLOW_CANCELLED', 'message', 'its workflow was cancelled')),
         error_code = 'WORKFLOW_CANCELLED', completed_at = now(), updated_at = now()
     WHERE n.workflow_id = ANY ($1::text[])
       AND (n.status IN ('PENDING', 'READY')
            OR (n.status IN ('ENQUEUED', 'RUNNING')
                AND (n.subworkflow IS NOT NULL OR n.wait_kind IS NOT NULL
                     OR n.task_id IN (SELECT id FROM tasks WHERE status = 'CANCELLED'))))
     RETURNING n.workflow_id
   ), cancelled AS (
     UPDATE {{schema}}.horsies_workflows w
     SET status = 'CANCELLED',
         result = jsonb_build_object('err', jsonb_build_object(
           'code', 'WORKFLOW_CANCELLED', 'message', 'workflow "' || w.name || '" was cancelled')),
         error_code = 'WORKFLOW_CANCELLED',
         nodes_terminal = w.nodes_terminal + (SELECT count(*) FROM skipped s WHERE s.workflow_id = w.id),
         completed_at = now(), updated_at = now()
     WHERE w.id = ANY ($1::text[]) AND w.status IN ('PENDING', 'RUNNING', 'PAUSED')
     RETURNING w.id
   )
   SELECT c.id,
          (SELECT count(*)::int FROM tasks t WHERE t.workflow_id = c.id AND t.status = 'CANCELLED') AS tasks_cancelled,
          (SELECT count(*)::int FROM tasks t WHERE t.workflow_id = c.id AND t.status = 'RUNNING') AS tasks_stopping,
          (SELECT count(*)::int FROM skipped s WHERE s.workflow_id = c.id) AS nodes_skipped
   FROM cancelled c, LATERAL (SELECT pg_notify($2, c.id)) n`,
  ({ ids, channel }) => [ids, channel],
);

/**
 * Reopens the FAILED nodes of a workflow and the nodes SKIPPED after them (retry-failed): back to PENDING with
 * no task, result or counters (the step recounts them and enqueues what is ready). Their earlier tasks stay as
 * they ended, still naming the workflow and node.
 */
export const WorkflowNodeReopen = statement<{ workflowId: string }, { node_index: number }>(
  'WorkflowNodeReopen',
  `UPDATE {{schema}}.horsies_workflow_tasks
   SET status = 'PENDING', result = NULL, error_code = NULL, completed_at = NULL, task_id = NULL,
       child_workflow_id = NULL, enqueued_at = NULL, deps_completed = 0, deps_failed = 0, deps_skipped = 0,
       wait_key = NULL, wait_due_at = NULL, updated_at = now()
   WHERE workflow_id = $1 AND status IN ('FAILED', 'SKIPPED')
   RETURNING node_index`,
  ({ workflowId }) => [workflowId],
);

/** A FAILED or PAUSED workflow back to RUNNING, its result cleared (retry-failed). */
export const WorkflowReopen = statement<{ id: string }, { id: string }>(
  'WorkflowReopen',
  `UPDATE {{schema}}.horsies_workflows
   SET status = 'RUNNING', result = NULL, error_code = NULL, completed_at = NULL, updated_at = now()
   WHERE id = $1 AND status IN ('FAILED', 'PAUSED')
   RETURNING id`,
  ({ id }) => [id],
);

/** READY subworkflow node → RUNNING, linked to the child workflow just started for it. */
export const WorkflowNodeLinkChild = statement<
  { workflowId: string; nodeIndex: number; childId: string },
  { node_index: number }
>(
  'WorkflowNodeLinkChild',
  `UPDATE {{schema}}.horsies_workflow_tasks
   SET status = 'RUNNING', child_workflow_id = $3, enqueued_at = now(), updated_at = now()
   WHERE node_key = $1 || ':' || $2 AND status = 'READY' AND subworkflow IS NOT NULL
   RETURNING node_index`,
  ({ workflowId, nodeIndex, childId }) => [workflowId, nodeIndex, childId],
);

/** READY subworkflow node → FAILED with the given error (its child could not be started). */
export const WorkflowNodeFail = statement<
  { workflowId: string; nodeIndex: number; code: string; message: string },
  { node_index: number; status: 'FAILED'; dependents: number[] }
>(
  'WorkflowNodeFail',
  `UPDATE {{schema}}.horsies_workflow_tasks
   SET status = 'FAILED', error_code = $3::text,
       result = jsonb_build_object('err', jsonb_build_object('code', $3::text, 'message', $4::text)),
       completed_at = now(), updated_at = now()
   WHERE node_key = $1 || ':' || $2 AND status = 'READY'
   RETURNING node_index, status, dependents`,
  ({ workflowId, nodeIndex, code, message }) => [workflowId, nodeIndex, code, message],
);
