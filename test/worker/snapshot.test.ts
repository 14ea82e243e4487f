/** Worker snapshots in horsies_worker_states, and validation of the recovery settings. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../src/errors.js';
import { thrown } from '../support/assertions.js';
import { eventually, useTestSchema } from '../support/db.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();

describe('worker snapshots', () => {
  it('records counts, queues, caps, config, CPU and memory every interval', async () => {
    const app = t.app({
      queues: [
        { name: 'fast', priority: 1, maxConcurrency: 4 },
        { name: 'slow', priority: 9 },
      ],
      clusterWideCap: 6,
    });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const task = app.task({ name: 'snap.work', input: z.object({}), queue: 'fast', handler: () => gate });
    const worker = createWorker(app, { concurrency: 3, prefetch: { size: 1 }, snapshotIntervalMs: 100 });
    await worker.start();
    await task.sendMany([{ input: {} }, { input: {} }]);
    const snapshot = await eventually(async () => {
      const rows = await t.query<Record<string, unknown>>(
        `SELECT * FROM {{schema}}.horsies_worker_states WHERE worker_id = $1 ORDER BY snapshot_at DESC LIMIT 1`,
        [worker.id],
      );
      return rows[0] && rows[0].tasks_running === 2 ? rows[0] : undefined;
    });
    expect(snapshot).toMatchObject({
      hostname: expect.any(String),
      pid: process.pid,
      processes: 1,
      queues: ['fast', 'slow'],
      tasks_running: 2,
      tasks_claimed: 0,
      max_claim_batch: 4,
      max_claim_per_worker: 4,
      cluster_wide_cap: 6,
      queue_priorities: { fast: 1, slow: 9 },
      queue_max_concurrency: { fast: 4, slow: null },
      task_names: ['snap.work'],
    });
    expect(snapshot.recovery_config).toMatchObject({
      claimedStaleThresholdMs: 120_000,
      capMode: 'hard',
      concurrency: 3,
      prefetch: { size: 1, startAhead: false },
    });
    expect(snapshot.memory_usage_mb as number).toBeGreaterThan(0);
    expect(snapshot.memory_percent as number).toBeGreaterThan(0);
    expect(snapshot.cpu_percent as number).toBeGreaterThanOrEqual(0);
    expect(snapshot.worker_started_at).toBeInstanceOf(Date);
    release();
    await worker.stop();
  });

  it('are replaced by a stop record when the worker stops cleanly: it shows stopped, not stale', async () => {
    const app = t.app();
    app.task({ name: 'snap.idle', input: z.object({}), handler: () => 1 });
    const worker = createWorker(app, { snapshotIntervalMs: 50 });
    await worker.start();
    const count = async (): Promise<number> =>
      (
        await t.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM {{schema}}.horsies_worker_states WHERE worker_id = $1`,
          [worker.id],
        )
      )[0]?.n ?? 0;
    await eventually(async () => ((await count()) >= 2 ? true : undefined));
    await worker.stop();
    expect(await count()).toBe(0);
    const stops = await t.query<{ hostname: string; pid: number; queues: string[]; stopped_at: Date }>(
      'SELECT hostname, pid, queues, stopped_at FROM {{schema}}.horsies_worker_stops WHERE worker_id = $1',
      [worker.id],
    );
    expect(stops).toEqual([
      { hostname: expect.any(String), pid: process.pid, queues: ['default'], stopped_at: expect.any(Date) },
    ]);
  });
});

describe('recovery settings', () => {
  it('apply the seed defaults', () => {
    expect(t.app().config.recovery).toEqual({
      autoRequeueStaleClaimed: true,
      claimedStaleThresholdMs: 120_000,
      claimerHeartbeatIntervalMs: 30_000,
      autoFailStaleRunning: true,
      runningStaleThresholdMs: 300_000,
      runnerHeartbeatIntervalMs: 30_000,
      checkIntervalMs: 30_000,
      heartbeatRetentionHours: 24,
      workerStateRetentionHours: 168,
      terminalRecordRetentionHours: 720,
      retentionBatchSize: 1000,
      retentionMaxBatchesPerRun: 50,
      workflowRecoveryGraceMs: 10_000,
      vacuumCheckIntervalMs: 1000,
      vacuumThreshold: 10_000,
      vacuumScaleFactor: 0.05,
    });
  });

  it('report every bad field at once, including thresholds under twice their heartbeat interval', () => {
    const error = thrown(
      () =>
        t.app({
          recovery: {
            claimerHeartbeatIntervalMs: 30_000,
            claimedStaleThresholdMs: 30_000,
            runnerHeartbeatIntervalMs: 10_000,
            runningStaleThresholdMs: 19_999,
            checkIntervalMs: 0,
            heartbeatRetentionHours: -1,
          },
        }),
      ConfigError,
    );
    expect(error.problems.map((p) => p.field).sort()).toEqual([
      'recovery.checkIntervalMs',
      'recovery.claimedStaleThresholdMs',
      'recovery.heartbeatRetentionHours',
      'recovery.runningStaleThresholdMs',
    ]);
  });

  it('refuse a stale threshold under twice the heartbeat interval', () => {
    const { problems } = thrown(
      () =>
        t.app({
          recovery: {
            claimerHeartbeatIntervalMs: 30_000,
            claimedStaleThresholdMs: 30_000,
            runnerHeartbeatIntervalMs: 10_000,
            runningStaleThresholdMs: 19_999,
          },
        }),
      ConfigError,
    );
    expect(problems.map((p) => p.field).sort()).toEqual([
      'recovery.claimedStaleThresholdMs',
      'recovery.runningStaleThresholdMs',
    ]);
    expect(problems[0]?.message).toMatch(/twice/);
    expect(() =>
      t.app({ recovery: { runnerHeartbeatIntervalMs: 10_000, runningStaleThresholdMs: 20_000 } }),
    ).not.toThrow();
  });

  it('refuse prefetchBuffer without the soft cap mode', () => {
    expect(() => t.app({ clusterWideCap: 4, prefetchBuffer: 2 })).toThrow(/soft/);
    expect(() => t.app({ clusterWideCap: 4, prefetchBuffer: 2, capMode: 'soft' })).not.toThrow();
  });
});
