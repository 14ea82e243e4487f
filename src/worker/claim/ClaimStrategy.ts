/**
 * How a worker claims and starts the tasks of one queue. Each queue gets one strategy, chosen once when the worker
 * is built ({@link claimStrategies}), from what meters the queue:
 *
 * - `plain` (PlainClaim.ts): nothing does. The claim starts the tasks it has reserved slots for in the same row update.
 * - `capped` (CappedClaim.ts): a cluster-wide cap or the queue's `maxConcurrency`. Claims count the room under the
 *   cap's lock; in soft mode the starts are gated by the cap instead.
 * - `limited` (LimitedClaim.ts): a rate limiter (the queue's or a task's) or `maxConcurrencyPerGroup`, within the
 *   caps when the queue has one too.
 *
 * Every start writes RUNNING through one routine, `horsies_start_rows`: the claims call it for the rows they lock,
 * and `horsies_start_tasks` for tasks claimed earlier (prefetched); the strategies differ only in what they count
 * around it.
 */
import type { Database } from '../../db/Database.js';
import { TaskReleaseClaimed } from '../../db/liveness.js';
import type { ClaimAndStartRow, ClaimParams, ClaimedTaskRow, TaskStartRow } from '../../db/tasks.js';

/** What meters a queue's claims and starts. */
export type ClaimKind = 'plain' | 'capped' | 'limited';

/** What a start of prefetched tasks did with one group of them. */
export interface PrefetchedStart {
  /** The tasks it tried to start, and their start rows (a task missing from `rows` was lost). */
  started: ClaimedTaskRow[];
  rows: TaskStartRow[];
  /** Tasks not started for want of room, still CLAIMED. */
  deferred: ClaimedTaskRow[];
  /**
   * What the deferred tasks wait for: `room` under a soft cap (a sign that it opened, or a retry that backs off),
   * or a rate limiter's window (`retryAt`, null when it gave none).
   */
  waitsFor: 'room' | 'window';
  retryAt: Date | null;
}

/** The claim side of one queue. */
export interface ClaimStrategy {
  readonly kind: ClaimKind;
  /**
   * The claim starts the tasks it takes for the slots reserved to it (its `start`); otherwise it is called with 0
   * and every task it takes starts through {@link startPrefetched}.
   */
  readonly startsInClaim: boolean;
  /** A soft cap gates the starts: a task waiting for its room is not handed back for want of a slot. */
  readonly gatesStart: boolean;
  /** A finish frees room others wait for (a cap, a group limit): its outcome is written at once. */
  readonly writesAtOnce: boolean;
  /** PENDING → CLAIMED for up to `params.limit` tasks, the first `start` of them RUNNING. Rows in claim order. */
  claim(params: ClaimParams, start: number): Promise<ClaimAndStartRow[]>;
  /** CLAIMED → RUNNING for tasks of this strategy's queues, as far as the room allows. */
  startPrefetched(tasks: ClaimedTaskRow[]): Promise<PrefetchedStart[]>;
  /** CLAIMED → PENDING (no attempt) for tasks this worker holds and will not start. */
  giveBack(tasks: ClaimedTaskRow[]): Promise<void>;
  /** True while the queue has no room left (its last claim took the last of it): claim passes leave it out. */
  full(): boolean;
  /** Room may have opened (a task finished here or elsewhere, or a poll): the next pass claims again. */
  roomMayHaveOpened(): void;
}

/** The strategies of a worker's queues. */
export interface ClaimStrategies {
  of(queue: string): ClaimStrategy;
  /** Each strategy once. */
  all(): ClaimStrategy[];
}

/** Hands claimed tasks back to PENDING, fenced on their claim: the give-back of every strategy. */
export async function giveBackClaimed(
  db: Database,
  workerId: string,
  tasks: ClaimedTaskRow[],
): Promise<void> {
  if (tasks.length === 0) return;
  await db.run(TaskReleaseClaimed, {
    workerId,
    tasks: tasks.map((t) => ({ id: t.id, token: t.claim_token })),
  });
}

/** Claim state of a queue under a cap: full once a claim took the last of the room it found. */
export class CapRoom {
  private isFull = false;
  /** Counts the signs that room may have opened: a claim counted before the latest one does not mark it full. */
  private signs = 0;

  /** The count to hand back to {@link note} after a claim sent now. */
  get mark(): number {
    return this.signs;
  }

  /**
   * A claim sent at `mark` found `room` and took `claimed`: one that took all the room it found (or found none)
   * leaves the queue full, unless a sign that room may have opened came while it ran.
   */
  note(room: number, claimed: number, mark: number): void {
    this.isFull = room <= claimed && mark === this.signs;
  }

  get full(): boolean {
    return this.isFull;
  }

  opened(): void {
    this.signs += 1;
    this.isFull = false;
  }
}

/** The rows a claim returned, sorted, with `status` kept for a claim that could not start any. */
export function claimedOnly(rows: ClaimedTaskRow[]): ClaimAndStartRow[] {
  return rows.map((r) => ({ ...r, status: 'CLAIMED' as const, started_at: null }));
}
