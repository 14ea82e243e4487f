/**
 * Hears cancel requests for the tasks running in this worker and stops their handlers (AbortSignal). A request
 * arrives as a notification on the schema's cancel channel; a poll of the worker's RUNNING tasks with a request
 * covers a lost notification or a LISTEN reconnect.
 */
import { TaskListCancelRequested } from '../db/admin.js';
import type { Database } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import type { Listener } from '../db/Listener.js';
import type { Logger } from 'pino';
import type { Executor } from './Executor.js';
import type { WorkerSink } from './events.js';

/** Settings of a {@link CancelWatcher}. */
export interface CancelWatcherOptions {
  workerId: string;
  /** How often to poll for requests while tasks run here. */
  pollIntervalMs: number;
}

/** Stops the handlers of tasks whose cancel was requested. */
export class CancelWatcher {
  private timer: NodeJS.Timeout | null = null;
  private readonly channel: string;

  constructor(
    private readonly db: Database,
    private readonly listener: Listener,
    private readonly options: CancelWatcherOptions,
    /** The handlers it stops. */
    private readonly executor: Pick<Executor, 'running' | 'stop'>,
    private readonly sink: Pick<WorkerSink, 'emit' | 'fail'>,
    private readonly logger: Logger,
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
    if (this.executor.running === 0) return [];
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
    await this.runOnce().catch((error: unknown) => this.sink.fail('cancel poll failed', error));
  }

  // Stops the handlers of those of `ids` that run here; returns their ids.
  private cancel(ids: string[]): string[] {
    return ids.filter((id) => this.timer !== null && this.stopHandler(id));
  }

  private stopHandler(id: string): boolean {
    if (!this.executor.stop(id, 'cancel')) return false;
    this.logger.info({ taskId: id }, 'cancel requested: stopping the handler');
    this.sink.emit('task:cancelling', id);
    return true;
  }
}
