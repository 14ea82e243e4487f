/**
 * Maintenance: vacuum of the task table while it is busy.
 *
 * A claim takes tasks from the head of the claim index (queue, priority, enqueue order) and moves them out of it.
 * Their index entries stay behind, dead, until the table is vacuumed, and every claim walks over them before it
 * finds a pending task: after 100,000 tasks drained, about a thousand index pages per claim. Autovacuum looks at
 * a table once a minute and waits for a fifth of it to be dead, so on a busy queue the claims grow slower between
 * its visits. The leader checks the table's dead rows every `vacuumCheckIntervalMs` and vacuums it when they pass
 * `vacuumThreshold` plus `vacuumScaleFactor` of its live rows: a vacuum reads every index of the table, so its
 * cost grows with the table, and the threshold with it.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Database } from '../db/Database.js';
import { TaskTableVacuum, TaskTableVacuumState } from '../db/maintenance.js';
import type { MaintenanceService } from './Maintainer.js';

/** What one check did. */
export interface VacuumerResult {
  /** Dead row versions in the task table when checked. */
  dead: number;
  /** Live rows when checked. */
  live: number;
  /** Whether it vacuumed (false below the threshold, or when this role may not vacuum the table). */
  vacuumed: boolean;
  /** How long the vacuum took, when it ran. */
  ms?: number;
}

/** Settings of a {@link Vacuumer}. */
export interface VacuumerOptions {
  /** Dead rows that always start a vacuum, whatever the table's size. */
  threshold: number;
  /** Share of the live rows added to the threshold. */
  scaleFactor: number;
}

/** Vacuums the task table when its dead rows pass the threshold. */
export class Vacuumer implements MaintenanceService<VacuumerResult> {
  readonly name = 'vacuum';
  private refusedLogged = false;

  constructor(
    private readonly db: Database,
    private readonly options: VacuumerOptions,
    private readonly logger: Logger,
  ) {}

  async runOnce(): Promise<VacuumerResult> {
    const [state] = await this.db.run(TaskTableVacuumState, { schema: this.db.schema });
    if (!state) return { dead: 0, live: 0, vacuumed: false };
    const { dead, live } = state;
    if (dead < this.options.threshold + this.options.scaleFactor * live)
      return { dead, live, vacuumed: false };
    if (!state.permitted) {
      if (!this.refusedLogged) {
        this.refusedLogged = true;
        this.logger.warn(
          { schema: this.db.schema, dead },
          'the task table needs a vacuum, but this role may not vacuum it (it is not the owner); ' +
            'autovacuum still will. Grant ownership (or MAINTAIN on PostgreSQL 17+), or set ' +
            'recovery.vacuumThreshold to null to stop this check',
        );
      }
      return { dead, live, vacuumed: false };
    }
    const started = performance.now();
    await this.db.run(TaskTableVacuum, {});
    return { dead, live, vacuumed: true, ms: performance.now() - started };
  }
}
