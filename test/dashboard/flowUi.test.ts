/**
 * The flow control section of the queues page in a real browser, over rows a real worker made: a queue whose
 * rate limiter is full, one paused by an upstream's 429 (TaskThrottledError), a group-limited queue with groups in
 * flight, and dedupe and debounce keys held by sends. The page's rows are read from the DOM and compared with the
 * database's.
 */
import { AxeBuilder } from '@axe-core/playwright';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskThrottledError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import type { FlowState } from '../../src/dashboard/contract.js';
import { eventually, useTestSchema } from '../support/db.js';
import { closePages, launchBrowser, SCREENSHOTS } from './browser.js';
import { serveDashboard } from './support.js';

const t = await useTestSchema();
const app = t.app({
  queues: [
    { name: 'metered', rateLimit: { max: 2, intervalMs: 3_600_000 } },
    { name: 'upstream', rateLimit: { max: 100, intervalMs: 1_000 } },
    { name: 'tenants', maxConcurrencyPerGroup: 2 },
    { name: 'default' },
  ],
  recovery: { claimerHeartbeatIntervalMs: 100, runnerHeartbeatIntervalMs: 100 },
});

let release: () => void = () => undefined;
const released = new Promise<void>((resolve) => (release = resolve));

const metered = app.task({
  name: 'flow.metered',
  queue: 'metered',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => n,
});
const callApi = app.task({
  name: 'flow.call',
  queue: 'upstream',
  input: z.object({}),
  // The upstream answers 429 with a Retry-After of an hour: the limiter pauses, the task waits.
  handler: () => {
    throw new TaskThrottledError({ retryAfterMs: 3_600_000 });
  },
});
const tenantJob = app.task({
  name: 'flow.tenant',
  queue: 'tenants',
  input: z.object({ n: z.number() }),
  handler: async ({ n }) => {
    await released;
    return n;
  },
});
const refresh = app.task({
  name: 'flow.refresh',
  queue: 'default',
  input: z.object({ account: z.string() }),
  handler: ({ account }) => account,
});
const reindex = app.task({
  name: 'flow.reindex',
  queue: 'default',
  input: z.object({ version: z.number() }),
  handler: ({ version }) => version,
});

let worker: Worker;
let context: BrowserContext;
let closeBrowser: () => Promise<void>;
const served = await serveDashboard(app, { live: { debounceMs: 100, pollMs: 60_000 } });
const ids: Record<string, string> = {};

beforeAll(async () => {
  worker = createWorker(app, { concurrency: 8, pollIntervalMs: 100, snapshotIntervalMs: 200 });
  await worker.start();
  // Three sends under a limit of 2 an hour: two run, the third waits for the window.
  await Promise.all([1, 2, 3].map((n) => metered.send({ n })));
  // Which two run first is the claim's choice: wait until two completed.
  await eventually(async () => {
    const rows = await t.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE task_name = 'flow.metered' AND status = 'COMPLETED'`,
    );
    return rows[0]!.n === 2;
  });
  // An upstream's 429: the limiter of `upstream` pauses for an hour.
  await callApi.send({});
  await eventually(async () => {
    const [row] = await t.query<{ paused_until: Date | null }>(
      `SELECT paused_until FROM {{schema}}.horsies_rate_limiters WHERE limiter_key = 'queue:upstream'`,
    );
    return row?.paused_until ?? undefined;
  });
  // Groups: three tasks of acme (limit 2 in flight), one of globex; they run until released.
  await tenantJob.sendMany([
    { input: { n: 1 }, group: 'acme' },
    { input: { n: 2 }, group: 'acme' },
    { input: { n: 3 }, group: 'acme' },
    { input: { n: 4 }, group: 'globex' },
  ]);
  await eventually(async () => {
    const rows = await t.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE task_name = 'flow.tenant' AND status = 'RUNNING'`,
    );
    return rows[0]!.n === 3;
  });
  // Keys: a dedupe key held after its task ran (scope finished, a day's window); a debounce key held by a burst's
  // pending task, due in an hour.
  const report = await refresh.send(
    { account: 'acme' },
    { dedupe: { key: 'account:acme', scope: 'finished', windowMs: 86_400_000 } },
  );
  expect(await report.result({ timeoutMs: 20_000 })).toEqual({ ok: true, value: 'acme' });
  ids.dedupe = report.id;
  const first = await reindex.send({ version: 1 }, { debounce: { key: 'doc:7', delayMs: 3_600_000 } });
  const second = await reindex.send({ version: 2 }, { debounce: { key: 'doc:7', delayMs: 3_600_000 } });
  expect(second.id).toBe(first.id);
  ids.debounce = first.id;
  ({ context, close: closeBrowser } = await launchBrowser());
}, 120_000);

afterEach(async (ctx) => closePages(context, ctx.task.result?.state === 'fail', 'flow'));

afterAll(async () => {
  await closeBrowser?.();
  release();
  await worker?.stop();
});

async function open(path: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${served.url}#/${path}`);
  return page;
}

describe('flow control on the queues page', () => {
  it('shows the limiters, the groups in flight and the keys held, as the rows say', async () => {
    const page = await open('queues');
    const flow = page.getByTestId('flow');
    // The full limiter: 2 starts of 2 in its window, no room.
    const full = flow.locator('tr[data-limiter="queue:metered"]');
    await full.waitFor();
    expect(await full.getAttribute('data-state')).toBe('full');
    expect(await full.getByTestId('limiter-used').innerText()).toBe('2');
    expect(await full.getByTestId('limiter-room').innerText()).toBe('0');
    // The paused one, until the time stored after the 429.
    const paused = flow.locator('tr[data-limiter="queue:upstream"]');
    const [stored] = await t.query<{ paused_until: Date }>(
      `SELECT paused_until FROM {{schema}}.horsies_rate_limiters WHERE limiter_key = 'queue:upstream'`,
    );
    expect(await paused.getAttribute('data-state')).toBe('paused');
    expect(new Date((await paused.getAttribute('data-paused-until'))!).getTime()).toBe(
      stored!.paused_until.getTime(),
    );
    expect(await paused.getByTestId('limiter-state').innerText()).toMatch(/^paused, ends in (59|60) min$/);

    // Groups in flight against the limit, as the task rows count them.
    const inFlight = await t.query<{ group_key: string; n: number }>(
      `SELECT group_key, count(*)::int AS n FROM {{schema}}.horsies_tasks
       WHERE queue_name = 'tenants' AND claimed GROUP BY group_key ORDER BY group_key`,
    );
    expect(inFlight).toEqual([
      { group_key: 'acme', n: 2 },
      { group_key: 'globex', n: 1 },
    ]);
    const acme = flow.locator('tr[data-group="tenants/acme"]');
    expect(await acme.getByTestId('group-in-flight').innerText()).toBe('2');
    expect(await acme.getByTestId('group-limit').innerText()).toContain('at limit');
    expect(
      await flow.locator('tr[data-group="tenants/globex"]').getByTestId('group-in-flight').innerText(),
    ).toBe('1');
    expect(await flow.getByTestId('flow-group-limits').innerText()).toContain('tenants (2 per group)');

    // Keys: the dedupe key of a finished task, held for its window; the debounce key of a pending task.
    const dedupe = flow.locator('tr[data-key="flow.refresh/account:acme"]');
    expect(await dedupe.getByTestId('key-kind').innerText()).toBe('dedupe (finished)');
    expect(await dedupe.innerText()).toContain('COMPLETED');
    expect(await dedupe.getByTestId('key-held-until').innerText()).toMatch(/^in (23|24) h$/);
    expect(await dedupe.locator('a').getAttribute('href')).toBe(`#/task/${ids.dedupe}`);
    const debounce = flow.locator('tr[data-key="flow.reindex/doc:7"]');
    expect(await debounce.getByTestId('key-kind').innerText()).toBe('debounce');
    const [due] = await t.query<{ enqueued_at: Date }>(
      'SELECT enqueued_at FROM {{schema}}.horsies_tasks WHERE id = $1',
      [ids.debounce],
    );
    expect(new Date((await debounce.getByTestId('key-due').getAttribute('data-due'))!).getTime()).toBe(
      due!.enqueued_at.getTime(),
    );
    expect(await flow.getByTestId('flow-keys').locator('tbody tr').count()).toBe(2);
    await page.screenshot({ path: `${SCREENSHOTS}/queues-flow.png`, fullPage: true });
    // No serious accessibility violation with its rows shown.
    const { violations } = await new AxeBuilder({ page }).analyze();
    expect(
      violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id),
    ).toEqual([]);
  });

  it('narrows groups and keys to one queue', async () => {
    const page = await open('queues?queue=tenants');
    const flow = page.getByTestId('flow');
    await flow.locator('tr[data-group="tenants/acme"]').waitFor();
    await flow.getByText('No dedupe or debounce key is held.').waitFor();
    const { body } = await served.get<FlowState>('api/flow?queue=default');
    expect(body.groups).toEqual([]);
    expect(body.keys.map((k) => k.key).sort()).toEqual(['account:acme', 'doc:7']);
  });
});
