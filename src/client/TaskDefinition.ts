/** A registered task type: its name, input schema, handler and defaults; the entry point for sending. */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Logger } from 'pino';
import type pg from 'pg';
import type { TransactionClient } from '../db/HeldTransaction.js';
import type { TaskError, TaskErrorCode } from '../errors.js';
import type { JsonValue } from '../types.js';
import type { RateLimit } from './config.js';
import type { ErrorCodeMap } from './policy.js';
import type { ResolvedRetryPolicy, RetryPolicy } from '../retry.js';
import type { SendCallOptions, SendContext, SendTarget } from './send.js';
import type { SendOptions } from './sendOptions.js';
import { prepareTask, prepareTasks, sendPrepared } from './send.js';
import type { HandleHost } from './TaskHandle.js';
import { TaskHandle } from './TaskHandle.js';

/** What a handler gets besides its input. */
export interface TaskContext {
  /** The task's id. */
  readonly taskId: string;
  /** The task's registered name. */
  readonly taskName: string;
  /** The queue it was claimed from. */
  readonly queue: string;
  /** 1-based number of this execution attempt. */
  readonly attempt: number;
  /** How many retries came before this attempt. */
  readonly retryCount: number;
  /** The workflow node this task runs for, or null for a task sent on its own. */
  readonly workflow: TaskWorkflowContext | null;
  /** Fires when the run should stop (shutdown, timeout, cancellation). Pass it to I/O that accepts one. */
  readonly signal: AbortSignal;
  /** A logger bound to this task. */
  readonly logger: Logger;
  /**
   * Reports how far the run got: any JSON value (`0.4`, `{ done: 40, total: 100 }`), at most 16 KiB. Readable
   * with `app.getTask()`, `horsies tasks show` and the dashboard, announced on the `task_progress` channel.
   * Throttled: the first report is written at once, then at most one every 500 ms (the latest value wins), and
   * the last one is written before the task's outcome. Throws at once for a value JSON cannot carry.
   */
  progress(value: JsonValue): void;
  /**
   * The transactional finish: runs `fn` inside a transaction and, in the same transaction, completes the task with
   * the value `fn` returns (the COMPLETED row and its attempt row, fenced on this run's claim). `fn`'s writes through
   * `tx` (sends with `{ tx }` too) and the completion commit together or not at all, so a handler whose effects are
   * writes to this database runs them exactly once, even across crashes and retries. Return what it returns:
   * `return ctx.transaction(async (tx) => { ...; return value })`.
   *
   * - `fn` returns or throws a `TaskError`, or throws anything else: everything is rolled back, and the failure is
   *   recorded as usual (retried by the task's policy). The promise resolves to the returned `TaskError`, or
   *   rejects with what was thrown; another call may follow.
   * - The claim is lost before the commit (reaped, claimed again, cancelled): everything is rolled back and it
   *   rejects with `TaskTransactionError` `TASK_CLAIM_LOST`; nothing of this run is written.
   * - The run is stopped while `fn` runs (timeout, cancel, shutdown): the AbortSignal ends the transaction (rolled
   *   back) and it rejects with `TRANSACTION_ABORTED`.
   * - Blocking tasks cannot use it (`TRANSACTION_UNAVAILABLE`), nor can a run use it twice once it committed.
   *
   * The connection comes from a pool of the worker's own (at most `concurrency` connections, opened on first use),
   * or from `options.pool`. Do not COMMIT or ROLLBACK on `tx` yourself.
   */
  transaction<T>(
    fn: (tx: TransactionClient) => Promise<T | TaskError> | T | TaskError,
    options?: TransactionOptions,
  ): Promise<T | TaskError>;
  /**
   * A durable step: runs `fn` once across the task's attempts. Its result (JSON only; anything else throws a
   * `NotSerializableError`) is stored, fenced on this run's claim like progress; a later attempt (a retry after a
   * crash or a failure) gets the stored result back without running `fn` again, and goes on from the first step
   * not done. Each step of a run needs its own `name`. A run that lost its claim stores nothing: the step throws
   * (`TASK_CLAIM_LOST`). Not available in blocking tasks (they run on a thread). See docs/tasks.md.
   */
  step<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
}

/** Options of {@link TaskContext.transaction}. */
export interface TransactionOptions {
  /**
   * The pool to take the connection from; it must reach the app's database (the task row is written through it).
   * Default: a pool the worker opens for transactional finishes.
   */
  pool?: pg.Pool | undefined;
}

/** Where a workflow task runs: its workflow and node. */
export interface TaskWorkflowContext {
  /** The workflow run's id. */
  readonly id: string;
  /** The node's id in the workflow (as in results and the CLI). */
  readonly nodeId: string;
  /** The node's index in the workflow. */
  readonly nodeIndex: number;
}

/**
 * A handler: returns the result, or returns or throws a {@link TaskError}. `C` is the codes it may return (any
 * string unless its task declares `errors`).
 */
export type TaskHandler<I, R, C extends string = string> = (
  input: I,
  ctx: TaskContext,
) => R | TaskError<C> | Promise<R | TaskError<C>>;

/**
 * Definition of a task, given to `app.task()`. `Q` is the app's queue names; `C` the error codes the task
 * declares in `errors` (any string when it declares none).
 */
export interface TaskConfig<
  S extends StandardSchemaV1,
  R,
  Q extends string = string,
  C extends string = string,
> {
  /** Unique name within the app; workers claim by name. 1–255 characters. */
  name: string;
  /** Standard Schema validator (zod, valibot, arktype...) of the input, checked at send and before the run. */
  input: S;
  /** The code that runs. */
  handler: TaskHandler<StandardSchemaV1.InferOutput<S>, R, NoInfer<C>>;
  /** Queue; default: the app's default queue. One of the queues declared in `createApp`. */
  queue?: Q | undefined;
  /**
   * The error codes the task can end with, besides the built-in ones (UPPER_SNAKE_CASE). Declared, they type
   * `result.error.code` as their union with the built-in codes, and a handler returning another code, or an
   * `errorCodes` entry or `defaultErrorCode` naming one, does not compile. Default: undeclared (any code).
   */
  errors?: readonly C[] | undefined;
  /** 1–100, lower runs first. Default 100. */
  priority?: number | undefined;
  /** Retry policy; fields not given come from the app's `retry`. Default: no retries. */
  retry?: RetryPolicy | undefined;
  /**
   * Execution timeout: the handler's AbortSignal fires and the attempt ends `TASK_TIMEOUT` (retried only if
   * listed in `retry.retryOn`). Default: the app's `timeoutMs`, else none.
   */
  timeoutMs?: number | undefined;
  /** Error classes to codes, consulted before the app's map (first `instanceof` match wins). */
  errorCodes?: ErrorCodeMap<NoInfer<C>> | undefined;
  /** Code of a thrown error no map names. Default `UNHANDLED_ERROR`. */
  defaultErrorCode?: NoInfer<C> | undefined;
  /**
   * How long a COMPLETED task is kept; 0 deletes it at the next retention pass once waiters had time to read it.
   * Default: its queue's `retentionMs`, else the app's `recovery.terminalRecordRetentionHours`.
   */
  retentionMs?: number | undefined;
  /**
   * What a worker that shuts down does with a run of this task: `continue` lets it finish within the drain
   * timeout; `resubmit` stops it and hands it back to PENDING without counting the attempt; `stop` stops it and
   * fails it with `WORKER_SHUTDOWN`. Default `continue`. Runs still going at the drain timeout are resubmitted.
   */
  shutdown?: ShutdownPolicy | undefined;
  /**
   * CPU-bound work: run the handler on a worker thread, so it cannot starve the event loop that sends the
   * worker's heartbeats. The thread loads the app module itself (the worker's `appModule`); the input and result
   * cross threads as JSON. A timeout, cancel or shutdown that the handler does not heed within the grace period
   * terminates its thread. Default false.
   */
  blocking?: boolean | undefined;
  /** Most runs of this task at once in one worker (on top of queue and cluster caps). Default: no limit. */
  maxConcurrentPerWorker?: number | undefined;
  /**
   * Cluster-wide limit on how often this task starts, over all workers: at most `max` starts in any `intervalMs`
   * window (on top of its queue's `rateLimit`; see docs/capacity.md, "Rate limits"). Default: none.
   */
  rateLimit?: RateLimit | undefined;
}

/** See {@link TaskConfig.shutdown}. */
export type ShutdownPolicy = 'continue' | 'resubmit' | 'stop';

/** The policies of a task with app defaults applied. */
export interface ResolvedTaskPolicies {
  queue: string;
  priority: number;
  retry: ResolvedRetryPolicy;
  timeoutMs: number | null;
  errorCodes: ErrorCodeMap;
  defaultErrorCode: string | undefined;
  retentionMs: number | null;
  shutdown: ShutdownPolicy;
  blocking: boolean;
  maxConcurrentPerWorker: number | null;
  rateLimit: RateLimit | null;
}

/** One item of `sendMany`: an input and its own options. */
export type SendManyItem<I, Q extends string = string> = { input: I } & SendOptions<Q>;

/** The codes of the {@link TaskError}s in `R` that `C` does not list. */
export type UndeclaredCodes<R, C extends string> =
  R extends TaskError<infer K> ? (K extends C ? never : K) : never;

/**
 * Fails a task definition that declares its `errors` and whose handler returns a {@link TaskError} with another
 * code (such an error lands in the inferred result type `R`, where this finds it).
 */
export type DeclaredCodesCheck<R, C extends string> = string extends C
  ? unknown
  : [UndeclaredCodes<R, C>] extends [never]
    ? unknown
    : {
        handler: `returns a TaskError with the code ${UndeclaredCodes<R, C>}, not listed in the task's errors`;
      };

/** The result type of a handler returning `R`: without the {@link TaskError}s it may return. */
export type TaskValue<R> = Exclude<R, TaskError>;

/**
 * A registered task. `S` is its input schema, `R` its result type, `Q` the app's queue names, `C` the error codes
 * it declares (any string when it declares none).
 */
export class TaskDefinition<
  S extends StandardSchemaV1 = StandardSchemaV1,
  R = unknown,
  Q extends string = string,
  C extends string = string,
> {
  readonly name: string;
  readonly queue: Q;
  readonly priority: number;
  readonly input: S;
  readonly handler: TaskHandler<StandardSchemaV1.InferOutput<S>, R, C>;
  /** Retry, timeout, error mapping and retention, with app defaults applied. */
  readonly policies: ResolvedTaskPolicies;
  private readonly target: SendTarget;

  /** @internal Made by `app.task()`. */
  constructor(
    config: TaskConfig<S, R, Q, C>,
    policies: ResolvedTaskPolicies,
    private readonly ctx: SendContext,
    private readonly host: HandleHost,
  ) {
    this.name = config.name;
    this.queue = policies.queue as Q;
    this.priority = policies.priority;
    this.input = config.input;
    this.handler = config.handler;
    this.policies = policies;
    this.target = {
      name: this.name,
      queue: this.queue,
      priority: this.priority,
      schema: this.input,
      maxRetries: policies.retry.maxRetries,
      retentionMs: policies.retentionMs,
      // Only a task that can retry needs its policy stored (the reaper reads it); others store nothing.
      taskOptions: policies.retry.maxRetries > 0 ? JSON.stringify({ retry: policies.retry }) : null,
    };
  }

  /** Sends one task. Validates everything before storing; throws a typed error on bad input. */
  async send(
    input: StandardSchemaV1.InferInput<S>,
    options: SendOptions<Q> & SendCallOptions = {},
  ): Promise<TaskHandle<R, TaskErrorCode<C>>> {
    const { tx, ...sendOptions } = options;
    const task = await prepareTask(this.ctx, this.target, input, sendOptions);
    const { ids, deduplicated } = await sendPrepared(this.ctx, this.target, [task], tx);
    return this.sentHandle(ids[0] as string, deduplicated.has(0));
  }

  /**
   * Sends many tasks in one statement (two when some carry a `dedupe` or `debounce` key, in one transaction). All
   * items are validated first: if any is bad, nothing is stored. Returns one handle per item, in order; items that
   * share a dedupe or debounce key stand for one task (see docs/capacity.md).
   */
  async sendMany(
    items: ReadonlyArray<SendManyItem<StandardSchemaV1.InferInput<S>, Q>>,
    options: SendCallOptions = {},
  ): Promise<TaskHandle<R, TaskErrorCode<C>>[]> {
    const tasks = await prepareTasks(this.ctx, this.target, items);
    const { ids, deduplicated } = await sendPrepared(this.ctx, this.target, tasks, options.tx);
    return ids.map((id, index) => this.sentHandle(id, deduplicated.has(index)));
  }

  /** A handle for an existing task of this type. */
  handle(id: string): TaskHandle<R, TaskErrorCode<C>> {
    return new TaskHandle<R, TaskErrorCode<C>>(this.host, id, this.name);
  }

  private sentHandle(id: string, deduplicated: boolean): TaskHandle<R, TaskErrorCode<C>> {
    return new TaskHandle<R, TaskErrorCode<C>>(this.host, id, this.name, deduplicated);
  }
}
