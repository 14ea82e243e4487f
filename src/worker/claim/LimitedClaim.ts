/**
 * The claim of a queue under flow control (FlowGuard holds the settings): a rate limiter (the queue's, or a task's
 * of it) or `maxConcurrencyPerGroup`. The claim (`horsies_claim_limited`) takes at most the room the limiters have
 * left, and with a group limit at most that many tasks of a group in flight; it starts the tasks it has reserved
 * slots for, locking the limiters' rows and recording those starts. A queue that also has a cap claims within the
 * cap's lock and starts nothing in its claim. Prefetched tasks of a rate-limited name start under their limiters
 * (`horsies_start_limited`): those the window has no room for wait for it; the others start as the cap, if any,
 * lets them.
 */
import type { Database } from '../../db/Database.js';
import type { ClaimAndStartRow, ClaimParams, ClaimedTaskRow } from '../../db/tasks.js';
import type { CapGuard } from '../CapGuard.js';
import type { FlowGuard } from '../FlowGuard.js';
import { CappedClaim } from './CappedClaim.js';
import { giveBackClaimed } from './ClaimStrategy.js';
import type { ClaimKind, ClaimStrategy, PrefetchedStart } from './ClaimStrategy.js';
import { allStarted, startTasks } from './PlainClaim.js';
import type { StrategySettings } from './PlainClaim.js';

/** Claims and starts of one queue under rate limiters or a group limit. */
export class LimitedClaim implements ClaimStrategy {
  readonly kind: ClaimKind = 'limited';
  readonly startsInClaim: boolean;
  readonly gatesStart: boolean;
  readonly writesAtOnce: boolean;
  /** The queue's cap, when it has one too. */
  private readonly capped: CappedClaim | null;

  constructor(
    private readonly db: Database,
    private readonly settings: StrategySettings,
    private readonly flow: FlowGuard,
    private readonly caps: CapGuard,
    private readonly queue: string,
  ) {
    this.capped = caps.applies(queue) ? new CappedClaim(db, settings, caps, queue, null) : null;
    this.startsInClaim = this.capped === null;
    this.gatesStart = this.capped?.gatesStart ?? false;
    this.writesAtOnce = this.capped !== null || flow.limitsGroups(queue);
  }

  async claim(params: ClaimParams, start: number): Promise<ClaimAndStartRow[]> {
    if (this.capped === null) return this.flow.claim(params, start);
    const room = this.capped.room;
    const mark = room.mark;
    const within = await this.caps.claimWithin(this.queue, params.limit, (on, limit) =>
      this.flow.claim({ ...params, limit }, 0, on),
    );
    room.note(within.room, within.rows.length, mark);
    return within.rows;
  }

  async startPrefetched(tasks: ClaimedTaskRow[]): Promise<PrefetchedStart[]> {
    const limited = tasks.filter((t) => this.flow.gatesStart(t.queue_name, t.task_name));
    const rest = limited.length === 0 ? tasks : tasks.filter((t) => !limited.includes(t));
    const results: PrefetchedStart[] = [];
    if (rest.length > 0) {
      results.push(
        ...(this.capped
          ? await this.capped.startPrefetched(rest)
          : [allStarted(rest, await startTasks(this.db, this.settings, rest))]),
      );
    }
    if (limited.length > 0) {
      for (const r of await this.flow.start(limited)) results.push({ ...r, waitsFor: 'window' });
    }
    return results;
  }

  giveBack(tasks: ClaimedTaskRow[]): Promise<void> {
    return giveBackClaimed(this.db, this.settings.workerId, tasks);
  }

  full(): boolean {
    return this.capped?.full() ?? false;
  }

  roomMayHaveOpened(): void {
    this.capped?.roomMayHaveOpened();
  }
}
