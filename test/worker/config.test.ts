/** Validation of a worker's configuration: every problem at once, each naming its field; defaults applied. */
import { describe, expect, it } from 'vitest';
import { resolveWorkerConfig } from '../../src/worker/config.js';
import type { WorkerConfig } from '../../src/worker/config.js';
import { ConfigError } from '../../src/errors.js';

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
    try {
      resolveWorkerConfig(bad, ['default']);
      expect.unreachable('the config is invalid');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const fields = (error as ConfigError).problems.map((p) => p.field).sort();
      expect(fields).toEqual(['concurrency', 'prefetch', 'queues.0', 'synchronousStarts']);
    }
  });
});
