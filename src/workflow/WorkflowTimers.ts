/**
 * Maintenance: fires the timers of wait nodes (a signal's timeout, a sleep's end). One bounded statement finds
 * up to `batchSize` nodes whose timer is due (`horsies_workflow_tasks_wait_due_idx`, which holds only nodes
 * waiting with a timer); each of their workflows then takes one step, which settles them (`WAIT_TIMEOUT` for a
 * signal that did not come, null for a sleep) and moves the run on. Nothing polls per run and no worker slot is
 * held: the timer is the node's row, read here once per maintenance pass, so a timer fires within one
 * maintenance interval of its time, on whichever process leads. A step that fails is reported and retried at the
 * next pass (the timer is still due); a node a delivery completed meanwhile is not changed again.
 */
import type { Database } from '../db/Database.js';
import { WorkflowWaitsDue } from '../db/waits.js';
import { stepWorkflow } from './step.js';
import type { ChildWorkflows } from './step.js';

/** What one pass did. */
export interface WorkflowTimersResult {
  /** Wait nodes whose timer was due, by workflow, with the nodes each step ended. */
  fired: { id: string; nodes: number[]; settled: number }[];
  /** Workflows whose step failed, with the error. */
  failed: { id: string; error: string }[];
}

/** Settings of a {@link WorkflowTimers}. */
export interface WorkflowTimersOptions {
  /** Most due timers fired per pass (the rest fire at the next pass). */
  batchSize: number;
  /** Workflows that subworkflow nodes start (a step may start one). */
  children?: ChildWorkflows;
}

/** Fires due timers of wait nodes; see the module comment. */
export class WorkflowTimers {
  readonly name = 'workflow-timers';

  constructor(
    private readonly db: Database,
    private readonly options: WorkflowTimersOptions,
  ) {
    if (!Number.isInteger(options.batchSize) || options.batchSize < 1) {
      throw new RangeError(`WorkflowTimers batchSize must be a positive integer, got ${options.batchSize}`);
    }
  }

  async runOnce(): Promise<WorkflowTimersResult> {
    const result: WorkflowTimersResult = { fired: [], failed: [] };
    const due = await this.db.run(WorkflowWaitsDue, { limit: this.options.batchSize });
    for (const { workflow_id: id, nodes } of due) {
      try {
        const step = await stepWorkflow(this.db, id, { nodes, children: this.options.children });
        result.fired.push({ id, nodes, settled: step.settled });
      } catch (error) {
        result.failed.push({ id, error: error instanceof Error ? error.message : String(error) });
      }
    }
    return result;
  }
}
