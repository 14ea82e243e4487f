/**
 * Builds a worker's parts, each from the parts it needs, in the order a task passes through them (see
 * docs/development.md, "The worker's pipeline"): the SlotLedger counts the slots; the Producer claims (each queue
 * through its claim strategy), takes hand-offs and starts; the Executor runs; the Completer writes outcomes; the
 * Heartbeater, CancelWatcher and StateReporter watch; maintenance runs while this worker leads. The worker owns the
 * lifecycle; this module owns the composition.
 */
import type { Logger } from 'pino';
import { Listener } from '../db/Listener.js';
import { RunMetrics } from '../metrics/RunMetrics.js';
import type { MaintenanceLeader } from '../recovery/MaintenanceLeader.js';
import { CancelWatcher } from './CancelWatcher.js';
import { CapGuard } from './CapGuard.js';
import { claimStrategies } from './claim/strategies.js';
import { Completer } from './Completer.js';
import type { ResolvedWorkerConfig } from './config.js';
import { DoneNotices } from './DoneNotices.js';
import type { WorkerHost, WorkerService, WorkerSink } from './events.js';
import { Executor } from './Executor.js';
import { FlowGuard } from './FlowGuard.js';
import { Heartbeater } from './Heartbeater.js';
import { maintenanceLeader } from './maintenance.js';
import { Producer } from './Producer.js';
import { RunReports } from './RunReports.js';
import { SlotLedger } from './SlotLedger.js';
import { StateReporter } from './StateReporter.js';
import { ThreadPool } from './ThreadPool.js';
import { TransactionalFinish } from './TransactionalFinish.js';

export type { WorkerEvents, WorkerHost, WorkerService, WorkerSink } from './events.js';

/**
 * Outcomes queued behind the write in flight that start a second write beside it. At throughput 'high' the one
 * write of a busy worker was in flight about nine tenths of a drain, and a second one made the drain 1.15x to 1.3x
 * faster (`profile:drain`, docs/benchmarks.md); a worker whose writes keep up never queues this many.
 */
const COMPLETION_BESIDE_AT = 150;

/** task_done notices are held for the next claim for at most this long: a busy worker claims again well within it. */
const NOTICE_HOLD_MS = 1;

/** The parts of one worker. */
export interface WorkerParts {
  caps: CapGuard;
  ledger: SlotLedger;
  producer: Producer;
  executor: Executor;
  completer: Completer;
  heartbeater: Heartbeater;
  listener: Listener;
  leader: MaintenanceLeader;
  /** Also among `services`; retired (its snapshots deleted) at the end of a clean stop. */
  reporter: StateReporter;
  /** task_done notifications of written outcomes, for the next claim or step to carry. */
  notices: DoneNotices;
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
  const { db, tasks, config: app } = host;
  const { workerId } = cfg.identity;
  const metrics = host.metrics ?? null;
  const reports = new RunReports(sink, metrics === null ? null : new RunMetrics(metrics));
  const blocking = [...tasks.values()].some((t) => t.policies.blocking) && cfg.appModule !== null;
  const pool = blocking
    ? new ThreadPool({ appModule: cfg.appModule!, exportName: cfg.appExport, size: cfg.blockingThreads })
    : null;
  const caps = new CapGuard(db, CapGuard.settingsOf(app));
  const { synchronousStarts } = cfg;
  const flow = new FlowGuard(db, { queues: app.queueConfigs, tasks, synchronousStarts, workerId }, logger);
  const notices = new DoneNotices(db, NOTICE_HOLD_MS, {
    onFailed: (error) =>
      sink.fail('sending task_done notifications failed; waiters find outcomes at their poll', error),
  });
  const strategies = claimStrategies(
    { db, queues: [...cfg.queues, ...app.queues], caps, flow, notices },
    { workerId, synchronousStarts },
  );
  const ledger = new SlotLedger(cfg);
  const completer = new Completer(
    db,
    cfg.completionBatchSize,
    cfg.completionDelayMs,
    reports,
    notices,
    COMPLETION_BESIDE_AT,
    sink.finishAndStep,
  );
  const transactions = new TransactionalFinish(db, logger, {
    workerId,
    poolSize: cfg.concurrency,
    notices,
  });
  const executor = new Executor(
    db,
    tasks,
    logger,
    { ...cfg, appErrorCodes: app.errorCodes ?? [], tracer: host.tracer ?? null },
    { ledger, completer, strategies, flow, reports },
    pool,
    transactions,
  );
  const producer = new Producer(
    { ...cfg, leaseMs: cfg.claimLeaseMs, holdMs: cfg.prefetch > 0 ? cfg.prefetchHoldMs : 0 },
    { db, ledger, strategies, executor, tasks, logger },
    sink,
  );
  const { claimerHeartbeatIntervalMs, runnerHeartbeatIntervalMs } = app.recovery;
  const heartbeater = new Heartbeater(
    db,
    {
      identity: cfg.identity,
      claimerIntervalMs: claimerHeartbeatIntervalMs,
      runnerIntervalMs: runnerHeartbeatIntervalMs,
      leaseMs: cfg.claimLeaseMs,
      maxClaimAgeMs: cfg.maxClaimAgeMs,
    },
    ledger,
    sink,
  );
  const listener = new Listener(db.listenConfig, { sessionLock: producer.handoffLock });
  producer.listenTo(listener, db.schema, logger);
  const cancelOptions = { workerId, pollIntervalMs: cfg.pollIntervalMs };
  const cancels = new CancelWatcher(db, listener, cancelOptions, executor, sink, logger);
  const leader = maintenanceLeader(
    {
      db,
      recovery: app.recovery,
      clock: cfg.clock,
      afterFinish: sink.afterFinish,
      metrics,
      workflows: host.workflows,
    },
    { candidateId: workerId, schedules: host.schedules ?? [], tasks, queues: app.queues },
    sink,
    logger,
  );
  const description = StateReporter.describe(cfg, app, tasks);
  const reporter = new StateReporter(db, cfg.snapshotIntervalMs, description, ledger, sink);
  return {
    caps,
    ledger,
    producer,
    executor,
    completer,
    heartbeater,
    listener,
    leader,
    reporter,
    notices,
    pool,
    services: [producer, heartbeater, cancels, reporter, ...(cfg.maintenance ? [leader] : []), transactions],
  };
}
