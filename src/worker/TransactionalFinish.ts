/**
 * The transactional finish (`ctx.transaction(fn)`): a handler's writes and its task's completion in one
 * transaction. `fn` runs on a connection inside `BEGIN`; when it returns a value, the task's COMPLETED row and
 * attempt row are written on the same connection, fenced on this run's worker, claim token and the absence of a
 * cancel request; then everything commits. Either all of it is durable or none of it, so a handler whose effects
 * are rows in this database has them exactly once per completed task.
 *
 * The fenced finish and the COMMIT go out back to back, in one round trip (`HeldTransaction.commitAfter`). The
 * finish (`TaskFinishHeld`) raises when its fence finds nothing, which aborts the transaction, and the server then
 * rolls it back in place of the COMMIT, so the handler's writes can never commit without their outcome. The commit waits for the WAL flush, as every outcome's
 * does: a result that a caller has seen never disappears in a server crash. The task_done notification goes out
 * after the commit, through the worker's DoneNotices, never inside it: a transaction that notifies holds a
 * database-wide lock from its commit until its WAL is flushed, which would line up every handler's commit.
 *
 * One run's transaction, as a state machine:
 *
 *   idle ──transaction()──► open ──fn returned a value, fenced write found the task──► committing ──► committed
 *    ▲                       │ ├─ fenced write found nothing (claim lost, cancel requested) ──► fenced
 *    │                       │ └─ AbortSignal (timeout, cancel, shutdown, claim lost) ──► ended
 *    └── rolled back ────────┘    fn threw, or returned a TaskError (recorded as usual)
 *
 * A committed outcome bypasses the completer's batch; the executor hands it to the worker as written, and the
 * finish hooks (the workflow step) follow it as any other. A fenced run writes nothing of its own (the executor
 * asks the completer for CANCELLED, which the fence turns into nothing unless a cancel request stands). Ended and
 * failed transactions leave the outcome to the usual path.
 *
 * Connections come from a pool of this worker's own, at most `concurrency` connections, opened on first use: a
 * handler holds its connection for as long as `fn` runs, and on the app's pool enough of them would starve the
 * heartbeats that keep every claim alive.
 */
import type pg from 'pg';
import type { Logger } from 'pino';
import { okEnvelope } from '../outcome.js';
import { toCanonicalJson } from '../json.js';
import type { TransactionOptions } from '../client/TaskDefinition.js';
import type { Database } from '../db/Database.js';
import { HeldTransaction, createTransactionPool } from '../db/HeldTransaction.js';
import type { TransactionClient } from '../db/HeldTransaction.js';
import { FINISH_FENCED, TaskFinishHeld } from '../db/tasks.js';
import type { ClaimedTaskRow, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import { TaskError, TaskTransactionError } from '../errors.js';
import type { DoneNotices } from './DoneNotices.js';
import { settlesWithin } from './timing.js';

/** Settings of a {@link TransactionalFinish}. */
export interface TransactionalFinishOptions {
  workerId: string;
  /** Most connections of the worker's own pool: the worker's concurrency. */
  poolSize: number;
  /**
   * Where the task_done notifications of committed outcomes go, sent after the commit (as the completer's are);
   * null: the finish notifies inside its own commit.
   */
  notices?: DoneNotices | null;
}

/** How a run's transactional finish ended, as far as the executor must know. */
export type TransactionVerdict =
  /** The outcome is written: report it as written, do not hand anything to the completer. */
  | { kind: 'committed'; finish: TaskFinish; row: TaskFinishRow }
  /** The fence failed: nothing was written; the task is not this run's any more (or a cancel stands). */
  | { kind: 'fenced' };

/** Serves `ctx.transaction()` for one worker's runs. A worker service: `stop()` ends its pool. */
export class TransactionalFinish {
  private pool: pg.Pool | null = null;
  private closed = false;

  constructor(
    private readonly db: Database,
    private readonly logger: Logger,
    private readonly options: TransactionalFinishOptions,
  ) {}

  /** The transactional finish of one run of `task`, ended by `signal`. */
  forRun(task: ClaimedTaskRow, signal: AbortSignal): TransactionalRun {
    return new TransactionalRun(this, task, signal);
  }

  start(): void {}

  /** Closes the worker's pool (after the drain: no run is left to use it). Idempotent. */
  async stop(): Promise<void> {
    this.closed = true;
    const pool = this.pool;
    this.pool = null;
    await pool?.end();
  }

  /** @internal */
  get database(): Database {
    return this.db;
  }

  /** @internal */
  get workerId(): string {
    return this.options.workerId;
  }

  /** @internal Where task_done notifications go after the commit; null: inside it. */
  get notices(): DoneNotices | null {
    return this.options.notices ?? null;
  }

  /** @internal */
  get log(): Logger {
    return this.logger;
  }

  /** @internal The pool a transaction takes its connection from. */
  poolFor(options: TransactionOptions | undefined): pg.Pool | null {
    if (options?.pool) return options.pool;
    if (this.closed) return null;
    return (this.pool ??= createTransactionPool(this.db, this.options.poolSize));
  }
}

/**
 * `ctx.transaction()` where it cannot be served: in a blocking task (it runs on a worker thread, away from the
 * worker's claim, its fencing and its AbortSignal), or in a worker built without transactional finishes.
 */
export function refuseTransaction(taskId: string, blocking: boolean): Promise<never> {
  return Promise.reject(
    new TaskTransactionError(
      'TRANSACTION_UNAVAILABLE',
      taskId,
      blocking
        ? 'ctx.transaction() is not available to blocking tasks: they run on a worker thread, apart from the ' +
            "claim that fences the task's completion; run the database work in a task that is not blocking"
        : 'ctx.transaction() is not available in this worker',
    ),
  );
}

type State = 'idle' | 'open' | 'committed' | 'fenced' | 'ended';

/** The transactional finish of one run; see the module comment. */
export class TransactionalRun {
  private state: State = 'idle';
  private held: HeldTransaction | null = null;
  private current: Promise<unknown> | null = null;
  private verdict: TransactionVerdict | null = null;
  /** The run is over: nothing may start or commit any more. */
  private concluded = false;

  constructor(
    private readonly owner: TransactionalFinish,
    private readonly task: ClaimedTaskRow,
    private readonly signal: AbortSignal,
  ) {}

  /** `ctx.transaction(fn, options)`. */
  run<T>(
    fn: (tx: TransactionClient) => Promise<T | TaskError> | T | TaskError,
    options?: TransactionOptions,
  ): Promise<T | TaskError> {
    if (this.state !== 'idle' || this.concluded) {
      const why =
        this.state === 'open'
          ? 'a transaction of this run is still open (await it before starting another)'
          : this.state === 'committed'
            ? 'this run already completed its task in a transaction'
            : 'the run has ended';
      return Promise.reject(this.error('TRANSACTION_UNAVAILABLE', why));
    }
    if (this.signal.aborted) return Promise.reject(this.aborted());
    const pool = this.owner.poolFor(options);
    if (!pool) return Promise.reject(this.error('TRANSACTION_UNAVAILABLE', 'the worker has stopped'));
    this.state = 'open';
    const running = this.execute(pool, fn);
    this.current = running;
    void running.then(
      () => this.settle(running),
      () => this.settle(running),
    );
    return running;
  }

  /**
   * Called once the handler's run is over (returned, or stopped and given its grace). An open transaction the
   * handler did not wait for is rolled back; a commit under way gets up to `graceMs` to land. Returns what the
   * executor must do instead of writing the handler's outcome, or null to write it as usual.
   */
  async conclude(graceMs: number): Promise<TransactionVerdict | null> {
    this.concluded = true;
    if (this.held?.open) {
      this.owner.log.warn(
        { taskId: this.task.id },
        'the run ended while its transaction was still open; rolled back',
      );
      this.held.interrupt(this.owner.database, new Error('the run ended before its transaction did'));
    }
    // Only a commit already sent is waited for; anything else was just ended or sees `concluded` and stops.
    const current = this.current;
    if (current && this.held?.committing)
      await settlesWithin(
        current.catch(() => undefined),
        graceMs,
      );
    return this.verdict;
  }

  private settle(running: Promise<unknown>): void {
    if (this.current === running) this.current = null;
  }

  private async execute<T>(
    pool: pg.Pool,
    fn: (tx: TransactionClient) => Promise<T | TaskError> | T | TaskError,
  ): Promise<T | TaskError> {
    const held = await HeldTransaction.begin(pool).catch((error: unknown) => {
      this.reopen();
      throw error;
    });
    this.held = held;
    const onAbort = (): void => held.interrupt(this.owner.database, this.aborted());
    this.signal.addEventListener('abort', onAbort, { once: true });
    // A stop, or the end of the run, that came while the connection was checked out.
    if (this.signal.aborted || this.concluded) onAbort();
    let sentCommit = false;
    try {
      const value = await fn(held.client);
      if (!held.open) throw this.ended();
      if (value instanceof TaskError) {
        await held.rollback();
        this.reopen();
        return value;
      }
      const finish = this.completion(value);
      // The fenced finish and the COMMIT go out together: a fence that finds nothing raises, and the server then
      // rolls back in place of the COMMIT.
      sentCommit = true;
      const written = await held.commitAfter(this.owner.database, TaskFinishHeld, {
        tasks: [finish],
        unlessCancelRequested: true,
        notifyLater: this.owner.notices !== null,
      });
      if (!written.committed) {
        sentCommit = false;
        if ((written.error as { code?: unknown } | null)?.code !== FINISH_FENCED) throw written.error;
        this.state = 'fenced';
        this.verdict = { kind: 'fenced' };
        throw this.error(
          'TASK_CLAIM_LOST',
          "the task is no longer this run's (reaped, claimed again or cancelled); its transaction was rolled back",
        );
      }
      const row = written.rows[0];
      if (!row) throw new Error('the finish committed without returning its row');
      this.state = 'committed';
      this.verdict = { kind: 'committed', finish, row };
      this.owner.notices?.add([row.id]);
      return value;
    } catch (error) {
      if (held.open) await held.rollback();
      if (this.state === 'open') {
        // After a failed COMMIT nobody knows here whether it landed: no second try in this run. (The fence
        // settles it: the failure written for this run changes nothing if the completion did land.)
        if (this.signal.aborted || this.concluded || sentCommit) {
          this.state = 'ended';
          if (sentCommit) throw error;
          throw error instanceof TaskTransactionError ? error : this.ended(error);
        }
        this.reopen();
      }
      throw error;
    } finally {
      this.signal.removeEventListener('abort', onAbort);
    }
  }

  // The COMPLETED finish of `value`; throws NotSerializableError (path `result...`) as a handler's return would.
  private completion(value: unknown): TaskFinish {
    return {
      id: this.task.id,
      workerId: this.owner.workerId,
      token: this.task.claim_token,
      status: 'COMPLETED',
      result: okEnvelope(toCanonicalJson(value === undefined ? null : value, 'result')),
      errorCode: null,
      errorMessage: null,
      failedReason: null,
      retryDelayMs: 0,
      crashed: false,
    };
  }

  // Rolled back for a reason of the callback: the run may try again.
  private reopen(): void {
    if (this.state === 'open') this.state = 'idle';
    this.held = null;
  }

  // Why an open transaction was ended from outside: the run's stop, or the run's end.
  private ended(cause?: unknown): TaskTransactionError {
    if (!this.signal.aborted) {
      return this.error(
        'TRANSACTION_UNAVAILABLE',
        'the run ended before its transaction did; it was rolled back',
        cause,
      );
    }
    return this.aborted(cause);
  }

  private aborted(cause?: unknown): TaskTransactionError {
    const reason = this.signal.reason instanceof Error ? this.signal.reason.message : 'the run was stopped';
    return this.error(
      'TRANSACTION_ABORTED',
      `${reason}; its transaction was rolled back`,
      cause ?? this.signal.reason,
    );
  }

  private error(code: TaskTransactionError['code'], message: string, cause?: unknown): TaskTransactionError {
    return new TaskTransactionError(code, this.task.id, message, cause === undefined ? undefined : { cause });
  }
}
