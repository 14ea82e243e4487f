/**
 * The dashboard in a real browser (Debian's Chromium, headless) against a real database with a real worker
 * running: every page shows its data, filters and pages work, each action changes the rows, a task finishing
 * meanwhile appears on an open page without a reload, and an action without the token is refused. Each page's
 * screenshot goes to docs/dashboard/ for the user guide when HORSIES_DOCS_SCREENSHOTS=1 (see browser.ts).
 */
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import { factoriesFor } from '../support/factories.js';
import { eventually, useTestSchema } from '../support/db.js';
import { closePages, launchBrowser, SCREENSHOTS } from './browser.js';
import { serveDashboard } from './support.js';

const TOKEN = 'browser-test-token';

const t = await useTestSchema();
const app = t.app({
  queues: [
    { name: 'default', priority: 10 },
    { name: 'emails', priority: 20, maxConcurrency: 5 },
    { name: 'reports', priority: 50 },
  ],
  recovery: { claimerHeartbeatIntervalMs: 100, runnerHeartbeatIntervalMs: 100 },
});
const { insertTasks } = factoriesFor(t);

const resize = app.task({
  name: 'images.resize',
  input: z.object({ width: z.number().int() }),
  handler: ({ width }) => ({ width, height: Math.round((width * 3) / 4) }),
});
const sendEmail = app.task({
  name: 'emails.send',
  queue: 'emails',
  input: z.object({ to: z.string() }),
  handler: ({ to }) => {
    if (to.endsWith('@bounce.test')) throw new TaskError('MAILBOX_FULL', `mailbox of ${to} is full`);
    return { delivered: to };
  },
});
/** Runs until cancelled. */
const longReport = app.task({
  name: 'reports.build',
  queue: 'reports',
  input: z.object({ month: z.string() }),
  handler: (_input, ctx) =>
    new Promise<never>((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => reject(new Error('stopped')));
    }),
});

let worker: Worker;
let context: BrowserContext;
let closeBrowser: () => Promise<void>;
const served = await serveDashboard(app, { token: TOKEN, live: { debounceMs: 100, pollMs: 60_000 } });

async function statusOf(id: string): Promise<string> {
  const [row] = await t.query<{ status: string }>(
    'SELECT status FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  return row!.status;
}

/** A new tab on `path` (a hash route), with the token handed over first when `token` is set. */
async function open(path: string, token = true): Promise<Page> {
  const page = await context.newPage();
  if (token) await page.goto(`${served.url}#token=${TOKEN}`);
  await page.goto(`${served.url}#/${path}`);
  return page;
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${SCREENSHOTS}/${name}.png`, fullPage: true });
}

beforeAll(async () => {
  worker = createWorker(app, { concurrency: 4, pollIntervalMs: 200, snapshotIntervalMs: 200 });
  await worker.start();
  // Real history: some tasks finish, some fail.
  const done = await Promise.all([120, 320, 640, 800, 1024].map((width) => resize.send({ width })));
  const mails = await Promise.all(
    ['ana@example.test', 'bo@example.test', 'cy@bounce.test', 'di@bounce.test'].map((to) =>
      sendEmail.send({ to }),
    ),
  );
  await Promise.all([...done, ...mails].map((h) => h.result({ timeoutMs: 20_000 })));
  // Volume and older history from the factories: enough finished rows for several pages, a scheduled backlog.
  await insertTasks({
    taskName: 'images.resize',
    status: 'COMPLETED',
    count: 120,
    finishedAgoMs: 20 * 60_000,
  });
  await insertTasks({
    taskName: 'emails.send',
    queue: 'emails',
    status: 'FAILED',
    errorCode: 'SMTP_TIMEOUT',
    count: 6,
  });
  await insertTasks({ taskName: 'reports.build', queue: 'reports', sentAgoMs: -3_600_000, count: 3 });
  ({ context, close: closeBrowser } = await launchBrowser());
}, 120_000);

// A failed test leaves what its pages showed behind, and closes them.
afterEach(async (ctx) => closePages(context, ctx.task.result?.state === 'fail', 'ui'));

afterAll(async () => {
  await closeBrowser?.();
  await worker?.stop();
});

describe('dashboard in a browser', () => {
  it('overview shows counts, charts, workers and the leader', async () => {
    const page = await open('');
    await page.getByTestId('overview-queues').locator('tr[data-queue="emails"]').waitFor();
    await eventually(async () => (await page.getByTestId('stat-leader').innerText()).includes(worker.id));
    expect(await page.getByTestId('stat-scheduled').locator('.value').innerText()).toBe('3');
    expect(
      Number(await page.getByTestId('stat-failed').locator('.value').innerText()),
    ).toBeGreaterThanOrEqual(8);
    expect(
      Number(await page.getByTestId('stat-workers').locator('.value').innerText()),
    ).toBeGreaterThanOrEqual(1);
    await page.getByTestId('chart-throughput').locator('canvas').waitFor();
    await page.getByTestId('chart-failure-rate').locator('canvas').waitFor();
    await shoot(page, 'overview');
    await page.close();
  });

  it('queues shows depth and caps, and pause and resume change the queue', async () => {
    const page = await open('queues');
    const row = page.getByTestId('queues').locator('tr[data-queue="reports"]');
    await row.waitFor();
    expect(await row.locator('td').nth(3).innerText()).toBe('3'); // scheduled
    const emails = page.getByTestId('queues').locator('tr[data-queue="emails"]');
    await eventually(async () => (await emails.locator('td').nth(8).innerText()) === '5'); // max concurrency
    expect(await emails.locator('td').nth(7).innerText()).toBe('20'); // priority
    await row.getByRole('button', { name: 'Pause' }).click();
    await row.getByTestId('queue-state').getByText('paused').waitFor();
    const [state] = await t.query<{ paused: boolean }>(
      `SELECT paused FROM {{schema}}.horsies_queue_state WHERE queue_name = 'reports'`,
    );
    expect(state?.paused).toBe(true);
    await shoot(page, 'queues');
    await row.getByRole('button', { name: 'Resume' }).click();
    await row.getByTestId('queue-state').getByText('active').waitFor();
    await page.close();
  });

  it('tasks filter by tab, error code and task name, and page through cursors', async () => {
    const page = await open('tasks?tab=completed&task=images.resize');
    const rows = page.getByTestId('tasks').locator('tbody tr');
    await eventually(async () => (await rows.count()) === 50);
    const first = await rows.first().getAttribute('data-id');
    await page.getByTestId('next-page').click();
    await eventually(async () => (await rows.first().getAttribute('data-id')) !== first);
    const second = await rows.first().getAttribute('data-id');
    await page.getByTestId('next-page').click();
    await eventually(async () => (await rows.first().getAttribute('data-id')) !== second);
    expect(await rows.count()).toBe(25); // 125 in all: 50 + 50 + 25
    expect(await page.getByTestId('next-page').isDisabled()).toBe(true);
    await page.getByRole('button', { name: '← Previous' }).click();
    await eventually(async () => (await rows.first().getAttribute('data-id')) === second);

    await page.locator('a[data-tab="failed"]').click();
    // The filter form is rebuilt for the new tab: fill it only once the tab shows.
    await page.locator('a[data-tab="failed"].active').waitFor();
    await page.getByText('No tasks match.').waitFor(); // no images.resize task failed
    await page.locator('input[name="error"]').fill('MAILBOX_FULL');
    await page.locator('input[name="task"]').fill('emails.send');
    await page.getByRole('button', { name: 'Filter' }).click();
    await eventually(async () => (await rows.count()) === 2);
    expect(await page.getByTestId('tasks').innerText()).not.toContain('SMTP_TIMEOUT');
    await shoot(page, 'tasks');
    await page.close();
  });

  it('task detail shows input, result, attempts and heartbeats; search by id finds it', async () => {
    const handle = await longReport.send({ month: '2026-10' });
    const page = await open('tasks');
    await page.locator('input[name="id"]').fill(handle.id);
    await page.getByRole('button', { name: 'Go to task' }).click();
    await page.getByTestId('task-id').getByText(handle.id).waitFor();
    await page.getByTestId('task-input').getByText('2026-10').waitFor();
    await page.locator('h1 .status', { hasText: 'RUNNING' }).waitFor({ timeout: 15_000 });
    await page.getByTestId('heartbeats').locator('tbody tr').first().waitFor({ timeout: 15_000 });
    await shoot(page, 'task');
    // Cancel: the worker stops the handler and the task ends CANCELLED.
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.locator('h1 .status', { hasText: 'CANCELLED' }).waitFor({ timeout: 15_000 });
    expect(await statusOf(handle.id)).toBe('CANCELLED');
    // Resubmit: back to PENDING, and the worker takes it again.
    await page.getByRole('button', { name: 'Resubmit' }).click();
    await page.locator('h1 .status', { hasText: /PENDING|CLAIMED|RUNNING/ }).waitFor();
    await eventually(async () => (await statusOf(handle.id)) === 'RUNNING');
    await handle.cancel();
    await page.close();
  });

  it('a finished task with its result and attempts', async () => {
    const handle = await resize.send({ width: 2000 });
    await handle.result({ timeoutMs: 20_000 });
    const page = await open(`task/${handle.id}`);
    await page.getByTestId('task-result').getByText('1500').waitFor();
    expect(await page.getByTestId('attempts').locator('tbody tr').count()).toBe(1);
    // The attempt on the timeline, with the row's times.
    const span = page.getByTestId('attempt-timeline').locator('[data-span="1"]');
    const [attempt] = await t.query<{ started_at: Date; finished_at: Date }>(
      'SELECT started_at, finished_at FROM {{schema}}.horsies_task_attempts WHERE task_id = $1',
      [handle.id],
    );
    expect(await span.getAttribute('data-status')).toBe('COMPLETED');
    expect(await span.getAttribute('data-started')).toBe(attempt!.started_at.toISOString());
    expect(await span.getAttribute('data-finished')).toBe(attempt!.finished_at.toISOString());
    await page.close();
  });

  it('dead letters resubmit a group in bulk, and the worker runs it again', async () => {
    const page = await open('dead-letters');
    const group = page.getByTestId('dead-letters').locator('tr[data-group="emails.send/SMTP_TIMEOUT"]');
    await group.waitFor();
    await shoot(page, 'dead-letters');
    await group.getByRole('button', { name: 'Resubmit 6' }).click();
    await page.getByTestId('action-message').getByText('resubmitted: 6 task(s)').waitFor();
    await group.waitFor({ state: 'detached' });
    // Back to PENDING with a fresh budget, and the worker takes them again (they fail once more: the factory's
    // rows carry no input the handler accepts).
    await eventually(async () => {
      const rows = await t.query<{ status: string; resubmit_count: number; error_code: string | null }>(
        `SELECT status, resubmit_count, error_code FROM {{schema}}.horsies_tasks
         WHERE task_name = 'emails.send' AND resubmit_count > 0`,
      );
      return rows.length === 6 && rows.every((r) => r.status === 'FAILED' && r.error_code !== 'SMTP_TIMEOUT');
    });
    await page.close();
  });

  it('workers lists the running worker live and an old one stale', async () => {
    await t.query(
      `INSERT INTO {{schema}}.horsies_worker_states (worker_id, snapshot_at, hostname, pid, queues, tasks_running)
       VALUES ('w-gone', now() - interval '3 minutes', 'old-host', 4242, '{default}', 0)`,
    );
    const page = await open('workers');
    const live = page.getByTestId('workers').locator(`tr[data-worker="${worker.id}"]`);
    const table = page.getByTestId('workers');
    await table.waitFor();
    await eventually(
      async () => (await live.count()) === 1 && (await live.innerText()).includes('live'),
    ).catch(async (error: Error) => {
      throw new Error(`${error.message}: no live row for ${worker.id} in\n${await table.innerText()}`);
    });
    await page.getByTestId('workers').locator('tr[data-worker="w-gone"]').getByText('stale').waitFor();
    await shoot(page, 'workers');
    await page.close();
  });

  it('a task finishing elsewhere shows up on an open page without a reload', async () => {
    const page = await open('tasks?tab=completed&task=images.resize&limit=5');
    const rows = page.getByTestId('tasks').locator('tbody tr');
    await eventually(async () => (await rows.count()) === 5);
    let navigations = 0;
    page.on('framenavigated', () => (navigations += 1));
    const handle = await resize.send({ width: 4096 });
    await page.getByTestId('tasks').locator(`tr[data-id="${handle.id}"]`).waitFor({ timeout: 15_000 });
    expect(navigations).toBe(0);
    await page.close();
  });

  it('an action without the token is refused and changes nothing', async () => {
    const handle = await longReport.send({ month: '2026-11' }, { delayMs: 3_600_000 });
    const page = await open(`task/${handle.id}`, false);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByTestId('action-message').getByText('missing or wrong x-horsies-token header').waitFor();
    expect(await statusOf(handle.id)).toBe('PENDING');
    await page.close();
  });
});
