/**
 * A worker: claims tasks of its queues (Producer), runs them (Executor) and writes their outcomes (Completer).
 * It holds at most `concurrency` tasks at once, counting from claim until the outcome is written, so the rows
 * in CLAIMED or RUNNING for this worker never exceed its concurrency. It also hears cancel requests for its
 * running tasks (NOTIFY, with a poll as backstop) and runs the maintenance services.
 *
 * Shutdown order: stop claiming, let running handlers finish (up to `drainTimeoutMs`, then stop them), write
 * the last outcomes, stop maintenance, close the LISTEN connection.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { App } from '../client/App.js';
import { TaskListCancelRequested } from '../db/admin.js';
import { Listener, channels } from '../db/Listener.js';
import type { ClaimedTaskRow, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import { Expirer } from '../recovery/Expirer.js';
import { Maintainer } from '../recovery/Maintainer.js';
import { Retainer } from '../recovery/Retainer.js';
import { Completer } from './Completer.js';
import { resolveWorkerConfig } from './config.js';
import type { ResolvedWorkerConfig, WorkerConfig } from './config.js';
import { Executor } from './Executor.js';
import { Producer } from './Producer.js';
import { settlesWithin } from './timing.js';

/** Events a worker emits; tests and monitoring await them. */
export interface WorkerEvents {
  'task:claimed': [ids: string[]];
  'task:started': [id: string, attempt: number];
  /** A run ended; its outcome is queued for writing. */
  'task:ran': [id: string, status: TaskFinish['status']];
  /**
   * Outcomes were written: `finished` with the status each task got (PENDING for a retry); `lost` had been
   * superseded (reaped, cancelled before start), so nothing was written for them.
   */
  'task:finished': [finished: TaskFinishRow[], lost: string[]];
  'task:expired': [id: string];
  /** A cancel request reached a task running here; its handler's AbortSignal fired. */
  'task:cancelling': [id: string];
  'maintenance:ran': [service: string, result: unknown];
  'worker:error': [error: unknown];
  'worker:stopped': [];
}

type State = 'new' | 'running' | 'stopping' | 'stopped';

/** See the module comment. Create with `app.worker(config)`. */
export class Worker extends EventEmitter<WorkerEvents> {
  /** The validated config, with defaults applied. */
  readonly config: ResolvedWorkerConfig;
  private readonly logger: Logger;
  private readonly producer: Producer;
  private readonly executor: Executor;
  private readonly completer: Completer;
  private readonly listener: Listener;
  private readonly maintainer: Maintainer;
  private state: State = 'new';
  private held = 0;
  private stopping: Promise<void> | null = null;
  private readonly starts = new Set<Promise<void>>();
  private cancelPoll: NodeJS.Timeout | null = null;
  private readonly retryTimers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly app: App,
    config: WorkerConfig = {},
  ) {
    super();
    this.config = resolveWorkerConfig(config, app.config.queues);
    const { identity } = this.config;
    const db = app.db;
    this.logger = app.logger.child({ workerId: identity.workerId });
    this.producer = new Producer(
      db,
      {
        queues: this.config.queues,
        taskNames: [...app.tasks.keys()],
        maxClaimBatch: this.config.maxClaimBatch,
        pollIntervalMs: this.config.pollIntervalMs,
        leaseMs: this.config.claimLeaseMs,
        identity,
        refillThreshold: Math.max(1, Math.floor(this.config.maxClaimBatch / 2)),
      },
      {
        capacity: () => (this.state === 'running' ? this.config.concurrency - this.held : 0),
        idle: () => this.held === 0,
        onClaimed: (tasks) => this.onClaimed(tasks),
        onError: (error) => this.fail('claim failed', error),
      },
    );
    this.executor = new Executor(
      db,
      app.tasks,
      this.logger,
      { identity, abortGraceMs: this.config.abortGraceMs, appErrorCodes: app.config.errorCodes ?? [] },
      {
        onSkipped: (task, reason) => {
          if (reason === 'expired') this.emit('task:expired', task.id);
          this.release(1);
        },
        onStarted: (task, attempt) => this.emit('task:started', task.id, attempt),
        onFinished: (finish) => {
          this.emit('task:ran', finish.id, finish.status);
          this.completer.add(finish);
        },
      },
    );
    this.completer = new Completer(db, identity, this.config.completionBatchSize, {
      onSettled: (result, finishes) => this.onSettled(result, finishes),
      onError: (error) => this.fail('writing task outcomes failed', error),
    });
    this.listener = new Listener(db.connectionConfig);
    this.listener.on('notification', (channel, payload) => {
      if (channel === channels.taskCancel(db.schema)) this.cancel(payload.split(','));
      else this.producer.wake();
    });
    this.listener.on('reconnect', () => {
      this.producer.wake();
      void this.pollCancels();
    });
    this.listener.on('error', (error) =>
      this.logger.warn({ err: error }, 'LISTEN connection lost; reconnecting'),
    );
    const recovery = app.config.recovery;
    this.maintainer = new Maintainer(
      [
        new Expirer(db, {
          batchSize: recovery.retentionBatchSize,
          maxBatchesPerRun: recovery.retentionMaxBatchesPerRun,
        }),
        new Retainer(db, recovery),
      ],
      { checkIntervalMs: recovery.checkIntervalMs },
      this.logger,
    );
    this.maintainer.on('maintenance:ran', (service, result) => this.emit('maintenance:ran', service, result));
  }

  /** The worker's id, as recorded in `claimed_by_worker_id`. */
  get id(): string {
    return this.config.identity.workerId;
  }

  /** Tasks held now (claimed, running, or finished but not yet written). */
  get heldTasks(): number {
    return this.held;
  }

  /** Listens for new tasks and cancel requests, and starts claiming and maintenance. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`worker already ${this.state}`);
    this.state = 'running';
    const schema = this.app.db.schema;
    await Promise.all([
      ...this.config.queues.map((q) => this.listener.listen(channels.taskQueue(schema, q))),
      this.listener.listen(channels.taskCancel(schema)),
    ]);
    this.producer.start();
    if (this.config.maintenance) this.maintainer.start();
    this.cancelPoll = setInterval(() => void this.pollCancels(), this.config.pollIntervalMs);
    this.cancelPoll.unref();
    this.logger.info(
      { queues: this.config.queues, concurrency: this.config.concurrency, tasks: [...this.app.tasks.keys()] },
      'worker started',
    );
  }

  /** Stops claiming, drains running tasks, writes their outcomes. Idempotent; resolves when done. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  /** Runs one pass of every maintenance service now (tests, or a worker started with `maintenance: false`). */
  runMaintenance(): Promise<void> {
    return this.maintainer.runOnce();
  }

  private async shutdown(): Promise<void> {
    const wasRunning = this.state === 'running';
    this.state = 'stopping';
    if (this.cancelPoll) clearInterval(this.cancelPoll);
    for (const timer of this.retryTimers) clearTimeout(timer);
    if (wasRunning) {
      this.logger.info({ held: this.held }, 'worker stopping: no new claims, draining');
      await this.producer.stop();
      await Promise.allSettled([...this.starts]);
      if (!(await settlesWithin(this.executor.idle(), this.config.drainTimeoutMs))) {
        this.logger.warn({ running: this.executor.running }, 'drain timeout: stopping running handlers');
        this.executor.stopAll('shutdown');
        await this.executor.idle();
      }
      await this.completer.drain();
    }
    this.completer.stop();
    await this.maintainer.stop();
    await this.listener.stop();
    this.state = 'stopped';
    this.logger.info('worker stopped');
    this.emit('worker:stopped');
  }

  private cancel(ids: string[]): void {
    for (const id of ids) {
      if (this.executor.stop(id, 'cancel')) {
        this.logger.info({ taskId: id }, 'cancel requested: stopping the handler');
        this.emit('task:cancelling', id);
      }
    }
  }

  private async pollCancels(): Promise<void> {
    if (this.executor.running === 0 || this.state !== 'running') return;
    try {
      const rows = await this.app.db.run(TaskListCancelRequested, { workerId: this.id });
      this.cancel(rows.map((r) => r.id));
    } catch (error) {
      this.fail('cancel poll failed', error);
    }
  }

  private onClaimed(tasks: ClaimedTaskRow[]): void {
    this.held += tasks.length;
    this.emit(
      'task:claimed',
      tasks.map((t) => t.id),
    );
    const start = this.executor.startAll(tasks).catch((error: unknown) => {
      // The start statement failed: these tasks stay CLAIMED until recovery hands stale claims back to PENDING.
      this.fail('starting claimed tasks failed', error);
      this.release(tasks.length);
    });
    this.starts.add(start);
    void start.finally(() => this.starts.delete(start));
  }

  private onSettled(result: { finished: TaskFinishRow[]; lost: string[] }, finishes: TaskFinish[]): void {
    if (result.lost.length > 0) {
      this.logger.warn(
        { taskIds: result.lost },
        'outcomes of tasks whose claim was superseded; nothing written',
      );
    }
    this.emit('task:finished', result.finished, result.lost);
    this.scheduleRetryWakes(result.finished, finishes);
    this.release(finishes.length);
  }

  // A retry becomes claimable after its delay; wake up then rather than at the next poll. Other workers rely on
  // their poll (or their own retries' timers).
  private scheduleRetryWakes(written: TaskFinishRow[], finishes: TaskFinish[]): void {
    const retried = new Set(written.filter((r) => r.status === 'PENDING').map((r) => r.id));
    const delays = new Set(finishes.filter((f) => retried.has(f.id) && f.retryDelayMs > 0).map((f) => f.retryDelayMs));
    for (const delay of delays) {
      if (delay >= this.config.pollIntervalMs) continue;
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        this.producer.wake();
      }, delay + 5);
      this.retryTimers.add(timer);
    }
  }

  private release(count: number): void {
    this.held -= count;
    this.producer.wake(false);
  }

  private fail(what: string, error: unknown): void {
    this.logger.error({ err: error }, what);
    this.emit('worker:error', error);
  }
}
