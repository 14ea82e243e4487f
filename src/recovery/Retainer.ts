/**
 * Maintenance: retention. Deletes old heartbeats, old worker snapshots and stop records, terminal tasks past the retention
 * period (their attempts cascade), and COMPLETED tasks whose own retention ran out. Every delete is a bounded
 * batch, and a pass runs at most `retentionMaxBatchesPerRun` of them per table.
 */
import { databaseClock } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Database } from '../db/Database.js';
import type { Statement } from '../db/sql.js';
import {
  HeartbeatPrune,
  TaskPruneFinished,
  TaskPrunePurgeable,
  WorkerStatePrune,
  WorkerStopPrune,
} from '../db/maintenance.js';
import { WorkflowPruneFinished } from '../db/workflows.js';
import type { PruneParams } from '../db/maintenance.js';
import type { ResolvedRecoveryConfig } from './config.js';
import type { MaintenanceService } from './Maintainer.js';

/** Rows deleted by one pass, per table. */
export interface RetainerResult {
  heartbeats: number;
  /** Worker snapshots and stop records. */
  workerStates: number;
  tasks: number;
  /** Terminal workflows (their nodes go with them). */
  workflows: number;
}

const HOUR_MS = 3_600_000;

/** Deletes what retention says is old enough. */
export class Retainer implements MaintenanceService<RetainerResult> {
  readonly name = 'retainer';

  constructor(
    private readonly db: Database,
    private readonly config: ResolvedRecoveryConfig,
    private readonly clock: Clock = databaseClock,
  ) {}

  async runOnce(): Promise<RetainerResult> {
    const { heartbeatRetentionHours, workerStateRetentionHours, terminalRecordRetentionHours } = this.config;
    const heartbeats =
      heartbeatRetentionHours === null
        ? 0
        : await this.drain(HeartbeatPrune, heartbeatRetentionHours * HOUR_MS);
    const workerStates =
      workerStateRetentionHours === null
        ? 0
        : (await this.drain(WorkerStatePrune, workerStateRetentionHours * HOUR_MS)) +
          (await this.drain(WorkerStopPrune, workerStateRetentionHours * HOUR_MS));
    let tasks = await this.drain(TaskPrunePurgeable, 0);
    let workflows = 0;
    if (terminalRecordRetentionHours !== null) {
      tasks += await this.drain(TaskPruneFinished, terminalRecordRetentionHours * HOUR_MS);
      workflows = await this.drain(WorkflowPruneFinished, terminalRecordRetentionHours * HOUR_MS);
    }
    return { heartbeats, workerStates, tasks, workflows };
  }

  private async drain(
    stmt: Statement<PruneParams, { deleted: number }>,
    olderThanMs: number,
  ): Promise<number> {
    const limit = this.config.retentionBatchSize;
    const now = this.clock.now();
    let total = 0;
    for (let i = 0; i < this.config.retentionMaxBatchesPerRun; i += 1) {
      const [row] = await this.db.run(stmt, { olderThanMs, limit, now });
      const deleted = row?.deleted ?? 0;
      total += deleted;
      if (deleted < limit) break;
    }
    return total;
  }
}
