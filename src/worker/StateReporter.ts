/** Writes a snapshot of the worker to `horsies_worker_states` every few seconds, for monitoring. */
import { totalmem } from 'node:os';
import type { Database } from '../db/Database.js';
import { WorkerStateInsert } from '../db/liveness.js';
import type { WorkerSnapshot } from '../db/liveness.js';

/** The parts of a snapshot that change; the reporter adds CPU and memory. */
export type WorkerSnapshotBase = Omit<WorkerSnapshot, 'memoryUsageMb' | 'cpuPercent' | 'memoryPercent'>;

/** Reports one worker's state. */
export class StateReporter {
  private timer: NodeJS.Timeout | null = null;
  private lastCpu = process.cpuUsage();
  private lastAt = process.hrtime.bigint();

  constructor(
    private readonly db: Database,
    private readonly intervalMs: number,
    private readonly snapshot: () => WorkerSnapshotBase,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Writes one snapshot now. CPU is the process's share of one core since the previous snapshot. */
  async runOnce(): Promise<WorkerSnapshot> {
    const now = process.hrtime.bigint();
    const cpu = process.cpuUsage(this.lastCpu);
    const wallMicros = Number(now - this.lastAt) / 1000;
    this.lastCpu = process.cpuUsage();
    this.lastAt = now;
    const rss = process.memoryUsage.rss();
    const full: WorkerSnapshot = {
      ...this.snapshot(),
      memoryUsageMb: Math.round((rss / 1024 / 1024) * 10) / 10,
      memoryPercent: Math.round((rss / totalmem()) * 10_000) / 100,
      cpuPercent: wallMicros > 0 ? Math.round(((cpu.user + cpu.system) / wallMicros) * 10_000) / 100 : 0,
    };
    await this.db.run(WorkerStateInsert, full);
    return full;
  }

  /** Reports now and every interval. */
  start(): void {
    if (this.timer) return;
    const report = (): void => void this.runOnce().catch(this.onError);
    report();
    this.timer = setInterval(report, this.intervalMs);
    this.timer.unref();
  }

  /** Stops reporting. Idempotent. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
