/**
 * Validation of a worker's configuration: every problem at once, each naming its field (dotted inside a group);
 * defaults applied; the groups the user writes resolved to the flat form the worker reads.
 */
import { describe, expect, it } from 'vitest';
import { resolveWorkerConfig } from '../../src/worker/config.js';
import type { WorkerConfig } from '../../src/worker/config.js';
import { ConfigError } from '../../src/errors.js';
import { thrown } from '../support/assertions.js';

/** The problems `config` is refused with, by field. */
function problemsOf(config: unknown): Record<string, { value: unknown; message: string }> {
  const { problems } = thrown(() => resolveWorkerConfig(config as WorkerConfig, ['default']), ConfigError);
  return Object.fromEntries(problems.map((p) => [p.field, { value: p.value, message: p.message }]));
}

describe('the worker config', () => {
  it('applies the defaults: starts commit asynchronously, claims hold no more than the concurrency', () => {
    const config = resolveWorkerConfig({}, ['default']);
    expect(config).toMatchObject({
      concurrency: 10,
      prefetch: 0,
      prefetchAuto: false,
      prefetchWindowMs: 20,
      prefetchHoldMs: 5_000,
      startPrefetched: false,
      maxClaimBatch: 10,
      maxClaimPerWorker: 10,
      claimLeaseMs: 60_000,
      maxClaimAgeMs: 600_000,
      synchronousStarts: false,
      completionBatchSize: 500,
      completionDelayMs: 2,
      drainTimeoutMs: 30_000,
      abortGraceMs: 5_000,
      handoff: false,
      pollIntervalMs: 2_000,
      snapshotIntervalMs: 5_000,
      queues: ['default'],
    });
    // An empty group, or one whose fields are all undefined, is the same as none.
    const spelled = resolveWorkerConfig(
      {
        prefetch: {},
        claims: { batchSize: undefined, leaseMs: undefined },
        outcomes: {},
        shutdown: { drainTimeoutMs: undefined },
      },
      ['default'],
    );
    const { identity: _a, ...defaults } = config;
    const { identity: _b, ...fromEmpty } = spelled;
    expect(fromEmpty).toEqual(defaults);
  });

  it('maps every grouped field to the flat form the worker reads', () => {
    expect(
      resolveWorkerConfig(
        {
          prefetch: { size: 7, windowMs: 30, holdMs: 900, startAhead: true },
          claims: { batchSize: 12, maxHeld: 20, leaseMs: 5_000, maxAgeMs: 50_000, synchronousStarts: true },
          outcomes: { batchSize: 40, delayMs: 0 },
          shutdown: { drainTimeoutMs: 1_000, abortGraceMs: 250 },
        },
        ['default'],
      ),
    ).toMatchObject({
      prefetch: 7,
      prefetchAuto: false,
      prefetchWindowMs: 30,
      prefetchHoldMs: 900,
      startPrefetched: true,
      maxClaimBatch: 12,
      maxClaimPerWorker: 20,
      claimLeaseMs: 5_000,
      maxClaimAgeMs: 50_000,
      synchronousStarts: true,
      completionBatchSize: 40,
      completionDelayMs: 0,
      drainTimeoutMs: 1_000,
      abortGraceMs: 250,
    });
  });

  it("starts tasks ahead with throughput 'high', sized by the rate, unless prefetch, startAhead or the claim batch is set", () => {
    expect(resolveWorkerConfig({ throughput: 'high' }, ['default'])).toMatchObject({
      prefetch: 490,
      prefetchAuto: true,
      startPrefetched: true,
      handoff: true,
      maxClaimBatch: 500,
      maxClaimPerWorker: 500,
    });
    expect(resolveWorkerConfig({ throughput: 'high', concurrency: 100 }, ['default'])).toMatchObject({
      prefetch: 1_000,
      maxClaimBatch: 500,
      maxClaimPerWorker: 1_100,
    });
    expect(
      resolveWorkerConfig({ throughput: 'high', prefetch: { size: 20 }, claims: { batchSize: 7 } }, [
        'default',
      ]),
    ).toMatchObject({ prefetch: 20, prefetchAuto: false, maxClaimBatch: 7, maxClaimPerWorker: 30 });
    expect(
      resolveWorkerConfig({ throughput: 'high', prefetch: { startAhead: false }, handoff: false }, [
        'default',
      ]),
    ).toMatchObject({ startPrefetched: false, prefetchAuto: true, handoff: false });
    expect(resolveWorkerConfig({ prefetch: { size: 5 } }, ['default']).startPrefetched).toBe(false);
    expect(
      resolveWorkerConfig({ throughput: 'high', prefetch: { size: 0 } }, ['default']).startPrefetched,
    ).toBe(false);
    // Nothing prefetched, nothing to start ahead: said at once rather than ignored.
    expect(problemsOf({ prefetch: { startAhead: true } })).toEqual({
      'prefetch.startAhead': { value: true, message: expect.stringMatching(/set prefetch\.size/) },
    });
    expect(
      resolveWorkerConfig({ prefetch: { startAhead: true, size: 'auto' } }, ['default']).startPrefetched,
    ).toBe(true);
  });

  it("sizes prefetch from the rate with 'auto', up to what 'high' would hold", () => {
    expect(resolveWorkerConfig({ prefetch: { size: 'auto' } }, ['default'])).toMatchObject({
      prefetch: 490,
      prefetchAuto: true,
      prefetchWindowMs: 20,
      maxClaimBatch: 500,
      maxClaimPerWorker: 500,
    });
    expect(Object.keys(problemsOf({ prefetch: { size: 'some', windowMs: 0 } })).sort()).toEqual([
      'prefetch.size',
      'prefetch.windowMs',
    ]);
  });

  it('reports every bad field at once, naming a grouped one by its dotted path', () => {
    const problems = problemsOf({
      concurrency: 0,
      throughput: 'max',
      queues: ['nope'],
      prefetch: { size: -1, holdMs: -5, ahead: true },
      claims: { leaseMs: 10, synchronousStarts: 'yes' },
      outcomes: { batchSize: 0, delayMs: 'soon' },
      shutdown: { drainTimeoutMs: -1, abortGraceMs: 1.5 },
    });
    expect(Object.keys(problems).sort()).toEqual([
      'claims.leaseMs',
      'claims.synchronousStarts',
      'concurrency',
      'outcomes.batchSize',
      'outcomes.delayMs',
      'prefetch.ahead',
      'prefetch.holdMs',
      'prefetch.size',
      'queues.0',
      'shutdown.abortGraceMs',
      'shutdown.drainTimeoutMs',
      'throughput',
    ]);
    expect(problems['prefetch.holdMs']).toEqual({ value: -5, message: expect.stringMatching(/>=0/) });
    expect(problems['claims.leaseMs']).toEqual({ value: 10, message: expect.stringMatching(/>=1000/) });
    expect(problems['prefetch.ahead']).toEqual({ value: true, message: 'is not a known option' });
    // A group given as something other than an object.
    expect(problemsOf({ claims: 5, shutdown: true })).toEqual({
      claims: { value: 5, message: expect.stringMatching(/expected object/) },
      shutdown: { value: true, message: expect.stringMatching(/expected object/) },
    });
  });

  it('says where each option of the flat config moved, beside the other problems', () => {
    const moved = {
      prefetchWindowMs: 'prefetch.windowMs',
      prefetchHoldMs: 'prefetch.holdMs',
      startPrefetched: 'prefetch.startAhead',
      maxClaimBatch: 'claims.batchSize',
      maxClaimPerWorker: 'claims.maxHeld',
      claimLeaseMs: 'claims.leaseMs',
      maxClaimAgeMs: 'claims.maxAgeMs',
      synchronousStarts: 'claims.synchronousStarts',
      completionBatchSize: 'outcomes.batchSize',
      completionDelayMs: 'outcomes.delayMs',
      drainTimeoutMs: 'shutdown.drainTimeoutMs',
      abortGraceMs: 'shutdown.abortGraceMs',
    };
    const problems = problemsOf({
      ...Object.fromEntries(Object.keys(moved).map((k) => [k, 1])),
      concurrency: 0,
    });
    expect(problems).toEqual({
      ...Object.fromEntries(
        Object.entries(moved).map(([from, to]) => [from, { value: 1, message: `has moved to ${to}` }]),
      ),
      concurrency: { value: 0, message: expect.stringMatching(/>=1/) },
    });
    // The old count of `prefetch` is told the group's field it goes to.
    expect(problemsOf({ prefetch: 20 })).toEqual({
      prefetch: { value: 20, message: 'is a group now: write prefetch: { size: 20 }' },
    });
    expect(problemsOf({ prefetch: 'auto' }).prefetch?.message).toBe(
      'is a group now: write prefetch: { size: "auto" }',
    );
    // A name that never existed is only unknown, at the top level or inside a group.
    expect(problemsOf({ prefetchSize: 3, claims: { prefetchHoldMs: 3 } })).toEqual({
      prefetchSize: { value: 3, message: 'is not a known option' },
      'claims.prefetchHoldMs': { value: 3, message: 'is not a known option' },
    });
  });
});
