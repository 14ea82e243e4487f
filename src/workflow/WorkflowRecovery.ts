/**
 * Maintenance: the workflow recovery pass. Repairs every half-done shape a crash or a lost step can leave, by
 * running the workflow step over the whole workflow (see `step.ts`):
 *
 * - a node ENQUEUED or RUNNING whose task ended (or vanished): settled from the task's stored result, or a
 *   synthesized one (`WORKER_CRASHED`, `TASK_CANCELLED`, `TASK_EXPIRED`, `RESULT_NOT_AVAILABLE`, `TASK_NOT_FOUND`);
 * - a PENDING node whose dependencies are all terminal: counters recounted, join rule applied;
 * - a READY node without a task: enqueued (a subworkflow node: its child started);
 * - a subworkflow node whose child workflow ended (or vanished): settled from the child;
 * - a RUNNING workflow whose nodes are all terminal: finished.
 *
 * Only workflows untouched for `workflowRecoveryGraceMs` are looked at, so the pass does not race a healthy
 * step; if it does, the step's compare-and-sets make the second run a no-op. Each workflow is repaired in its own
 * transaction: one that cannot be repaired is reported and the pass goes on.
 */
import { databaseClock } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Database } from '../db/Database.js';
import { WorkflowListStale } from '../db/workflows.js';
import { stepWorkflow } from './step.js';
import type { ChildWorkflows } from './step.js';

/** What one recovery pass did. */
export interface WorkflowRecoveryResult {
  /** Workflows stepped, with the nodes each step settled or skipped and the tasks it enqueued. */
  repaired: { id: string; settled: number; enqueued: number; status: string | null }[];
  /** Workflows whose repair failed, with the error. */
  failed: { id: string; error: string }[];
}

/** Settings of a {@link WorkflowRecovery}. */
export interface WorkflowRecoveryOptions {
  /** A workflow is looked at once it has not changed for this long. */
  graceMs: number;
  /** Most workflows repaired per pass. */
  batchSize: number;
  /** Workflows that subworkflow nodes start (a READY one without its child is started here). */
  children?: ChildWorkflows;
}

/** Finds and repairs stuck workflows. */
export class WorkflowRecovery {
  readonly name = 'workflow-recovery';

  constructor(
    private readonly db: Database,
    private readonly options: WorkflowRecoveryOptions,
    private readonly clock: Clock = databaseClock,
  ) {}

  async runOnce(): Promise<WorkflowRecoveryResult> {
    const result: WorkflowRecoveryResult = { repaired: [], failed: [] };
    const stale = await this.db.run(WorkflowListStale, {
      graceMs: this.options.graceMs,
      limit: this.options.batchSize,
      now: this.clock.now(),
    });
    for (const { id } of stale) {
      try {
        const step = await stepWorkflow(this.db, id, {
          nodes: null,
          repair: true,
          children: this.options.children,
        });
        result.repaired.push({ id, settled: step.settled, enqueued: step.enqueued, status: step.status });
      } catch (error) {
        result.failed.push({ id, error: error instanceof Error ? error.message : String(error) });
      }
    }
    return result;
  }
}
