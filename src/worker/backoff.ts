/** Retry delays, computed from a resolved retry policy. Pure: the random source is injected. */
import type { ResolvedRetryPolicy } from '../client/policy.js';

/** A source of uniform random numbers in [0, 1). */
export type RandomSource = () => number;

/**
 * Delay in ms before retry `n` (1 for the first retry): the policy's backoff from `baseDelayMs`, capped at
 * `maxDelayMs`, then spread by ±`jitter`. Never negative.
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
  return Math.max(0, Math.round(delay));
}
