/** `horsies worker --metrics-port`: a worker process serves its metrics over HTTP while it drains. */
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { importFixture } from '../support/fixtures.js';
import { startWorkerProcess } from '../support/processes.js';
import { scrape, sum } from './scrape.js';

const t = await useTestSchema();

describe('horsies worker --metrics-port', () => {
  it('serves /metrics from the worker process, counting its runs', async () => {
    const worker = startWorkerProcess({ databaseUrl: databaseUrl(), schema: t.schema }, [
      '--metrics-port',
      '0',
      '--metrics-host',
      '127.0.0.1',
    ]);
    await worker.ready;
    const line = worker
      .output()
      .split('\n')
      .find((l) => l.includes('"serving metrics"'));
    const url = (JSON.parse(line!) as { url: string }).url;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const { total } = await importFixture({ schema: t.schema }, () => import('../fixtures/app.js'));
    try {
      const handles = await Promise.all(Array.from({ length: 12 }, (_, i) => total.send({ values: [i, 1] })));
      for (const h of handles) expect((await h.result({ timeoutMs: 15_000 })).ok).toBe(true);
      // Counted by the worker right after each outcome is written, a moment after the waiter hears of it.
      const samples = await eventually(async () => {
        const s = await scrape(url);
        return sum(s, 'horsies_tasks_completed_total', { task: 'total' }) === 12 ? s : undefined;
      });
      expect(sum(samples, 'horsies_tasks_started_total', { queue: 'default', task: 'total' })).toBe(12);
      expect(sum(samples, 'horsies_task_run_duration_seconds_count', { task: 'total' })).toBe(12);
      // The sends were made here, not in the worker process.
      expect(sum(samples, 'horsies_tasks_sent_total')).toBe(0);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    // The endpoint goes away with the worker.
    await expect(fetch(url)).rejects.toThrow();
  });

  it('refuses a port that is not one', async () => {
    const result = await runCli(['worker', 'test/fixtures/app.ts', '--metrics-port', '70000'], {
      DATABASE_URL: databaseUrl(),
      HORSIES_SCHEMA: t.schema,
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('must be a port, 0 to 65535');
  });
});
