/**
 * What the dashboard renders is safe, and who may read it is controlled:
 *
 * - Task inputs, results, error messages and node ids hold script and markup; every page that shows them shows
 *   them as text, and nothing injected runs (the test listens for dialogs, console errors and page errors).
 * - A strict Content-Security-Policy header is on every response: pages, files, API answers, errors, redirects.
 * - An accessibility pass (axe-core) over the pages finds no serious or critical violation.
 * - A read token: without it every API read is refused (the event stream too), with it or the action token
 *   reads pass, the read token cannot act, and the page asks for it, then works live.
 */
import { tmpdir } from 'node:os';
import { AxeBuilder } from '@axe-core/playwright';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createDashboard } from '../../src/dashboard/Dashboard.js';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { useTestSchema } from '../support/db.js';
import { closePages, launchBrowser } from './browser.js';
import { serveDashboard } from './support.js';

const TOKEN = 'safety-action-token';
const READ_TOKEN = 'safety-read-token';

/** Markup that runs script if a page ever puts it into the DOM as HTML, or follows it as a link. */
const HOSTILE = {
  script: '<script>alert("script")</script>',
  image: '<img src=x onerror="alert(\'image\')">',
  link: 'javascript:alert("link")',
  svg: '<svg onload="alert(\'svg\')"></svg>',
  closing: '"></pre><iframe src="javascript:alert(\'frame\')"></iframe>',
};
const HOSTILE_ID = '<img src=x onerror=alert("node")>';

const t = await useTestSchema();
const app = t.app({ queues: [{ name: 'default' }] });
const echo = app.task({
  name: 'hostile.echo',
  input: z.object({ text: z.record(z.string(), z.string()) }),
  handler: ({ text }) => ({ echoed: text }),
});
const fail = app.task({
  name: 'hostile.fail',
  input: z.object({ text: z.record(z.string(), z.string()) }),
  handler: () => {
    throw new TaskError('HOSTILE', `failed with ${HOSTILE.image} and ${HOSTILE.script}`);
  },
});

let worker: Worker;
let context: BrowserContext;
let closeBrowser: () => Promise<void>;
const served = await serveDashboard(app, { token: TOKEN, live: { debounceMs: 100, pollMs: 60_000 } });
const guarded = await serveDashboard(app, {
  token: TOKEN,
  readToken: READ_TOKEN,
  live: { debounceMs: 100, pollMs: 60_000 },
});

/** Everything that would show that injected code ran, or that the page broke. */
const incidents: string[] = [];

async function open(url: string): Promise<Page> {
  const page = await context.newPage();
  page.on('dialog', (dialog) => {
    incidents.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  page.on('pageerror', (error) => incidents.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') incidents.push(`console error: ${message.text()}`);
  });
  await page.goto(url);
  return page;
}

beforeAll(async () => {
  worker = createWorker(app, { concurrency: 2, pollIntervalMs: 50, queues: ['default'] });
  await worker.start();
  ({ context, close: closeBrowser } = await launchBrowser());
}, 120_000);

afterEach(async (ctx) =>
  closePages(context, ctx.task.result?.state === 'fail', 'safety', `incidents: ${incidents.join('; ')}`),
);

afterAll(async () => {
  await closeBrowser?.();
  await worker?.stop();
});

/** Serious and critical accessibility violations of the page as it is now. */
async function seriousViolations(page: Page): Promise<string[]> {
  const { violations } = await new AxeBuilder({ page }).analyze();
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

describe('what the dashboard renders', () => {
  it('shows hostile inputs, results, errors and node ids as text, and nothing injected runs', async () => {
    const done = await echo.send({ text: HOSTILE });
    const failed = await fail.send({ text: HOSTILE });
    await done.result({ timeoutMs: 20_000 });
    await failed.result({ timeoutMs: 20_000 });
    const wf = workflow(app, 'hostile.flow');
    const first = wf.node(echo, { id: HOSTILE_ID, input: { text: HOSTILE } });
    wf.node(fail, { id: 'after <b>bold</b>', input: { text: HOSTILE }, waitsFor: [first] });
    const run = await wf.build().start();
    await run.result({ timeoutMs: 20_000 }).catch(() => undefined);

    const task = await open(`${served.url}#/task/${encodeURIComponent(failed.id)}`);
    await task.getByText('HOSTILE', { exact: false }).first().waitFor();
    const body = await task.locator('main').innerText();
    // The input is shown as JSON: each string with its quotes escaped.
    for (const text of Object.values(HOSTILE)) expect(body).toContain(JSON.stringify(text).slice(1, -1));
    expect(body).toContain(`failed with ${HOSTILE.image}`);
    expect(await task.locator('main img, main iframe, main script').count()).toBe(0);
    expect(await task.locator('a[href^="javascript:"]').count()).toBe(0);

    const flow = await open(`${served.url}#/workflow/${encodeURIComponent(run.id)}`);
    const node = flow.getByTestId('graph-svg').locator('[data-node]').first();
    await node.waitFor();
    expect(await node.getAttribute('data-node')).toBe(HOSTILE_ID);
    await node.click();
    const detail = flow.getByTestId('node-detail');
    await detail.getByTestId('node-input').waitFor();
    expect(await detail.locator('h3').innerText()).toContain(HOSTILE_ID);
    expect(await detail.getByTestId('node-input').innerText()).toContain(
      HOSTILE.closing.replace(/"/g, '\\"'),
    );
    expect(await flow.locator('main img, main iframe, main script, main foreignObject').count()).toBe(0);

    const list = await open(`${served.url}#/tasks?tab=failed`);
    await list.getByText('hostile.fail').first().waitFor();
    await list.screenshot({ path: `${tmpdir()}/horsies-hostile-list.png` });

    expect(incidents).toEqual([]);
  }, 60_000);

  it('sends a strict Content-Security-Policy on every response', async () => {
    const paths = [
      '',
      'index.html',
      'api/config',
      'api/overview',
      'api/nothing',
      'api/tasks?limit=0',
      'missing.js',
    ];
    const asset = (await (await fetch(served.url)).text()).match(/assets\/index-[^"]+\.js/)?.[0];
    expect(asset).toBeTruthy();
    const responses = [
      ...(await Promise.all(paths.map((p) => fetch(`${served.url}${p}`)))),
      await fetch(`${served.url}${asset}`),
      await fetch(`${served.url}api/tasks/x/cancel`, { method: 'POST' }),
      await fetch(`${guarded.url}api/overview`),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 404, 400, 404, 200, 401, 401]);
    for (const response of responses) {
      const csp = response.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toMatch(/unsafe-eval|script-src[^;]*unsafe-inline/);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      await response.body?.cancel();
    }
  });

  it('passes an accessibility check with no serious violation', async () => {
    const run = (await app.listWorkflows({ name: 'hostile.flow', limit: 1 }))[0];
    expect(run).toBeTruthy();
    const found: Record<string, string[]> = {};
    for (const path of [
      '',
      'queues',
      'tasks?tab=failed',
      'workflows',
      `workflow/${run!.id}`,
      'workers',
      'schedules',
    ]) {
      const page = await open(`${served.url}#/${path}`);
      await page.locator('main h1').first().waitFor();
      if (path.startsWith('workflow/')) {
        await page.getByTestId('graph-svg').locator('[data-node]').first().click();
        await page.getByTestId('node-detail').getByTestId('node-input').waitFor();
        await page.getByTestId('timeline').waitFor();
      } else await page.locator('main table, main .stats, main .muted').first().waitFor();
      found[path || 'overview'] = await seriousViolations(page);
      console.log(`axe ${path || 'overview'}: ${found[path || 'overview']!.length} serious`);
      await page.close();
    }
    expect(found).toEqual(Object.fromEntries(Object.keys(found).map((k) => [k, []])));
  }, 180_000);
});

describe('a read token', () => {
  it('refuses every API read without it, passes the read or action token, and the read token cannot act', async () => {
    const config = await guarded.get<{ readToken: boolean }>('api/config');
    expect(config).toEqual({ status: 200, body: { actions: true, hideData: false, readToken: true } });
    for (const path of ['api/overview', 'api/tasks', 'api/workflows', 'api/events', 'api/tasks/x']) {
      const none = await fetch(`${guarded.url}${path}`);
      const wrong = await fetch(`${guarded.url}${path}`, { headers: { 'x-horsies-token': 'nope' } });
      expect([path, none.status, wrong.status]).toEqual([path, 401, 401]);
      expect(JSON.stringify(await none.json())).not.toContain(READ_TOKEN);
    }
    for (const token of [READ_TOKEN, TOKEN]) {
      const ok = await fetch(`${guarded.url}api/overview`, { headers: { 'x-horsies-token': token } });
      expect(ok.status).toBe(200);
    }
    // The UI's own files hold no data and stay public, so the page can ask for the token.
    expect((await fetch(guarded.url)).status).toBe(200);
    const act = await guarded.post('api/queues/default/pause', {}, { 'x-horsies-token': READ_TOKEN });
    expect(act.status).toBe(401);
    // One token for both.
    const both = createDashboard(app, { token: TOKEN, readToken: true });
    expect(both.readsNeedToken).toBe(true);
    await both.close();
    expect(() => createDashboard(app, { readToken: true })).toThrow(/action token/);
  });

  it('the page asks for the token, then shows the data and follows changes live', async () => {
    const page = await open(guarded.url);
    const gate = page.getByTestId('token-gate');
    await gate.waitFor();
    await gate.getByLabel('token').fill(READ_TOKEN);
    await gate.getByRole('button', { name: 'Open' }).click();
    await page.getByTestId('live').getByText('live').waitFor();
    await page.goto(`${guarded.url}#/tasks?tab=completed`);
    const handle = await echo.send({ text: { note: 'sent while the page is open' } });
    await page.locator(`tr[data-id="${handle.id}"]`).waitFor({ timeout: 20_000 });
    expect(incidents).toEqual([]);
  }, 60_000);
});
