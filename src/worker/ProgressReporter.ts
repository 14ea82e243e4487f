/**
 * `ctx.progress(value)` of one run: throttled writes of the latest value. The first report is written at once;
 * later ones within `intervalMs` of the last write replace each other, and the latest is written when the interval
 * is up. Writes go one at a time, in order. Before the run's outcome is handed over, {@link flush} writes what is
 * still pending, so the last value a handler reported is stored before its task ends. A write that fails is
 * logged and dropped: progress is for people watching, never a reason to fail a task.
 */
import type { Logger } from 'pino';
import { toCanonicalJson } from '../json.js';
import type { Database } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import { TaskProgressSet } from '../db/progress.js';
import { HorsiesError } from '../errors.js';

/** Largest progress value, in bytes of JSON. */
export const MAX_PROGRESS_BYTES = 16 * 1024;

/** Least time between two progress writes of one run. */
export const PROGRESS_INTERVAL_MS = 500;

/** Thrown by `ctx.progress()` for a value over {@link MAX_PROGRESS_BYTES}. */
export class ProgressTooLargeError extends HorsiesError {
  override name = 'ProgressTooLargeError';

  constructor(taskId: string, sizeBytes: number) {
    super(
      'PROGRESS_TOO_LARGE',
      `progress of task ${taskId} is ${sizeBytes} bytes as JSON, over the limit of ${MAX_PROGRESS_BYTES} bytes`,
    );
  }
}

/** The run a reporter writes for. */
export interface ProgressTarget {
  id: string;
  workerId: string;
  /** The claim token the run holds. */
  token: string;
}

/** Throttled progress of one run. */
export class ProgressReporter {
  private pending: string | null = null;
  private lastWriteAt = Number.NEGATIVE_INFINITY;
  private writing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly db: Database,
    private readonly target: ProgressTarget,
    private readonly logger: Logger,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
  ) {}

  /** Checks `value` (JSON, size) at once, throwing a typed error; then queues it. */
  report(value: unknown): void {
    this.reportJson(toCanonicalJson(value, 'progress'));
  }

  /** Queues a value already turned into JSON text (a blocking task's thread does that). */
  reportJson(json: string): void {
    const size = Buffer.byteLength(json);
    if (size > MAX_PROGRESS_BYTES) throw new ProgressTooLargeError(this.target.id, size);
    // A handler left running after its outcome was decided reports into the void.
    if (this.closed) return;
    this.pending = json;
    this.schedule();
  }

  /** Writes what is pending now and waits for every write; later reports are ignored. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    while (this.writing || this.pending !== null) {
      if (this.writing) await this.writing;
      else this.write();
    }
  }

  private schedule(): void {
    if (this.writing || this.timer) return;
    const wait = this.lastWriteAt + this.intervalMs - performance.now();
    if (wait <= 0) {
      this.write();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.writing) this.write();
    }, wait);
    this.timer.unref();
  }

  private write(): void {
    const value = this.pending;
    if (value === null) return;
    this.pending = null;
    this.lastWriteAt = performance.now();
    const { id, workerId, token } = this.target;
    this.writing = this.db
      .run(TaskProgressSet, {
        id,
        workerId,
        token,
        value,
        channel: channels.taskProgress(this.db.schema),
      })
      .then(
        () => undefined,
        (error: unknown) => this.logger.warn({ err: error, taskId: id }, 'writing progress failed; dropped'),
      )
      .finally(() => {
        this.writing = null;
        if (this.pending !== null && !this.closed) this.schedule();
      });
  }
}
