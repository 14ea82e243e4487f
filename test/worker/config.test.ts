/** Validation of a worker's configuration: every problem at once, each naming its field; defaults applied. */
import { describe, expect, it } from 'vitest';
import { resolveWorkerConfig } from '../../src/worker/config.js';
import type { WorkerConfig } from '../../src/worker/config.js';
import { ConfigError } from '../../src/errors.js';
import { thrown } from '../support/assertions.js';

describe('the worker config', () => {
  it('applies the defaults: starts commit asynchronously, claims hold no more than the concurrency', () => {
    const config = resolveWorkerConfig({}, ['default']);
    expect(config).toMatchObject({
      concurrency: 10,
      prefetch: 0,
      maxClaimBatch: 10,
      maxClaimPerWorker: 10,
      prefetchHoldMs: 5_000,
      synchronousStarts: false,
      queues: ['default'],
    });
    expect(resolveWorkerConfig({ synchronousStarts: true }, ['default']).synchronousStarts).toBe(true);
  });

  it("starts tasks ahead with throughput 'high', sized by the rate, unless prefetch, startPrefetched or the claim batch is set", () => {
    expect(resolveWorkerConfig({ throughput: 'high' }, ['default'])).toMatchObject({
      prefetch: 490,
      prefetchAuto: true,
      startPrefetched: true,
      maxClaimBatch: 500,
      maxClaimPerWorker: 500,
    });
    expect(resolveWorkerConfig({ throughput: 'high', concurrency: 100 }, ['default'])).toMatchObject({
      prefetch: 1_000,
      maxClaimBatch: 500,
      maxClaimPerWorker: 1_100,
    });
    expect(
      resolveWorkerConfig({ throughput: 'high', prefetch: 20, maxClaimBatch: 7 }, ['default']),
    ).toMatchObject({ prefetch: 20, prefetchAuto: false, maxClaimBatch: 7, maxClaimPerWorker: 30 });
    expect(resolveWorkerConfig({ throughput: 'high', startPrefetched: false }, ['default'])).toMatchObject({
      startPrefetched: false,
      prefetchAuto: true,
    });
    expect(resolveWorkerConfig({ prefetch: 5 }, ['default']).startPrefetched).toBe(false);
    expect(resolveWorkerConfig({ throughput: 'high', prefetch: 0 }, ['default']).startPrefetched).toBe(false);
    // Nothing prefetched, nothing to start ahead: said at once rather than ignored.
    const { problems } = thrown(
      () => resolveWorkerConfig({ startPrefetched: true }, ['default']),
      ConfigError,
    );
    expect(problems).toEqual([
      { field: 'startPrefetched', value: true, message: expect.stringMatching(/set prefetch/) },
    ]);
    expect(
      resolveWorkerConfig({ startPrefetched: true, prefetch: 'auto' }, ['default']).startPrefetched,
    ).toBe(true);
  });

  it("sizes prefetch from the rate with 'auto', up to what 'high' would hold", () => {
    expect(resolveWorkerConfig({ prefetch: 'auto' }, ['default'])).toMatchObject({
      prefetch: 490,
      prefetchAuto: true,
      prefetchWindowMs: 20,
      maxClaimBatch: 500,
      maxClaimPerWorker: 500,
    });
    expect(resolveWorkerConfig({}, ['default'])).toMatchObject({ prefetch: 0, prefetchAuto: false });
    const { problems } = thrown(
      () => resolveWorkerConfig({ prefetch: 'some' as 'auto', prefetchWindowMs: 0 }, ['default']),
      ConfigError,
    );
    expect(problems.map((p) => p.field).sort()).toEqual(['prefetch', 'prefetchWindowMs']);
  });

  it('reports every bad field at once', () => {
    const bad = {
      concurrency: 0,
      prefetch: -1,
      synchronousStarts: 'yes',
      throughput: 'max',
      prefetchHoldMs: -5,
      queues: ['nope'],
    } as unknown as WorkerConfig;
    const { problems } = thrown(() => resolveWorkerConfig(bad, ['default']), ConfigError);
    expect(problems.map((p) => p.field).sort()).toEqual([
      'concurrency',
      'prefetch',
      'prefetchHoldMs',
      'queues.0',
      'synchronousStarts',
      'throughput',
    ]);
  });
});
