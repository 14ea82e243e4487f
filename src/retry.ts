/**
 * The retry decision, in one place: the retry policy (its shape, defaults and validation, and the copy stored
 * with each task for recovery that runs without the task's code), whether an error code retries, and the delay
 * before the next attempt. The executor decides with the task definition's policy, the reaper with the stored
 * one; both call {@link decideRetry}. A leaf module: it imports nothing of the library but its errors.
 */
import { z } from 'zod';
import { BUILTIN_ERROR_CODES, isValidErrorCode } from './errors.js';

/** How the delay before retry n (1 for the first retry) grows. */
export type BackoffStrategy = 'constant' | 'linear' | 'exponential' | 'exponential_jitter';

/** When and how a failed task is retried. */
export interface RetryPolicy {
  /** Retries after the first attempt. Default 0 (no retry). */
  maxRetries?: number | undefined;
  /**
   * Error codes that retry; any other code fails the task at once. Required when `maxRetries` > 0. May include
   * built-in codes such as `TASK_TIMEOUT`, `WORKER_CRASHED` or `UNHANDLED_ERROR`.
   */
  retryOn?: string[] | undefined;
  /**
   * Delay growth, with `baseDelayMs` = b and retry number n: `constant` b; `linear` b·n; `exponential` b·2^(n−1);
   * `exponential_jitter` uniform(0, b·2^(n−1)). Or an explicit list of delays in ms, the last one repeating.
   * Default `exponential`.
   */
  backoff?: BackoffStrategy | number[] | undefined;
  /** Base delay b. Default 1,000 ms. 0 re-queues at once. */
  baseDelayMs?: number | undefined;
  /** Cap on any computed delay. Default 3,600,000 ms (one hour). */
  maxDelayMs?: number | undefined;
  /** Spread every delay by ±this fraction (0.1 = ±10%), after the cap. Default 0. */
  jitter?: number | undefined;
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

/** A source of uniform random numbers in [0, 1). */
export type RandomSource = () => number;

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

const strategySchema = z.enum(['constant', 'linear', 'exponential', 'exponential_jitter']);

/** Validates a {@link RetryPolicy} as a user writes it. */
export const retryPolicySchema = z.strictObject({
  maxRetries: z.number().int().min(0).max(1000).optional(),
  retryOn: z.array(errorCodeSchema(false)).optional(),
  backoff: z
    .union([strategySchema, z.array(z.number().int().min(0)).min(1, 'must list at least one interval')])
    .optional(),
  baseDelayMs: z.number().int().min(0).optional(),
  maxDelayMs: z.number().int().min(0).optional(),
  jitter: z.number().min(0).max(1).optional(),
});

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
    backoff: z.union([strategySchema, z.array(z.number().min(0)).min(1)]),
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

/**
 * The longest delay before a retry: 2^31 − 1 ms (about 24.8 days), the largest the finish statements take. A
 * longer computed delay, from a policy's `maxDelayMs` or from a stored policy written by hand, waits this long.
 */
export const MAX_RETRY_DELAY_MS = 2_147_483_647;

/**
 * Delay in ms before retry `n` (1 for the first retry): the policy's backoff from `baseDelayMs`, capped at
 * `maxDelayMs`, then spread by ±`jitter`. Never negative, never above {@link MAX_RETRY_DELAY_MS}.
 */
export function retryDelayMs(
  policy: ResolvedRetryPolicy,
  n: number,
  random: RandomSource = Math.random,
): number {
  const { backoff, baseDelayMs: base } = policy;
  let delay: number;
  if (Array.isArray(backoff)) {
    delay = backoff[Math.min(n, backoff.length) - 1] ?? 0;
  } else {
    switch (backoff) {
      case 'constant':
        delay = base;
        break;
      case 'linear':
        delay = base * n;
        break;
      case 'exponential':
        delay = base * 2 ** (n - 1);
        break;
      case 'exponential_jitter':
        delay = random() * base * 2 ** (n - 1);
        break;
      default:
        throw new Error(`unknown backoff strategy ${String(backoff)}`);
    }
  }
  delay = Math.min(delay, policy.maxDelayMs);
  if (policy.jitter > 0) delay *= 1 + policy.jitter * (2 * random() - 1);
  // NaN (an unreadable stored policy) counts as no delay.
  return Number.isNaN(delay) ? 0 : Math.min(MAX_RETRY_DELAY_MS, Math.max(0, Math.round(delay)));
}

/** What happens after a failed attempt: retry after `delayMs`, or fail for good. */
export type RetryDecision = { retry: true; delayMs: number } | { retry: false };

/**
 * Whether an attempt that failed with `code` retries: the policy lists the code and retries remain
 * (`retryCount` retries so far, `maxRetries` as stored on the task row). A retry gets its backoff delay.
 */
export function decideRetry(
  policy: ResolvedRetryPolicy | null | undefined,
  failure: { code: string; retryCount: number; maxRetries: number },
  random: RandomSource = Math.random,
): RetryDecision {
  if (!policy || !policy.retryOn.includes(failure.code) || failure.retryCount >= failure.maxRetries) {
    return { retry: false };
  }
  return { retry: true, delayMs: retryDelayMs(policy, failure.retryCount + 1, random) };
}
