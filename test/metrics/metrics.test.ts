/**
 * Metrics with a real worker: scraped over HTTP while tasks drain (with retries and failures) and after, and
 * compared with what the rows say. Cluster gauges from the maintenance leader; the reaper's and the expirer's
 * counts; bounded labels.
 */
import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { z } from 'zod';
import { ManualClock } from '../../src/clock.js';
import { ConfigError, TaskError } from '../../src/errors.js';
import { HorsiesMetrics } from '../../src/metrics/Metrics.js';
import { serveMetrics } from '../../src/metrics/MetricsServer.js';
import { createWorker } from '../../src/worker/Worker.js';
import { eventually, useTestSchema, waitForEvent } from '../support/db.js';
import { factoriesFor } from '../support/factories.js';
import { has, parseExposition, scrape, sum } from './scrape.js';

const t = await useTestSchema();
const factories = factoriesFor(t);

const count = async (sql: string, values: unknown[] = []): Promise<number> =>
  Number((await t.query<{ n: string }>(sql, values))[0]!.n);

describe('metrics of a drain, scraped over HTTP', () => {
  it('counts sends, starts, completions, retries and failures as the rows do', async () => {
    const app = t.app({ queues: ['default', 'bulk'] });
    const calls = new Map<string, number>();
    const ok = app.task({ name: 'm.ok', input: z.object({ n: z.number() }), handler: ({ n }) => n * 2 });
    const flaky = app.task({
      name: 'm.flaky',
      input: z.object({ k: z.number() }),
      retry: { maxRetries: 2, retryOn: ['FLAKY'], backoff: 'constant', baseDelayMs: 0 },
      handler: (_input, ctx) => {
        calls.set(ctx.taskId, (calls.get(ctx.taskId) ?? 0) + 1);
        return ctx.attempt === 1 ? new TaskError('FLAKY', 'first attempt fails') : 'recovered';
      },
    });
    const doomed = app.task({
      name: 'm.doomed',
      input: z.object({ k: z.number() }),
      retry: { maxRetries: 1, retryOn: ['BOOM'], backoff: 'constant', baseDelayMs: 0 },
      handler: () => new TaskError('BOOM', 'always fails'),
    });
    const broken = app.task({
      name: 'm.broken',
      input: z.object({ k: z.number() }),
      handler: () => {
        throw new Error('a bug');
      },
    });
    const server = await serveMetrics(app.metrics!.registry, { port: 0, host: '127.0.0.1' });
    const worker = createWorker(app, { concurrency: 8, maintenance: false });
    try {
      const handles = [
        ...(await ok.sendMany(Array.from({ length: 30 }, (_, n) => ({ input: { n } })))),
        ...(await ok.sendMany(Array.from({ length: 10 }, (_, n) => ({ input: { n }, queue: 'bulk' })))),
        ...(await Promise.all(Array.from({ length: 8 }, (_, k) => flaky.send({ k })))),
        ...(await Promise.all(Array.from({ length: 5 }, (_, k) => doomed.send({ k })))),
        ...(await Promise.all(Array.from({ length: 4 }, (_, k) => broken.send({ k })))),
      ];
      // Before any run: the sends are counted, nothing else.
      const before = await scrape(server.url);
      expect(sum(before, 'horsies_tasks_sent_total')).toBe(57);
      expect(sum(before, 'horsies_tasks_sent_total', { queue: 'bulk', task: 'm.ok' })).toBe(10);
      expect(sum(before, 'horsies_tasks_started_total')).toBe(0);

      const firstWrite = waitForEvent(worker, 'task:finished');
      await worker.start();
      await firstWrite;
      // During the drain: a scrape answers, and what it counts never exceeds what the rows hold so far (a start
      // is counted once written; its run then shows as a RUNNING row until its attempt row is written).
      const during = await scrape(server.url);
      const startedDuring = sum(during, 'horsies_tasks_started_total');
      expect(startedDuring).toBeGreaterThan(0);
      expect(startedDuring).toBeLessThanOrEqual(
        await count(
          `SELECT (SELECT count(*) FROM {{schema}}.horsies_task_attempts)
                + (SELECT count(*) FROM {{schema}}.horsies_tasks WHERE status = 'RUNNING') AS n`,
        ),
      );

      for (const handle of handles) await handle.result({ timeoutMs: 20_000 });
      // The last outcomes' counts follow their write; wait until the worker holds nothing.
      await eventually(async () => worker.heldTasks === 0);
      const after = await scrape(server.url);

      const attempts = await count('SELECT count(*) AS n FROM {{schema}}.horsies_task_attempts');
      const retries = await count(
        'SELECT count(*) AS n FROM {{schema}}.horsies_task_attempts WHERE will_retry',
      );
      expect(sum(after, 'horsies_tasks_started_total')).toBe(attempts);
      expect(sum(after, 'horsies_task_run_duration_seconds_count')).toBe(attempts);
      expect(sum(after, 'horsies_task_queue_wait_seconds_count')).toBe(attempts);
      expect(sum(after, 'horsies_tasks_retried_total')).toBe(retries);
      expect(sum(after, 'horsies_tasks_retried_total', { task: 'm.flaky', error_code: 'FLAKY' })).toBe(8);
      expect(sum(after, 'horsies_tasks_retried_total', { task: 'm.doomed', error_code: 'BOOM' })).toBe(5);
      for (const status of ['COMPLETED', 'FAILED'] as const) {
        const rows = await t.query<{
          task_name: string;
          queue_name: string;
          error_code: string | null;
          n: string;
        }>(
          `SELECT task_name, queue_name, error_code, count(*) AS n FROM {{schema}}.horsies_tasks
           WHERE status = $1 GROUP BY 1, 2, 3`,
          [status],
        );
        const metric =
          status === 'COMPLETED' ? 'horsies_tasks_completed_total' : 'horsies_tasks_failed_total';
        expect(sum(after, metric)).toBe(rows.reduce((a, r) => a + Number(r.n), 0));
        for (const r of rows) {
          const labels: Record<string, string> = { queue: r.queue_name, task: r.task_name };
          if (status === 'FAILED') labels.error_code = r.error_code!;
          expect(sum(after, metric, labels), JSON.stringify(labels)).toBe(Number(r.n));
        }
      }
      expect(
        sum(after, 'horsies_tasks_failed_total', { task: 'm.broken', error_code: 'UNHANDLED_ERROR' }),
      ).toBe(4);
      expect(sum(after, 'horsies_tasks_completed_total', { queue: 'bulk' })).toBe(10);
      // Every flaky task ran twice, as its retry count says.
      expect([...calls.values()].every((c) => c === 2)).toBe(true);
      // The histograms hold real times: no run of these handlers took a second.
      expect(sum(after, 'horsies_task_run_duration_seconds_bucket', { task: 'm.ok', le: '1' })).toBe(40);
    } finally {
      await worker.stop();
      await server.close();
    }
  });

  it('answers 404 off /metrics and refuses other methods', async () => {
    const app = t.app();
    const server = await serveMetrics(app.metrics!.registry, { port: 0, host: '127.0.0.1' });
    try {
      expect((await fetch(server.url.replace('/metrics', '/'))).status).toBe(404);
      expect((await fetch(server.url, { method: 'POST' })).status).toBe(405);
    } finally {
      await server.close();
    }
  });
});

describe('cluster gauges and maintenance counts', () => {
  it('the maintenance leader reports pending, claimed and running per queue, the oldest age and live workers', async () => {
    const app = t.app({ queues: ['gauges', 'quiet'] });
    app.task({ name: 'g.noop', queue: 'quiet', input: z.object({}), handler: () => null });
    await factories.insertTasks({ taskName: 'g.pending', queue: 'gauges', count: 3, sentAgoMs: 5_000 });
    await factories.insertTasks({ taskName: 'g.later', queue: 'gauges', count: 2, sentAgoMs: -60_000 });
    await factories.insertTasks({ taskName: 'g.running', queue: 'gauges', status: 'RUNNING', count: 2 });
    await factories.insertTask({ taskName: 'g.claimed', queue: 'gauges', status: 'CLAIMED' });
    await factories.insertTasks({ taskName: 'g.x', queue: 'undeclared-a', count: 2 });
    await factories.insertTasks({ taskName: 'g.x', queue: 'undeclared-b', status: 'RUNNING' });
    await factories.insertTasks({ taskName: 'g.done', queue: 'gauges', status: 'COMPLETED', count: 4 });
    const registry = app.metrics!.registry;
    const worker = createWorker(app, { queues: ['quiet'] });
    const elected = waitForEvent(worker, 'leader:elected');
    await worker.start();
    await elected;
    try {
      const samples = await eventually(async () => {
        await worker.runMaintenance();
        const s = parseExposition(await registry.metrics());
        return sum(s, 'horsies_workers_live') >= 1 ? s : undefined;
      });
      expect(sum(samples, 'horsies_maintenance_leader')).toBe(1);
      expect(sum(samples, 'horsies_queue_pending_tasks', { queue: 'gauges' })).toBe(5);
      expect(sum(samples, 'horsies_queue_claimed_tasks', { queue: 'gauges' })).toBe(1);
      expect(sum(samples, 'horsies_queue_running_tasks', { queue: 'gauges' })).toBe(2);
      // Only due tasks age: the oldest was enqueued 5 s ago (the delayed ones do not count).
      const age = sum(samples, 'horsies_queue_oldest_pending_age_seconds', { queue: 'gauges' });
      expect(age).toBeGreaterThanOrEqual(5);
      expect(age).toBeLessThan(60);
      // A declared queue with nothing in it reads 0; undeclared queues add up under `other`.
      expect(has(samples, 'horsies_queue_pending_tasks', { queue: 'quiet' })).toBe(true);
      expect(sum(samples, 'horsies_queue_pending_tasks', { queue: 'quiet' })).toBe(0);
      expect(sum(samples, 'horsies_queue_pending_tasks', { queue: 'other' })).toBe(2);
      expect(sum(samples, 'horsies_queue_running_tasks', { queue: 'other' })).toBe(1);
      expect(has(samples, 'horsies_queue_pending_tasks', { queue: 'undeclared-a' })).toBe(false);
    } finally {
      await worker.stop();
    }
    // Out of office: a process that no longer leads reports no cluster figures (its last ones would go stale).
    const afterStop = parseExposition(await registry.metrics());
    expect(sum(afterStop, 'horsies_maintenance_leader')).toBe(0);
    expect(has(afterStop, 'horsies_queue_pending_tasks')).toBe(false);
    expect(sum(afterStop, 'horsies_workers_live')).toBe(0);
  });

  it('counts what the reaper and the expirer do, by task and error code', async () => {
    const app = t.app({ queues: ['reaped'] });
    const stuckClaimed = await factories.insertTasks({
      taskName: 'r.stuck',
      queue: 'reaped',
      status: 'CLAIMED',
      count: 2,
    });
    const stuckRunning = await factories.insertTasks({
      taskName: 'r.stuck',
      queue: 'reaped',
      status: 'RUNNING',
      count: 3,
    });
    await factories.insertTasks({ taskName: 'r.late', queue: 'reaped', goodUntilAgoMs: 1_000, count: 4 });
    // Maintenance an hour ahead: every claim and run is stale by then.
    const clock = new ManualClock(new Date(Date.now() + 3_600_000));
    const worker = createWorker(app, { queues: ['reaped'], clock });
    await worker.runMaintenance();
    const samples = parseExposition(await app.metrics!.registry.metrics());
    expect(sum(samples, 'horsies_tasks_requeued_total', { queue: 'reaped', task: 'other' })).toBe(
      stuckClaimed.length,
    );
    expect(
      sum(samples, 'horsies_tasks_failed_total', { queue: 'reaped', error_code: 'WORKER_CRASHED' }),
    ).toBe(stuckRunning.length);
    expect(sum(samples, 'horsies_tasks_expired_total', { queue: 'reaped' })).toBe(4);
    expect(
      await count(
        `SELECT count(*) AS n FROM {{schema}}.horsies_tasks WHERE queue_name = 'reaped' AND status = 'EXPIRED'`,
      ),
    ).toBe(4);
    await worker.stop();
  });

  it('counts a cancel of a task that had not started', async () => {
    const app = t.app({ queues: ['cancels'] });
    const task = app.task({ name: 'c.task', queue: 'cancels', input: z.object({}), handler: () => null });
    const handle = await task.send({}, { delayMs: 60_000 });
    expect((await app.cancel(handle.id)).outcome).toBe('cancelled');
    expect((await app.cancel(handle.id)).outcome).toBe('already_finished');
    const samples = parseExposition(await app.metrics!.registry.metrics());
    expect(sum(samples, 'horsies_tasks_cancelled_total', { queue: 'cancels', task: 'c.task' })).toBe(1);
  });
});

describe('labels and settings', () => {
  it('caps error codes: built-in codes always, then the first N others, then OTHER', () => {
    const metrics = new HorsiesMetrics({ queues: ['q'], isTaskName: (n) => n === 'known', maxErrorCodes: 2 });
    for (const code of ['A_ONE', 'B_TWO', 'C_THREE', 'D_FOUR', 'TASK_TIMEOUT', 'A_ONE']) {
      metrics.outcome('q', 'known', 'failed', code);
    }
    metrics.outcome('nowhere', 'unknown', 'failed', 'A_ONE');
    return metrics.registry.metrics().then((text) => {
      const samples = parseExposition(text);
      const codes = samples
        .filter((s) => s.name === 'horsies_tasks_failed_total' && s.labels.task === 'known')
        .map((s) => [s.labels.error_code, s.value]);
      expect(Object.fromEntries(codes)).toEqual({ A_ONE: 2, B_TWO: 1, OTHER: 2, TASK_TIMEOUT: 1 });
      expect(sum(samples, 'horsies_tasks_failed_total', { queue: 'other', task: 'other' })).toBe(1);
    });
  });

  it('uses a registry given in the config, and none with metrics: false', async () => {
    const registry = new Registry();
    const app = t.app({ metrics: { registry } });
    expect(app.metrics!.registry).toBe(registry);
    expect(await registry.getSingleMetric('horsies_tasks_sent_total')).toBeDefined();
    expect(t.app({ metrics: false }).metrics).toBeNull();
    expect(() => t.app({ metrics: { registry: {} as Registry } })).toThrow(ConfigError);
  });
});
