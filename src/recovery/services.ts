/**
 * The maintenance leader's services, in the order a pass runs them. Adding a service (the workflow recovery
 * pass, the scheduler, the metrics collector) is one entry in {@link maintenanceServices}.
 */
import type { Clock } from '../clock.js';
import type { Database } from '../db/Database.js';
import type { FinishHook } from '../db/tasks.js';
import type { ResolvedRecoveryConfig } from './config.js';
import { Expirer } from './Expirer.js';
import type { MaintenanceService } from './Maintainer.js';
import { Reaper } from './Reaper.js';
import { Retainer } from './Retainer.js';
import { WorkflowRecovery } from '../workflow/WorkflowRecovery.js';

/** What the maintenance services are built from. */
export interface MaintenanceContext {
  db: Database;
  recovery: ResolvedRecoveryConfig;
  /** Time the services compare with (the database clock unless a test injects one). */
  clock: Clock;
  /** Follows every outcome a service writes (the reaper's verdicts, expiries), as it follows the worker's own. */
  afterFinish: FinishHook;
}

/** The services one maintenance pass runs, in order. */
export function maintenanceServices(ctx: MaintenanceContext): MaintenanceService[] {
  const { db, recovery, clock } = ctx;
  return [
    new Reaper(db, recovery, { clock, afterFinish: ctx.afterFinish }),
    new Expirer(
      db,
      { batchSize: recovery.retentionBatchSize, maxBatchesPerRun: recovery.retentionMaxBatchesPerRun },
      clock,
      ctx.afterFinish,
    ),
    new WorkflowRecovery(
      db,
      { graceMs: recovery.workflowRecoveryGraceMs, batchSize: recovery.retentionBatchSize },
      clock,
    ),
    new Retainer(db, recovery, clock),
  ];
}
