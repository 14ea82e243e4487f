/**
 * The maintenance leader's services, in the order a pass runs them. Adding a service (the workflow recovery
 * pass, the scheduler, the metrics collector) is one entry in {@link maintenanceServices}.
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Database } from '../db/Database.js';
import type { FinishHook } from '../db/tasks.js';
import type { ResolvedRecoveryConfig } from './config.js';
import { Expirer } from './Expirer.js';
import { Maintainer } from './Maintainer.js';
import type { MaintenanceService } from './Maintainer.js';
import { Reaper } from './Reaper.js';
import type { ReaperObserver } from './Reaper.js';
import { ClusterCollector } from '../metrics/ClusterCollector.js';
import type { HorsiesMetrics } from '../metrics/Metrics.js';
import { Retainer } from './Retainer.js';
import { Vacuumer } from './Vacuumer.js';
import { WorkflowRecovery } from '../workflow/WorkflowRecovery.js';
import { WorkflowTimers } from '../workflow/WorkflowTimers.js';
import type { ChildWorkflows } from '../workflow/step.js';

/** What the maintenance services are built from. */
export interface MaintenanceContext {
  db: Database;
  recovery: ResolvedRecoveryConfig;
  /** Time the services compare with (the database clock unless a test injects one). */
  clock: Clock;
  /** Follows every outcome a service writes (the reaper's verdicts, expiries), as it follows the worker's own. */
  afterFinish: FinishHook;
  /** The process's metrics: counts what the services do and, with the collector, sets the cluster gauges. */
  metrics?: HorsiesMetrics | null;
  /** Workflows that subworkflow nodes start (the app's registry), for the workflow recovery pass. */
  workflows?: ChildWorkflows;
}

/** The services one maintenance pass runs, in order. */
export function maintenanceServices(ctx: MaintenanceContext): MaintenanceService[] {
  const { db, recovery, clock } = ctx;
  const metrics = ctx.metrics ?? null;
  return [
    new Reaper(db, recovery, {
      clock,
      afterFinish: ctx.afterFinish,
      observer: metrics === null ? undefined : reaperMetrics(metrics),
    }),
    new Expirer(
      db,
      {
        batchSize: recovery.retentionBatchSize,
        maxBatchesPerRun: recovery.retentionMaxBatchesPerRun,
        onExpired:
          metrics === null
            ? undefined
            : (rows) => rows.forEach((r) => metrics.expired(r.queue_name, r.task_name)),
      },
      clock,
      ctx.afterFinish,
    ),
    new WorkflowTimers(db, { batchSize: recovery.retentionBatchSize, children: ctx.workflows }),
    new WorkflowRecovery(
      db,
      {
        graceMs: recovery.workflowRecoveryGraceMs,
        batchSize: recovery.retentionBatchSize,
        children: ctx.workflows,
      },
      clock,
    ),
    new Retainer(db, recovery, clock),
    ...(metrics === null ? [] : [new ClusterCollector(db, metrics)]),
  ];
}

/**
 * The vacuum check, on a timer of its own (every `vacuumCheckIntervalMs`: the claim index's dead head grows with
 * every claim, by the second); null when `vacuumThreshold` is null.
 */
export function vacuumLoop(ctx: MaintenanceContext, logger: Logger): Maintainer | null {
  const { vacuumThreshold, vacuumScaleFactor, vacuumCheckIntervalMs } = ctx.recovery;
  if (vacuumThreshold === null) return null;
  const metrics = ctx.metrics ?? null;
  const vacuumer = new Vacuumer(
    ctx.db,
    {
      threshold: vacuumThreshold,
      scaleFactor: vacuumScaleFactor,
      onVacuumed: metrics === null ? undefined : (ms) => metrics.vacuumed(ms / 1000),
    },
    logger,
  );
  return new Maintainer([vacuumer], { checkIntervalMs: vacuumCheckIntervalMs }, logger);
}

// The reaper's verdicts counted like a worker's outcomes: a stale run ends WORKER_CRASHED, retried or failed.
function reaperMetrics(metrics: HorsiesMetrics): ReaperObserver {
  return {
    requeued: (rows) => rows.forEach((r) => metrics.requeued(r.queue_name, r.task_name)),
    reaped: (rows) =>
      rows.forEach((r) =>
        metrics.outcome(
          r.queue_name,
          r.task_name,
          r.status === 'PENDING' ? 'retried' : 'failed',
          'WORKER_CRASHED',
        ),
      ),
  };
}
