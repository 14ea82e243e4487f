/**
 * A workflow's tree: the run and its live descendants (the child runs its subworkflow nodes started), locked
 * level by level, parents first, and paused together. Control (control.ts) pauses, resumes and cancels trees; a
 * step (step.ts) pauses one when a failed node's workflow says `onError: 'pause'`. Both import this module, and
 * neither imports the other for it: control steps workflows, so a step cannot import control.
 */
import type { Database, Queryable } from '../db/Database.js';
import { WorkflowLockChildren, WorkflowSetStatus, WorkflowWithdrawPending } from '../db/workflows.js';
import type { WorkflowRow, WorkflowStatus } from '../db/workflows.js';

/** The statuses of a run that has not ended: what pause, resume and cancel reach in a tree. */
export const LIVE_STATUSES: readonly WorkflowStatus[] = ['PENDING', 'RUNNING', 'PAUSED'];

/** Locks the live descendants of a locked workflow, level by level, parents first. */
export async function lockDescendants(
  db: Database,
  tx: Queryable,
  root: WorkflowRow,
): Promise<WorkflowRow[]> {
  const found: WorkflowRow[] = [];
  for (let level = [root.id]; level.length > 0;) {
    const children = (await db.run(WorkflowLockChildren, { parentIds: level }, tx)).filter((c) =>
      LIVE_STATUSES.includes(c.status),
    );
    found.push(...children);
    level = children.map((c) => c.id);
  }
  return found;
}

/**
 * Pauses a locked workflow and its running descendants, and gives back their tasks that never ran. Used by
 * `pauseWorkflow` (control.ts) and by a step whose failed node pauses its workflow (`onError: 'pause'`). Returns
 * the ids paused.
 */
export async function pauseTree(db: Database, tx: Queryable, root: WorkflowRow): Promise<string[]> {
  const tree = [root, ...(await lockDescendants(db, tx, root))];
  const paused = await db.run(
    WorkflowSetStatus,
    { ids: tree.map((w) => w.id), from: ['RUNNING'], to: 'PAUSED' },
    tx,
  );
  const stopped = tree.filter((w) => w.status === 'RUNNING' || w.status === 'PAUSED').map((w) => w.id);
  await db.run(WorkflowWithdrawPending, { ids: stopped }, tx);
  return paused.map((p) => p.id);
}
