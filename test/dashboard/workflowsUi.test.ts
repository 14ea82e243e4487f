/**
 * The workflow and schedule pages in a real browser (Debian's Chromium, headless) against a real database and a
 * real worker: a finished workflow's graph shows each node's status; a running workflow is paused and resumed
 * through its buttons, and its subworkflow node leads to the child run, which leads back; triggering a schedule
 * from its page creates a task. Screenshots of the pages go to docs/dashboard/ for the user guide when
 * HORSIES_DOCS_SCREENSHOTS=1 (see browser.ts).
 */
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { eventually, useTestSchema } from '../support/db.js';
import { closePages, launchBrowser, SCREENSHOTS } from './browser.js';
import { serveDashboard } from './support.js';

const TOKEN = 'workflow-browser-token';

const t = await useTestSchema();
// Tasks on `held` are served by no worker: their workflows stay running until a test moves them.
const app = t.app({ queues: [{ name: 'default' }, { name: 'held' }] });

const fetchOrders = app.task({
  name: 'orders.fetch',
  input: z.object({ day: z.string() }),
  handler: ({ day }) => ({ day, orders: 42 }),
});
const price = app.task({
  name: 'orders.price',
  input: z.object({ region: z.string() }),
  handler: ({ region }) => {
    if (region === 'mars') throw new TaskError('NO_RATES', 'no exchange rates for mars');
    return { region, total: 1234 };
  },
});
const report = app.task({
  name: 'reports.daily',
  input: z.object({ parts: z.array(z.unknown()) }),
  handler: ({ parts }) => ({ parts: parts.length }),
});
const ship = app.task({
  name: 'orders.ship',
  queue: 'held',
  input: z.object({ region: z.string() }),
  handler: ({ region }) => ({ region, shipped: true }),
});
app.schedule({
  name: 'daily-orders',
  task: fetchOrders,
  input: { day: 'today' },
  pattern: { kind: 'daily', at: '02:30' },
  timezone: 'Europe/Berlin',
});
app.schedule({
  name: 'hourly-pricing',
  task: price,
  input: { region: 'eu' },
  pattern: { kind: 'hourly', minute: 5 },
});

let worker: Worker;
let context: BrowserContext;
let closeBrowser: () => Promise<void>;
const served = await serveDashboard(app, { token: TOKEN, live: { debounceMs: 100, pollMs: 60_000 } });

async function open(path: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${served.url}#token=${TOKEN}`);
  await page.goto(`${served.url}#/${path}`);
  return page;
}

beforeAll(async () => {
  worker = createWorker(app, { concurrency: 4, pollIntervalMs: 100, queues: ['default'] });
  await worker.start();
  ({ context, close: closeBrowser } = await launchBrowser());
}, 120_000);

afterEach(async (ctx) => closePages(context, ctx.task.result?.state === 'fail', 'wf'));

afterAll(async () => {
  await closeBrowser?.();
  await worker?.stop();
});

describe('workflow and schedule pages in a browser', () => {
  it("a finished workflow's graph shows each node's status", async () => {
    const wf = workflow(app, 'orders.nightly');
    const orders = wf.node(fetchOrders, { input: { day: '2026-11-02' } });
    const regions = ['eu', 'us', 'mars'].map((region) =>
      wf.node(price, { input: { region }, waitsFor: [orders] }),
    );
    const final = wf.node(report, {
      input: { parts: regions.map((r) => r.outcome) },
      join: { quorum: 2 },
    });
    const handle = await wf.build({ output: final }).start();
    await handle.result({ timeoutMs: 20_000 });

    const list = await open('workflows');
    await list.getByTestId('workflows').locator(`tr[data-id="${handle.id}"]`).getByRole('link').click();
    const dag = list.getByTestId('graph-svg');
    await dag.locator('[data-node]').nth(4).waitFor();
    const statuses = Object.fromEntries(
      await Promise.all(
        (await dag.locator('[data-node]').all()).map(
          async (n) => [await n.getAttribute('data-node'), await n.getAttribute('data-status')] as const,
        ),
      ),
    );
    expect(statuses).toEqual({
      'orders.fetch': 'COMPLETED',
      'orders.price': 'COMPLETED',
      'orders.price#2': 'COMPLETED',
      'orders.price#3': 'FAILED',
      'reports.daily': 'COMPLETED',
    });
    expect(await list.getByTestId('dag').getByTestId('layer').count()).toBe(3);
    // Each dependency is an edge: the fetch fans out to the three prices, which the report joins.
    const edges = await dag
      .locator('polyline[data-from]')
      .evaluateAll((lines) =>
        lines.map((l) => `${l.getAttribute('data-from')}>${l.getAttribute('data-to')}`),
      );
    expect(edges.sort()).toEqual(
      [
        'orders.fetch>orders.price',
        'orders.fetch>orders.price#2',
        'orders.fetch>orders.price#3',
        'orders.price#2>reports.daily',
        'orders.price#3>reports.daily',
        'orders.price>reports.daily',
      ].sort(),
    );
    // A failed node fails the workflow (no success policy), though the quorum join ran.
    await list.locator('h1 .status', { hasText: 'FAILED' }).waitFor();
    // A FAILED run offers only Retry failed.
    const controls = list.getByTestId('workflow-controls');
    await controls.getByRole('button', { name: 'Retry failed' }).waitFor();
    expect(await controls.getByRole('button').allInnerTexts()).toEqual(['Retry failed']);
    await list.screenshot({ path: `${SCREENSHOTS}/workflow.png`, fullPage: true });
  });

  it('pauses and resumes a running workflow with its buttons; its subworkflow node leads to the child and back', async () => {
    const shipping = workflow(app, 'orders.shipping', { params: z.object({ region: z.string() }) });
    shipping.node(ship, { input: { region: shipping.params.region } });
    const shippingDef = shipping.build();
    const wf = workflow(app, 'orders.fulfil');
    const orders = wf.node(fetchOrders, { input: { day: '2026-11-03' } });
    wf.node(shippingDef, { id: 'ship-eu', input: { region: 'eu' }, waitsFor: [orders] });
    const handle = await wf.build().start();
    await eventually(async () => {
      const nodes = await handle.nodes();
      return nodes.find((n) => n.id === 'ship-eu')?.status === 'RUNNING';
    });

    const page = await open(`workflow/${encodeURIComponent(handle.id)}`);
    const controls = page.getByTestId('workflow-controls');
    await page.locator('h1 .status', { hasText: 'RUNNING' }).waitFor();
    expect(await controls.getByRole('button').allInnerTexts()).toEqual(['Pause', 'Cancel']);

    await controls.getByRole('button', { name: 'Pause' }).click();
    await page.getByTestId('action-message').getByText('paused').waitFor();
    await page.locator('h1 .status', { hasText: 'PAUSED' }).waitFor();
    expect(await controls.getByRole('button').allInnerTexts()).toEqual(['Resume', 'Cancel']);
    expect(await handle.status()).toBe('PAUSED');
    const [child] = await app.listWorkflows({ name: 'orders.shipping', limit: 1 });
    expect(child).toMatchObject({ parentId: handle.id, status: 'PAUSED' });
    await page.screenshot({ path: `${SCREENSHOTS}/workflow-paused.png`, fullPage: true });

    await controls.getByRole('button', { name: 'Resume' }).click();
    await page.getByTestId('action-message').getByText('resumed').waitFor();
    await page.locator('h1 .status', { hasText: 'RUNNING' }).waitFor();
    expect(await handle.status()).toBe('RUNNING');
    expect((await app.getWorkflow(child!.id).info())?.status).toBe('RUNNING');

    // The subworkflow node links to its child run, whose page links back to the parent.
    const node = page.getByTestId('graph-svg').locator('[data-node="ship-eu"]');
    expect(await node.getAttribute('data-child')).toBe(child!.id);
    await node.getByTestId('child-link').click();
    await page.getByTestId('workflow-id').getByText(child!.id).waitFor();
    const parentLine = page.getByTestId('workflow-parent');
    expect(await parentLine.innerText()).toContain('(its node ship-eu)');
    await parentLine.getByRole('link', { name: handle.id }).click();
    await page.getByTestId('workflow-id').getByText(handle.id).waitFor();

    await handle.cancel();
  });

  it('the schedules page triggers a run that creates a task', async () => {
    await t.query(`INSERT INTO {{schema}}.horsies_schedule_state (schedule_name) VALUES ('old-cleanup')`);
    const page = await open('schedules');
    const table = page.getByTestId('schedules');
    await table.locator('tr[data-schedule="old-cleanup"]').getByText('orphaned').waitFor();
    const row = table.locator('tr[data-schedule="daily-orders"]');
    await row.waitFor();
    expect(await row.innerText()).toContain('Europe/Berlin');
    await row.getByRole('button', { name: 'Trigger' }).click();
    await page.getByTestId('action-message').getByText('triggered daily-orders').waitFor();
    const taskLink = row.getByTestId('schedule-last-task').getByRole('link');
    await taskLink.waitFor();
    const taskId = decodeURIComponent((await taskLink.getAttribute('href'))!.replace('#/task/', ''));
    const [task] = await t.query<{ task_name: string }>(
      'SELECT task_name FROM {{schema}}.horsies_tasks WHERE id = $1',
      [taskId],
    );
    expect(task?.task_name).toBe('orders.fetch');
    await row.getByTestId('schedule-last-task').getByText('COMPLETED').waitFor({ timeout: 15_000 });
    await eventually(async () => (await row.innerText()).includes('in '));
    await page.screenshot({ path: `${SCREENSHOTS}/schedules.png`, fullPage: true });
  });
});
