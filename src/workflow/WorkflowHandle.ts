/**
 * A handle on one workflow run: its status, its typed result (awaited through a notification on
 * `workflow_done`, with a poll behind it), its nodes, and the result of one node.
 */
import type { OutcomeSource } from '../client/ResultWaiter.js';
import { decodeOutcome } from '../client/outcome.js';
import type { Database } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import { WorkflowGet, WorkflowGetOutcomes, WorkflowNodeList } from '../db/workflows.js';
import type { WorkflowNodeRow, WorkflowNodeStatus, WorkflowStatus } from '../db/workflows.js';
import { TaskError } from '../errors.js';
import type { TaskResult } from '../errors.js';
import type { WorkflowNode } from './WorkflowDefinition.js';

/** What a handle needs of the app: an `App` is one. */
export interface WorkflowHandleHost {
  readonly db: Database;
  waitForOutcome<T>(source: OutcomeSource, id: string, timeoutMs?: number): Promise<TaskResult<T>>;
}

/** Outcomes of workflows, for the app's result waiters. */
export const workflowOutcomes: OutcomeSource = {
  channel: channels.workflowDone,
  async read(db, ids) {
    const rows = await db.run(WorkflowGetOutcomes, { ids });
    return new Map(
      rows.map((row) => [
        row.id,
        row.status === 'COMPLETED' || row.status === 'FAILED' || row.status === 'CANCELLED'
          ? decodeOutcome({
              status: row.status,
              result: row.result,
              error_code: row.error_code,
              failed_reason: null,
            })
          : null,
      ]),
    );
  },
  notFound: (id) => new TaskError('WORKFLOW_NOT_FOUND', `no workflow with id ${id}`),
};

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
  constructor(
    private readonly host: WorkflowHandleHost,
    /** The workflow's id. */
    readonly id: string,
  ) {}

  /** The workflow's status, or null if there is no such workflow. */
  async status(): Promise<WorkflowStatus | null> {
    const [row] = await this.host.db.run(WorkflowGet, { id: this.id });
    return row?.status ?? null;
  }

  /**
   * Waits for the workflow to end and resolves to its result: the output node's value (or the terminal nodes'
   * outcomes), or an error (`WORKFLOW_FAILED` naming the node, `WORKFLOW_SUCCESS_CASE_NOT_MET`,
   * `WORKFLOW_NOT_FOUND`, `WAIT_TIMEOUT` after `timeoutMs`). Never throws for an outcome.
   */
  result(options: { timeoutMs?: number } = {}): Promise<TaskResult<O>> {
    return this.host.waitForOutcome<O>(workflowOutcomes, this.id, options.timeoutMs);
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
