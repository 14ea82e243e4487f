/**
 * Builds a worker's parts and wires them to each other: what each service calls back into, and which of those
 * calls reach the worker itself (its events, its state, its finish hooks). The worker owns the lifecycle; this
 * module owns the wiring.
 */
import type { EventEmitter } from 'node:events';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type { ResolvedAppConfig } from '../client/config.js';
import type { TaskDefinition } from '../client/TaskDefinition.js';
import type { Database } from '../db/Database.js';
import { Listener, channels } from '../db/Listener.js';
import type { HeartbeatRole } from '../db/liveness.js';
import type { ClaimedTaskRow, FinishHook, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import { MaintenanceLeader } from '../recovery/MaintenanceLeader.js';
import { maintenanceServices, vacuumLoop } from '../recovery/services.js';
import { CancelWatcher } from './CancelWatcher.js';
import { CapGuard } from './CapGuard.js';
import { claimStrategies } from './claim/strategies.js';
import { Completer } from './Completer.js';
import type { CompleterResult } from './Completer.js';
import type { ResolvedWorkerConfig } from './config.js';
import { Dispatcher } from './Dispatcher.js';
import type { StartedWithClaim } from './Dispatcher.js';
import { DoneNotices } from './DoneNotices.js';
import { PrefetchSizer } from './PrefetchSizer.js';
import { Executor } from './Executor.js';
import { FlowGuard } from './FlowGuard.js';
import { Handoff } from './Handoff.js';
import { Heartbeater } from './Heartbeater.js';
import { Producer } from './Producer.js';
import { StateReporter } from './StateReporter.js';
import type { HorsiesMetrics } from '../metrics/Metrics.js';
import { RunMetrics } from '../metrics/RunMetrics.js';
import type { TaskTracer } from '../tracing/TaskTracer.js';
import { ThreadPool } from './ThreadPool.js';
import { TransactionalFinish } from './TransactionalFinish.js';
import { Scheduler } from '../scheduler/Scheduler.js';
import type { ScheduleConfig } from '../scheduler/declare.js';
import type { ChildWorkflows } from '../workflow/step.js';

/**
 * Outcomes queued behind the write in flight that start a second write beside it. At throughput 'high' the one
 * write of a busy worker was in flight about nine tenths of a drain, and a second one made the drain 1.15x to 1.3x
 * faster (`profile:drain`, docs/benchmarks.md); a worker whose writes keep up never queues this many.
 */
const COMPLETION_BESIDE_AT = 150;

/** What a worker needs of the app it runs: an `App` is one. */
export interface WorkerHost {
  readonly db: Database;
  readonly logger: Logger;
  readonly tasks: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>;
  readonly config: Pick<
    ResolvedAppConfig,
    'queues' | 'queueConfigs' | 'clusterWideCap' | 'capMode' | 'prefetchBuffer' | 'recovery' | 'errorCodes'
  >;
  /** Recurring tasks the maintenance leader sends. Default: none. */
  readonly schedules?: readonly ScheduleConfig[];
  /** Metrics to count runs and maintenance in (the app's). Default: none. */
  readonly metrics?: HorsiesMetrics | null;
  /** Spans for runs (the app's tracer). Default: none. */
  readonly tracer?: TaskTracer | null;
  /** Workflows that subworkflow nodes start, by name (an app's registry). Default: none. */
  readonly workflows?: ChildWorkflows;
}

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

/** A background loop of the worker, started after its LISTEN channels are up. */
export interface WorkerService {
  start(): void;
  stop(): Promise<void> | void;
}

/** What the parts call back into on the worker. */
export interface WorkerSink {
  /** True while the worker takes new work. */
  accepting(): boolean;
  emit: EventEmitter<WorkerEvents>['emit'];
  fail(what: string, error: unknown): void;
  /** Heartbeats of `role` found these held tasks owned elsewhere now. */
  onLost(role: HeartbeatRole, ids: string[]): void;
  /** A cancel request for a task; true if it runs here and was asked to stop. */
  cancel(id: string): boolean;
  /** A batch of outcomes was written (or found superseded). */
  onSettled(result: CompleterResult, finishes: TaskFinish[]): void;
  /** Follows outcomes written by maintenance (the reaper), as the worker's own. */
  afterFinish: FinishHook;
}

/** The parts of one worker. */
export interface WorkerParts {
  caps: CapGuard;
  producer: Producer;
  dispatcher: Dispatcher;
  executor: Executor;
  completer: Completer;
  heartbeater: Heartbeater;
  listener: Listener;
  /** Sends hand tasks to this worker while it is idle (`handoff`); null when it does not take them. */
  handoff: Handoff | null;
  leader: MaintenanceLeader;
  /** Also among `services`; retired (its snapshots deleted) at the end of a clean stop. */
  reporter: StateReporter;
  pool: ThreadPool | null;
  /** Started in order once the worker listens; stopped after the drain. */
  services: WorkerService[];
}

/** Builds the parts of a worker of `host` with config `cfg`. */
export function assemble(
  host: WorkerHost,
  cfg: ResolvedWorkerConfig,
  logger: Logger,
  sink: WorkerSink,
): WorkerParts {
  const app = host.config;
  const { db, tasks } = host;
  const { identity } = cfg;
  const metrics = host.metrics ?? null;
  const runs = metrics === null ? null : new RunMetrics(metrics);
  // Every written batch of outcomes passes through the sink, whichever part wrote it: count them there.
  if (runs !== null) sink = countingOutcomes(sink, runs);
  const pool =
    [...tasks.values()].some((t) => t.policies.blocking) && cfg.appModule !== null
      ? new ThreadPool({ appModule: cfg.appModule, exportName: cfg.appExport, size: cfg.blockingThreads })
      : null;
  const caps = new CapGuard(db, {
    clusterWideCap: app.clusterWideCap ?? null,
    mode: app.capMode,
    prefetchBuffer: app.prefetchBuffer,
    queueCaps: new Map(
      [...app.queueConfigs.values()].flatMap((q) =>
        q.maxConcurrency === undefined ? [] : [[q.name, q.maxConcurrency] as const],
      ),
    ),
  });
  const flow = new FlowGuard(
    db,
    {
      queues: app.queueConfigs,
      tasks,
      synchronousStarts: cfg.synchronousStarts,
      workerId: identity.workerId,
    },
    logger,
  );
  // The dispatcher needs the executor, whose hooks (and the claim side's) call back into the dispatcher: they reach
  // it through this binding, set once the executor exists.
  let dispatcher: Dispatcher;
  // Held for the next claim for at most 1 ms: a busy worker claims again well within that after most finishes.
  const notices = new DoneNotices(db, 1, {
    onFailed: (error) =>
      sink.fail(
        'sending task_done notifications failed; result waiters find the outcomes at their poll',
        error,
      ),
  });
  // With prefetch 'auto', the tasks held ahead follow the rate of the runs that end here.
  const strategies = claimStrategies(
    { db, queues: [...cfg.queues, ...app.queues], caps, flow, notices },
    { workerId: identity.workerId, synchronousStarts: cfg.synchronousStarts },
  );
  const sizer = cfg.prefetchAuto ? new PrefetchSizer(cfg.prefetchWindowMs, cfg.prefetch) : null;
  // Tasks the worker may hold (claimed or running). After handing back tasks that found no slot in time, nothing
  // is claimed ahead until a run ends.
  const mostHeld = (): number =>
    dispatcher.holdingBack
      ? Math.min(cfg.concurrency, cfg.maxClaimPerWorker)
      : sizer
        ? Math.min(cfg.maxClaimPerWorker, cfg.concurrency + sizer.size())
        : cfg.maxClaimPerWorker;
  const onClaimed = (claimed: ClaimedTaskRow[], started?: StartedWithClaim): void => {
    sink.emit(
      'task:claimed',
      claimed.map((t) => t.id),
    );
    dispatcher.add(claimed, started);
  };
  const handoff = cfg.handoff
    ? new Handoff(
        db,
        { identity, leaseMs: cfg.claimLeaseMs },
        {
          reserveStarts: (queue, max) => dispatcher.reserveStarts(queue, max),
          cancelReservation: (reserved) => dispatcher.cancelReservation(reserved),
          onClaimed,
          known: () => dispatcher.heldIds(),
          refill: () => producer.refillIdleSlots(),
        },
      )
    : null;
  const producer = new Producer(
    {
      queues: cfg.queues,
      maxClaimBatch: cfg.maxClaimBatch,
      pollIntervalMs: cfg.pollIntervalMs,
      leaseMs: cfg.claimLeaseMs,
      identity,
      refillThreshold: () => Math.max(1, Math.floor(Math.min(cfg.maxClaimBatch, mostHeld()) / 2)),
    },
    {
      // Tasks whose outcome is being written take no slot: the claims go on while their outcomes wait for the
      // write in flight, so that the next write takes them all in one statement. Up to a full batch of them
      // (completionBatchSize, or as many as the worker may hold if that is more): a write that lags stops the
      // claims.
      capacity: () => {
        if (!sink.accepting()) return 0;
        const most = mostHeld();
        const unwritten = Math.max(most, cfg.completionBatchSize);
        return Math.max(0, Math.min(most - dispatcher.busy, most + unwritten - dispatcher.size));
      },
      idle: () => dispatcher.busy === 0,
      onClaimed,
      reserveStarts: (queue, max) => dispatcher.reserveStarts(queue, max),
      startsAhead: (queue) => dispatcher.startsAhead(queue),
      cancelReservation: (reserved) => dispatcher.cancelReservation(reserved),
      onError: (error) => sink.fail('claim failed', error),
      claimableTaskNames: () => dispatcher.claimableTaskNames(),
    },
    strategies,
    handoff,
  );
  const completer = new Completer(
    db,
    cfg.completionBatchSize,
    cfg.completionDelayMs,
    {
      onSettled: (result, finishes) => sink.onSettled(result, finishes),
      onError: (error) => sink.fail('writing task outcomes failed', error),
    },
    notices,
    COMPLETION_BESIDE_AT,
  );
  const transactions = new TransactionalFinish(db, logger, {
    workerId: identity.workerId,
    poolSize: cfg.concurrency,
  });
  const executor = new Executor(
    db,
    tasks,
    logger,
    {
      identity,
      abortGraceMs: cfg.abortGraceMs,
      appErrorCodes: app.errorCodes ?? [],
      synchronousStarts: cfg.synchronousStarts,
      tracer: host.tracer ?? null,
      slots: cfg.startPrefetched ? { size: cfg.concurrency, holdMs: cfg.prefetchHoldMs } : null,
    },
    {
      onSkipped: (task, reason) => {
        if (reason === 'expired') {
          runs?.expired(task);
          sink.emit('task:expired', task.id);
        }
        dispatcher.release([task.id]);
        // Its workflow's step gives the node back (READY, the never-run task withdrawn).
        if (reason === 'stopped') {
          void sink.afterFinish([
            {
              id: task.id,
              status: 'STOPPED',
              workflow_id: task.workflow_id,
              workflow_node: task.workflow_node,
            },
          ]);
        }
      },
      onStarted: (task, attempt, startedAt) => {
        runs?.started(task, startedAt);
        dispatcher.setPhase(task.id, 'running');
        sink.emit('task:started', task.id, attempt);
      },
      onFinished: (finish, task, ran = true) => {
        if (ran) {
          sizer?.ran();
          runs?.ran(finish);
          sink.emit('task:ran', finish.id, finish.status);
        }
        dispatcher.setPhase(finish.id, 'finishing', ran);
        // Under a cap or a group limit the task holds room until its outcome is written: write it at once.
        completer.add(finish, strategies.of(task.queue_name).writesAtOnce);
        dispatcher.scheduleDispatch();
        producer.wake(false);
      },
      // Written by the handler's own transaction: past the completer, straight to what follows a written batch.
      onThrottled: (task, retryAfterMs) => flow.pause(task, retryAfterMs),
      onHeldTooLong: (ids) => {
        logger.info(
          { count: ids.length, why: `no slot freed for them within ${cfg.prefetchHoldMs} ms` },
          'handing started tasks back to PENDING',
        );
        dispatcher.holdBack();
      },
      onCommitted: (finish, row) => {
        sizer?.ran();
        dispatcher.setPhase(finish.id, 'finishing');
        sink.emit('task:ran', finish.id, finish.status);
        sink.onSettled({ finished: [row], lost: [] }, [finish]);
        dispatcher.scheduleDispatch();
      },
    },
    pool,
    transactions,
  );
  dispatcher = new Dispatcher(
    executor,
    strategies,
    tasks,
    {
      concurrency: cfg.concurrency,
      retryMs: cfg.pollIntervalMs,
      holdMs: cfg.prefetch > 0 ? cfg.prefetchHoldMs : 0,
      startAhead: () => (cfg.startPrefetched ? Math.max(0, mostHeld() - cfg.concurrency) : 0),
    },
    logger,
    {
      onReleased: () => {
        producer.capRoomMayHaveOpened();
        producer.wake(false);
      },
      onError: (what, error) => sink.fail(what, error),
    },
  );
  const heartbeater = new Heartbeater(
    db,
    {
      identity,
      claimerIntervalMs: app.recovery.claimerHeartbeatIntervalMs,
      runnerIntervalMs: app.recovery.runnerHeartbeatIntervalMs,
      leaseMs: cfg.claimLeaseMs,
      maxClaimAgeMs: cfg.maxClaimAgeMs,
    },
    {
      owned: (role) => dispatcher.owned(role),
      onLost: (role, ids) => sink.onLost(role, ids),
      onError: (error) => sink.fail('heartbeat failed', error),
    },
  );
  const listener = wakeOnNotifications(
    new Listener(db.listenConfig, { sessionLock: handoff?.lockKey }),
    db.schema,
    producer,
    dispatcher,
    handoff,
    logger,
  );
  const cancels = new CancelWatcher(
    db,
    listener,
    { workerId: identity.workerId, pollIntervalMs: cfg.pollIntervalMs },
    {
      running: () => executor.running,
      cancel: (id) => sink.cancel(id),
      onError: (error) => sink.fail('cancel poll failed', error),
    },
  );
  // The scheduler keeps its own timer (a slot is due to the second, maintenance runs every 30 s by default).
  const scheduler =
    (host.schedules?.length ?? 0) > 0
      ? new Scheduler(db, {
          schedules: host.schedules ?? [],
          tasks,
          queues: app.queues,
          logger,
          clock: cfg.clock,
        })
      : null;
  scheduler?.on('scheduler:ran', (result) => sink.emit('maintenance:ran', 'scheduler', result));
  const maintenance = {
    db,
    recovery: app.recovery,
    clock: cfg.clock,
    afterFinish: sink.afterFinish,
    metrics,
    workflows: host.workflows,
  };
  // The vacuum check keeps its own timer too.
  const vacuum = vacuumLoop(maintenance, logger);
  vacuum?.on('maintenance:ran', (service, result) => sink.emit('maintenance:ran', service, result));
  const leader = new MaintenanceLeader(
    db,
    { candidateId: identity.workerId, checkIntervalMs: app.recovery.checkIntervalMs },
    maintenanceServices(maintenance),
    logger,
    [scheduler, vacuum].filter((loop) => loop !== null),
  );
  for (const event of ['leader:elected', 'leader:lost'] as const) {
    leader.on(event, () => {
      metrics?.setLeader(event === 'leader:elected');
      sink.emit(event);
    });
  }
  leader.on('maintenance:ran', (service, result) => sink.emit('maintenance:ran', service, result));
  const reporter = new StateReporter(db, cfg.snapshotIntervalMs, StateReporter.describe(cfg, app, tasks), {
    counts: () => dispatcher.counts(),
    onError: (error) => sink.fail('worker snapshot failed', error),
  });
  return {
    caps,
    producer,
    dispatcher,
    executor,
    completer,
    heartbeater,
    listener,
    handoff,
    leader,
    reporter,
    pool,
    services: [producer, heartbeater, cancels, reporter, ...(cfg.maintenance ? [leader] : []), transactions],
  };
}

// A notification on a queue channel (or on task_done, heard only when caps are set: room may have opened under
// a cap) asks for a claim pass; after a reconnect, notifications may have been missed, so claim at once. One on
// the worker's hand-off channel is a task a send handed over.
function wakeOnNotifications(
  listener: Listener,
  schema: string,
  producer: Producer,
  dispatcher: Dispatcher,
  handoff: Handoff | null,
  logger: Logger,
): Listener {
  const cancelChannel = channels.taskCancel(schema);
  const doneChannel = channels.taskDone(schema);
  listener.on('notification', (channel, payload) => {
    if (channel === cancelChannel) return;
    if (channel === handoff?.channel) return handoff.received(payload);
    if (channel === doneChannel) {
      dispatcher.capRoomMayHaveOpened();
      producer.capRoomMayHaveOpened();
    }
    producer.wake();
  });
  listener.on('reconnect', () => {
    logger.info('LISTEN connection back');
    handoff?.reconnected();
    producer.capRoomMayHaveOpened();
    producer.wake();
  });
  listener.on('error', (error) => logger.warn({ err: error }, 'LISTEN connection lost; reconnecting'));
  return listener;
}

// The sink, with each settled batch counted into the metrics before the worker follows it.
function countingOutcomes(sink: WorkerSink, runs: RunMetrics): WorkerSink {
  return {
    ...sink,
    onSettled: (result, finishes) => {
      runs.settled(result.finished, finishes);
      sink.onSettled(result, finishes);
    },
  };
}
