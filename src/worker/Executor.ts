/**
 * Runs claimed tasks. First it confirms ownership and starts them in one statement (CLAIMED → RUNNING, or
 * EXPIRED when `good_until` passed while they waited), then runs each handler: stored input re-validated
 * against the task's schema, handler called with a context and an AbortSignal, the outcome turned into a finish
 * for the completer.
 *
 *   claimed ──TaskStartMany──► running ──handler──► finish ──► Completer
 *      │                          │
 *      ├─ expired (no attempt)    └─ invalid input → FAILED VALIDATION_FAILED
 *      └─ lost (claim superseded; not run)
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type { TaskDefinition, TaskContext } from '../client/TaskDefinition.js';
import { toCanonicalJson } from '../client/json.js';
import { errorEnvelope, okEnvelope } from '../client/outcome.js';
import type { Database } from '../db/Database.js';
import { TaskStartMany } from '../db/tasks.js';
import type { ClaimedTaskRow, TaskFinish, WorkerIdentity } from '../db/tasks.js';
import { NotSerializableError, TaskError } from '../errors.js';

/** What the executor calls back into. */
export interface ExecutorHooks {
  /** A task will not run here (expired or lost); its slot is free. */
  onSkipped(task: ClaimedTaskRow, reason: 'expired' | 'lost'): void;
  onStarted(task: ClaimedTaskRow, attempt: number): void;
  /** A handler finished; hand the finish to the completer. */
  onFinished(finish: TaskFinish, task: ClaimedTaskRow): void;
}

/** Runs tasks for one worker. */
export class Executor {
  private readonly controllers = new Map<string, AbortController>();
  private readonly runs = new Set<Promise<void>>();

  constructor(
    private readonly db: Database,
    private readonly identity: WorkerIdentity,
    private readonly registry: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>,
    private readonly logger: Logger,
    private readonly hooks: ExecutorHooks,
  ) {}

  /** Number of handlers running now. */
  get running(): number {
    return this.runs.size;
  }

  /** Starts claimed tasks (one statement) and launches their handlers. */
  async startAll(tasks: ClaimedTaskRow[]): Promise<void> {
    const rows = await this.db.run(TaskStartMany, {
      workerId: this.identity.workerId,
      tasks: tasks.map((t) => ({ id: t.id, generation: t.claim_generation })),
    });
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const task of tasks) {
      const row = byId.get(task.id);
      if (!row) {
        this.logger.warn({ taskId: task.id }, 'claim was superseded before the task started; not running it');
        this.hooks.onSkipped(task, 'lost');
      } else if (row.status === 'EXPIRED') {
        this.hooks.onSkipped(task, 'expired');
      } else {
        this.hooks.onStarted(task, row.attempt);
        const run = this.run(task, row.attempt);
        this.runs.add(run);
        void run.finally(() => this.runs.delete(run));
      }
    }
  }

  /** Fires the AbortSignal of every running handler. */
  abortAll(reason: string): void {
    for (const controller of this.controllers.values()) controller.abort(new Error(reason));
  }

  /** Resolves when every running handler has returned. */
  async idle(): Promise<void> {
    while (this.runs.size > 0) await Promise.allSettled([...this.runs]);
  }

  private async run(task: ClaimedTaskRow, attempt: number): Promise<void> {
    const definition = this.registry.get(task.task_name);
    const controller = new AbortController();
    this.controllers.set(task.id, controller);
    try {
      const outcome = definition
        ? await this.execute(definition, task, attempt, controller.signal).catch(unhandled)
        : new TaskError('UNHANDLED_ERROR', `task "${task.task_name}" is not registered in this worker`);
      this.hooks.onFinished(toFinish(task, outcome), task);
    } finally {
      this.controllers.delete(task.id);
    }
  }

  private async execute(
    definition: TaskDefinition<StandardSchemaV1, unknown>,
    task: ClaimedTaskRow,
    attempt: number,
    signal: AbortSignal,
  ): Promise<{ json: string } | TaskError> {
    const validated = await definition.input['~standard'].validate(task.kwargs);
    if (validated.issues) {
      const detail = validated.issues.map((i) => i.message).join('; ');
      return new TaskError(
        'VALIDATION_FAILED',
        `stored input no longer matches the task's schema: ${detail}`,
      );
    }
    const logger = this.logger;
    let taskLogger: Logger | null = null;
    const ctx: TaskContext = {
      taskId: task.id,
      taskName: task.task_name,
      queue: task.queue_name,
      attempt,
      retryCount: task.retry_count,
      signal,
      get logger() {
        return (taskLogger ??= logger.child({ taskId: task.id, task: task.task_name, attempt }));
      },
    };
    let value: unknown;
    try {
      value = await definition.handler(validated.value, ctx);
    } catch (error) {
      return error instanceof TaskError ? error : unhandled(error);
    }
    if (value instanceof TaskError) return value;
    try {
      return { json: toCanonicalJson(value === undefined ? null : value, 'result') };
    } catch (error) {
      if (!(error instanceof NotSerializableError)) throw error;
      return new TaskError('RESULT_NOT_SERIALIZABLE', error.message);
    }
  }
}

function toFinish(task: ClaimedTaskRow, outcome: { json: string } | TaskError): TaskFinish {
  if (outcome instanceof TaskError) {
    return {
      id: task.id,
      generation: task.claim_generation,
      status: 'FAILED',
      result: errorEnvelope(outcome),
      errorCode: outcome.code,
      errorMessage: outcome.message,
      failedReason: null,
    };
  }
  return {
    id: task.id,
    generation: task.claim_generation,
    status: 'COMPLETED',
    result: okEnvelope(outcome.json),
    errorCode: null,
    errorMessage: null,
    failedReason: null,
  };
}

const MAX_STACK_CHARS = 4000;

function unhandled(error: unknown): TaskError {
  if (error instanceof Error) {
    return new TaskError('UNHANDLED_ERROR', `${error.name}: ${error.message}`, {
      name: error.name,
      stack: (error.stack ?? '').slice(0, MAX_STACK_CHARS),
    });
  }
  return new TaskError('UNHANDLED_ERROR', `non-Error thrown: ${String(error)}`);
}
