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
      synchronousStarts: false,
      queues: ['default'],
    });
    expect(resolveWorkerConfig({ synchronousStarts: true }, ['default']).synchronousStarts).toBe(true);
  });

  it('reports every bad field at once', () => {
    const bad = {
      concurrency: 0,
      prefetch: -1,
      synchronousStarts: 'yes',
      queues: ['nope'],
    } as unknown as WorkerConfig;
    const { problems } = thrown(() => resolveWorkerConfig(bad, ['default']), ConfigError);
    expect(problems.map((p) => p.field).sort()).toEqual([
      'concurrency',
      'prefetch',
      'queues.0',
      'synchronousStarts',
    ]);
  });
});
