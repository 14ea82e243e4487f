/** A reference to one sent task: wait for its result, read its row. */
import type { TaskResult } from '../errors.js';
import type { TaskInfo } from '../types.js';
import type { CancelResult } from './operations.js';

/** What a handle needs from its app. */
export interface HandleHost {
  waitForResult<T>(id: string, timeoutMs?: number): Promise<TaskResult<T>>;
  getTask(id: string, options?: { attempts?: boolean | undefined }): Promise<TaskInfo | null>;
  cancel(id: string): Promise<CancelResult>;
}

/**
 * A sent task. `R` is the task's result type; `C` the type of its error codes (any string, or the codes its task
 * declares and the built-in ones).
 */
export class TaskHandle<R, C extends string = string> {
  /** @internal Returned by a task definition's `send()`. */
  constructor(
    private readonly host: HandleHost,
    /** The task's id. */
    readonly id: string,
    /** The task's registered name. */
    readonly taskName: string,
    /**
     * True when the send that returned this handle stored no task of its own: a task already held its `dedupe`
     * or `debounce` key (for a debounce, that task now carries this send's input). False otherwise, and on a
     * handle made from an id.
     */
    readonly deduplicated: boolean = false,
  ) {}

  /**
   * Waits for the task to finish. Never throws for an outcome: resolves `{ ok: true, value }` or
   * `{ ok: false, error }` with codes such as the handler's own, `WAIT_TIMEOUT` (nothing changed, wait again) or
   * `TASK_NOT_FOUND`. Without `timeoutMs` it waits as long as it takes.
   */
  result(options: { timeoutMs?: number | undefined } = {}): Promise<TaskResult<R, C>> {
    // The stored code is one the task declared or a built-in one (its errors are checked where they are made).
    return this.host.waitForResult<R>(this.id, options.timeoutMs) as Promise<TaskResult<R, C>>;
  }

  /** Cancels the task: at once if it has not started, through its worker if it runs. */
  cancel(): Promise<CancelResult> {
    return this.host.cancel(this.id);
  }

  /** The task's current row (and its attempts, when asked), or null if it no longer exists. */
  info(options: { attempts?: boolean | undefined } = {}): Promise<TaskInfo | null> {
    return this.host.getTask(this.id, options);
  }
}
