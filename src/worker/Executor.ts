/**
 * Runs started tasks. A claim strategy (claim/) starts them (CLAIMED → RUNNING, or EXPIRED when `good_until`
 * passed while they waited) and hands the start rows over ({@link Executor.launch}); the executor runs each
 * handler: stored input re-validated against the task's schema, handler called with a context and an AbortSignal,
 * the outcome turned into a finish for the completer.
 *
 *   claimed ──────start──────► running ──handler──► outcome ──► finish ──► Completer
 *      │                          │                    ├─ value            → COMPLETED
 *      ├─ expired (no attempt)    ├─ timeout           ├─ error, retryable → RETRY (back to PENDING)
 *      └─ lost (not run)          ├─ cancel request    ├─ error            → FAILED
 *                                 └─ shutdown          └─ cancelled        → CANCELLED
 *
 * A handler that finishes through `ctx.transaction` (see TransactionalFinish.ts) has its COMPLETED outcome written in
 * its own transaction: the run then reports it as written (`committed`) instead of handing it to the completer.
 *
 * A stop (timeout, cancel, shutdown) fires the handler's AbortSignal and gives it `abortGraceMs` to return. A
 * handler that ignores the signal is left behind: its outcome is decided without it, its slot is freed, and the
 * leak is logged.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type { TaskContext, TaskDefinition, TaskWorkflowContext } from '../client/TaskDefinition.js';
import type { RunFence } from '../db/progress.js';
import { StepJournal } from './StepJournal.js';
import type { ErrorCodeMap } from '../client/policy.js';
import { errorEnvelope, okEnvelope } from '../outcome.js';
import type { Database } from '../db/Database.js';
import { TaskOptionsGet } from '../db/tasks.js';
import type { ClaimedTaskRow, TaskFinish, TaskFinishRow, TaskStartRow, WorkerIdentity } from '../db/tasks.js';
import { TaskError } from '../errors.js';
import { decideRetry, storedRetryPolicy } from '../retry.js';
import type { RandomSource, ResolvedRetryPolicy } from '../retry.js';
import { runHandler } from './runHandler.js';
import type { Outcome } from './runHandler.js';
import type { ThreadPool } from './ThreadPool.js';
import { refuseTransaction } from './TransactionalFinish.js';
import type { TransactionalFinish, TransactionalRun, TransactionVerdict } from './TransactionalFinish.js';
import { settlesWithin } from './timing.js';
import type { TaskTracer } from '../tracing/TaskTracer.js';
import { ProgressReporter } from './ProgressReporter.js';
import type { SlotLedger } from './SlotLedger.js';
import type { Completer } from './Completer.js';
import type { ClaimStrategies } from './claim/ClaimStrategy.js';
import type { FlowGuard } from './FlowGuard.js';
import { toCanonicalJson } from '../json.js';
import type { JsonValue } from '../types.js';

/**
 * Why a running handler is being stopped: its timeout; a cancel request; shutdown with policy `stop`
 * (`WORKER_SHUTDOWN`); shutdown with policy `resubmit` or a drain timeout (`release`: back to PENDING, no attempt
 * counted); or the claim was lost to another worker (`lost`: whatever is written is fenced out).
 */
export type StopReason = 'timeout' | 'cancel' | 'shutdown' | 'release' | 'lost';

/** What a run reports as it goes (the worker's events and run metrics: RunReports). */
export interface RunReporter {
  /** A run starts; `startedAt` is the database's start time. */
  started(task: ClaimedTaskRow, attempt: number, startedAt: Date | null): void;
  /** A handler returned (or was left behind): its finish goes to the completer. */
  ran(finish: TaskFinish): void;
  /** `good_until` passed before the task started: EXPIRED, no attempt. */
  expired(task: ClaimedTaskRow): void;
  /** A run ended whose outcome its transactional finish already committed (`row`). */
  committed(finish: TaskFinish, row: TaskFinishRow): void;
  /** Its workflow was paused or cancelled: the task was handed back before it ran. */
  stopped(task: ClaimedTaskRow): void;
}

/** What an executor works with. */
export interface ExecutorParts {
  /** Phases of the runs, and the handler slots of tasks started ahead. */
  ledger: SlotLedger;
  /** Where finishes go to be written. */
  completer: Pick<Completer, 'add'>;
  /** Whose `writesAtOnce` says a finish holds room others wait for. */
  strategies: ClaimStrategies;
  /** Pauses the rate limiters of a run an upstream throttled. */
  flow: Pick<FlowGuard, 'pause'>;
  reports: RunReporter;
}

/** Settings of an {@link Executor}. */
export interface ExecutorOptions {
  identity: WorkerIdentity;
  /** How long a stopped handler gets to return before it is left behind. */
  abortGraceMs: number;
  /** The app's error map, consulted after the task's. */
  appErrorCodes: ErrorCodeMap;
  /** Starts wait for their WAL flush (see WorkerConfig.claims.synchronousStarts). */
  synchronousStarts: boolean;
  /** Random source for backoff jitter (tests inject one). */
  random?: RandomSource;
  /** Spans for runs; null or absent when tracing is off. */
  tracer?: TaskTracer | null;
}

/**
 * One run's stop: why it was stopped, and the one wait of the run that a stop ends (for a slot, then for the
 * handler). A run awaits one promise per wait, made here, instead of a promise of its stop raced with the wait.
 */
class Run {
  reason: StopReason | null = null;
  private wake: ((reason: StopReason) => void) | null = null;

  constructor(readonly taskName: string) {}

  stop(reason: StopReason): void {
    if (this.reason) return;
    this.reason = reason;
    this.wake?.(reason);
  }

  /** What `wait` resolves to, or the stop's reason when the run is stopped first (at once if it was already). */
  until<T>(wait: Promise<T>): Promise<T | StopReason> {
    if (this.reason) return Promise.resolve(this.reason);
    return new Promise<T | StopReason>((resolve, reject) => {
      this.wake = resolve;
      wait.then(resolve, reject);
    });
  }
}

/** Runs tasks for one worker. */
export class Executor {
  private readonly runs = new Map<string, Run>();
  private readonly pending = new Set<Promise<void>>();
  /** Progress reporters of runs that reported progress (made on a run's first `ctx.progress()`). */
  private readonly progress = new Map<string, ProgressReporter>();
  private readonly ledger: SlotLedger;
  /** {@link reportProgress}, as the handlers' contexts call it. */
  private readonly reportProgressOf = (task: ClaimedTaskRow, json: string): void =>
    this.reportProgress(task, json);

  constructor(
    private readonly db: Database,
    private readonly registry: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>,
    private readonly logger: Logger,
    private readonly options: ExecutorOptions,
    private readonly parts: ExecutorParts,
    private readonly pool: ThreadPool | null = null,
    private readonly transactions: TransactionalFinish | null = null,
  ) {
    this.ledger = parts.ledger;
    // Runs started ahead that found no handler slot in time go back to PENDING, unrun.
    this.ledger.on('heldTooLong', (ids) => {
      this.logger.info(
        { count: ids.length, why: 'no slot freed for them within prefetchHoldMs' },
        'handing started tasks back to PENDING',
      );
      for (const id of ids) this.stop(id, 'release');
    });
  }

  /** Number of runs now (leaked ones excluded), with those started ahead that wait for a slot. */
  get running(): number {
    return this.runs.size;
  }

  /**
   * Hands back to PENDING the started tasks still waiting for a slot (the worker stops: what has not run goes
   * back, as claimed tasks do).
   */
  releaseWaiting(): void {
    for (const id of this.ledger.waitingForSlot()) this.stop(id, 'release');
  }

  /** Ids of the tasks running now. */
  runningIds(): string[] {
    return [...this.runs.keys()];
  }

  /** Launches the handlers of started tasks; tasks missing from `rows` were lost, EXPIRED ones expired. */
  launch(tasks: ClaimedTaskRow[], rows: TaskStartRow[]): void {
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const task of tasks) {
      const row = byId.get(task.id);
      if (!row) {
        this.logger.warn(
          { taskId: task.id },
          'claim was superseded or cancelled before the task started; not running it',
        );
        this.ledger.release([task.id]);
      } else if (row.status === 'EXPIRED') {
        this.parts.reports.expired(task);
        this.ledger.release([task.id]);
      } else if (row.status === 'STOPPED') {
        this.logger.info(
          { taskId: task.id, workflowId: task.workflow_id, code: 'WORKFLOW_STOPPED' },
          'its workflow is paused or cancelled: handed back before it ran',
        );
        this.ledger.release([task.id]);
        // Its workflow's step gives the node back (READY, the never-run task withdrawn).
        this.parts.reports.stopped(task);
      } else {
        this.ledger.setPhase(task.id, 'running');
        this.parts.reports.started(task, row.attempt, row.started_at);
        const run = this.run(task, row.attempt);
        this.pending.add(run);
        void run.finally(() => this.pending.delete(run));
      }
    }
  }

  /** Stops one running handler (AbortSignal, then `abortGraceMs`). Returns false if it does not run here. */
  stop(taskId: string, reason: StopReason): boolean {
    const run = this.runs.get(taskId);
    if (!run) return false;
    run.stop(reason);
    return true;
  }

  /** Stops every running handler, with a reason chosen per task. */
  stopAll(
    reason: StopReason | ((task: TaskDefinition<StandardSchemaV1, unknown> | undefined) => StopReason | null),
  ): void {
    for (const [id, run] of this.runs) {
      const chosen = typeof reason === 'function' ? reason(this.registry.get(run.taskName)) : reason;
      if (chosen) this.stop(id, chosen);
    }
  }

  /** Resolves when every run has ended (handlers returned, or were left behind after their grace). */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  private async run(task: ClaimedTaskRow, attempt: number): Promise<void> {
    const definition = this.registry.get(task.task_name);
    if (!definition) {
      const error = new TaskError(
        'UNHANDLED_ERROR',
        `task "${task.task_name}" is not registered in this worker`,
      );
      this.finished(this.toFinish(task, error, null, null), task, true);
      return;
    }
    const stops = new Run(task.task_name);
    this.runs.set(task.id, stops);
    const slot = this.ledger.takeSlot(task.id);
    if (slot) {
      const waited = await stops.until(slot);
      if (waited !== undefined) {
        // Stopped before its handler was called: a cancel cancels it, anything else hands it back unrun.
        this.ledger.withdrawSlot(task.id);
        this.runs.delete(task.id);
        this.finished(this.unrunFinish(task, definition, waited), task, false);
        return;
      }
    }
    const span = this.options.tracer?.startRun(task, attempt) ?? null;
    const abort = new LazyAbort();
    const timeoutMs = definition.policies.timeoutMs;
    let timer: NodeJS.Timeout | null = null;
    // A blocking task's timeout starts when a thread takes it, not while it waits for one.
    const startTimer =
      timeoutMs === null
        ? noTimer
        : (): void => {
            timer = setTimeout(() => this.runs.get(task.id)?.stop('timeout'), timeoutMs);
          };
    let finish: TaskFinish;
    // The run's transactional finish, made on its first `ctx.transaction()` call (most runs never make one).
    const transactional: { run: TransactionalRun | null } = { run: null };
    let verdict: TransactionVerdict | null;
    try {
      const onThread = definition.policies.blocking && this.pool !== null;
      if (!onThread) startTimer();
      const launch = (): Promise<Outcome> =>
        onThread
          ? this.executeOnThread(task, attempt, startTimer)
          : this.execute(definition, task, attempt, abort, transactional);
      // Within the run's span, so the handler's own spans and sends are its children.
      const execution = span ? span.within(launch) : launch();
      const first = await stops.until(execution);
      let outcome: Outcome;
      if (typeof first !== 'string') {
        outcome = first;
      } else {
        abort.abort(new Error(`task stopped: ${first}`));
        if (onThread) this.pool?.abort(task.id);
        const settled = await settlesWithin(execution, this.options.abortGraceMs);
        if (!settled) {
          if (onThread) {
            this.logger.warn(
              { taskId: task.id, task: task.task_name, reason: first },
              'terminating the thread of a blocking handler',
            );
            await this.pool?.terminate(task.id);
          } else {
            this.logger.warn(
              { taskId: task.id, task: task.task_name, reason: first, graceMs: this.options.abortGraceMs },
              'handler ignored its AbortSignal and leaked; the task is finished without it',
            );
          }
        }
        // A cancel is a request: a handler that still returns a value within the grace completed its work, and
        // keeps its result (a workflow node records it). Any other stop, or an error, ends as the stop says.
        const returned = settled && first === 'cancel' ? await execution : null;
        outcome = returned && !(returned instanceof TaskError) ? returned : stopOutcome(first, timeoutMs);
      }
      verdict = transactional.run ? await transactional.run.conclude(this.options.abortGraceMs) : null;
      // A fenced completion wrote nothing: CANCELLED lands if a cancel request stands, else the fence drops it.
      finish =
        verdict?.kind === 'fenced'
          ? this.toFinish(task, stopOutcome('cancel', timeoutMs), definition, 'cancel')
          : this.toFinish(
              task,
              outcome,
              definition,
              typeof first === 'string' ? first : null,
              nodeRetryPolicyApplies(task, outcome) ? await this.nodeRetryPolicy(task) : null,
            );
    } finally {
      if (timer) clearTimeout(timer);
      this.runs.delete(task.id);
      this.ledger.freeSlot();
    }
    // The last progress the handler reported is stored before its outcome is handed over.
    const progress = this.progress.get(task.id);
    if (progress) {
      this.progress.delete(task.id);
      await progress.close();
    }
    if (finish.status === 'THROTTLED') await this.parts.flow.pause(task, finish.retryDelayMs);
    span?.end(verdict?.kind === 'committed' ? verdict.finish : finish);
    // After the slot is free, so the worker can start the next task at once.
    if (verdict?.kind === 'committed') {
      this.ledger.ended(task.id, true);
      this.parts.reports.committed(verdict.finish, verdict.row);
    } else this.finished(finish, task, true);
  }

  // A run ended (`ran`: its handler ran, not a task started ahead and stopped while it waited for a slot): its
  // finish goes to the completer, written at once when it holds room others wait for (a cap, a group limit).
  private finished(finish: TaskFinish, task: ClaimedTaskRow, ran: boolean): void {
    if (ran) this.parts.reports.ran(finish);
    this.parts.completer.add(finish, this.parts.strategies.of(task.queue_name).writesAtOnce);
    this.ledger.ended(finish.id, ran);
  }

  private async executeOnThread(
    task: ClaimedTaskRow,
    attempt: number,
    onStart: () => void,
  ): Promise<Outcome> {
    try {
      const reply = await this.pool!.run(
        {
          id: task.id,
          taskName: task.task_name,
          input: task.kwargs,
          context: {
            taskId: task.id,
            taskName: task.task_name,
            queue: task.queue_name,
            attempt,
            retryCount: task.retry_count,
            workflow: workflowOf(task),
          },
        },
        onStart,
        (json) => this.reportProgress(task, json),
      );
      if ('value' in reply) return { value: reply.value };
      return new TaskError(reply.error.code, reply.error.message, reply.error.data);
    } catch (error) {
      return new TaskError('UNHANDLED_ERROR', `the task's thread failed: ${(error as Error).message}`);
    }
  }

  private execute(
    definition: TaskDefinition<StandardSchemaV1, unknown>,
    task: ClaimedTaskRow,
    attempt: number,
    abort: LazyAbort,
    transactional: { run: TransactionalRun | null },
  ): Promise<Outcome> {
    const transactions = definition.policies.blocking ? null : this.transactions;
    let steps: StepJournal | null = null;
    const ctx = new HandlerContext(
      task,
      attempt,
      abort,
      this.logger,
      this.reportProgressOf,
      (fn, options) =>
        transactions
          ? (transactional.run ??= transactions.forRun(task, abort.signal)).run(fn, options)
          : refuseTransaction(task.id, definition.policies.blocking),
      (name, fn) => (steps ??= new StepJournal(this.db, this.fenceOf(task))).run(name, fn),
    );
    return runHandler(definition, task.kwargs, ctx, this.options.appErrorCodes);
  }

  // A run's progress, written through its reporter (made on the first report). A handler left behind after its
  // outcome was decided reports into the void.
  private reportProgress(task: ClaimedTaskRow, json: string): void {
    let reporter = this.progress.get(task.id);
    if (!reporter) {
      if (!this.runs.has(task.id)) return;
      reporter = new ProgressReporter(this.db, this.fenceOf(task), this.logger);
      this.progress.set(task.id, reporter);
    }
    reporter.reportJson(json);
  }

  // What this run's owner writes (progress, steps) are fenced on: one place, for every such write.
  private fenceOf(task: ClaimedTaskRow): RunFence {
    return { id: task.id, workerId: this.options.identity.workerId, token: task.claim_token };
  }

  /**
   * A workflow node may override its task's retry policy; the override is stored with the task (`task_options`)
   * and read here, only when a failed run of a node's task has retries to decide.
   */
  private async nodeRetryPolicy(task: ClaimedTaskRow): Promise<ResolvedRetryPolicy | null> {
    const [row] = await this.db.run(TaskOptionsGet, { id: task.id });
    return row ? storedRetryPolicy(row.task_options) : null;
  }

  // The finish of a started task stopped while it waited for a slot: its handler never ran.
  private unrunFinish(
    task: ClaimedTaskRow,
    definition: TaskDefinition<StandardSchemaV1, unknown>,
    reason: StopReason,
  ): TaskFinish {
    if (reason === 'cancel') {
      const cancelled = new TaskError('TASK_CANCELLED', 'the task was cancelled before its handler ran');
      return this.toFinish(task, cancelled, definition, 'cancel');
    }
    // A claim lost meanwhile: fenced out, whatever it says.
    if (reason === 'lost') return this.toFinish(task, stopOutcome('lost', null), definition, 'lost');
    return this.toFinish(task, stopOutcome('release', null), definition, 'release');
  }

  private toFinish(
    task: ClaimedTaskRow,
    outcome: Outcome,
    definition: TaskDefinition<StandardSchemaV1, unknown> | null,
    stopReason: StopReason | null,
    retryPolicy: ResolvedRetryPolicy | null = null,
  ): TaskFinish {
    // A run stopped because its claim looked lost ended for the worker's sake, not the handler's: its attempt is
    // a WORKER_FAILURE, as the reaper writes one. Fencing drops it: its claim token is no longer the row's.
    const crashed = stopReason === 'lost';
    const workerId = this.options.identity.workerId;
    if (stopReason === 'release') {
      return finishOf(task, workerId, crashed, 'RELEASE', 'null', null, null, 0);
    }
    if (!(outcome instanceof TaskError)) {
      return finishOf(task, workerId, crashed, 'COMPLETED', okEnvelope(outcome.value), null, null, 0);
    }
    const failed = (status: TaskFinish['status'], retryDelayMs: number): TaskFinish =>
      finishOf(
        task,
        workerId,
        crashed,
        status,
        errorEnvelope(outcome),
        outcome.code,
        outcome.message,
        retryDelayMs,
      );
    if (stopReason === 'cancel') return failed('CANCELLED', 0);
    // An upstream's throttle: retried when it says, without counting against the retries.
    const throttle = stopReason === null ? throttledAfterMs(outcome) : null;
    if (throttle !== null) return failed('THROTTLED', throttle);
    const decision = decideRetry(
      retryPolicy ?? definition?.policies.retry,
      { code: outcome.code, retryCount: task.retry_count, maxRetries: task.max_retries },
      this.options.random,
    );
    return decision.retry ? failed('RETRY', decision.delayMs) : failed('FAILED', 0);
  }
}

/**
 * The context a handler gets, one per run. A class, with its getters on the prototype: an object literal with
 * getters took about 2 us to make in V8. `progress`, `transaction` and `step` are own functions, so that a handler
 * may take them out of the context (`{ progress }`) and call them.
 */
class HandlerContext implements TaskContext {
  readonly taskId: string;
  readonly taskName: string;
  readonly queue: string;
  readonly retryCount: number;
  readonly workflow: TaskWorkflowContext | null;
  readonly progress: (value: JsonValue) => void;
  readonly #abort: LazyAbort;
  readonly #logger: Logger;
  #taskLogger: Logger | null = null;

  constructor(
    task: ClaimedTaskRow,
    readonly attempt: number,
    abort: LazyAbort,
    logger: Logger,
    report: (task: ClaimedTaskRow, json: string) => void,
    readonly transaction: TaskContext['transaction'],
    readonly step: TaskContext['step'],
  ) {
    this.taskId = task.id;
    this.taskName = task.task_name;
    this.queue = task.queue_name;
    this.retryCount = task.retry_count;
    this.workflow = workflowOf(task);
    this.#abort = abort;
    this.#logger = logger;
    this.progress = (value) => report(task, toCanonicalJson(value, 'progress'));
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get logger(): Logger {
    return (this.#taskLogger ??= this.#logger.child({
      taskId: this.taskId,
      task: this.taskName,
      attempt: this.attempt,
    }));
  }
}

/**
 * A run's AbortSignal, made when first read: most handlers never read theirs, and an AbortController per run was
 * one of the larger costs of a no-op run. Aborted before it was read, the signal comes out aborted.
 */
class LazyAbort {
  private controller: AbortController | null = null;
  private reason: Error | null = null;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  abort(reason: Error): void {
    if (this.reason) return;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}

function noTimer(): void {}

/**
 * A finish, written out whole: an object spread with properties added (`{ ...base, status }`) costs micro-
 * seconds per object in V8, and this runs once per task.
 */
function finishOf(
  task: ClaimedTaskRow,
  workerId: string,
  crashed: boolean,
  status: TaskFinish['status'],
  result: string,
  errorCode: string | null,
  errorMessage: string | null,
  retryDelayMs: number,
): TaskFinish {
  return {
    id: task.id,
    workerId,
    token: task.claim_token,
    status,
    result,
    errorCode,
    errorMessage,
    failedReason: null,
    retryDelayMs,
    crashed,
    workflowId: task.workflow_id,
  };
}

/** A failed run of a workflow node's task with retries to decide: its node may override the retry policy. */
function nodeRetryPolicyApplies(task: ClaimedTaskRow, outcome: Outcome): boolean {
  return outcome instanceof TaskError && task.workflow_id !== null && task.max_retries > 0;
}

/** The workflow context of a claimed task, or null for a plain task. */
export function workflowOf(task: ClaimedTaskRow): TaskWorkflowContext | null {
  if (task.workflow_id === null || task.workflow_node === null) return null;
  return { id: task.workflow_id, nodeIndex: task.workflow_node, nodeId: task.workflow_node_id ?? '' };
}

function stopOutcome(reason: StopReason, timeoutMs: number | null): TaskError {
  switch (reason) {
    case 'timeout':
      return new TaskError('TASK_TIMEOUT', `the task did not finish within ${timeoutMs} ms`);
    case 'cancel':
      return new TaskError('TASK_CANCELLED', 'the task was cancelled while it ran');
    case 'shutdown':
    case 'release':
      return new TaskError('WORKER_SHUTDOWN', 'the worker shut down while the task ran');
    case 'lost':
      return new TaskError('WORKER_CRASHED', 'the claim was lost while the task ran');
  }
}

// The wait a TASK_THROTTLED outcome asks for (also one that crossed a thread as plain data), else null.
function throttledAfterMs(outcome: TaskError): number | null {
  if (outcome.code !== 'TASK_THROTTLED') return null;
  const ms = (outcome.data as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? Math.ceil(ms) : 1000;
}
