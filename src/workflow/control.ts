/**
 * Workflow control: pause, resume, cancel and retry-failed, each on a workflow and the child workflows its
 * subworkflow nodes run, in one transaction.
 *
 *   RUNNING ──pause──► PAUSED ──resume──► RUNNING          (children follow: running ones pause, paused resume)
 *      │                 │ └──retryFailed──► RUNNING        (FAILED nodes and the skips after them run again)
 *      └──cancel──► CANCELLED ◄──cancel──┘                  (and every live descendant)
 *   FAILED ──retryFailed──► RUNNING
 *
 * Lock order (the one order of the whole engine): a workflow's row, then its nodes, then their tasks; and a
 * parent before its children. A tree is locked level by level from the workflow named: each level's rows in id
 * order, once its parents are held, so no child can be started under a level not yet locked. A workflow step
 * locks one workflow, and a child that ends steps its parent afterwards, in a transaction of its own; a batch of
 * task outcomes locks only its tasks, in id order, as a cancel does. So a cancel racing completions of the same
 * workflow waits, and never deadlocks.
 *
 * Pause: no node becomes READY or is enqueued; running tasks finish and their results are kept; a task that
 * never ran is given back (its node READY again, the task row, which has no attempt, deleted), and one claimed
 * but not started is handed back by its worker's start (`WORKFLOW_STOPPED`) and given back by the next step.
 * Retries waiting stay PENDING, and claims skip them while the workflow is not RUNNING.
 */
import type { Database, Queryable } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import {
  WorkflowCancelMany,
  WorkflowLock,
  WorkflowNodeReopen,
  WorkflowReopen,
  WorkflowSetStatus,
  WorkflowTasksLock,
  WorkflowWakeHeld,
} from '../db/workflows.js';
import type { WorkflowRow, WorkflowStatus } from '../db/workflows.js';
import { step, stepParent } from './step.js';
import type { ChildWorkflows, ParentNode, StepResult } from './step.js';
import { LIVE_STATUSES, lockDescendants, pauseTree } from './tree.js';

/** What a control operation did. */
export interface ControlResult {
  /** The named workflow's status afterwards (null: no such workflow). */
  status: WorkflowStatus | null;
  /** Ids of the workflows it changed: the one named and the descendants that followed. */
  changed: string[];
}

/** What a cancel did, besides {@link ControlResult}. */
export interface CancelResult extends ControlResult {
  /** Tasks cancelled before they started. */
  tasksCancelled: number;
  /** Running tasks asked to stop (their AbortSignal fires). */
  tasksStopping: number;
}

/**
 * Runs a control operation: `act` gets the named workflow locked (undefined when there is none) in one
 * transaction; a parent node it names steps after the commit, in its own transaction (parents are never locked
 * after their children).
 */
async function control<R>(
  db: Database,
  id: string,
  children: ChildWorkflows | undefined,
  act: (tx: Queryable, root: WorkflowRow | undefined) => Promise<{ result: R; parent?: ParentNode | null }>,
): Promise<R> {
  const { result, parent } = await db.transaction(async (tx) => {
    const [root] = await db.run(WorkflowLock, { id, waitForFlush: true }, tx);
    return act(tx, root);
  });
  if (parent) await stepParent(db, parent, children);
  return result;
}

/** Pauses a RUNNING workflow and its running children; a workflow that is not RUNNING is left as it is. */
export function pauseWorkflow(db: Database, id: string): Promise<ControlResult> {
  return control<ControlResult>(db, id, undefined, async (tx, root) => {
    if (root?.status !== 'RUNNING') return { result: { status: root?.status ?? null, changed: [] } };
    return { result: { status: 'PAUSED', changed: await pauseTree(db, tx, root) } };
  });
}

/**
 * PAUSED → RUNNING for the paused runs of a locked tree, parents first, each then stepped as recovery steps it
 * (PENDING nodes re-evaluated, READY ones enqueued or their children started, a run with nothing left finished),
 * and the queues of their held retries woken. Returns the ids resumed and the steps' results by id.
 */
async function resumeTree(
  db: Database,
  tx: Queryable,
  tree: WorkflowRow[],
  children: ChildWorkflows | undefined,
): Promise<{ resumed: string[]; steps: Map<string, StepResult> }> {
  const resumed = new Set(
    (
      await db.run(WorkflowSetStatus, { ids: tree.map((w) => w.id), from: ['PAUSED'], to: 'RUNNING' }, tx)
    ).map((r) => r.id),
  );
  const steps = new Map<string, StepResult>();
  // Parents first: a parent's step may end it; a child's never touches its parent here.
  for (const w of tree.filter((t) => resumed.has(t.id))) {
    steps.set(w.id, await step(db, tx, w.id, { nodes: null, repair: true, children }));
  }
  await db.run(WorkflowWakeHeld, { ids: [...resumed], schema: db.schema }, tx);
  return { resumed: [...resumed], steps };
}

/**
 * Resumes a PAUSED workflow and its paused descendants: each RUNNING again, its PENDING nodes re-evaluated,
 * READY ones enqueued (subworkflow nodes start their child), held retries woken; one with nothing left to run
 * completes.
 */
export function resumeWorkflow(db: Database, id: string, children?: ChildWorkflows): Promise<ControlResult> {
  return control<ControlResult>(db, id, children, async (tx, root) => {
    if (root?.status !== 'PAUSED') return { result: { status: root?.status ?? null, changed: [] } };
    const tree = [root, ...(await lockDescendants(db, tx, root))];
    const { resumed, steps } = await resumeTree(db, tx, tree, children);
    const own = steps.get(id);
    return { result: { status: own?.status ?? 'RUNNING', changed: resumed }, parent: own?.parent };
  });
}

/**
 * Cancels a live workflow and every live descendant (see `WorkflowCancelMany`). When the workflow named is itself
 * a child, its parent node then fails `SUBWORKFLOW_FAILED` (a step of the parent, after the commit).
 */
export function cancelWorkflow(db: Database, id: string, children?: ChildWorkflows): Promise<CancelResult> {
  return control<CancelResult>(db, id, children, async (tx, root) => {
    if (!root || !LIVE_STATUSES.includes(root.status)) {
      return { result: { status: root?.status ?? null, changed: [], tasksCancelled: 0, tasksStopping: 0 } };
    }
    const ids = [root, ...(await lockDescendants(db, tx, root))].map((w) => w.id);
    await db.run(WorkflowTasksLock, { ids }, tx);
    const rows = await db.run(WorkflowCancelMany, { ids, channel: channels.workflowDone(db.schema) }, tx);
    return {
      result: {
        status: 'CANCELLED',
        changed: rows.map((r) => r.id),
        tasksCancelled: rows.reduce((n, r) => n + r.tasks_cancelled, 0),
        tasksStopping: rows.reduce((n, r) => n + r.tasks_stopping, 0),
      },
      parent:
        root.parent_workflow_id !== null && root.parent_node_index !== null
          ? { id: root.parent_workflow_id, node: root.parent_node_index }
          : null,
    };
  });
}

/**
 * Runs the FAILED nodes of a FAILED or PAUSED workflow again, with the nodes that were SKIPPED after them: they
 * go back to PENDING, the workflow to RUNNING, and a step enqueues what is ready. COMPLETED nodes keep their
 * results. A FAILED subworkflow node starts a new child. A PAUSED run's paused descendants resume with it.
 */
export function retryFailedWorkflow(
  db: Database,
  id: string,
  children?: ChildWorkflows,
): Promise<ControlResult & { reopened: number }> {
  return control<ControlResult & { reopened: number }>(db, id, children, async (tx, root) => {
    if (root?.status !== 'FAILED' && root?.status !== 'PAUSED') {
      return { result: { status: root?.status ?? null, changed: [], reopened: 0 } };
    }
    // A paused run's children were paused with it: they run again with it.
    const descendants = root.status === 'PAUSED' ? await lockDescendants(db, tx, root) : [];
    const reopened = await db.run(WorkflowNodeReopen, { workflowId: id }, tx);
    await db.run(WorkflowReopen, { id }, tx);
    const stepped = await step(db, tx, id, { nodes: null, repair: true, children });
    const { resumed } = await resumeTree(db, tx, descendants, children);
    return {
      result: { status: stepped.status, changed: [id, ...resumed], reopened: reopened.length },
      parent: stepped.parent,
    };
  });
}
