/**
 * A worker: claims tasks of its queues (Producer), runs them (Executor), writes their outcomes (Completer),
 * and keeps its claims alive (Heartbeater). It also hears cancel requests for its running tasks (NOTIFY, with a
 * poll as backstop), campaigns for the maintenance leadership (Elector) and, while leader, runs the reaper,
 * expiry and retention (Maintainer).
 *
 * The held tasks and their local phases (claimed, starting, running, finishing) live in the Dispatcher.
 *
 * `concurrency` bounds running handlers; `prefetch` lets the worker hold that many more claimed tasks ready
 * (protected by their claim lease and claimer heartbeats). With `prefetch` 0 (the default) the tasks in
 * CLAIMED or RUNNING for this worker never exceed its concurrency.
 *
 * Shutdown: stop claiming; hand claimed-but-not-started tasks back to PENDING at once; apply each running task's
 * shutdown policy (`continue` finishes within `drainTimeoutMs`, `resubmit` goes back to PENDING, `stop` fails with
 * WORKER_SHUTDOWN); resubmit what still runs at the drain timeout; write the last outcomes; resign leadership.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { App } from '../client/App.js';
import { TaskListCancelRequested } from '../db/admin.js';
import { Listener, channels } from '../db/Listener.js';
import type { HeartbeatRole } from '../db/liveness.js';
import type { ClaimedTaskRow, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import { Elector } from '../recovery/Elector.js';
import { Expirer } from '../recovery/Expirer.js';
import { Maintainer } from '../recovery/Maintainer.js';
import { Reaper } from '../recovery/Reaper.js';
import { Retainer } from '../recovery/Retainer.js';
import { Completer } from './Completer.js';
import { resolveWorkerConfig } from './config.js';
import type { ResolvedWorkerConfig, WorkerConfig } from './config.js';
import { Executor } from './Executor.js';
import { Heartbeater } from './Heartbeater.js';
import { CapGuard } from './CapGuard.js';
import { Dispatcher } from './Dispatcher.js';
import type { StartedWithClaim } from './Dispatcher.js';
import { Producer } from './Producer.js';
import { StateReporter } from './StateReporter.js';
import { ThreadPool } from './ThreadPool.js';
import { settlesWithin } from './timing.js';

/** Events a worker emits; tests and monitoring await them. */
export interface WorkerEvents {
  'task:claimed': [ids: string[]];
  'task:started': [id: string, attempt: number];
  /** A run ended; its outcome is queued for writing. */
  'task:ran': [id: string, status: TaskFinish['status']];
  /**
   * Outcomes were written: `finished` with the status each task got (PENDING for a retry or release); `lost` had
   * been superseded (reaped, cancelled), so nothing was written for them.
   */
  'task:finished': [finished: TaskFinishRow[], lost: string[]];
  'task:expired': [id: string];
  /** A cancel request reached a task running here; its handler's AbortSignal fired. */
  'task:cancelling': [id: string];
  /** Held tasks the database says this worker no longer owns. */
  'task:lost': [ids: string[]];
  'leader:elected': [];
  'leader:lost': [];
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
  private readonly heartbeater: Heartbeater;
  private readonly listener: Listener;
  private readonly elector: Elector;
  private readonly maintainer: Maintainer;
  private readonly reporter: StateReporter;
  private readonly pool: ThreadPool | null;
  private readonly caps: CapGuard;
  private readonly dispatcher: Dispatcher;
  private state: State = 'new';
  private stopping: Promise<void> | null = null;
  private cancelPoll: NodeJS.Timeout | null = null;
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private startedAt = new Date();

  constructor(
    private readonly app: App,
    config: WorkerConfig = {},
  ) {
    super();
    const blocking = [...app.tasks.values()].some((t) => t.policies.blocking);
    this.config = resolveWorkerConfig(config, app.config.queues, blocking);
    this.pool =
      blocking && this.config.appModule !== null
        ? new ThreadPool({
            appModule: this.config.appModule,
            exportName: this.config.appExport,
            size: this.config.blockingThreads,
          })
        : null;
    const { identity } = this.config;
    const db = app.db;
    const recovery = app.config.recovery;
    const queueCaps = new Map(
      [...app.config.queueConfigs.values()].flatMap((q) =>
        q.maxConcurrency === undefined ? [] : [[q.name, q.maxConcurrency] as const],
      ),
    );
    this.caps = new CapGuard(db, {
      clusterWideCap: app.config.clusterWideCap ?? null,
      mode: app.config.capMode,
      prefetchBuffer: app.config.prefetchBuffer,
      queueCaps,
    });
    this.logger = app.logger.child({ workerId: identity.workerId });
    this.producer = new Producer(
      db,
      {
        queues: this.config.queues,
        maxClaimBatch: this.config.maxClaimBatch,
        pollIntervalMs: this.config.pollIntervalMs,
        leaseMs: this.config.claimLeaseMs,
        identity,
        synchronousStarts: this.config.synchronousStarts,
        refillThreshold: Math.max(1, Math.floor(this.config.maxClaimBatch / 2)),
      },
      {
        capacity: () => (this.state === 'running' ? this.config.maxClaimPerWorker - this.dispatcher.size : 0),
        idle: () => this.dispatcher.size === 0,
        onClaimed: (tasks, started) => this.onClaimed(tasks, started),
        reserveStarts: (queue, max) => this.dispatcher.reserveStarts(queue, max),
        cancelReservation: (reserved) => this.dispatcher.cancelReservation(reserved),
        onError: (error) => this.fail('claim failed', error),
        claimableTaskNames: () => this.dispatcher.claimableTaskNames(),
      },
      this.caps,
    );
    this.executor = new Executor(
      db,
      app.tasks,
      this.logger,
      {
        identity,
        abortGraceMs: this.config.abortGraceMs,
        appErrorCodes: app.config.errorCodes ?? [],
        synchronousStarts: this.config.synchronousStarts,
      },
      {
        onSkipped: (task, reason) => {
          if (reason === 'expired') this.emit('task:expired', task.id);
          this.dispatcher.release([task.id]);
        },
        onStarted: (task, attempt) => {
          this.dispatcher.setPhase(task.id, 'running');
          this.emit('task:started', task.id, attempt);
        },
        onFinished: (finish) => {
          this.dispatcher.setPhase(finish.id, 'finishing');
          this.emit('task:ran', finish.id, finish.status);
          this.completer.add(finish);
          this.dispatcher.scheduleDispatch();
        },
      },
      this.pool,
    );
    this.dispatcher = new Dispatcher(
      db,
      this.executor,
      this.caps,
      app.tasks,
      {
        workerId: identity.workerId,
        concurrency: this.config.concurrency,
        retryMs: this.config.pollIntervalMs,
      },
      this.logger,
      {
        onReleased: () => this.producer.wake(false),
        onError: (what, error) => this.fail(what, error),
      },
    );
    this.completer = new Completer(db, this.config.completionBatchSize, {
      onSettled: (result, finishes) => this.onSettled(result, finishes),
      onError: (error) => this.fail('writing task outcomes failed', error),
    });
    this.heartbeater = new Heartbeater(
      db,
      {
        identity,
        claimerIntervalMs: recovery.claimerHeartbeatIntervalMs,
        runnerIntervalMs: recovery.runnerHeartbeatIntervalMs,
        leaseMs: this.config.claimLeaseMs,
        maxClaimAgeMs: this.config.maxClaimAgeMs,
      },
      {
        owned: (role) => this.dispatcher.owned(role),
        onLost: (role, ids) => this.onLost(role, ids),
        onError: (error) => this.fail('heartbeat failed', error),
      },
    );
    this.listener = new Listener(db.connectionConfig);
    this.listener.on('notification', (channel, payload) => {
      if (channel === channels.taskCancel(db.schema)) this.cancel(payload.split(','));
      else {
        // task_done (heard only when caps are set): room may have opened under a cap.
        if (channel === channels.taskDone(db.schema)) this.dispatcher.scheduleDispatch();
        this.producer.wake();
      }
    });
    this.listener.on('reconnect', () => {
      this.logger.info('LISTEN connection back');
      this.producer.wake();
      void this.pollCancels();
    });
    this.listener.on('error', (error) =>
      this.logger.warn({ err: error }, 'LISTEN connection lost; reconnecting'),
    );
    this.maintainer = new Maintainer(
      [
        new Reaper(db, recovery),
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
    this.elector = new Elector(
      db,
      { name: 'maintenance', candidateId: identity.workerId, ttlMs: recovery.checkIntervalMs },
      this.logger,
    );
    this.elector.on('leader:elected', () => {
      this.maintainer.start();
      this.emit('leader:elected');
    });
    this.elector.on('leader:lost', () => {
      void this.maintainer.stop();
      this.emit('leader:lost');
    });
    this.reporter = new StateReporter(
      db,
      this.config.snapshotIntervalMs,
      () => this.snapshot(),
      (error) => this.fail('worker snapshot failed', error),
    );
  }

  /** The worker's id, as recorded in `claimed_by_worker_id`. */
  get id(): string {
    return this.config.identity.workerId;
  }

  /** Tasks held now (claimed, running, or finished but not yet written). */
  get heldTasks(): number {
    return this.dispatcher.size;
  }

  /** True while this worker runs maintenance for the cluster. */
  get isLeader(): boolean {
    return this.elector.isLeader;
  }

  /** Listens for new tasks and cancel requests; starts claiming, heartbeats, snapshots and the election. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`worker already ${this.state}`);
    this.state = 'running';
    this.startedAt = new Date();
    const schema = this.app.db.schema;
    const capped = this.config.queues.some((q) => this.caps.applies(q));
    await Promise.all([
      ...this.config.queues.map((q) => this.listener.listen(channels.taskQueue(schema, q))),
      this.listener.listen(channels.taskCancel(schema)),
      ...(capped ? [this.listener.listen(channels.taskDone(schema))] : []),
    ]);
    this.producer.start();
    this.heartbeater.start();
    if (this.config.maintenance) this.elector.start();
    if (this.config.snapshotIntervalMs > 0) this.reporter.start();
    this.cancelPoll = setInterval(() => void this.pollCancels(), this.config.pollIntervalMs);
    this.cancelPoll.unref();
    this.logger.info(
      { queues: this.config.queues, concurrency: this.config.concurrency, tasks: [...this.app.tasks.keys()] },
      'worker started',
    );
  }

  /** Graceful shutdown (see the module comment). Idempotent; resolves when done. */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  /** Runs one pass of every maintenance service now, leader or not (tests, operators). */
  runMaintenance(): Promise<void> {
    return this.maintainer.runOnce();
  }

  /** Sends one heartbeat of a role now (tests). */
  async beat(role: HeartbeatRole): Promise<string[]> {
    return this.heartbeater.runOnce(role);
  }

  private async shutdown(): Promise<void> {
    const wasRunning = this.state === 'running';
    this.state = 'stopping';
    if (this.cancelPoll) clearInterval(this.cancelPoll);
    for (const timer of this.retryTimers) clearTimeout(timer);
    this.reporter.stop();
    if (wasRunning) {
      this.logger.info({ held: this.dispatcher.size }, 'worker stopping: no new claims');
      this.dispatcher.pause();
      await this.producer.stop();
      await this.dispatcher.stop();
      this.executor.stopAll((definition) => {
        const policy = definition?.policies.shutdown ?? 'continue';
        return policy === 'resubmit' ? 'release' : policy === 'stop' ? 'shutdown' : null;
      });
      if (!(await settlesWithin(this.executor.idle(), this.config.drainTimeoutMs))) {
        this.logger.warn(
          { running: this.executor.running },
          'drain timeout: handing running tasks back to PENDING',
        );
        this.executor.stopAll('release');
        await this.executor.idle();
      }
      // Bounded: with the database down, unwritten outcomes stay RUNNING rows that the reaper recovers.
      if (!(await settlesWithin(this.completer.drain(), this.config.drainTimeoutMs))) {
        this.logger.warn(
          { pending: this.completer.pending },
          'could not write every outcome before the drain timeout',
        );
      }
    }
    this.completer.stop();
    await this.heartbeater.stop();
    await this.elector.stop();
    await this.maintainer.stop();
    await this.listener.stop();
    await this.pool?.close();
    this.state = 'stopped';
    this.logger.info('worker stopped');
    this.emit('worker:stopped');
  }

  private onClaimed(tasks: ClaimedTaskRow[], started?: StartedWithClaim): void {
    this.emit(
      'task:claimed',
      tasks.map((t) => t.id),
    );
    this.dispatcher.add(tasks, started);
  }

  private onLost(role: HeartbeatRole, ids: string[]): void {
    const lost = this.dispatcher.takeLost(role, ids);
    if (lost.length === 0) return;
    this.logger.warn({ taskIds: lost, role }, 'claims lost to another worker or the reaper');
    this.emit('task:lost', lost);
    for (const id of lost) this.executor.stop(id, 'lost');
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

  private onSettled(result: { finished: TaskFinishRow[]; lost: string[] }, finishes: TaskFinish[]): void {
    if (result.lost.length > 0) {
      this.logger.warn(
        { taskIds: result.lost },
        'outcomes of tasks whose claim was superseded; nothing written',
      );
    }
    this.emit('task:finished', result.finished, result.lost);
    this.scheduleRetryWakes(result.finished, finishes);
    this.dispatcher.release(finishes.map((f) => f.id));
  }

  // A retry becomes claimable after its delay; wake up then rather than at the next poll. Other workers rely on
  // their poll (or their own retries' timers).
  private scheduleRetryWakes(written: TaskFinishRow[], finishes: TaskFinish[]): void {
    const retried = new Set(written.filter((r) => r.status === 'PENDING').map((r) => r.id));
    const delays = new Set(
      finishes.filter((f) => retried.has(f.id) && f.retryDelayMs > 0).map((f) => f.retryDelayMs),
    );
    for (const delay of delays) {
      if (delay >= this.config.pollIntervalMs) continue;
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        this.producer.wake();
      }, delay + 5);
      this.retryTimers.add(timer);
    }
  }

  private snapshot() {
    const counts = this.dispatcher.counts();
    return {
      worker: this.config.identity,
      processes: 1,
      queues: this.config.queues,
      tasksRunning: counts.running,
      tasksClaimed: counts.claimed,
      maxClaimBatch: this.config.maxClaimBatch,
      maxClaimPerWorker: this.config.maxClaimPerWorker,
      clusterWideCap: this.app.config.clusterWideCap ?? null,
      queuePriorities: Object.fromEntries(
        this.config.queues.map((q) => [q, this.app.config.queueConfigs.get(q)?.priority ?? 100]),
      ),
      queueMaxConcurrency: Object.fromEntries(
        this.config.queues.map((q) => [q, this.app.config.queueConfigs.get(q)?.maxConcurrency ?? null]),
      ),
      recoveryConfig: {
        ...this.app.config.recovery,
        capMode: this.app.config.capMode,
        prefetchBuffer: this.app.config.prefetchBuffer,
        prefetch: this.config.prefetch,
        concurrency: this.config.concurrency,
      },
      workerStartedAt: this.startedAt,
      taskNames: [...this.app.tasks.keys()],
    };
  }

  private fail(what: string, error: unknown): void {
    this.logger.error({ err: error }, what);
    this.emit('worker:error', error);
  }
}
