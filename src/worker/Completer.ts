/**
 * Writes finished tasks. Finishes queue up while a write is in flight and go out together in the next one, so a
 * busy worker sends one statement for many tasks and an idle one writes each finish at once. When finishes arrived
 * during a write (the worker is busy), the next write waits up to `delayMs` for more to join it, unless a full
 * batch waits, a drain does, or a finish that others wait for (see {@link add}): fewer, larger statements. When
 * `besideAt` finishes queue up behind a write in flight, a second write takes them on a connection of its own (at
 * most two at once): the writes, not the handlers, are then what holds the worker back. A failed write is retried
 * with backoff; a batch that a single bad row breaks is split so the others still land.
 */
import type { Database } from '../db/Database.js';
import { isTransientDatabaseError } from '../db/Database.js';
import { TaskFinishMany } from '../db/tasks.js';
import type { TaskFinish, TaskFinishRow } from '../db/tasks.js';
import type { DoneNotices } from './DoneNotices.js';
import { sleep } from './timing.js';

/** What one write did. */
export interface CompleterResult {
  /** Tasks written, with the status each got (PENDING for a retry). */
  finished: TaskFinishRow[];
  /** Ids whose claim was superseded (reaped, cancelled): nothing was written for them. */
  lost: string[];
}

/** What the completer calls back into. */
export interface CompleterHooks {
  /** Called after every write, with every finish it settled (written, lost or dropped). */
  onSettled(result: CompleterResult, finishes: TaskFinish[]): void;
  onError(error: unknown, finishes: TaskFinish[]): void;
}

/** Batches finishes for one worker. */
export class Completer {
  private buffer: TaskFinish[] = [];
  private flushing: Promise<void> | null = null;
  private idleWaiters: (() => void)[] = [];
  private stopped = false;
  /** The worker is stopping: writes no longer wait for more finishes. */
  private hurried = false;
  /** Queued finishes that must not wait for company (see {@link add}), by task id. */
  private readonly urgent = new Set<string>();
  /** Ends the wait of the next write for more finishes (null when no write waits). */
  private endDelay: (() => void) | null = null;
  /** The loop's write is in flight (not waiting for more finishes to join it). */
  private writing = false;
  /** The second write, beside the loop's (null when none is in flight). */
  private beside: Promise<void> | null = null;

  constructor(
    private readonly db: Database,
    private readonly batchSize: number,
    /** How long a write waits for more finishes when some arrived during the last one; 0: none. */
    private readonly delayMs: number,
    private readonly hooks: CompleterHooks,
    /** Where the task_done notifications of written outcomes go (the finish leaves them out of its commit). */
    private readonly notices: DoneNotices,
    /** Finishes queued behind the write in flight that start a second write beside it; null: never. */
    private readonly besideAt: number | null = null,
    /**
     * Writes a batch that ends workflow tasks with their workflows' step, in one transaction (the rows of stepped
     * nodes marked `stepped`); null: such a batch is written as any other and stepped after.
     */
    private readonly withStep: ((finishes: TaskFinish[]) => Promise<TaskFinishRow[]>) | null = null,
  ) {}

  /** Number of finishes not yet written. */
  get pending(): number {
    return this.buffer.length;
  }

  /**
   * Queues a finish for writing. `urgent`: others wait for it (its task holds room under a cap or a group limit
   * until its outcome is written), so its write does not wait for more finishes.
   */
  add(finish: TaskFinish, urgent = false): void {
    this.buffer.push(finish);
    if (urgent) this.urgent.add(finish.id);
    if (!this.flushing) this.flushing = this.flushLoop();
    else if (urgent || this.buffer.length >= this.batchSize) this.endDelay?.();
    if (
      this.writing &&
      this.beside === null &&
      this.besideAt !== null &&
      this.buffer.length >= this.besideAt
    ) {
      this.beside = this.writeBeside();
    }
  }

  /** Writes one batch now (up to `batchSize` queued finishes). */
  async runOnce(): Promise<CompleterResult> {
    const batch = this.buffer.splice(0, this.batchSize);
    if (batch.length === 0) return { finished: [], lost: [] };
    for (const finish of batch) this.urgent.delete(finish.id);
    const result = await this.write(batch);
    this.notices.add(result.finished.filter((r) => r.status !== 'PENDING').map((r) => r.id));
    this.hooks.onSettled(result, batch);
    return result;
  }

  /** Resolves when every queued finish is written (and its notifications sent). */
  async drain(): Promise<void> {
    if (this.flushing || this.beside || this.buffer.length > 0) {
      const idle = new Promise<void>((resolve) => this.idleWaiters.push(resolve));
      this.endDelay?.();
      await idle;
    }
    await this.notices.drain();
  }

  /** Writes from now on without waiting for more finishes to join (the worker is stopping). */
  hurry(): void {
    this.hurried = true;
    this.endDelay?.();
  }

  /** Stops retrying writes after the current one (the tasks stay RUNNING for the reaper). Idempotent. */
  stop(): void {
    this.stopped = true;
    this.hurry();
  }

  private async flushLoop(): Promise<void> {
    // Let finishes of the same tick join the first write.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.buffer.length > 0) {
      this.writing = true;
      try {
        await this.runOnce();
      } finally {
        this.writing = false;
      }
      if (this.buffer.length > 0) await this.delay();
    }
    this.flushing = null;
    this.settleIdle();
  }

  // The finishes queued behind the loop's write, written beside it.
  private async writeBeside(): Promise<void> {
    try {
      await this.runOnce();
    } catch (error) {
      this.hooks.onError(error, []);
    } finally {
      this.beside = null;
      this.settleIdle();
    }
  }

  // Wakes the drains once neither write is in flight (a finish queued meanwhile started the loop again).
  private settleIdle(): void {
    if (this.flushing || this.beside) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  // Finishes arrived during the write just made: let more join the next one, unless nothing should wait.
  private async delay(): Promise<void> {
    if (this.delayMs === 0 || this.hurried || this.idleWaiters.length > 0) return;
    if (this.buffer.length >= this.batchSize || this.urgent.size > 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.endDelay?.(), this.delayMs);
      this.endDelay = () => {
        clearTimeout(timer);
        this.endDelay = null;
        resolve();
      };
    });
  }

  private async write(batch: TaskFinish[]): Promise<CompleterResult> {
    for (let failures = 0; ; failures += 1) {
      try {
        const rows =
          this.withStep !== null && batch.some(endsNode)
            ? await this.withStep(batch)
            : await this.db.run(TaskFinishMany, { tasks: batch, notifyLater: true });
        const written = new Set(rows.map((r) => r.id));
        return { finished: rows, lost: batch.filter((f) => !written.has(f.id)).map((f) => f.id) };
      } catch (error) {
        this.hooks.onError(error, batch);
        if (!isTransientDatabaseError(error)) return this.writeOneByOne(batch);
        if (this.stopped && failures >= 3) return { finished: [], lost: [] };
        await sleep(Math.min(5_000, 50 * 2 ** Math.min(failures, 7)));
      }
    }
  }

  // A non-transient failure (a constraint violation, say) blames one row; write the others on their own.
  private async writeOneByOne(batch: TaskFinish[]): Promise<CompleterResult> {
    const result: CompleterResult = { finished: [], lost: [] };
    for (const finish of batch) {
      try {
        const rows = await this.db.run(TaskFinishMany, { tasks: [finish], notifyLater: true });
        if (rows.length > 0) result.finished.push(...rows);
        else result.lost.push(finish.id);
      } catch (error) {
        this.hooks.onError(error, [finish]);
      }
    }
    return result;
  }
}

/** A finish that ends its workflow node (unless a retry turns out to be past `good_until`). */
function endsNode(finish: TaskFinish): boolean {
  return (
    finish.workflowId != null &&
    (finish.status === 'COMPLETED' || finish.status === 'FAILED' || finish.status === 'CANCELLED')
  );
}
