/**
 * Maintenance service: reads the cluster's figures (tasks pending, claimed and running per queue, the oldest due
 * task's age, live workers) with one statement per pass and sets the cluster gauges of this process's metrics.
 * It runs on the maintenance leader only, so one process in the cluster reports them, and not in a new leader's
 * first pass: on a backlog of a million tasks the count costs the server about a quarter of a second, which the
 * workers starting on that backlog need more than the gauges do.
 */
import type { Database } from '../db/Database.js';
import { ClusterFiguresRead, SerialPlansSet } from '../db/metrics.js';
import type { HorsiesMetrics, QueueFigures } from './Metrics.js';

/** A worker counts as live with a snapshot this recent (the dashboard's and the CLI's window). */
export const LIVE_WORKER_WINDOW_MS = 30_000;

/** What one pass read. */
export interface ClusterCollectorResult {
  queues: QueueFigures[];
  liveWorkers: number;
}

/**
 * Sets the cluster gauges from one query per pass. A maintenance service by its shape (`name`, `runsOnStart`,
 * `runOnce`), which recovery/services.ts checks where it lists it: metrics/ imports nothing of recovery/, as
 * WorkflowRecovery does not.
 */
export class ClusterCollector {
  readonly name = 'metrics';
  readonly runsOnStart = false;

  constructor(
    private readonly db: Database,
    private readonly metrics: HorsiesMetrics,
  ) {}

  async runOnce(): Promise<ClusterCollectorResult> {
    const [row] = await this.db.transaction(async (tx) => {
      await this.db.run(SerialPlansSet, {}, tx);
      return this.db.run(ClusterFiguresRead, { liveWithinMs: LIVE_WORKER_WINDOW_MS }, tx);
    });
    const queues: QueueFigures[] = (row?.queues ?? []).map((q) => ({
      queue: q.queue_name,
      pending: q.pending,
      claimed: q.claimed,
      running: q.running,
      oldestPendingAgeSeconds: q.oldest_pending_age_s,
    }));
    const liveWorkers = row?.live_workers ?? 0;
    this.metrics.setCluster(queues, liveWorkers);
    return { queues, liveWorkers };
  }
}
