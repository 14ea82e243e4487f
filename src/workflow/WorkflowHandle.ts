/**
 * A handle on one workflow run: its status, its typed result (awaited through its host, the app, whose result
 * waiter hears `workflow_done` with a poll behind it), its nodes, the result of one node, and control.
 */
import type { Database } from '../db/Database.js';
import { WorkflowGet, WorkflowList, WorkflowNodeList } from '../db/workflows.js';
import type { WorkflowNodeRow, WorkflowNodeStatus, WorkflowRow, WorkflowStatus } from '../db/workflows.js';
import { ConfigError, SignalError, TaskError } from '../errors.js';
import type { TaskResult } from '../errors.js';
import { decodeOutcome } from '../outcome.js';
import { cancelWorkflow, pauseWorkflow, resumeWorkflow, retryFailedWorkflow } from './control.js';
import type { CancelResult, ControlResult } from './control.js';
import type { ChildWorkflows } from './step.js';
import { signalNode } from './signals.js';
import type { SignalHost, SignalOptions, SignalReceipt } from './signals.js';
import { WaitNode } from './WorkflowNode.js';
import type { WorkflowNode } from './WorkflowNode.js';

/** What a handle needs of the app: an `App` is one. */
export interface WorkflowHandleHost extends SignalHost {
  readonly db: Database;
  /** Workflows that subworkflow nodes start (resume and retry may start children). */
  readonly workflows?: ChildWorkflows;
  /**
   * Waits for the run `id` to end: its outcome, `WORKFLOW_NOT_FOUND` when there is no such run, `WAIT_TIMEOUT`
   * after `timeoutMs`.
   */
  waitForWorkflow<T>(id: string, timeoutMs?: number): Promise<TaskResult<T>>;
}

/** One node of a run, as a handle reports it. */
export interface WorkflowNodeInfo {
  index: number;
  id: string;
  taskName: string;
  queue: string;
  /** Indexes of the nodes it waits for. */
  dependencies: number[];
  /** RUNNING while its task runs (stored as ENQUEUED until the task ends). */
  status: WorkflowNodeStatus;
  taskId: string | null;
  enqueuedAt: Date | null;
  startedAt: Date | null;
  completedAt: Date | null;
  /** The node's outcome once it is terminal, else null. */
  result: TaskResult<unknown> | null;
}

/** See the module comment. `O` is the workflow's result type. */
export class WorkflowHandle<O> {
  /** @internal Returned by a workflow's `start()`, or by `app.getWorkflow()`. */
  constructor(
    private readonly host: WorkflowHandleHost,
    /** The workflow's id. */
    readonly id: string,
  ) {}

  /** The workflow's status, or null if there is no such workflow. */
  async status(): Promise<WorkflowStatus | null> {
    return (await this.info())?.status ?? null;
  }

  /** The run as listings show it (status, counts, parent and root), or null if there is no such workflow. */
  async info(): Promise<WorkflowInfo | null> {
    const [row] = await this.host.db.run(WorkflowGet, { id: this.id });
    return row ? toWorkflowInfo(row) : null;
  }

  /**
   * Waits for the workflow to end and resolves to its result: the output node's value (or the terminal nodes'
   * outcomes), or an error (`WORKFLOW_FAILED` naming the node, `WORKFLOW_SUCCESS_CASE_NOT_MET`,
   * `WORKFLOW_NOT_FOUND`, `WAIT_TIMEOUT` after `timeoutMs`). Never throws for an outcome.
   */
  result(options: { timeoutMs?: number | undefined } = {}): Promise<TaskResult<O>> {
    return this.host.waitForWorkflow<O>(this.id, options.timeoutMs);
  }

  /**
   * Pauses the run and its running child workflows: no node becomes READY or is enqueued, running tasks
   * finish (their results are kept), tasks that have not started are given back and their nodes wait READY.
   * A run that is not RUNNING is left as it is (see `status` in the result).
   */
  pause(): Promise<ControlResult> {
    return pauseWorkflow(this.host.db, this.id);
  }

  /**
   * Resumes a PAUSED run and its paused child workflows: every node whose dependencies are met is enqueued,
   * and a run with nothing left completes. FAILED nodes stay failed (see {@link retryFailed}).
   */
  resume(): Promise<ControlResult> {
    return resumeWorkflow(this.host.db, this.id, this.host.workflows);
  }

  /**
   * Cancels the run and every live child workflow: tasks not started CANCELLED, running ones asked to stop
   * through their AbortSignal, every node not started SKIPPED (`WORKFLOW_CANCELLED`). A run that still returns
   * keeps its result on its node. `result()` resolves to `WORKFLOW_CANCELLED`.
   */
  cancel(): Promise<CancelResult> {
    return cancelWorkflow(this.host.db, this.id, this.host.workflows);
  }

  /**
   * Runs the FAILED nodes of a FAILED or PAUSED run again, with the nodes skipped after them; COMPLETED nodes
   * keep their results. The run is RUNNING again.
   */
  retryFailed(): Promise<ControlResult & { reopened: number }> {
    return retryFailedWorkflow(this.host.db, this.id, this.host.workflows);
  }

  /**
   * Delivers a signal to a wait node of this run (`wf.waitFor()`): the payload, typed and validated by the
   * node's schema, completes the node if it waits, or is kept for it until the run reaches it. See
   * {@link SignalReceipt} for what happened, and docs/workflows.md ("Workflows that wait") for order and ids.
   */
  signal<I>(node: WaitNode<unknown, I>, payload: I, options: SignalOptions = {}): Promise<SignalReceipt> {
    const target = node.target;
    if (!(node instanceof WaitNode) || !('wait' in target) || target.wait.kind !== 'signal') {
      throw new SignalError('NOT_A_WAIT_NODE', `node "${String(node?.id)}" waits for no signal`);
    }
    return signalNode(
      this.host,
      this.id,
      { id: node.id, index: node.index, schema: target.wait.schema },
      payload,
      options,
    );
  }

  /** Every node of the run, in index order. */
  async nodes(): Promise<WorkflowNodeInfo[]> {
    const rows = await this.host.db.run(WorkflowNodeList, { workflowId: this.id });
    return rows.map(toNodeInfo);
  }

  /**
   * The outcome of one node (given as the node object or its id), as it stands: `RESULT_NOT_AVAILABLE` while
   * the node has not ended, `UPSTREAM_SKIPPED` for a skipped node.
   */
  async resultFor<R>(node: WorkflowNode<R>): Promise<TaskResult<R>>;
  async resultFor(node: string): Promise<TaskResult<unknown>>;
  async resultFor(node: string | WorkflowNode<unknown>): Promise<TaskResult<unknown>> {
    const id = typeof node === 'string' ? node : node.id;
    const found = (await this.nodes()).find((n) => n.id === id);
    if (!found)
      return {
        ok: false,
        error: new TaskError('RESULT_NOT_AVAILABLE', `no node "${id}" in workflow ${this.id}`),
      };
    return (
      found.result ?? {
        ok: false,
        error: new TaskError('RESULT_NOT_AVAILABLE', `node "${id}" has not ended`),
      }
    );
  }
}

function toNodeInfo(row: WorkflowNodeRow): WorkflowNodeInfo {
  const terminal = row.status === 'COMPLETED' || row.status === 'FAILED' || row.status === 'SKIPPED';
  return {
    index: row.node_index,
    id: row.node_id,
    taskName: row.task_name,
    queue: row.queue_name,
    dependencies: row.dependencies,
    status: row.status,
    taskId: row.task_id,
    enqueuedAt: row.enqueued_at,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    result: terminal
      ? decodeOutcome({
          status: row.status === 'COMPLETED' ? 'COMPLETED' : 'FAILED',
          result: row.result,
          error_code: row.error_code,
          failed_reason: null,
        })
      : null,
  };
}

/** A workflow run as listings show it. */
export interface WorkflowInfo {
  id: string;
  name: string;
  status: WorkflowStatus;
  onError: 'fail' | 'pause';
  nodesTotal: number;
  nodesTerminal: number;
  /** The error code of a FAILED or CANCELLED run. */
  errorCode: string | null;
  /** For a child workflow: its parent run and the node that runs it; the root of its tree; its depth (0: a root). */
  parentId: string | null;
  parentNodeIndex: number | null;
  rootId: string;
  depth: number;
  sentAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
  updatedAt: Date;
}

/** Which workflow runs {@link listWorkflows} returns. */
export interface WorkflowFilter {
  status?: WorkflowStatus | undefined;
  name?: string | undefined;
  /** Most runs returned (1–1000). Default 50. */
  limit?: number | undefined;
  /** Runs sent before this one (a cursor: the last run of the previous page). */
  before?: Pick<WorkflowInfo, 'id' | 'sentAt'> | undefined;
}

/** Workflow runs, newest first (see {@link WorkflowFilter}). */
export async function listWorkflows(db: Database, filter: WorkflowFilter = {}): Promise<WorkflowInfo[]> {
  const limit = filter.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new ConfigError('workflow filter', [
      { field: 'limit', value: limit, message: 'must be an integer from 1 to 1000' },
    ]);
  }
  const rows = await db.run(WorkflowList, {
    status: filter.status ?? null,
    name: filter.name ?? null,
    before: filter.before ? { sentAt: filter.before.sentAt, id: filter.before.id } : null,
    limit,
  });
  return rows.map(toWorkflowInfo);
}

/** The public view of a workflow row. */
export function toWorkflowInfo(row: WorkflowRow): WorkflowInfo {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    onError: row.on_error,
    nodesTotal: row.nodes_total,
    nodesTerminal: row.nodes_terminal,
    errorCode: row.error_code,
    parentId: row.parent_workflow_id,
    parentNodeIndex: row.parent_node_index,
    rootId: row.root_workflow_id,
    depth: row.depth,
    sentAt: row.sent_at,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    updatedAt: row.updated_at,
  };
}
