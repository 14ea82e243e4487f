/**
 * The app: one connection pool, one schema, the registry of task definitions. Producers send through it,
 * workers run its tasks, handles wait on it.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { pino } from 'pino';
import { z } from 'zod';
import type { Logger } from 'pino';
import { Database, connectionFault } from '../db/Database.js';
import { HorsiesMetrics } from '../metrics/Metrics.js';
import { TaskTracer } from '../tracing/TaskTracer.js';
import { migrate } from '../db/Migrator.js';
import type { MigrateResult } from '../db/Migrator.js';
import { AttemptListByTask, TaskGet } from '../db/tasks.js';
import { TaskStepList } from '../db/progress.js';
import { ConfigError, HorsiesError, UnknownQueueError } from '../errors.js';
import { declareSchedules } from '../scheduler/declare.js';
import type { ScheduleConfig } from '../scheduler/declare.js';
import { listSchedules, pauseSchedule, resumeSchedule, triggerSchedule } from '../scheduler/operations.js';
import type { ScheduleInfo } from '../scheduler/operations.js';
import type { TaskResult } from '../errors.js';
import type { JsonValue, TaskInfo, TaskStatus } from '../types.js';
import { parseConfig } from '../config.js';
import { rateLimitSchema, resolveAppConfig } from './config.js';
import { waitReason } from './waitReason.js';
import { policyFields } from './policy.js';
import { errorCodeSchema, resolveRetryPolicy } from '../retry.js';
import type { AppConfig, ResolvedAppConfig } from './config.js';
import { ResultWaiter, workflowOutcomes } from './ResultWaiter.js';
import type { OutcomeSource } from './ResultWaiter.js';
import type { SendContext } from './send.js';
import { TaskDefinition } from './TaskDefinition.js';
import type { DeclaredCodesCheck, ResolvedTaskPolicies, TaskConfig, TaskValue } from './TaskDefinition.js';
import type { HandleHost } from './TaskHandle.js';
import { TaskHandle } from './TaskHandle.js';
import { toTaskInfo } from './taskInfo.js';
import {
  cancelTask,
  countTasks,
  listQueues,
  listTasks,
  resubmitTasks,
  setQueuePaused,
} from './operations.js';
import type { CancelResult, QueueInfo, ResubmitResult, TaskFilter } from './operations.js';
import type { ChildWorkflow } from '../workflow/step.js';
import { WorkflowHandle, listWorkflows } from '../workflow/WorkflowHandle.js';
import type { WorkflowFilter, WorkflowInfo } from '../workflow/WorkflowHandle.js';
import { emitEvent, signalNode } from '../workflow/signals.js';
import type { EmitOptions, EmitReceipt, SignalOptions, SignalReceipt } from '../workflow/signals.js';

const APP_BRAND = Symbol.for('horsies.App');

const taskConfigSchema = z.strictObject({
  name: z.string().min(1).max(255),
  input: z.custom<StandardSchemaV1>(
    (v) => typeof (v as StandardSchemaV1 | null)?.['~standard']?.validate === 'function',
    'must be a Standard Schema validator (zod, valibot, arktype...)',
  ),
  handler: z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', 'must be a function'),
  queue: z.string().optional(),
  errors: z
    .array(errorCodeSchema(true))
    .refine((codes) => new Set(codes).size === codes.length, 'must not repeat a code')
    .optional(),
  priority: z.number().int().min(1).max(100).default(100),
  ...policyFields,
  retentionMs: z.number().int().min(0).optional(),
  shutdown: z.enum(['continue', 'resubmit', 'stop']).default('continue'),
  blocking: z.boolean().default(false),
  maxConcurrentPerWorker: z.number().int().min(1).optional(),
  rateLimit: rateLimitSchema.optional(),
});

/** True when `value` is an {@link App} (also across two copies of the library). */
export function isApp(value: unknown): value is App {
  return (
    typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[APP_BRAND] === true
  );
}

/** Creates an app. Validates the whole config at once and throws a ConfigError naming every bad field. */
export function createApp<Q extends string = 'default'>(config: AppConfig<Q> = {}): App<Q> {
  return new App<Q>(config);
}

/** See {@link createApp}. */
export class App<Q extends string = string> implements HandleHost {
  readonly [APP_BRAND] = true;
  /** The validated config, with defaults applied. */
  readonly config: ResolvedAppConfig;
  /** The app's logger. */
  readonly logger: Logger;
  /** @internal The database seam. */
  readonly db: Database;
  /**
   * The app's Prometheus metrics, null with `metrics: false`. Serve `app.metrics.registry` yourself, or run
   * `horsies worker --metrics-port N`. See `docs/observability.md`.
   */
  readonly metrics: HorsiesMetrics | null;
  /** @internal Spans for sends and runs; null when tracing is off or `@opentelemetry/api` is not installed. */
  readonly tracer: TaskTracer | null;
  /**
   * @internal Workflows that subworkflow nodes run, by name: registered when a workflow using one is built.
   */
  readonly workflows = new Map<string, ChildWorkflow>();
  /**
   * @internal Payload schemas of the signals and events that wait nodes wait for, by name: registered when a
   * workflow with such a node is built.
   */
  readonly signals = new Map<string, StandardSchemaV1>();
  private readonly registry = new Map<string, TaskDefinition<StandardSchemaV1, unknown>>();
  private readonly sendContext: SendContext;
  private readonly waiter: ResultWaiter;
  private readonly otherWaiters = new Map<OutcomeSource, ResultWaiter>();
  private readonly scheduleConfigs: ScheduleConfig<Q>[];
  private closed = false;

  constructor(config: AppConfig<Q> = {}) {
    this.config = resolveAppConfig(config);
    this.logger =
      this.config.logger ?? pino({ name: 'horsies', level: process.env.HORSIES_LOG_LEVEL || 'info' });
    this.db = new Database({
      pool: this.config.pool,
      connectionString: this.config.databaseUrl ?? process.env.DATABASE_URL,
      poolSize: this.config.poolSize,
      schema: this.config.schema,
      preparedStatements: this.config.preparedStatements,
      listenConnectionString: this.config.listenUrl ?? (process.env.HORSIES_LISTEN_URL || undefined),
      statementTimeoutMs: this.config.statementTimeoutMs,
      lockTimeoutMs: this.config.lockTimeoutMs,
    });
    const metricsConfig = this.config.metrics === true ? {} : this.config.metrics;
    this.metrics =
      metricsConfig === false
        ? null
        : new HorsiesMetrics({
            registry: metricsConfig.registry,
            maxErrorCodes: metricsConfig.maxErrorCodes,
            queues: this.config.queues,
            isTaskName: (name) => this.registry.has(name),
          });
    this.tracer = TaskTracer.create(this.config.tracing);
    this.sendContext = {
      db: this.db,
      metrics: this.metrics,
      tracer: this.tracer,
      queues: this.config.queues,
      queueRetentionMs: new Map(
        [...this.config.queueConfigs.values()].flatMap((q) =>
          q.retentionMs === undefined ? [] : [[q.name, q.retentionMs] as const],
        ),
      ),
      maxPayloadBytes: this.config.maxPayloadBytes,
    };
    this.waiter = new ResultWaiter(this.db, { pollIntervalMs: this.config.resultPollIntervalMs });
    // Declared in an AppConfig<Q>: of this app's queues.
    this.scheduleConfigs = [...this.config.schedules] as ScheduleConfig<Q>[];
  }

  /**
   * Defines a task. The input type comes from the schema, the result type from the handler, the error codes of
   * its results from `errors` when it declares them; its `queue` must be one the app declares.
   */
  task<S extends StandardSchemaV1, R, C extends string = string>(
    config: TaskConfig<S, R, Q, C> & DeclaredCodesCheck<R, C>,
  ): TaskDefinition<S, TaskValue<R>, Q, C> {
    const parsed = parseConfig(`task definition "${String(config?.name)}"`, taskConfigSchema, config);
    const declared = parsed.errors;
    if (declared) {
      const undeclared = [
        ...(parsed.errorCodes ?? []).map(([, code], i) => ({ field: `errorCodes.${i}`, code })),
        ...(parsed.defaultErrorCode ? [{ field: 'defaultErrorCode', code: parsed.defaultErrorCode }] : []),
      ].filter((entry) => !declared.includes(entry.code));
      if (undeclared.length > 0) {
        throw new ConfigError(
          `task definition "${parsed.name}"`,
          undeclared.map(({ field, code }) => ({
            field,
            value: code,
            message: "is not one of the task's errors",
          })),
        );
      }
    }
    if (this.registry.has(parsed.name)) {
      throw new ConfigError(`task definition "${parsed.name}"`, [
        { field: 'name', value: parsed.name, message: 'is already defined in this app' },
      ]);
    }
    const queue = parsed.queue ?? this.config.defaultQueue;
    if (!this.config.queues.includes(queue)) throw new UnknownQueueError(queue, this.config.queues);
    const retry = resolveRetryPolicy(parsed.retry, this.config.retry);
    if (retry.maxRetries > 0 && retry.retryOn.length === 0) {
      throw new ConfigError(`task definition "${parsed.name}"`, [
        {
          field: 'retry.retryOn',
          value: retry.retryOn,
          message: 'must list the error codes that retry when maxRetries > 0 (other codes fail at once)',
        },
      ]);
    }
    const policies: ResolvedTaskPolicies = {
      queue,
      priority: parsed.priority,
      retry,
      timeoutMs: parsed.timeoutMs ?? this.config.timeoutMs ?? null,
      errorCodes: parsed.errorCodes ?? [],
      defaultErrorCode: parsed.defaultErrorCode,
      retentionMs: parsed.retentionMs ?? null,
      shutdown: parsed.shutdown,
      blocking: parsed.blocking,
      maxConcurrentPerWorker: parsed.maxConcurrentPerWorker ?? null,
      rateLimit: parsed.rateLimit ?? null,
    };
    // The handler's TaskErrors are outcomes, not values: the definition's result type leaves them out.
    const definition = new TaskDefinition<S, TaskValue<R>, Q, C>(
      config as unknown as TaskConfig<S, TaskValue<R>, Q, C>,
      policies,
      this.sendContext,
      this,
    );
    this.registry.set(definition.name, definition as unknown as TaskDefinition<StandardSchemaV1, unknown>);
    return definition;
  }

  /** The registered task definitions, by name. */
  get tasks(): ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>> {
    return this.registry;
  }

  /**
   * Applies pending migrations to the app's schema. Safe to call from many processes at once. A database that
   * cannot be reached rejects with a `DatabaseUnavailableError` saying where and why, as a worker's start does.
   */
  async migrate(): Promise<MigrateResult> {
    try {
      return await migrate(this.db);
    } catch (error) {
      throw connectionFault(error, this.db.target) ?? error;
    }
  }

  /** A handle for any task id (its result type unknown). */
  handle<R = unknown>(id: string): TaskHandle<R> {
    return new TaskHandle<R>(this, id, '');
  }

  /** The task's row, with its attempts when asked; null if there is no such task. */
  async getTask(
    id: string,
    options: { attempts?: boolean | undefined; steps?: boolean | undefined } = {},
  ): Promise<TaskInfo | null> {
    const [row] = await this.db.run(TaskGet, { id });
    if (!row) return null;
    const attempts = options.attempts ? await this.db.run(AttemptListByTask, { taskId: id }) : undefined;
    const info = toTaskInfo(row, attempts);
    if (options.steps) {
      info.steps = (await this.db.run(TaskStepList, { taskId: id })).map((s) => ({
        name: s.name,
        result: s.result as JsonValue,
        attempt: s.attempt,
        storedAt: s.created_at,
      }));
    }
    if (row.status === 'PENDING') info.waiting = await waitReason(this.db, row);
    return info;
  }

  /** Cancels a task: at once if it has not started, through its worker if it runs. See {@link CancelResult}. */
  cancel(id: string): Promise<CancelResult> {
    const metrics = this.metrics;
    return cancelTask(
      this.db,
      id,
      metrics ? (t) => metrics.outcome(t.queue_name, t.task_name, 'cancelled') : undefined,
    );
  }

  /** Tasks matching a filter (for example the dead-letter set: `{ status: 'FAILED' }`), newest first. */
  listTasks(
    filter: TaskFilter = {},
    page: { limit?: number | undefined; offset?: number | undefined } = {},
  ): Promise<TaskInfo[]> {
    return listTasks(this.db, filter, page);
  }

  /** How many tasks match a filter, per status (every status present). */
  countTasks(filter: TaskFilter = {}): Promise<Record<TaskStatus, number>> {
    return countTasks(this.db, filter);
  }

  /**
   * Puts FAILED (or CANCELLED, EXPIRED) tasks back to PENDING with a fresh retry budget: given ids, or all that
   * match a filter (default status FAILED), in bounded batches. Attempt numbers continue; history is kept.
   */
  resubmit(
    target: { ids: string[] } | (TaskFilter & { batchSize?: number | undefined }),
  ): Promise<ResubmitResult> {
    return resubmitTasks(this.db, target);
  }

  /** Every queue with tasks or a stored state: counts by status, paused or not, tasks no worker serves. */
  listQueues(): Promise<QueueInfo[]> {
    return listQueues(this.db);
  }

  /** Pauses a queue cluster-wide: running tasks finish, nothing new is claimed from it. */
  pauseQueue(queue: string): Promise<void> {
    return setQueuePaused(this.db, queue, true);
  }

  /** Resumes a paused queue. */
  resumeQueue(queue: string): Promise<void> {
    return setQueuePaused(this.db, queue, false);
  }

  /**
   * Declares a recurring task (see `docs/scheduler.md`). Checked at once against the app's tasks and queues,
   * with the others declared so far: one ConfigError lists every problem. Declare schedules before starting
   * workers or a scheduler.
   */
  schedule(config: ScheduleConfig<Q>): void {
    declareSchedules([...this.scheduleConfigs, config], { tasks: this.registry, queues: this.config.queues });
    this.scheduleConfigs.push(config);
  }

  /** The declared schedules, from the config and `schedule()`. */
  get schedules(): readonly ScheduleConfig<Q>[] {
    return this.scheduleConfigs;
  }

  /** Every schedule with a state row or a declaration: next and last runs, paused, orphaned. */
  listSchedules(): Promise<ScheduleInfo[]> {
    return listSchedules(this.db, { schedules: this.declaredSchedules() });
  }

  /** Sends one run of a declared schedule now, outside its slots. */
  triggerSchedule(name: string): Promise<{ taskId: string }> {
    const schedule = this.declaredSchedules().find((s) => s.name === name);
    if (!schedule)
      return Promise.reject(new HorsiesError('SCHEDULE_NOT_FOUND', `no schedule "${name}" in the app`));
    return triggerSchedule(this.db, schedule);
  }

  /** Pauses a schedule cluster-wide: no scheduler sends its slots until it is resumed. */
  pauseSchedule(name: string): Promise<void> {
    return pauseSchedule(this.db, name, { declared: this.scheduleConfigs.map((s) => s.name) });
  }

  /** Resumes a paused schedule at its next slot. */
  resumeSchedule(name: string): Promise<void> {
    return resumeSchedule(this.db, name, { declared: this.scheduleConfigs.map((s) => s.name) });
  }

  private declaredSchedules() {
    return declareSchedules(this.scheduleConfigs, { tasks: this.registry, queues: this.config.queues });
  }

  /** @internal Used by handles. */
  waitForResult<T>(id: string, timeoutMs?: number): Promise<TaskResult<T>> {
    return this.waiter.wait<T>(id, timeoutMs);
  }

  /** Workflow runs, newest first, by status and name (see {@link WorkflowFilter}). */
  listWorkflows(filter: WorkflowFilter = {}): Promise<WorkflowInfo[]> {
    return listWorkflows(this.db, filter);
  }

  /** A handle on a workflow run by id (pause, resume, cancel, nodes; its result untyped). */
  getWorkflow(id: string): WorkflowHandle<unknown> {
    return new WorkflowHandle<unknown>(this, id);
  }

  /**
   * Delivers the event `name` to every workflow node waiting for it (`wf.waitFor(name, { key })`) with this
   * `key`, at the time it commits; inside the caller's transaction with `tx`. The payload is validated with the
   * waits' schema before anything is stored; an event no workflow of this app waits for throws a
   * {@link SignalError} (`UNKNOWN_SIGNAL`). Returns the runs it resumed. See docs/workflows.md.
   */
  emit(name: string, payload: unknown, options: EmitOptions = {}): Promise<EmitReceipt> {
    return emitEvent(this, name, payload, options);
  }

  /**
   * Delivers a signal to the node `nodeId` of the run `workflowId`, validated with the schema of the signal the
   * node waits for (untyped: `handle.signal(node, payload)` is the typed form). See {@link SignalReceipt}.
   */
  signal(
    workflowId: string,
    nodeId: string,
    payload: unknown,
    options: SignalOptions = {},
  ): Promise<SignalReceipt> {
    return signalNode(this, workflowId, { id: nodeId }, payload, options);
  }

  /** @internal Used by workflow handles. */
  waitForWorkflow<T>(id: string, timeoutMs?: number): Promise<TaskResult<T>> {
    return this.waitForOutcome<T>(workflowOutcomes, id, timeoutMs);
  }

  // Waits on another source of outcomes than tasks (workflows); one waiter, one LISTEN per source.
  private waitForOutcome<T>(source: OutcomeSource, id: string, timeoutMs?: number): Promise<TaskResult<T>> {
    let waiter = this.otherWaiters.get(source);
    if (!waiter) {
      waiter = new ResultWaiter(this.db, { pollIntervalMs: this.config.resultPollIntervalMs }, source);
      this.otherWaiters.set(source, waiter);
    }
    return waiter.wait<T>(id, timeoutMs);
  }

  /** Stops waiting for results and ends the pool the app created. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([this.waiter, ...this.otherWaiters.values()].map((w) => w.stop()));
    await this.db.end();
  }
}
