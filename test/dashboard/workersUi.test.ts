/**
 * The workers page in a real browser: a running worker shows live; once it stops cleanly it shows stopped (its
 * stop record), not stale, while a worker that went silent without stopping shows stale.
 */
import { AxeBuilder } from '@axe-core/playwright';
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Overview, WorkerRow } from '../../src/dashboard/contract.js';
import { createWorker } from '../../src/worker/Worker.js';
import { eventually, useTestSchema } from '../support/db.js';
import { launchBrowser, SCREENSHOTS } from './browser.js';
import { serveDashboard } from './support.js';

const t = await useTestSchema();
const app = t.app({ queues: [{ name: 'default' }] });
app.task({ name: 'workers.noop', input: z.object({}), handler: () => null });
const served = await serveDashboard(app, { live: { debounceMs: 100, pollMs: 60_000 } });

let context: BrowserContext;
let closeBrowser: () => Promise<void>;
beforeAll(async () => {
  ({ context, close: closeBrowser } = await launchBrowser());
}, 60_000);
afterAll(async () => {
  await closeBrowser?.();
});

describe('the workers page', () => {
  it('shows a cleanly stopped worker as stopped, and a silent one as stale', async () => {
    // A worker that went silent three minutes ago without stopping.
    await t.query(
      `INSERT INTO {{schema}}.horsies_worker_states (worker_id, snapshot_at, hostname, pid, queues, tasks_running)
       VALUES ('w-silent', now() - interval '3 minutes', 'old-host', 4242, '{default}', 0)`,
    );
    const worker = createWorker(app, { concurrency: 1, pollIntervalMs: 200, snapshotIntervalMs: 200 });
    await worker.start();
    const page = await context.newPage();
    await page.goto(`${served.url}#/workers`);
    const row = page.getByTestId('workers').locator(`tr[data-worker="${worker.id}"]`);
    await eventually(
      async () => (await row.count()) === 1 && (await row.getAttribute('data-state')) === 'live',
    );

    await worker.stop();
    // Its snapshots are gone and its stop record written, in one statement.
    expect(
      await t.query('SELECT 1 FROM {{schema}}.horsies_worker_states WHERE worker_id = $1', [worker.id]),
    ).toEqual([]);
    const [stop] = await t.query<{ stopped_at: Date; queues: string[] }>(
      'SELECT stopped_at, queues FROM {{schema}}.horsies_worker_stops WHERE worker_id = $1',
      [worker.id],
    );
    expect(stop?.queues).toEqual(['default']);

    await page.reload();
    await row.waitFor();
    expect(await row.getAttribute('data-state')).toBe('stopped');
    expect(await row.getByTestId('worker-state').innerText()).toBe('stopped');
    expect(await row.innerText()).toMatch(/stopped \d+(\.\d)? (ms|s) ago/);
    const silent = page.getByTestId('workers').locator('tr[data-worker="w-silent"]');
    expect(await silent.getAttribute('data-state')).toBe('stale');
    expect(await silent.getByTestId('worker-state').innerText()).toBe('stale');
    await page.screenshot({ path: `${SCREENSHOTS}/workers-stopped.png`, fullPage: true });
    // No serious accessibility violation with its rows shown.
    const { violations } = await new AxeBuilder({ page }).analyze();
    expect(
      violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id),
    ).toEqual([]);
    await page.close();

    const { body: workers } = await served.get<WorkerRow[]>('api/workers');
    expect(workers.find((w) => w.worker_id === worker.id)).toMatchObject({
      stale: false,
      stopped_at: stop!.stopped_at.toISOString(),
      hostname: expect.any(String),
    });
    const { body: overview } = await served.get<Overview>('api/overview');
    expect(overview.workers).toEqual({ live: 0, stale: 1, stopped: 1 });
  }, 60_000);
});
