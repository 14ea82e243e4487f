/**
 * The claim of a queue that nothing meters: one statement claims and starts the tasks there are reserved slots for
 * (`TaskClaimAndStart`: PENDING → RUNNING in one row update, the rest CLAIMED), and carries the task_done notices
 * held for the next claim; prefetched tasks start in one statement per batch (`TaskStartMany`).
 */
import type { Database } from '../../db/Database.js';
import { TaskClaimAndStart, TaskStartMany, inClaimOrder, startingTasks } from '../../db/tasks.js';
import type { ClaimAndStartRow, ClaimParams, ClaimedTaskRow, TaskStartRow } from '../../db/tasks.js';
import type { DoneNotices } from '../DoneNotices.js';
import { giveBackClaimed } from './ClaimStrategy.js';
import type { ClaimKind, ClaimStrategy, PrefetchedStart } from './ClaimStrategy.js';

/** Settings shared by every strategy. */
export interface StrategySettings {
  workerId: string;
  /** Starts wait for their WAL flush (see WorkerConfig.claims.synchronousStarts). */
  synchronousStarts: boolean;
}

/** Claims and starts with no count around them. One instance serves every plain queue of a worker. */
export class PlainClaim implements ClaimStrategy {
  readonly kind: ClaimKind = 'plain';
  readonly startsInClaim = true;
  readonly gatesStart = false;
  readonly writesAtOnce = false;

  constructor(
    private readonly db: Database,
    private readonly settings: StrategySettings,
    /** task_done notifications a claim carries (only when its commit does not wait for the WAL flush). */
    private readonly notices: DoneNotices | null,
  ) {}

  async claim(params: ClaimParams, start: number): Promise<ClaimAndStartRow[]> {
    const { synchronousStarts } = this.settings;
    const notify = synchronousStarts ? undefined : this.notices?.take();
    try {
      const rows = await this.db.run(TaskClaimAndStart, {
        ...params,
        start,
        waitForFlush: synchronousStarts,
        notify,
      });
      return inClaimOrder(rows);
    } catch (error) {
      if (notify) this.notices?.giveBack(notify);
      throw error;
    }
  }

  async startPrefetched(tasks: ClaimedTaskRow[]): Promise<PrefetchedStart[]> {
    return [allStarted(tasks, await startTasks(this.db, this.settings, tasks))];
  }

  giveBack(tasks: ClaimedTaskRow[]): Promise<void> {
    return giveBackClaimed(this.db, this.settings.workerId, tasks);
  }

  full(): boolean {
    return false;
  }

  roomMayHaveOpened(): void {}
}

/** A start of prefetched tasks that deferred none of them. */
export function allStarted(started: ClaimedTaskRow[], rows: TaskStartRow[]): PrefetchedStart {
  return { started, rows, deferred: [], waitsFor: 'room', retryAt: null };
}

/** CLAIMED → RUNNING (or EXPIRED) for tasks this worker still owns, in one statement (`horsies_start_tasks`). */
export function startTasks(db: Database, settings: StrategySettings, tasks: ClaimedTaskRow[]) {
  if (tasks.length === 0) return Promise.resolve([]);
  return db.run(TaskStartMany, {
    workerId: settings.workerId,
    tasks: startingTasks(tasks),
    waitForFlush: settings.synchronousStarts,
  });
}
