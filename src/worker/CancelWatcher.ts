/**
 * Hears cancel requests for the tasks running in this worker and stops their handlers (AbortSignal). A request
 * arrives as a notification on the schema's cancel channel; a poll of the worker's RUNNING tasks with a request
 * covers a lost notification or a LISTEN reconnect.
 */
import { TaskListCancelRequested } from '../db/admin.js';
import type { Database } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import type { Listener } from '../db/Listener.js';

/** Settings of a {@link CancelWatcher}. */
export interface CancelWatcherOptions {
  workerId: string;
  /** How often to poll for requests while tasks run here. */
  pollIntervalMs: number;
}

/** What the cancel watcher calls back into. */
export interface CancelWatcherHooks {
  /** Handlers running here now. */
  running(): number;
  /** Stops a running handler; false if it does not run here. */
  cancel(taskId: string): boolean;
  onError(error: unknown): void;
}

/** Stops the handlers of tasks whose cancel was requested. */
export class CancelWatcher {
  private timer: NodeJS.Timeout | null = null;
  private readonly channel: string;

  constructor(
    private readonly db: Database,
    private readonly listener: Listener,
    private readonly options: CancelWatcherOptions,
    private readonly hooks: CancelWatcherHooks,
  ) {
    this.channel = channels.taskCancel(db.schema);
    listener.on('notification', (channel, payload) => {
      if (channel === this.channel) this.cancel(payload.split(','));
    });
    listener.on('reconnect', () => void this.poll());
  }

  /** The channel to LISTEN on. */
  get channels(): string[] {
    return [this.channel];
  }

  /** One poll: stops every handler here whose task has a cancel request. Resolves to the ids stopped. */
  async runOnce(): Promise<string[]> {
    if (this.hooks.running() === 0) return [];
    const rows = await this.db.run(TaskListCancelRequested, { workerId: this.options.workerId });
    return this.cancel(rows.map((r) => r.id));
  }

  /** Polls every `pollIntervalMs`. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.poll(), this.options.pollIntervalMs);
    this.timer.unref();
  }

  /** Stops polling (notifications are ignored once the listener stops). Idempotent. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async poll(): Promise<void> {
    if (!this.timer) return;
    await this.runOnce().catch((error: unknown) => this.hooks.onError(error));
  }

  private cancel(ids: string[]): string[] {
    return ids.filter((id) => this.timer !== null && this.hooks.cancel(id));
  }
}
