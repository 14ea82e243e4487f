/**
 * A dedicated connection that LISTENs on a set of channels and reconnects with backoff when it drops. After a
 * reconnect it emits `reconnect`, because notifications sent while it was away are lost: consumers re-read.
 *
 * Channels are namespaced by schema: `<schema>:task_new`, `<schema>:task_queue_<queue>`, `<schema>:task_done`,
 * `<schema>:task_cancel`, `<schema>:task_progress`.
 */
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { quoteIdentifier } from './sql.js';

/** The channel names of one schema. */
export const channels = {
  taskNew: (schema: string): string => `${schema}:task_new`,
  taskQueue: (schema: string, queue: string): string => `${schema}:task_queue_${queue}`,
  taskDone: (schema: string): string => `${schema}:task_done`,
  taskCancel: (schema: string): string => `${schema}:task_cancel`,
  workflowDone: (schema: string): string => `${schema}:workflow_done`,
  /** Tasks handed to one idle worker by their sends (payload: the claim's row as JSON); `key` is the worker's. */
  handoff: (schema: string, key: string): string => `${schema}:handoff_${key}`,
  /** A running task reported progress (payload: its id). */
  taskProgress: (schema: string): string => `${schema}:task_progress`,
};

/** Events of a {@link Listener}. */
export interface ListenerEvents {
  notification: [channel: string, payload: string];
  /** The connection came back (after a drop); notifications in the gap are lost. */
  reconnect: [];
  /** A connection attempt or the connection failed; the listener keeps retrying. */
  error: [error: Error];
}

/** Settings of a {@link Listener}. */
export interface ListenerOptions {
  /** Smallest delay before reconnecting. Default 100 ms. */
  minBackoffMs?: number;
  /** Largest delay before reconnecting. Default 5,000 ms. */
  maxBackoffMs?: number;
  /**
   * A session-level advisory lock (a bigint, as a decimal string) each connection takes before it listens, held
   * while the connection lives: others tell by it that this listener is alive (a worker's hand-off registration).
   * A connection that finds it taken (the previous one's backend has not exited yet) counts as a failed attempt.
   */
  sessionLock?: string;
}

/** Keeps one LISTEN connection alive. */
export class Listener extends EventEmitter<ListenerEvents> {
  private client: pg.Client | null = null;
  private readonly channels = new Set<string>();
  private connecting: Promise<void> | null = null;
  private stopped = false;
  private failures = 0;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly sessionLock: string | null;

  constructor(
    private readonly config: pg.ClientConfig,
    options: ListenerOptions = {},
  ) {
    super();
    this.minBackoffMs = options.minBackoffMs ?? 100;
    this.maxBackoffMs = options.maxBackoffMs ?? 5_000;
    this.sessionLock = options.sessionLock ?? null;
  }

  /** True while a connection is up and listening. */
  get connected(): boolean {
    return this.client !== null;
  }

  /** Connects (if needed) and listens on `channel`. Resolves once LISTEN is in effect or the first try failed. */
  async listen(channel: string): Promise<void> {
    if (this.stopped) return;
    const fresh = !this.channels.has(channel);
    this.channels.add(channel);
    if (this.client && fresh) {
      await this.client
        .query(`LISTEN ${quoteIdentifier(channel)}`)
        .catch((e: Error) => this.fail(this.client, e));
      return;
    }
    await this.ensureConnected();
  }

  /** Closes the connection and stops reconnecting. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = null;
    if (client) await client.end().catch(() => undefined);
  }

  private ensureConnected(): Promise<void> {
    if (this.client || this.stopped) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      ...this.config,
      application_name: this.config.application_name ?? 'horsies:listen',
    });
    client.on('error', (e) => this.fail(client, e));
    client.on('end', () => this.fail(client, new Error('LISTEN connection ended')));
    client.on('notification', (msg) => this.emit('notification', msg.channel, msg.payload ?? ''));
    try {
      await client.connect();
      if (this.sessionLock !== null) {
        const { rows } = await client.query<{ locked: boolean }>(
          'SELECT pg_try_advisory_lock($1::bigint) AS locked',
          [this.sessionLock],
        );
        if (!rows[0]?.locked)
          throw new Error(`session lock ${this.sessionLock} is held by another connection`);
      }
      for (const channel of this.channels) await client.query(`LISTEN ${quoteIdentifier(channel)}`);
    } catch (error) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      this.scheduleReconnect(error as Error);
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    const wasFailing = this.failures > 0;
    this.failures = 0;
    if (wasFailing) this.emit('reconnect');
  }

  private fail(client: pg.Client | null, error: Error): void {
    if (client === null || client !== this.client) return;
    this.client = null;
    client.removeAllListeners('end');
    client.end().catch(() => undefined);
    this.scheduleReconnect(error);
  }

  private scheduleReconnect(error: Error): void {
    if (this.stopped) return;
    this.failures += 1;
    if (this.listenerCount('error') > 0) this.emit('error', error);
    const delay = Math.min(this.maxBackoffMs, this.minBackoffMs * 2 ** Math.min(this.failures - 1, 16));
    this.reconnectTimer = setTimeout(
      () => {
        this.reconnectTimer = null;
        void this.ensureConnected();
      },
      delay * (0.5 + Math.random() / 2),
    );
    this.reconnectTimer.unref();
  }
}
