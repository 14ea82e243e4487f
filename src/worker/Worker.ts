/**
 * A worker: claims tasks of its queues (Producer), runs them (Executor) and writes their outcomes (Completer).
 * It holds at most `concurrency` tasks at once, counting from claim until the finish is written, so the rows
 * in CLAIMED or RUNNING for this worker never exceed its concurrency.
 *
 * Shutdown order: stop claiming, let running handlers finish (up to `drainTimeoutMs`, then abort them), write
 * the last finishes, close the LISTEN connection.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { App } from '../client/App.js';
import { Listener, channels } from '../db/Listener.js';
import type { ClaimedTaskRow, TaskFinish } from '../db/tasks.js';
import { Completer } from './Completer.js';
import { resolveWorkerConfig } from './config.js';
import type { ResolvedWorkerConfig, WorkerConfig } from './config.js';
import { Executor } from './Executor.js';
import { Producer } from './Producer.js';

/** Events a worker emits; tests and monitoring await them. */
export interface WorkerEvents {
  'task:claimed': [ids: string[]];
  'task:started': [id: string, attempt: number];
  /** A handler returned; its finish is queued for writing. */
  'task:ran': [id: string, status: 'COMPLETED' | 'FAILED'];
  /** Finishes were written: `finished` landed, `lost` had been superseded (a late finisher, which changes nothing). */
  'task:finished': [finished: string[], lost: string[]];
  'task:expired': [id: string];
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
  private state: State = 'new';
  private held = 0;
  private stopping: Promise<void> | null = null;
  private starts = new Set<Promise<void>>();

  constructor(
    private readonly app: App,
    config: WorkerConfig = {},
  ) {
    super();
    this.config = resolveWorkerConfig(config, app.config.queues);
    const { identity } = this.config;
    this.logger = app.logger.child({ workerId: identity.workerId });
    this.producer = new Producer(
      app.db,
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
    this.executor = new Executor(app.db, identity, app.tasks, this.logger, {
      onSkipped: (task, reason) => {
        if (reason === 'expired') this.emit('task:expired', task.id);
        this.release(1);
      },
      onStarted: (task, attempt) => this.emit('task:started', task.id, attempt),
      onFinished: (finish) => {
        this.emit('task:ran', finish.id, finish.status);
        this.completer.add(finish);
      },
    });
    this.completer = new Completer(app.db, identity, this.config.completionBatchSize, {
      onSettled: (result, finishes) => this.onSettled(result, finishes),
      onError: (error) => this.fail('writing finished tasks failed', error),
    });
    this.listener = new Listener(app.db.connectionConfig);
    this.listener.on('notification', () => this.producer.wake());
    this.listener.on('reconnect', () => this.producer.wake());
    this.listener.on('error', (error) =>
      this.logger.warn({ err: error }, 'LISTEN connection lost; reconnecting'),
    );
  }

  /** The worker's id, as recorded in `claimed_by_worker_id`. */
  get id(): string {
    return this.config.identity.workerId;
  }

  /** Tasks held now (claimed, running, or finished but not yet written). */
  get heldTasks(): number {
    return this.held;
  }

  /** Listens for new tasks and starts claiming. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`worker already ${this.state}`);
    this.state = 'running';
    await Promise.all(
      this.config.queues.map((q) => this.listener.listen(channels.taskQueue(this.app.db.schema, q))),
    );
    this.producer.start();
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

  private async shutdown(): Promise<void> {
    const wasRunning = this.state === 'running';
    this.state = 'stopping';
    if (wasRunning) {
      this.logger.info({ held: this.held }, 'worker stopping: no new claims, draining');
      await this.producer.stop();
      await Promise.allSettled([...this.starts]);
      const drained = await withTimeout(this.executor.idle(), this.config.drainTimeoutMs);
      if (!drained) {
        this.logger.warn({ running: this.executor.running }, 'drain timeout: aborting running handlers');
        this.executor.abortAll('worker shutdown');
        await withTimeout(this.executor.idle(), 5_000);
      }
      await this.completer.drain();
    }
    this.completer.stop();
    await this.listener.stop();
    this.state = 'stopped';
    this.logger.info('worker stopped');
    this.emit('worker:stopped');
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

  private onSettled(result: { finished: string[]; lost: string[] }, finishes: TaskFinish[]): void {
    if (result.lost.length > 0) {
      this.logger.warn(
        { taskIds: result.lost },
        'finished tasks whose claim was superseded; nothing written',
      );
    }
    this.emit('task:finished', result.finished, result.lost);
    this.release(finishes.length);
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

async function withTimeout(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
