import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY, decideRetry, retryDelayMs, storedRetryPolicy } from '../src/retry.js';
import type { ResolvedRetryPolicy } from '../src/retry.js';

const policy = (p: Partial<ResolvedRetryPolicy>): ResolvedRetryPolicy => ({ ...DEFAULT_RETRY_POLICY, ...p });
const fixed = (value: number) => () => value;

describe('retryDelayMs', () => {
  it('constant: the base delay every time', () => {
    const p = policy({ backoff: 'constant', baseDelayMs: 500 });
    expect([1, 2, 5].map((n) => retryDelayMs(p, n))).toEqual([500, 500, 500]);
  });

  it('linear: base × n', () => {
    const p = policy({ backoff: 'linear', baseDelayMs: 300 });
    expect([1, 2, 3, 4].map((n) => retryDelayMs(p, n))).toEqual([300, 600, 900, 1200]);
  });

  it('exponential: base × 2^(n−1)', () => {
    const p = policy({ backoff: 'exponential', baseDelayMs: 100 });
    expect([1, 2, 3, 4, 5].map((n) => retryDelayMs(p, n))).toEqual([100, 200, 400, 800, 1600]);
  });

  it('exponential_jitter: uniform(0, base × 2^(n−1)) from the random source', () => {
    const p = policy({ backoff: 'exponential_jitter', baseDelayMs: 100 });
    expect(retryDelayMs(p, 3, fixed(0))).toBe(0);
    expect(retryDelayMs(p, 3, fixed(0.5))).toBe(200);
    expect(retryDelayMs(p, 3, fixed(0.999))).toBe(400);
  });

  it('explicit intervals, the last one repeating', () => {
    const p = policy({ backoff: [1000, 5000, 30000] });
    expect([1, 2, 3, 4, 9].map((n) => retryDelayMs(p, n))).toEqual([1000, 5000, 30000, 30000, 30000]);
  });

  it('caps every strategy at maxDelayMs', () => {
    expect(retryDelayMs(policy({ backoff: 'exponential', baseDelayMs: 1000, maxDelayMs: 5000 }), 10)).toBe(
      5000,
    );
    expect(retryDelayMs(policy({ backoff: 'linear', baseDelayMs: 1000, maxDelayMs: 2500 }), 3)).toBe(2500);
    expect(retryDelayMs(policy({ backoff: [100, 99_999], maxDelayMs: 1000 }), 2)).toBe(1000);
  });

  it('the default cap is one hour', () => {
    expect(retryDelayMs(policy({ backoff: 'exponential', baseDelayMs: 1000 }), 40)).toBe(3_600_000);
  });

  it('spreads by ±jitter after the cap', () => {
    const p = policy({ backoff: 'constant', baseDelayMs: 1000, jitter: 0.1 });
    expect(retryDelayMs(p, 1, fixed(0))).toBe(900);
    expect(retryDelayMs(p, 1, fixed(0.5))).toBe(1000);
    expect(retryDelayMs(p, 1, fixed(1))).toBe(1100);
    const capped = policy({ backoff: 'exponential', baseDelayMs: 1000, maxDelayMs: 2000, jitter: 0.5 });
    expect(retryDelayMs(capped, 10, fixed(1))).toBe(3000);
  });

  it('a zero base delay re-queues at once', () => {
    expect(retryDelayMs(policy({ backoff: 'exponential', baseDelayMs: 0 }), 3)).toBe(0);
  });
});

describe('decideRetry', () => {
  const policy: ResolvedRetryPolicy = {
    ...DEFAULT_RETRY_POLICY,
    maxRetries: 2,
    retryOn: ['FLAKY'],
    backoff: 'linear',
    baseDelayMs: 100,
  };

  it('retries a listed code while retries remain, with the backoff of the next retry', () => {
    expect(decideRetry(policy, { code: 'FLAKY', retryCount: 0, maxRetries: 2 })).toEqual({
      retry: true,
      delayMs: 100,
    });
    expect(decideRetry(policy, { code: 'FLAKY', retryCount: 1, maxRetries: 2 })).toEqual({
      retry: true,
      delayMs: 200,
    });
  });

  it('fails an unlisted code, an exhausted budget, or a task without a policy', () => {
    expect(decideRetry(policy, { code: 'OTHER', retryCount: 0, maxRetries: 2 })).toEqual({ retry: false });
    expect(decideRetry(policy, { code: 'FLAKY', retryCount: 2, maxRetries: 2 })).toEqual({ retry: false });
    expect(decideRetry(null, { code: 'FLAKY', retryCount: 0, maxRetries: 2 })).toEqual({ retry: false });
  });

  it('takes the retry budget from the row, not the policy (a resubmit or a changed definition)', () => {
    expect(decideRetry(policy, { code: 'FLAKY', retryCount: 2, maxRetries: 5 }).retry).toBe(true);
    expect(decideRetry(policy, { code: 'FLAKY', retryCount: 0, maxRetries: 0 }).retry).toBe(false);
  });

  it('reads a stored policy, and treats a malformed one as no retry', () => {
    const stored = storedRetryPolicy({ retry: { ...policy, retryOn: ['WORKER_CRASHED'] } });
    expect(decideRetry(stored, { code: 'WORKER_CRASHED', retryCount: 0, maxRetries: 2 }).retry).toBe(true);
    const broken = storedRetryPolicy({ retry: { maxRetries: 'two' } });
    expect(decideRetry(broken, { code: 'WORKER_CRASHED', retryCount: 0, maxRetries: 2 }).retry).toBe(false);
  });
});
