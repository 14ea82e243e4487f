/**
 * A worker, assembled from services (see `assembly.ts` for the composition): the SlotLedger counts what it holds,
 * the Producer claims tasks of its queues (and takes those sends hand over) and starts them as slots free up, the
 * Executor runs them, the Completer writes their outcomes (then the finish hooks follow), the Heartbeater keeps the claims alive, the CancelWatcher stops
 * handlers whose task was cancelled, the StateReporter writes snapshots, and the MaintenanceLeader campaigns for
 * the maintenance leadership and, while elected, runs the services listed in `recovery/services.ts`. The finish hook
 * steps the workflows of written outcomes (`workflow/step.ts`), lending the step the worker's free slots while its
 * queues are dry: the nodes it makes ready start here at once (eager dispatch, `Producer.reserveForStep`).
 *
 * `concurrency` bounds running handlers; `prefetch` lets the worker hold that many more claimed tasks ready
 * (protected by their claim lease and claimer heartbeats), or with `'auto'` as many as its recent rate of ended runs
 * says it will start within `prefetchWindowMs`; what waits longer than `prefetchHoldMs` for a slot is handed back.
 * With `startPrefetched` (and `throughput: 'high'`) the tasks prefetched are started in their claim, RUNNING, and
 * wait in the executor for a handler slot. With `prefetch` 0 (the default) the tasks this worker has claimed or
 * running never exceed its concurrency (its RUNNING rows also count runs that ended and wait for their outcome to be
 * written: see `completionBatchSize`).
 *
 * Shutdown: stop claiming; hand tasks that have not run (claimed, or started ahead and waiting) back to PENDING at
 * once; apply each running task's shutdown policy (`continue` finishes within `drainTimeoutMs`, `resubmit` goes back
 * to PENDING, `stop` fails with WORKER_SHUTDOWN); resubmit what still runs at the drain timeout; write the last
 * outcomes; resign leadership; delete the worker's snapshots (it is gone, not stale).
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { channels } from '../db/Listener.js';
import { prepareSchema } from '../db/Migrator.js';
import type { HeartbeatRole } from '../db/liveness.js';
import type { EndedTaskRow, FinishHook, TaskFinish } from '../db/tasks.js';
import { checkAtStart, checkNotifyInBackground } from '../client/checks.js';
import { assemble } from './assembly.js';
import type { WorkerEvents, WorkerHost, WorkerParts } from './assembly.js';
import type { CompleterResult } from './Completer.js';
import { resolveWorkerConfig } from './config.js';
import type { ResolvedWorkerConfig, WorkerConfig } from './config.js';
import { settlesWithin } from './timing.js';
import type { DispatcherSignals } from './Dispatcher.js';
import type { ProducerSignals } from './Producer.js';
import { WorkflowStepper } from '../workflow/step.js';

export type { WorkerEvents, WorkerHost } from './assembly.js';

type State = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/** Creates a worker for an app's tasks (`createWorker(app, config)`). Call `start()` on it. */
export function createWorker(host: WorkerHost, config: WorkerConfig = {}): Worker {
  return new Worker(host, config);
}

/** See the module comment. Create with {@link createWorker}. */
export class Worker extends EventEmitter<WorkerEvents> {
  /** The validated config, with defaults applied. */
  readonly config: ResolvedWorkerConfig;
  private readonly logger: Logger;
  private readonly parts: WorkerParts;
  /** Follow each written batch of outcomes, in order, after it commits. */
  private readonly finishHooks: FinishHook[];
  private readonly workflows: WorkflowStepper;
  private readonly following = new Set<Promise<void>>();
  private state: State = 'new';
  private stopping: Promise<void> | null = null;
  private startAbort: AbortController | null = null;

  constructor(
    private readonly host: WorkerHost,
    config: WorkerConfig = {},
  ) {
    super();
    const blocking = [...host.tasks.values()].some((t) => t.policies.blocking);
    this.config = resolveWorkerConfig(config, host.config.queues, blocking);
    this.logger = host.logger.child({ workerId: this.config.identity.workerId });
    this.workflows = new WorkflowStepper(
      host.db,
      (workflowId, error) =>
        this.fail(`workflow ${workflowId}: step failed; the recovery pass will redo it`, error),
      host.workflows,
      {
        reserve: () => (this.state === 'running' ? this.parts.producer.reserveForStep() : null),
        started: (slots, rows) => this.parts.producer.stepStarted(slots, rows),
      },
      {
        take: () => this.parts.notices.take(),
        giveBack: (notice) => this.parts.notices.giveBack(notice),
      },
    );
    this.finishHooks = [(written) => this.workflows.add(written)];
    this.parts = assemble(host, this.config, this.logger, {
      emit: this.emit.bind(this),
      fail: (what, error) => this.fail(what, error),
      onLost: (role, ids) => this.onLost(role, ids),
      onSettled: (result, finishes) => this.onSettled(result, finishes),
      afterFinish: (written) => this.follow(written),
      finishAndStep: (finishes) => this.workflows.finishAndStep(finishes),
    });
  }

  /** The worker's id, as recorded in `claimed_by_worker_id`. */
  get id(): string {
    return this.config.identity.workerId;
  }

  /** Tasks held now (claimed, running, or finished but not yet written). */
  get heldTasks(): number {
    return this.parts.ledger.size;
  }

  /** Tasks held now that take a slot: claimed or running (at most `maxClaimPerWorker`). */
  get activeTasks(): number {
    return this.parts.ledger.busy;
  }

  /**
   * Points of the claim side a test can wait for, off unless the test enables them (see TestSignal).
   * @internal
   */
  get testSignals(): { producer: ProducerSignals; dispatcher: DispatcherSignals } {
    return { producer: this.parts.producer.signals, dispatcher: this.parts.producer.startSignals };
  }

  /** True while this worker runs maintenance for the cluster. */
  get isLeader(): boolean {
    return this.parts.leader.isLeader;
  }

  /**
   * Checks the database (waiting up to `startupTimeoutMs` for one that cannot be reached yet) and the schema's
   * migrations (applying them with `migrate`), listens for new tasks and cancel requests, then starts every
   * service. Rejects with `DatabaseUnavailableError`, `SchemaNotMigratedError` or `DatabaseNotConfiguredError`,
   * the worker then stopped.
   */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`worker already ${this.state}`);
    // The checks of `horsies check`: warnings logged, errors thrown before anything is claimed.
    checkAtStart(this.host, { drainTimeoutMs: this.config.drainTimeoutMs }, this.logger);
    this.state = 'starting';
    this.startAbort = new AbortController();
    try {
      await prepareSchema(this.host.db, {
        timeoutMs: this.config.startupTimeoutMs,
        migrate: this.config.migrate,
        signal: this.startAbort.signal,
        onRetry: (fault, delayMs) =>
          this.logger.warn({ reason: fault.reason, retryInMs: delayMs }, `${fault.message}; retrying`),
      });
    } catch (error) {
      const stoppedMeanwhile = this.startAbort.signal.aborted;
      await this.stop();
      if (stoppedMeanwhile) return;
      throw error;
    }
    if (this.state !== 'starting') return;
    this.state = 'running';
    const { listener, caps, producer, services } = this.parts;
    const handoff = producer.handoffChannel;
    const schema = this.host.db.schema;
    const capped = this.config.queues.some((q) => caps.applies(q));
    await Promise.all([
      ...this.config.queues.map((q) => listener.listen(channels.taskQueue(schema, q))),
      listener.listen(channels.taskCancel(schema)),
      ...(capped ? [listener.listen(channels.taskDone(schema))] : []),
      ...(handoff ? [listener.listen(handoff)] : []),
    ]);
    for (const service of services) service.start();
    checkNotifyInBackground(this.host.db, this.logger, () => this.state === 'running');
    this.logger.info(
      {
        queues: this.config.queues,
        concurrency: this.config.concurrency,
        tasks: [...this.host.tasks.keys()],
      },
      'worker started',
    );
  }

  /** Graceful shutdown (see the module comment). Idempotent; resolves when done. */
  stop(): Promise<void> {
    this.startAbort?.abort();
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  /** Runs one pass of every maintenance service now, leader or not (tests, operators). */
  runMaintenance(): Promise<void> {
    return this.parts.leader.runOnce();
  }

  /** Sends one heartbeat of a role now (tests). */
  async beat(role: HeartbeatRole): Promise<string[]> {
    return this.parts.heartbeater.runOnce(role);
  }

  private async shutdown(): Promise<void> {
    const { producer, ledger, completer, services, leader, reporter, listener, pool } = this.parts;
    const wasRunning = this.state === 'running';
    this.state = 'stopping';
    completer.hurry();
    if (wasRunning) {
      this.logger.info({ held: ledger.size }, 'worker stopping: no new claims');
      await producer.stop();
      // A step in flight may still start tasks here (eager dispatch): they run with the rest of the drain.
      await this.workflows.idle();
      await this.drain();
    }
    completer.stop();
    for (const service of services) await service.stop();
    await leader.stop();
    await Promise.allSettled([...this.following]);
    await this.workflows.idle();
    await listener.stop();
    await pool?.close();
    if (wasRunning) {
      await reporter.retire().catch((error: unknown) => {
        this.logger.warn({ err: error }, 'could not delete the worker snapshots; retention removes them');
      });
    }
    this.state = 'stopped';
    this.logger.info('worker stopped');
    this.emit('worker:stopped');
  }

  // Running handlers follow their shutdown policy within the drain timeout; then their outcomes are written.
  private async drain(): Promise<void> {
    const { executor, completer } = this.parts;
    // Tasks started ahead that have not run go back to PENDING, as claimed ones did.
    executor.releaseWaiting();
    executor.stopAll((definition) => {
      const policy = definition?.policies.shutdown ?? 'continue';
      return policy === 'resubmit' ? 'release' : policy === 'stop' ? 'shutdown' : null;
    });
    if (!(await settlesWithin(executor.idle(), this.config.drainTimeoutMs))) {
      this.logger.warn({ running: executor.running }, 'drain timeout: handing running tasks back to PENDING');
      executor.stopAll('release');
      await executor.idle();
    }
    // Bounded: with the database down, unwritten outcomes stay RUNNING rows that the reaper recovers.
    if (!(await settlesWithin(completer.drain(), this.config.drainTimeoutMs))) {
      this.logger.warn(
        { pending: completer.pending },
        'could not write every outcome before the drain timeout',
      );
    }
  }

  private onLost(role: HeartbeatRole, ids: string[]): void {
    const lost = this.parts.producer.takeLost(role, ids);
    if (lost.length === 0) return;
    this.logger.warn({ taskIds: lost, role }, 'claims lost to another worker or the reaper');
    this.emit('task:lost', lost);
    for (const id of lost) this.parts.executor.stop(id, 'lost');
  }

  private onSettled(result: CompleterResult, finishes: TaskFinish[]): void {
    if (result.lost.length > 0) {
      this.logger.warn(
        { taskIds: result.lost },
        'outcomes of tasks whose claim was superseded; nothing written',
      );
    }
    this.emit('task:finished', result.finished, result.lost);
    const retried = new Set(result.finished.filter((r) => r.status === 'PENDING').map((r) => r.id));
    for (const delay of new Set(finishes.filter((f) => retried.has(f.id)).map((f) => f.retryDelayMs))) {
      this.parts.producer.wakeAfter(delay);
    }
    this.parts.ledger.releaseFinished(finishes);
    if (result.finished.length > 0 && this.finishHooks.length > 0) {
      const follow = this.follow(result.finished);
      this.following.add(follow);
      void follow.finally(() => this.following.delete(follow));
    }
  }

  // A hook that fails leaves the outcome written; what it should have done is redone by recovery.
  private async follow(written: EndedTaskRow[]): Promise<void> {
    for (const hook of this.finishHooks) {
      try {
        await hook(written);
      } catch (error) {
        this.fail('a finish hook failed', error);
      }
    }
  }

  private fail(what: string, error: unknown): void {
    this.logger.error({ err: error }, what);
    this.emit('worker:error', error);
  }
}
