/** Maintenance: PENDING tasks whose `good_until` passed become EXPIRED (`TASK_EXPIRED`, no attempt row). */
import { databaseClock } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Database } from '../db/Database.js';
import type { FinishHook } from '../db/tasks.js';
import { TaskExpireBatch } from '../db/maintenance.js';
import type { MaintenanceService } from './Maintainer.js';

/** What one expiry pass did. */
export interface ExpirerResult {
  expired: number;
}

/** Expires PENDING tasks past their deadline, in batches. */
export class Expirer implements MaintenanceService<ExpirerResult> {
  readonly name = 'expirer';

  constructor(
    private readonly db: Database,
    private readonly options: {
      batchSize: number;
      maxBatchesPerRun: number;
      /** Follows each batch expired (metrics). */
      onExpired?: (tasks: { id: string; task_name: string; queue_name: string }[]) => void;
    },
    private readonly clock: Clock = databaseClock,
    /** Follows the expired tasks (their workflow nodes fail `TASK_EXPIRED` at once). */
    private readonly afterFinish: FinishHook | null = null,
  ) {}

  async runOnce(): Promise<ExpirerResult> {
    let expired = 0;
    for (let i = 0; i < this.options.maxBatchesPerRun; i += 1) {
      const rows = await this.db.run(TaskExpireBatch, {
        limit: this.options.batchSize,
        now: this.clock.now(),
      });
      expired += rows.length;
      if (rows.length > 0) this.options.onExpired?.(rows);
      if (this.afterFinish && rows.some((r) => r.workflow_id !== null)) await this.afterFinish(rows);
      if (rows.length < this.options.batchSize) break;
    }
    return { expired };
  }
}
