/**
 * The claim of a queue under a cap (a cluster-wide cap, or the queue's `maxConcurrency`; CapGuard holds their
 * settings). One statement takes the cap's lock, counts what is in flight and claims at most the room left
 * (`TaskClaimWithinCap`); in hard mode it also starts the tasks it has reserved slots for
 * (`TaskClaimAndStartWithinCap`), unless starts wait for their WAL flush (the commit would then hold the cap's lock
 * through each flush, and every capped claimer would wait for it in turn). In soft mode claims may run the buffer
 * over the cap and the starts pass the cap's gate instead (`TaskStartWithinCap`): those it has no room for wait
 * until room may have opened.
 *
 * A claim that took the last of the room it found leaves the queue full: claim passes leave it out until room may
 * have opened ({@link roomMayHaveOpened}: a task finished here or elsewhere, or a poll).
 */
import type { Database } from '../../db/Database.js';
import {
  TaskClaimAndStartWithinCap,
  TaskClaimWithinCap,
  TaskStartWithinCap,
  rowsWithinCap,
} from '../../db/capacity.js';
import type { CappedRow } from '../../db/capacity.js';
import { inClaimOrder, startingTasks } from '../../db/tasks.js';
import type { ClaimAndStartRow, ClaimParams, ClaimedTaskRow } from '../../db/tasks.js';
import type { CapGuard } from '../CapGuard.js';
import type { DoneNotices } from '../DoneNotices.js';
import { CapRoom, claimedOnly, giveBackClaimed } from './ClaimStrategy.js';
import type { ClaimKind, ClaimStrategy, PrefetchedStart } from './ClaimStrategy.js';
import { allStarted, startTasks } from './PlainClaim.js';
import type { StrategySettings } from './PlainClaim.js';

/** Claims and starts of one capped queue. */
export class CappedClaim implements ClaimStrategy {
  readonly kind: ClaimKind = 'capped';
  readonly startsInClaim: boolean;
  readonly gatesStart: boolean;
  readonly writesAtOnce = true;
  /** The queue's room as its last claim found it. */
  readonly room = new CapRoom();

  constructor(
    private readonly db: Database,
    private readonly settings: StrategySettings,
    private readonly caps: CapGuard,
    private readonly queue: string,
    private readonly notices: DoneNotices | null,
  ) {
    this.gatesStart = caps.gatesStart(queue);
    this.startsInClaim = !this.gatesStart && !settings.synchronousStarts;
  }

  async claim(params: ClaimParams, start: number): Promise<ClaimAndStartRow[]> {
    const cap = this.caps.limits(this.queue, 'claim');
    const mark = this.room.mark;
    if (!this.startsInClaim) {
      const rows = await this.db.run(TaskClaimWithinCap, { ...params, cap });
      return claimedOnly(inClaimOrder(this.withinRoom(rows, mark)));
    }
    const notify = this.notices?.take();
    try {
      const rows = await this.db.run(TaskClaimAndStartWithinCap, {
        ...params,
        start,
        waitForFlush: false,
        notify,
        cap,
      });
      return inClaimOrder(this.withinRoom(rows, mark));
    } catch (error) {
      if (notify) this.notices?.giveBack(notify);
      throw error;
    }
  }

  /** Soft mode: as many of `tasks`, in order, as the cap has room to run; the rest wait for room. */
  async startPrefetched(tasks: ClaimedTaskRow[]): Promise<PrefetchedStart[]> {
    if (!this.gatesStart) {
      return [allStarted(tasks, await startTasks(this.db, this.settings, tasks))];
    }
    const rows = await this.db.run(TaskStartWithinCap, {
      workerId: this.settings.workerId,
      tasks: startingTasks(tasks),
      waitForFlush: this.settings.synchronousStarts,
      queue: this.queue,
      cap: this.caps.limits(this.queue, 'start'),
    });
    const room = rows[0]?.room ?? 0;
    return [
      {
        started: tasks.slice(0, room),
        rows: rowsWithinCap(rows),
        deferred: tasks.slice(room),
        waitsFor: 'room',
        retryAt: null,
      },
    ];
  }

  giveBack(tasks: ClaimedTaskRow[]): Promise<void> {
    return giveBackClaimed(this.db, this.settings.workerId, tasks);
  }

  full(): boolean {
    return this.room.full;
  }

  roomMayHaveOpened(): void {
    this.room.opened();
  }

  private withinRoom<R extends { id: string }>(rows: CappedRow<R>[], mark: number): R[] {
    const claimed = rowsWithinCap(rows);
    this.room.note(rows[0]?.room ?? 0, claimed.length, mark);
    return claimed;
  }
}
