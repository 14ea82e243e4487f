/** Recovery and retention settings (the seed's RecoveryConfig), shared by every worker of an app. */
import { z } from 'zod';

/** Recovery and retention settings. Every field is optional. */
export interface RecoveryConfig {
  /** Requeue CLAIMED tasks whose claimer heartbeat went stale (safe: their code never ran). Default true. */
  autoRequeueStaleClaimed?: boolean | undefined;
  /** A CLAIMED task is stale after this long without a claimer heartbeat. Default 120,000 ms. */
  claimedStaleThresholdMs?: number | undefined;
  /** How often a worker sends claimer heartbeats. Default 30,000 ms. */
  claimerHeartbeatIntervalMs?: number | undefined;
  /** Retry or fail RUNNING tasks whose runner heartbeat went stale (`WORKER_CRASHED`). Default true. */
  autoFailStaleRunning?: boolean | undefined;
  /** A RUNNING task is stale after this long without a runner heartbeat. Default 300,000 ms. */
  runningStaleThresholdMs?: number | undefined;
  /** How often a worker sends runner heartbeats. Default 30,000 ms. */
  runnerHeartbeatIntervalMs?: number | undefined;
  /** How often maintenance (reaper, expiry, retention) runs. Default 30,000 ms. */
  checkIntervalMs?: number | undefined;
  /** Delete heartbeats older than this; null keeps them. Default 24. */
  heartbeatRetentionHours?: number | null | undefined;
  /** Delete worker snapshots and stop records older than this; null keeps them. Default 168 (7 days). */
  workerStateRetentionHours?: number | null | undefined;
  /** Delete terminal tasks (and their attempts) finished longer ago than this; null keeps them. Default 720. */
  terminalRecordRetentionHours?: number | null | undefined;
  /** Rows deleted per statement by retention. Default 1,000. */
  retentionBatchSize?: number | undefined;
  /** Most statements one retention pass runs per table, so a huge backlog is spread over passes. Default 50. */
  retentionMaxBatchesPerRun?: number | undefined;
  /**
   * The workflow recovery pass repairs a workflow (a node whose task ended without the node following, a READY
   * node without a task, ...) once it has not changed for this long. Default 10,000 ms.
   */
  workflowRecoveryGraceMs?: number | undefined;
  /** How often the leader reads the task table's statistics to decide on a vacuum. Default 1,000 ms. */
  vacuumCheckIntervalMs?: number | undefined;
  /**
   * The leader vacuums the task table once this many of its rows, plus `vacuumScaleFactor` of its live rows, were
   * updated (other than in place) or deleted since its last vacuum, so that claims do not walk over the index
   * entries of tasks claimed since; null leaves the table to autovacuum. Default 10,000.
   */
  vacuumThreshold?: number | null | undefined;
  /** Share of the task table's live rows added to `vacuumThreshold`. Default 0.05. */
  vacuumScaleFactor?: number | undefined;
}

const hours = z.number().positive().nullable();

export const recoveryConfigSchema = z
  .strictObject({
    autoRequeueStaleClaimed: z.boolean().default(true),
    claimedStaleThresholdMs: z.number().int().min(1).default(120_000),
    claimerHeartbeatIntervalMs: z.number().int().min(1).default(30_000),
    autoFailStaleRunning: z.boolean().default(true),
    runningStaleThresholdMs: z.number().int().min(1).default(300_000),
    runnerHeartbeatIntervalMs: z.number().int().min(1).default(30_000),
    checkIntervalMs: z.number().int().min(30).default(30_000),
    heartbeatRetentionHours: hours.default(24),
    workerStateRetentionHours: hours.default(168),
    terminalRecordRetentionHours: hours.default(720),
    retentionBatchSize: z.number().int().min(1).max(100_000).default(1000),
    retentionMaxBatchesPerRun: z.number().int().min(1).default(50),
    workflowRecoveryGraceMs: z.number().int().min(0).default(10_000),
    vacuumCheckIntervalMs: z.number().int().min(100).default(1000),
    vacuumThreshold: z.number().int().min(1000).nullable().default(10_000),
    vacuumScaleFactor: z.number().min(0).max(10).default(0.05),
  })
  .superRefine((c, ctx) => {
    if (c.claimedStaleThresholdMs < 2 * c.claimerHeartbeatIntervalMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['claimedStaleThresholdMs'],
        message: `must be at least twice claimerHeartbeatIntervalMs (${2 * c.claimerHeartbeatIntervalMs})`,
      });
    }
    if (c.runningStaleThresholdMs < 2 * c.runnerHeartbeatIntervalMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['runningStaleThresholdMs'],
        message: `must be at least twice runnerHeartbeatIntervalMs (${2 * c.runnerHeartbeatIntervalMs})`,
      });
    }
  });

/** A {@link RecoveryConfig} with defaults applied. */
export type ResolvedRecoveryConfig = z.output<typeof recoveryConfigSchema>;
