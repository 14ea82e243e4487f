/**
 * Resolves `handle.result()` calls. One LISTEN on the source's channel (`task_done` for tasks) serves every
 * waiter of the app; a notification only says which ids finished, so the rows are always re-read (in one batch)
 * before a waiter resolves. A poll covers lost notifications, reconnects and PgBouncer in transaction mode, where
 * LISTEN does not work.
 */
import type { Database } from '../db/Database.js';
import { Listener, channels } from '../db/Listener.js';
import { TaskGetOutcomes } from '../db/tasks.js';
import { WorkflowGetOutcomes } from '../db/workflows.js';
import { TaskError } from '../errors.js';
import type { TaskResult } from '../errors.js';
import { decodeOutcome } from '../outcome.js';

interface Waiter {
  resolve: (result: TaskResult<unknown>) => void;
  timer: NodeJS.Timeout | null;
}

/** What a {@link ResultWaiter} waits on: tasks, or other things that finish (workflows). */
export interface OutcomeSource {
  /** The channel whose notifications carry the ids that finished, or left a claim for PENDING (comma-separated). */
  channel(schema: string): string;
  /** The outcomes of these ids: null for one not finished yet; an id missing from the map does not exist. */
  read(db: Database, ids: string[]): Promise<Map<string, TaskResult<unknown> | null>>;
  /** The outcome of an id that does not exist. */
  notFound(id: string): TaskError;
}

/** Outcomes of tasks. */
export const taskOutcomes: OutcomeSource = {
  channel: channels.taskDone,
  async read(db, ids) {
    const rows = await db.run(TaskGetOutcomes, { ids });
    return new Map(rows.map((row) => [row.id, decodeOutcome(row)]));
  },
  notFound: (id) => new TaskError('TASK_NOT_FOUND', `no task with id ${id}`),
};

/** Outcomes of workflow runs; a run that is not COMPLETED, FAILED or CANCELLED has none yet. */
export const workflowOutcomes: OutcomeSource = {
  channel: channels.workflowDone,
  async read(db, ids) {
    const rows = await db.run(WorkflowGetOutcomes, { ids });
    return new Map(
      rows.map((row) => [
        row.id,
        row.status === 'COMPLETED' || row.status === 'FAILED' || row.status === 'CANCELLED'
          ? decodeOutcome({
              status: row.status,
              result: row.result,
              error_code: row.error_code,
              failed_reason: null,
            })
          : null,
      ]),
    );
  },
  notFound: (id) => new TaskError('WORKFLOW_NOT_FOUND', `no workflow with id ${id}`),
};

/** Settings of a {@link ResultWaiter}. */
export interface ResultWaiterOptions {
  /** How often every awaited task is re-read even without a notification. */
  pollIntervalMs: number;
}

/** Shared by all handles of one app. */
export class ResultWaiter {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private listener: Listener | null = null;
  private pollTimer: NodeJS.Timeout | null = null;
  private readonly dirty = new Set<string>();
  private checkScheduled = false;
  private stopped = false;

  constructor(
    private readonly db: Database,
    private readonly options: ResultWaiterOptions,
    private readonly source: OutcomeSource = taskOutcomes,
  ) {}

  /** Waits for an id to reach a terminal status; resolves `WAIT_TIMEOUT` after `timeoutMs`. */
  async wait<T>(id: string, timeoutMs?: number): Promise<TaskResult<T>> {
    if (this.stopped) throw new Error('the app is closed');
    const promise = new Promise<TaskResult<unknown>>((resolve) => {
      const waiter: Waiter = { resolve, timer: null };
      if (timeoutMs !== undefined && Number.isFinite(timeoutMs)) {
        waiter.timer = setTimeout(
          () =>
            this.settle(id, waiter, {
              ok: false,
              error: new TaskError('WAIT_TIMEOUT', `${id} did not finish within ${timeoutMs} ms`),
            }),
          Math.max(0, timeoutMs),
        );
      }
      let set = this.waiters.get(id);
      if (!set) this.waiters.set(id, (set = new Set()));
      set.add(waiter);
    });
    // LISTEN first, then read: a task that finishes in between is seen by one or the other.
    await this.ensureListening();
    this.startPolling();
    this.markDirty([id]);
    return promise as Promise<TaskResult<T>>;
  }

  /** Stops listening and polling; pending waiters resolve `WAIT_TIMEOUT`. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
    for (const [id, set] of this.waiters) {
      for (const waiter of set) {
        this.settle(id, waiter, { ok: false, error: new TaskError('WAIT_TIMEOUT', 'the app was closed') });
      }
    }
    await this.listener?.stop();
  }

  private async ensureListening(): Promise<void> {
    if (!this.listener) {
      this.listener = new Listener(this.db.listenConfig);
      this.listener.on('notification', (_channel, payload) => this.markDirty(payload.split(',')));
      this.listener.on('reconnect', () => this.markDirty([...this.waiters.keys()]));
      this.listener.on('error', () => undefined);
    }
    await this.listener.listen(this.source.channel(this.db.schema));
  }

  private startPolling(): void {
    if (this.pollTimer) return;
    this.pollTimer = setInterval(() => this.markDirty([...this.waiters.keys()]), this.options.pollIntervalMs);
    this.pollTimer.unref();
  }

  private markDirty(ids: string[]): void {
    for (const id of ids) if (this.waiters.has(id)) this.dirty.add(id);
    if (this.dirty.size === 0 || this.checkScheduled) return;
    this.checkScheduled = true;
    setImmediate(() => {
      this.checkScheduled = false;
      const batch = [...this.dirty];
      this.dirty.clear();
      this.check(batch).catch(() => {
        // A failed read is retried by the next poll.
      });
    });
  }

  private async check(ids: string[]): Promise<void> {
    if (ids.length === 0 || this.stopped) return;
    const outcomes = await this.source.read(this.db, ids);
    for (const id of ids) {
      const outcome = outcomes.get(id);
      if (outcome === undefined) this.settleAll(id, { ok: false, error: this.source.notFound(id) });
      else if (outcome) this.settleAll(id, outcome);
    }
  }

  private settleAll(id: string, result: TaskResult<unknown>): void {
    for (const waiter of this.waiters.get(id) ?? []) this.settle(id, waiter, result);
  }

  private settle(id: string, waiter: Waiter, result: TaskResult<unknown>): void {
    const set = this.waiters.get(id);
    if (!set?.delete(waiter)) return;
    if (waiter.timer) clearTimeout(waiter.timer);
    if (set.size === 0) this.waiters.delete(id);
    if (this.waiters.size === 0 && this.pollTimer) {
      clearInterval(this.pollTimer);
      this.pollTimer = null;
    }
    waiter.resolve(result);
  }
}
