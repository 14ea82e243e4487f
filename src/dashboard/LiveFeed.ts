/**
 * Pushes "something changed" to every open dashboard page over server-sent events. One LISTEN connection per
 * dashboard process, whatever the number of viewers: it is opened when the first page connects and closed when
 * the last one leaves. Notifications are coalesced (one event per `debounceMs` at most, however many tasks
 * finish), and a poll every `pollMs` sends an event anyway, for what sends no notification (a start, a pause, a
 * worker snapshot) and for notifications lost while the connection was down. Pages re-read what they show.
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { Database } from '../db/Database.js';
import { Listener, channels } from '../db/Listener.js';

/**
 * Why an event was sent: a notification; the poll; `listen`, the feed's LISTEN connection is up (pages re-read
 * what they show, since a change between their first read and that moment sent no notification they could hear);
 * `reconnect`, the same after the connection was lost.
 */
export type ChangeReason = 'notify' | 'poll' | 'listen' | 'reconnect';

/** The data of one `change` event. */
export interface ChangeEvent {
  reason: ChangeReason;
  /** Ids of tasks that finished since the last event (at most 100). */
  finished: string[];
  /** Queues that got new or returned PENDING tasks since the last event. */
  queues: string[];
  /** Ids of running tasks that reported progress since the last event (at most 100). */
  progress: string[];
}

/** Settings of a {@link LiveFeed}. */
export interface LiveFeedOptions {
  /** Least time between two notification-driven events. Default 250 ms. */
  debounceMs?: number;
  /** An event at least this often while pages are open. Default 5,000 ms. */
  pollMs?: number;
}

/** Events of a {@link LiveFeed}: `change` after each broadcast (tests wait on it). */
export interface LiveFeedEvents {
  change: [event: ChangeEvent, clients: number];
  listening: [];
}

/** See the module comment. */
export class LiveFeed extends EventEmitter<LiveFeedEvents> {
  private readonly clients = new Set<ServerResponse>();
  private listener: Listener | null = null;
  private debounceTimer: NodeJS.Timeout | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private finished = new Set<string>();
  private queues = new Set<string>();
  private progress = new Set<string>();
  private lastSent = 0;
  private stopped = false;
  private readonly debounceMs: number;
  private readonly pollMs: number;

  constructor(
    private readonly db: Database,
    options: LiveFeedOptions = {},
  ) {
    super();
    this.debounceMs = options.debounceMs ?? 250;
    this.pollMs = options.pollMs ?? 5_000;
  }

  /** Open event streams. */
  get clientCount(): number {
    return this.clients.size;
  }

  /** True while the LISTEN connection is up. */
  get listening(): boolean {
    return this.listener?.connected ?? false;
  }

  /** Turns `res` into an event stream until the client goes away. */
  attach(res: ServerResponse): void {
    if (this.stopped) {
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: 2000\n: connected\n\n`);
    this.clients.add(res);
    res.on('close', () => {
      this.clients.delete(res);
      if (this.clients.size === 0) this.idle();
    });
    if (this.clients.size === 1) this.wake();
  }

  /** Ends every stream and the LISTEN connection. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const res of this.clients) res.end();
    this.clients.clear();
    await this.idle();
  }

  private wake(): void {
    const listener = new Listener(this.db.listenConfig);
    this.listener = listener;
    listener.on('error', () => undefined);
    listener.on('notification', (channel, payload) => {
      if (channel === channels.taskDone(this.db.schema)) {
        for (const id of payload.split(',')) if (id && this.finished.size < 100) this.finished.add(id);
      } else if (channel === channels.taskProgress(this.db.schema)) {
        if (this.progress.size < 100) this.progress.add(payload);
      } else if (payload) {
        this.queues.add(payload);
      }
      this.schedule('notify');
    });
    listener.on('reconnect', () => this.schedule('reconnect'));
    void Promise.all([
      listener.listen(channels.taskNew(this.db.schema)),
      listener.listen(channels.taskDone(this.db.schema)),
      listener.listen(channels.taskProgress(this.db.schema)),
    ]).then(() => {
      if (this.listener !== listener || !listener.connected) return;
      this.schedule('listen');
      this.emit('listening');
    });
    this.pollTimer = setInterval(() => this.send('poll'), this.pollMs);
    this.pollTimer.unref();
  }

  private async idle(): Promise<void> {
    if (this.debounceTimer) clearTimeout(this.debounceTimer);
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.debounceTimer = null;
    this.pollTimer = null;
    const listener = this.listener;
    this.listener = null;
    await listener?.stop();
  }

  private schedule(reason: ChangeReason): void {
    if (this.debounceTimer) return;
    const wait = Math.max(0, this.lastSent + this.debounceMs - Date.now());
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = null;
      this.send(reason);
    }, wait);
  }

  private send(reason: ChangeReason): void {
    this.lastSent = Date.now();
    const event: ChangeEvent = {
      reason,
      finished: [...this.finished],
      queues: [...this.queues],
      progress: [...this.progress],
    };
    this.finished = new Set();
    this.queues = new Set();
    this.progress = new Set();
    const frame = `event: change\ndata: ${JSON.stringify(event)}\n\n`;
    for (const res of this.clients) res.write(frame);
    this.emit('change', event, this.clients.size);
  }
}
