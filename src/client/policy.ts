/**
 * Per-task policies, set on the task definition (with app-wide defaults): retries and backoff, the execution
 * timeout, the mapping of error classes to codes, and how long a completed task is kept.
 */
import { z } from 'zod';
import { BUILTIN_ERROR_CODES, isValidErrorCode } from '../errors.js';

/** How the delay before retry n (1 for the first retry) grows. */
export type BackoffStrategy = 'constant' | 'linear' | 'exponential' | 'exponential_jitter';

/** When and how a failed task is retried. */
export interface RetryPolicy {
  /** Retries after the first attempt. Default 0 (no retry). */
  maxRetries?: number;
  /**
   * Error codes that retry; any other code fails the task at once. Required when `maxRetries` > 0. May include
   * built-in codes such as `TASK_TIMEOUT`, `WORKER_CRASHED` or `UNHANDLED_ERROR`.
   */
  retryOn?: string[];
  /**
   * Delay growth, with `baseDelayMs` = b and retry number n: `constant` b; `linear` b·n; `exponential` b·2^(n−1);
   * `exponential_jitter` uniform(0, b·2^(n−1)). Or an explicit list of delays in ms, the last one repeating.
   * Default `exponential`.
   */
  backoff?: BackoffStrategy | number[];
  /** Base delay b. Default 1,000 ms. 0 re-queues at once. */
  baseDelayMs?: number;
  /** Cap on any computed delay. Default 3,600,000 ms (one hour). */
  maxDelayMs?: number;
  /** Spread every delay by ±this fraction (0.1 = ±10%), after the cap. Default 0. */
  jitter?: number;
}

/** A {@link RetryPolicy} with defaults applied. */
export interface ResolvedRetryPolicy {
  maxRetries: number;
  retryOn: readonly string[];
  backoff: BackoffStrategy | readonly number[];
  baseDelayMs: number;
  maxDelayMs: number;
  jitter: number;
}

/** An error class, matched with `instanceof` (so subclasses match too). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ErrorClass = abstract new (...args: any[]) => Error;

/** Ordered pairs of error class and code; the first class the thrown error is an instance of wins. */
export type ErrorCodeMap = ReadonlyArray<readonly [ErrorClass, string]>;

export const DEFAULT_RETRY_POLICY: ResolvedRetryPolicy = {
  maxRetries: 0,
  retryOn: [],
  backoff: 'exponential',
  baseDelayMs: 1000,
  maxDelayMs: 3_600_000,
  jitter: 0,
};

const builtinCodes: readonly string[] = BUILTIN_ERROR_CODES;

/** A code that is UPPER_SNAKE; `userCode` also refuses the built-in codes. */
export function errorCodeSchema(userCode: boolean) {
  return z.string().superRefine((code, ctx) => {
    if (!isValidErrorCode(code))
      ctx.addIssue({ code: 'custom', message: 'must be an UPPER_SNAKE_CASE code' });
    else if (userCode && builtinCodes.includes(code)) {
      ctx.addIssue({ code: 'custom', message: 'is a built-in code, reserved for the library' });
    }
  });
}

const retryPolicySchema = z.strictObject({
  maxRetries: z.number().int().min(0).max(1000).optional(),
  retryOn: z.array(errorCodeSchema(false)).optional(),
  backoff: z
    .union([
      z.enum(['constant', 'linear', 'exponential', 'exponential_jitter']),
      z.array(z.number().int().min(0)).min(1, 'must list at least one interval'),
    ])
    .optional(),
  baseDelayMs: z.number().int().min(0).optional(),
  maxDelayMs: z.number().int().min(0).optional(),
  jitter: z.number().min(0).max(1).optional(),
});

const errorCodeMapSchema = z.array(
  z.tuple([
    z.custom<ErrorClass>(
      (v) => (typeof v === 'function' && v.prototype instanceof Error) || v === Error,
      'must be an Error class',
    ),
    errorCodeSchema(true),
  ]),
);

/** The policy fields shared by task definitions and the app's defaults. */
export const policyFields = {
  retry: retryPolicySchema.optional(),
  timeoutMs: z.number().int().min(1).optional(),
  errorCodes: errorCodeMapSchema.optional(),
  defaultErrorCode: errorCodeSchema(true).optional(),
};

/** Applies defaults to a retry policy, task-level fields over app-level ones. */
export function resolveRetryPolicy(
  task: RetryPolicy | undefined,
  app: RetryPolicy | undefined,
): ResolvedRetryPolicy {
  const merged = { ...DEFAULT_RETRY_POLICY, ...stripUndefined(app ?? {}), ...stripUndefined(task ?? {}) };
  return {
    ...merged,
    retryOn: [...merged.retryOn],
    backoff: Array.isArray(merged.backoff) ? [...merged.backoff] : merged.backoff,
  };
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

const storedPolicySchema = z.object({
  retry: z.object({
    maxRetries: z.number().int().min(0),
    retryOn: z.array(z.string()),
    backoff: z.union([
      z.enum(['constant', 'linear', 'exponential', 'exponential_jitter']),
      z.array(z.number().min(0)).min(1),
    ]),
    baseDelayMs: z.number().min(0),
    maxDelayMs: z.number().min(0),
    jitter: z.number().min(0).max(1),
  }),
});

/**
 * The retry policy stored with a task at send (`task_options`), for recovery that runs without the task's code.
 * A missing or malformed value (an old or hand-written row) means no retry.
 */
export function storedRetryPolicy(taskOptions: unknown): ResolvedRetryPolicy {
  const parsed = storedPolicySchema.safeParse(taskOptions);
  return parsed.success ? parsed.data.retry : DEFAULT_RETRY_POLICY;
}
