/**
 * The app: one connection pool, one schema, the registry of task definitions. Producers send through it,
 * workers run its tasks, handles wait on it.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { pino } from 'pino';
import type { Logger } from 'pino';
import { Database } from '../db/Database.js';
import { migrate } from '../db/Migrator.js';
import type { MigrateResult } from '../db/Migrator.js';
import { AttemptListByTask, TaskGet } from '../db/tasks.js';
import { ConfigError, UnknownQueueError } from '../errors.js';
import type { TaskResult } from '../errors.js';
import type { TaskInfo } from '../types.js';
import { Worker } from '../worker/Worker.js';
import type { WorkerConfig } from '../worker/config.js';
import { resolveAppConfig } from './config.js';
import type { AppConfig, ResolvedAppConfig } from './config.js';
import { ResultWaiter } from './ResultWaiter.js';
import type { SendContext } from './send.js';
import { TaskDefinition } from './TaskDefinition.js';
import type { TaskConfig } from './TaskDefinition.js';
import type { HandleHost } from './TaskHandle.js';
import { TaskHandle } from './TaskHandle.js';
import { toTaskInfo } from './taskInfo.js';

const APP_BRAND = Symbol.for('horsies.App');

/** True when `value` is an {@link App} (also across two copies of the library). */
export function isApp(value: unknown): value is App {
  return (
    typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[APP_BRAND] === true
  );
}

/** Creates an app. Validates the whole config at once and throws a ConfigError naming every bad field. */
export function createApp(config: AppConfig = {}): App {
  return new App(config);
}

/** See {@link createApp}. */
export class App implements HandleHost {
  readonly [APP_BRAND] = true;
  /** The validated config, with defaults applied. */
  readonly config: ResolvedAppConfig;
  /** The app's logger. */
  readonly logger: Logger;
  /** @internal The database seam. */
  readonly db: Database;
  private readonly registry = new Map<string, TaskDefinition<StandardSchemaV1, unknown>>();
  private readonly sendContext: SendContext;
  private readonly waiter: ResultWaiter;
  private closed = false;

  constructor(config: AppConfig = {}) {
    this.config = resolveAppConfig(config);
    this.logger =
      this.config.logger ?? pino({ name: 'horsies', level: process.env.HORSIES_LOG_LEVEL || 'info' });
    this.db = new Database({
      pool: this.config.pool,
      connectionString: this.config.databaseUrl ?? process.env.DATABASE_URL,
      poolSize: this.config.poolSize,
      schema: this.config.schema,
      preparedStatements: this.config.preparedStatements,
    });
    this.sendContext = {
      db: this.db,
      queues: this.config.queues,
      maxPayloadBytes: this.config.maxPayloadBytes,
    };
    this.waiter = new ResultWaiter(this.db, { pollIntervalMs: this.config.resultPollIntervalMs });
  }

  /** Defines a task. The input type comes from the schema, the result type from the handler. */
  task<S extends StandardSchemaV1, R>(config: TaskConfig<S, R>): TaskDefinition<S, R> {
    const problems = [];
    if (typeof config.name !== 'string' || config.name.length === 0 || config.name.length > 255) {
      problems.push({
        field: 'name',
        value: config.name,
        message: 'must be a string of 1 to 255 characters',
      });
    } else if (this.registry.has(config.name)) {
      problems.push({ field: 'name', value: config.name, message: 'is already defined in this app' });
    }
    if (typeof config.input?.['~standard']?.validate !== 'function') {
      problems.push({
        field: 'input',
        value: typeof config.input,
        message: 'must be a Standard Schema validator (zod, valibot...)',
      });
    }
    if (typeof config.handler !== 'function') {
      problems.push({ field: 'handler', value: config.handler, message: 'must be a function' });
    }
    const priority = config.priority ?? 100;
    if (!Number.isInteger(priority) || priority < 1 || priority > 100) {
      problems.push({
        field: 'priority',
        value: config.priority,
        message: 'must be an integer from 1 to 100',
      });
    }
    if (problems.length > 0) throw new ConfigError(`task definition "${String(config.name)}"`, problems);
    const queue = config.queue ?? this.config.defaultQueue;
    if (!this.config.queues.includes(queue)) throw new UnknownQueueError(queue, this.config.queues);
    const definition = new TaskDefinition<S, R>({ ...config, queue, priority }, this.sendContext, this);
    this.registry.set(definition.name, definition as unknown as TaskDefinition<StandardSchemaV1, unknown>);
    return definition;
  }

  /** The registered task definitions, by name. */
  get tasks(): ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>> {
    return this.registry;
  }

  /** Creates a worker for this app's tasks. Call `start()` on it. */
  worker(config: WorkerConfig = {}): Worker {
    return new Worker(this, config);
  }

  /** Applies pending migrations to the app's schema. Safe to call from many processes at once. */
  migrate(): Promise<MigrateResult> {
    return migrate(this.db);
  }

  /** A handle for any task id (its result type unknown). */
  handle<R = unknown>(id: string): TaskHandle<R> {
    return new TaskHandle<R>(this, id, '');
  }

  /** The task's row, with its attempts when asked; null if there is no such task. */
  async getTask(id: string, options: { attempts?: boolean } = {}): Promise<TaskInfo | null> {
    const [row] = await this.db.run(TaskGet, { id });
    if (!row) return null;
    const attempts = options.attempts ? await this.db.run(AttemptListByTask, { taskId: id }) : undefined;
    return toTaskInfo(row, attempts);
  }

  /** @internal Used by handles. */
  waitForResult<T>(id: string, timeoutMs?: number): Promise<TaskResult<T>> {
    return this.waiter.wait<T>(id, timeoutMs);
  }

  /** Stops waiting for results and ends the pool the app created. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.waiter.stop();
    await this.db.end();
  }
}
