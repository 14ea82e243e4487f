/**
 * The handler slots of a worker that starts prefetched tasks in their claim (`startPrefetched`): such a task is
 * RUNNING from its claim on, and waits here, in claim order, until one of the `size` handlers returns. A task that
 * waits longer than `holdMs` is reported (`onHeldTooLong`), so that the worker hands it back to PENDING.
 */
export class HandlerSlots {
  private used = 0;
  /** Runs waiting for a slot, oldest first. */
  private readonly waiters: Waiter[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly size: number,
    /** Longest wait before `onHeldTooLong`; 0: never. */
    private readonly holdMs: number,
    private readonly onHeldTooLong: (ids: string[]) => void,
  ) {}

  /** Runs waiting for a slot. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Ids of the runs waiting for a slot, oldest first. */
  waitingIds(): string[] {
    return this.waiters.map((w) => w.id);
  }

  /**
   * Takes a slot for the run of task `id`: null when one was free (the run goes on at once, with no promise in
   * between), otherwise a promise that resolves when a slot is handed over to it.
   */
  take(id: string): Promise<void> | null {
    if (this.used < this.size) {
      this.used += 1;
      return null;
    }
    return new Promise((resolve) => {
      this.waiters.push({ id, since: Date.now(), resolve, reported: false });
      this.armHold();
    });
  }

  /** A run that held a slot ended: the slot goes to the oldest waiter, or is free. */
  release(): void {
    const next = this.waiters.shift();
    if (next) next.resolve();
    else this.used -= 1;
  }

  /**
   * A waiting run will not run (stopped while it waited). If its slot was handed over in the meantime (the two
   * crossed), the slot goes on to the next waiter.
   */
  withdraw(id: string): void {
    const at = this.waiters.findIndex((w) => w.id === id);
    if (at >= 0) this.waiters.splice(at, 1);
    else this.release();
  }

  // One timer, for the oldest waiter not yet reported: waiters join in order, so it is the next to pass holdMs.
  // Each is reported once; it leaves the line when its run is stopped.
  private armHold(): void {
    if (this.timer || this.holdMs <= 0) return;
    const next = this.waiters.find((w) => !w.reported);
    if (!next) return;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        const cutoff = Date.now() - this.holdMs;
        const stale = this.waiters.filter((w) => !w.reported && w.since <= cutoff);
        for (const w of stale) w.reported = true;
        if (stale.length > 0) this.onHeldTooLong(stale.map((w) => w.id));
        this.armHold();
      },
      Math.max(1, next.since + this.holdMs - Date.now()),
    );
    this.timer.unref?.();
  }

  /** Clears the hold timer (the worker stops). */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

interface Waiter {
  id: string;
  /** When it began to wait (ms, this process's clock). */
  since: number;
  resolve: () => void;
  /** Reported to `onHeldTooLong`. */
  reported: boolean;
}
