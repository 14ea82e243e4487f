/**
 * Maintenance: vacuum of the task table while it is busy.
 *
 * A claim takes tasks from the head of the claim index (queue, priority, enqueue order) and moves them out of it.
 * Their index entries stay behind, dead, until the table is vacuumed, and every claim walks over them before it
 * finds a pending task: after 100,000 tasks drained, about a thousand index pages per claim. Autovacuum looks at
 * a table once a minute and waits for a fifth of it to be dead, so on a busy queue the claims grow slower between
 * its visits. The leader checks the table every `vacuumCheckIntervalMs` and vacuums it once the rows changed since
 * the last vacuum pass `vacuumThreshold` plus `vacuumScaleFactor` of its live rows: a vacuum reads every index of
 * the table, so its cost grows with the table, and the threshold with it.
 *
 * What counts is PostgreSQL's count of row versions left behind with index entries: updates that were not HOT,
 * and deletes. Its count of dead rows would undercount them: pruning a page removes dead rows from the count but
 * leaves their index entries for vacuum. Any vacuum of the table (this one, autovacuum's, an operator's) starts
 * the count again, and a vacuum that could not remove everything (an open transaction still sees the old rows)
 * is not repeated until as many rows have changed again.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Database } from '../db/Database.js';
import { TaskTableVacuum, TaskTableVacuumState } from '../db/maintenance.js';
import type { MaintenanceService } from './Maintainer.js';

/** What one check did. */
export interface VacuumerResult {
  /** Rows updated (not in place) or deleted since the last vacuum of the table. */
  changed: number;
  /** Live rows of the table. */
  live: number;
  /**
   * Whether it ran a vacuum (false below the threshold, or when this role may not vacuum the table); true also when
   * the vacuum found another one on the table and left it to that one.
   */
  vacuumed: boolean;
  /** How long the vacuum took, when it ran. */
  ms?: number;
}

/** Settings of a {@link Vacuumer}. */
export interface VacuumerOptions {
  /** Changed rows that always start a vacuum, whatever the table's size. */
  threshold: number;
  /** Share of the live rows added to the threshold. */
  scaleFactor: number;
  /** Follows each vacuum, with its duration (metrics). */
  onVacuumed?: (ms: number) => void;
}

/** Vacuums the task table when enough of its rows changed since its last vacuum. */
export class Vacuumer implements MaintenanceService<VacuumerResult> {
  readonly name = 'vacuum';
  private refusedLogged = false;
  /** The statistics' running count of changed rows when the table was last vacuumed (null: not known yet). */
  private baseline: number | null = null;
  /** The table's last vacuum, as the statistics had it when `baseline` was set. */
  private lastVacuum: number | null = null;

  constructor(
    private readonly db: Database,
    private readonly options: VacuumerOptions,
    private readonly logger: Logger,
  ) {}

  async runOnce(): Promise<VacuumerResult> {
    const [state] = await this.db.run(TaskTableVacuumState, { schema: this.db.schema });
    if (!state) return { changed: 0, live: 0, vacuumed: false };
    if (this.baseline === null) {
      // The first check: the dead rows are what piled up since the last vacuum, as far as anyone can tell.
      this.baseline = state.changed - state.dead;
      this.lastVacuum = state.lastVacuum;
    } else if (state.lastVacuum !== this.lastVacuum || state.changed < this.baseline) {
      // Vacuumed since (by autovacuum or an operator), or the statistics were reset: count from here.
      this.baseline = state.changed;
      this.lastVacuum = state.lastVacuum;
    }
    const changed = state.changed - this.baseline;
    const { live } = state;
    if (changed < this.options.threshold + this.options.scaleFactor * live) {
      return { changed, live, vacuumed: false };
    }
    if (!state.permitted) {
      if (!this.refusedLogged) {
        this.refusedLogged = true;
        this.logger.warn(
          { schema: this.db.schema, changed },
          'the task table needs a vacuum, but this role may not vacuum it (it is not the owner); ' +
            'autovacuum still will. Grant ownership (or MAINTAIN on PostgreSQL 17+), or set ' +
            'recovery.vacuumThreshold to null to stop this check',
        );
      }
      return { changed, live, vacuumed: false };
    }
    // Counted from here whatever happens: a vacuum that failed is not tried again at every check, only once as
    // many rows changed again.
    this.baseline = state.changed;
    const started = performance.now();
    await this.vacuum();
    const ms = performance.now() - started;
    // What changed while it ran is counted towards the next one; its own end is not taken for another's.
    const [after] = await this.db.run(TaskTableVacuumState, { schema: this.db.schema });
    this.lastVacuum = after?.lastVacuum ?? null;
    this.options.onVacuumed?.(ms);
    return { changed, live, vacuumed: true, ms };
  }

  /**
   * The vacuum, on a connection of its own: not one of the pool's for what may be minutes on a large table, and
   * without the app's statement timeout (5 minutes by default), since a vacuum cancelled near its end has removed
   * nothing from the indexes.
   */
  private vacuum(): Promise<unknown> {
    return this.db.withOwnConnection((client) => this.db.run(TaskTableVacuum, {}, client));
  }
}
