/**
 * The task_done notifications of a worker's written outcomes. They go out after the outcome's commit, never in it
 * (see `TaskDoneNotify`). A busy worker claims again within a fraction of a millisecond of most finishes, so the
 * claim carries them (`TaskClaimAndStart` with `notify`): one statement where there were two, for every batch.
 * What no claim takes within `carryMs` is sent in a statement of its own, so a result waiter waits at most that
 * much longer when the worker has nothing more to claim.
 */
import type { Database } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import { TaskDoneNotify } from '../db/tasks.js';
import type { DoneNotice } from '../db/tasks.js';

/** What {@link DoneNotices} calls back into. */
export interface DoneNoticesHooks {
  /** Sending notifications failed (result waiters find the outcomes at their poll). */
  onFailed(error: unknown): void;
}

/** Queues task_done notifications for the next claim, or sends them alone. */
export class DoneNotices {
  private queued: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly sending = new Set<Promise<void>>();
  private readonly channel: string;

  constructor(
    private readonly db: Database,
    private readonly carryMs: number,
    private readonly hooks: DoneNoticesHooks,
  ) {
    this.channel = channels.taskDone(db.schema);
  }

  /** Ids of tasks whose outcomes just committed. */
  add(ids: string[]): void {
    if (ids.length === 0) return;
    this.queued.push(...ids);
    this.timer ??= setTimeout(() => this.flush(), this.carryMs);
  }

  /** Takes what is queued, for a claim to send; undefined when nothing is. */
  take(): DoneNotice | undefined {
    if (this.queued.length === 0) return undefined;
    this.clearTimer();
    const ids = this.queued;
    this.queued = [];
    return { channel: this.channel, ids };
  }

  /** Notifications a claim took but did not send (its statement failed): sent now, alone. */
  giveBack(notice: DoneNotice): void {
    this.queued.push(...notice.ids);
    this.flush();
  }

  /** Sends what is queued now, in a statement of its own. */
  flush(): void {
    const notice = this.take();
    if (!notice) return;
    const sent = this.db
      .run(TaskDoneNotify, notice)
      .then(
        () => undefined,
        (error: unknown) => this.hooks.onFailed(error),
      )
      .finally(() => this.sending.delete(sent));
    this.sending.add(sent);
  }

  /** Sends what is queued and resolves when every notification has gone out (or failed). */
  async drain(): Promise<void> {
    this.flush();
    await Promise.all([...this.sending]);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
