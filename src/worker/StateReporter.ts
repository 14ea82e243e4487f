/** Writes a snapshot of the worker to `horsies_worker_states` every few seconds, for monitoring. */
import { totalmem } from 'node:os';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { ResolvedAppConfig } from '../client/config.js';
import type { TaskDefinition } from '../client/TaskDefinition.js';
import type { Database } from '../db/Database.js';
import { WorkerStateInsert, WorkerStopRecord } from '../db/liveness.js';
import type { WorkerSnapshot } from '../db/liveness.js';
import type { ResolvedWorkerConfig } from './config.js';
import type { WorkerSink } from './events.js';
import type { SlotLedger } from './SlotLedger.js';

/** What does not change over a worker's life: everything in a snapshot but the counts and resource use. */
export type WorkerSnapshotStatic = Omit<
  WorkerSnapshot,
  'tasksRunning' | 'tasksClaimed' | 'memoryUsageMb' | 'cpuPercent' | 'memoryPercent' | 'workerStartedAt'
>;

/**
 * Reports one worker's state. A worker that stops cleanly retires its snapshots and leaves a stop record instead:
 * left behind, its last snapshot would age into a stale worker on the dashboard (a clean stop looking like a
 * crash, once per `horsies dev` reload) and keep counting as serving its tasks until it left the live window; the
 * stop record shows it stopped.
 */
export class StateReporter {
  private timer: NodeJS.Timeout | null = null;
  private reporting: Promise<unknown> = Promise.resolve();
  private lastCpu = process.cpuUsage();
  private lastAt = process.hrtime.bigint();
  private startedAt = new Date();

  constructor(
    private readonly db: Database,
    private readonly intervalMs: number,
    private readonly fixed: WorkerSnapshotStatic,
    /** Tasks held now, claimed (not yet started) and running. */
    private readonly held: Pick<SlotLedger, 'counts'>,
    private readonly sink: Pick<WorkerSink, 'fail'>,
  ) {}

  /** The fixed part of a worker's snapshots: its identity, queues, caps and settings. */
  static describe(
    cfg: ResolvedWorkerConfig,
    app: Pick<
      ResolvedAppConfig,
      'queueConfigs' | 'clusterWideCap' | 'capMode' | 'prefetchBuffer' | 'recovery'
    >,
    tasks: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>,
  ): WorkerSnapshotStatic {
    return {
      worker: cfg.identity,
      processes: 1,
      queues: cfg.queues,
      maxClaimBatch: cfg.maxClaimBatch,
      maxClaimPerWorker: cfg.maxClaimPerWorker,
      clusterWideCap: app.clusterWideCap ?? null,
      queuePriorities: Object.fromEntries(
        cfg.queues.map((q) => [q, app.queueConfigs.get(q)?.priority ?? 100]),
      ),
      queueMaxConcurrency: Object.fromEntries(
        cfg.queues.map((q) => [q, app.queueConfigs.get(q)?.maxConcurrency ?? null]),
      ),
      recoveryConfig: {
        ...app.recovery,
        capMode: app.capMode,
        prefetchBuffer: app.prefetchBuffer,
        // Named as in WorkerConfig.prefetch; rows of workers before the grouped config hold `prefetch` (the size,
        // a number) and `startPrefetched` instead. Tasks started ahead count a crashed attempt when this worker dies.
        prefetch: { size: cfg.prefetch, startAhead: cfg.startPrefetched },
        concurrency: cfg.concurrency,
      },
      taskNames: [...tasks.keys()],
    };
  }

  /** Writes one snapshot now. CPU is the process's share of one core since the previous snapshot. */
  async runOnce(): Promise<WorkerSnapshot> {
    const now = process.hrtime.bigint();
    const cpu = process.cpuUsage(this.lastCpu);
    const wallMicros = Number(now - this.lastAt) / 1000;
    this.lastCpu = process.cpuUsage();
    this.lastAt = now;
    const rss = process.memoryUsage.rss();
    const counts = this.held.counts();
    const full: WorkerSnapshot = {
      ...this.fixed,
      tasksRunning: counts.running,
      tasksClaimed: counts.claimed,
      workerStartedAt: this.startedAt,
      memoryUsageMb: Math.round((rss / 1024 / 1024) * 10) / 10,
      memoryPercent: Math.round((rss / totalmem()) * 10_000) / 100,
      cpuPercent: wallMicros > 0 ? Math.round(((cpu.user + cpu.system) / wallMicros) * 10_000) / 100 : 0,
    };
    await this.db.run(WorkerStateInsert, full);
    return full;
  }

  /** Reports now and every interval (none when the interval is 0). The worker's start time is set here. */
  start(): void {
    this.startedAt = new Date();
    if (this.timer || this.intervalMs <= 0) return;
    const report = (): void => {
      this.reporting = this.runOnce().catch((error: unknown) =>
        this.sink.fail('worker snapshot failed', error),
      );
    };
    report();
    this.timer = setInterval(report, this.intervalMs);
    this.timer.unref();
  }

  /** Stops reporting. Idempotent. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * Stops reporting, then (once a snapshot under way is written) deletes the worker's snapshots and writes its
   * stop record, in one statement. A worker that never reported (interval 0) leaves none.
   */
  async retire(): Promise<void> {
    this.stop();
    await this.reporting;
    if (this.intervalMs <= 0) return;
    const { worker } = this.fixed;
    await this.db.run(WorkerStopRecord, {
      workerId: worker.workerId,
      hostname: worker.hostname,
      pid: worker.pid,
      queues: this.fixed.queues,
      workerStartedAt: this.startedAt,
    });
  }
}
