/**
 * The dashboard's JSON API and event stream against a real database: rows made with the factories, read back
 * through each tab and filter, pages walked by cursor, actions refused without the token and applied with it.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createDashboard } from '../../src/dashboard/Dashboard.js';
import { factoriesFor } from '../support/factories.js';
import { eventually, useTestSchema } from '../support/db.js';
import { serveDashboard } from './support.js';

const TOKEN = 'test-token-for-actions';
const t = await useTestSchema();
const app = t.app();
const { insertTask, insertTasks, insertAttempt } = factoriesFor(t);
const readOnly = await serveDashboard(app);
const withActions = await serveDashboard(app.db, { token: TOKEN });
const hidden = await serveDashboard(app, { hideData: true });
const mounted = await serveDashboard(app, {}, '/ops/horsies');

interface Page {
  rows: { id: string; status: string; finished_at: string | null; queue_name: string; task_name: string }[];
  nextCursor: string | null;
}

async function tab(query: string): Promise<Page> {
  const { status, body } = await readOnly.get<Page>(`api/tasks?${query}`);
  expect(status, JSON.stringify(body)).toBe(200);
  return body;
}

async function statusOf(id: string): Promise<string> {
  const [row] = await t.query<{ status: string }>(
    'SELECT status FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  return row!.status;
}

describe('task lists', () => {
  it('shows each state in its tab', async () => {
    const q = 'tabs';
    const pending = await insertTask({ taskName: 'api.tabs', queue: q });
    const scheduled = await insertTask({ taskName: 'api.tabs', queue: q, sentAgoMs: -60_000 });
    const running = await insertTask({ taskName: 'api.tabs', queue: q, status: 'RUNNING' });
    const completed = await insertTask({ taskName: 'api.tabs', queue: q, status: 'COMPLETED' });
    const failed = await insertTask({ taskName: 'api.tabs', queue: q, status: 'FAILED' });
    const expired = await insertTask({ taskName: 'api.tabs', queue: q, status: 'EXPIRED' });
    const retrying = await insertTask({ taskName: 'api.tabs', queue: q, sentAgoMs: -30_000 });
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET retry_count = 1, next_retry_at = enqueued_at WHERE id = $1`,
      [retrying],
    );
    const ids = async (name: string): Promise<string[]> =>
      (await tab(`tab=${name}&queue=${q}`)).rows.map((r) => r.id).sort();
    expect(await ids('pending')).toEqual([pending, scheduled, retrying].sort());
    expect(await ids('scheduled')).toEqual([scheduled]);
    expect(await ids('retrying')).toEqual([retrying]);
    expect(await ids('running')).toEqual([running]);
    expect(await ids('completed')).toEqual([completed]);
    expect(await ids('failed')).toEqual([failed]);
    expect(await ids('dead')).toEqual([failed, expired].sort());
    expect(await ids('finished')).toEqual([completed, failed, expired].sort());
  });

  it('walks every finished row once, newest first, through cursors', async () => {
    const made = await insertTasks({ taskName: 'api.pages', status: 'COMPLETED', count: 23 });
    const seen: Page['rows'] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Page = await tab(
        `tab=completed&task=api.pages&limit=5${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      seen.push(...page.rows);
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor);
    expect(pages).toBe(5);
    expect(seen.map((r) => r.id).sort()).toEqual([...made].sort());
    const keys = seen.map((r) => `${r.finished_at}|${r.id}`);
    expect(keys).toEqual([...keys].sort().reverse());
  });

  it('walks pending rows in claim order through cursors', async () => {
    const made = await insertTasks({ taskName: 'api.pending.pages', queue: 'pendpages', count: 7 });
    const first = await tab('tab=pending&queue=pendpages&limit=4');
    const second = await tab(`tab=pending&queue=pendpages&limit=4&cursor=${first.nextCursor}`);
    expect(first.rows).toHaveLength(4);
    expect(second.nextCursor).toBeNull();
    expect([...first.rows, ...second.rows].map((r) => r.id).sort()).toEqual([...made].sort());
  });

  it('filters by queue, task name, error code and time', async () => {
    const a = await insertTask({
      taskName: 'api.filter.a',
      queue: 'fq1',
      status: 'FAILED',
      errorCode: 'E_ONE',
    });
    const b = await insertTask({
      taskName: 'api.filter.b',
      queue: 'fq2',
      status: 'FAILED',
      errorCode: 'E_TWO',
    });
    const old = await insertTask({
      taskName: 'api.filter.a',
      queue: 'fq1',
      status: 'FAILED',
      errorCode: 'E_ONE',
      finishedAgoMs: 3 * 3_600_000,
    });
    const ids = async (query: string): Promise<string[]> =>
      (await tab(`tab=failed&${query}`)).rows.map((r) => r.id).sort();
    expect(await ids('queue=fq2')).toEqual([b]);
    expect(await ids('task=api.filter.a')).toEqual([a, old].sort());
    expect(await ids('error=E_TWO')).toEqual([b]);
    expect(await ids('error=E_ONE&queue=fq1&task=api.filter.a')).toEqual([a, old].sort());
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    expect(await ids(`task=api.filter.a&from=${hourAgo}`)).toEqual([a]);
    expect(await ids(`task=api.filter.a&to=${hourAgo}`)).toEqual([old]);
  });

  it('refuses a bad tab, limit or cursor with 400', async () => {
    expect((await readOnly.get('api/tasks?tab=nope')).status).toBe(400);
    expect((await readOnly.get('api/tasks?tab=failed&limit=0')).status).toBe(400);
    expect((await readOnly.get('api/tasks?tab=failed&cursor=garbage')).status).toBe(400);
    const badTime = Buffer.from(JSON.stringify(['not a time', 'x'])).toString('base64url');
    expect((await readOnly.get(`api/tasks?tab=failed&cursor=${badTime}`)).status).toBe(400);
    expect((await readOnly.get('api/tasks?tab=failed&from=yesterday')).status).toBe(400);
  });
});

describe('task detail', () => {
  it('returns the task with its attempts, input and result; 404 for an unknown id', async () => {
    const id = await insertTask({ taskName: 'api.detail', status: 'FAILED', attempt: 2 });
    await insertAttempt(id, 1, 'FAILED');
    await insertAttempt(id, 2, 'FAILED');
    const { status, body } = await readOnly.get<{
      id: string;
      attempts: { attempt: number }[];
      result: unknown;
      input: unknown;
    }>(`api/tasks/${id}`);
    expect(status).toBe(200);
    expect(body.id).toBe(id);
    expect(body.attempts.map((a) => a.attempt)).toEqual([1, 2]);
    expect(body.result).toEqual({ err: { code: 'BOOM', message: 'made by the test' } });
    expect(body.input).toEqual({});
    expect((await readOnly.get('api/tasks/no-such-task')).status).toBe(404);
  });

  it('leaves input and result out when the server hides data', async () => {
    const id = await insertTask({ taskName: 'api.hidden', status: 'COMPLETED' });
    const { body } = await hidden.get<{ input: unknown; result: unknown; hidden: boolean }>(
      `api/tasks/${id}`,
    );
    expect(body).toMatchObject({ input: null, result: null, hidden: true });
    expect(JSON.stringify(body)).not.toContain('done');
  });
});

describe('pages', () => {
  it('overview and queues count live tasks exactly and finished ones over the last hour', async () => {
    await insertTasks({ taskName: 'api.ov', queue: 'ovq', count: 3 });
    await insertTasks({ taskName: 'api.ov', queue: 'ovq', status: 'RUNNING', count: 2 });
    await insertTasks({ taskName: 'api.ov', queue: 'ovq', status: 'COMPLETED', count: 4 });
    await insertTasks({
      taskName: 'api.ov',
      queue: 'ovq',
      status: 'COMPLETED',
      finishedAgoMs: 2 * 3_600_000,
    });
    const { body } = await readOnly.get<{
      queues: { queue: string; pending: number; running: number; lastHour: Record<string, number> }[];
      throughput: { completed: number }[];
    }>('api/overview');
    const q = body.queues.find((x) => x.queue === 'ovq');
    expect(q).toMatchObject({ pending: 3, running: 2, lastHour: { COMPLETED: 4 } });
    expect(body.throughput.reduce((n, b) => n + b.completed, 0)).toBeGreaterThanOrEqual(4);
    const queues = await readOnly.get<{ queue: string; pending: number }[]>('api/queues');
    expect(queues.body.find((x) => x.queue === 'ovq')?.pending).toBe(3);
  });

  it('workers are listed with their latest snapshot, silent ones marked stale', async () => {
    await t.query(
      `INSERT INTO {{schema}}.horsies_worker_states (worker_id, snapshot_at, queues, tasks_running)
       VALUES ('w-live', now() - interval '1 minute', '{a}', 0), ('w-live', now(), '{a}', 3),
              ('w-stale', now() - interval '2 minutes', '{a}', 1)`,
    );
    const { body } =
      await readOnly.get<{ worker_id: string; stale: boolean; tasks_running: number }[]>('api/workers');
    expect(body.find((w) => w.worker_id === 'w-live')).toMatchObject({ stale: false, tasks_running: 3 });
    expect(body.find((w) => w.worker_id === 'w-stale')).toMatchObject({ stale: true });
  });

  it('dead letters are grouped by task, queue and error code', async () => {
    await insertTasks({ taskName: 'api.dlq', queue: 'dlq', status: 'FAILED', errorCode: 'E_DLQ', count: 3 });
    const { body } =
      await readOnly.get<{ task_name: string; error_code: string; count: number }[]>('api/dead-letters');
    expect(body.find((g) => g.task_name === 'api.dlq')).toMatchObject({ error_code: 'E_DLQ', count: 3 });
  });

  it('serves the UI and the API under a mount path, redirecting the bare path to its slash', async () => {
    const page = await fetch(mounted.url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(await page.text()).toContain('<div id="app">');
    const bare = await fetch(mounted.url.slice(0, -1), { redirect: 'manual' });
    expect(bare.status).toBe(308);
    expect(bare.headers.get('location')).toBe('/ops/horsies/');
    expect((await mounted.get<{ actions: boolean }>('api/config')).body).toEqual({
      actions: false,
      hideData: false,
      readToken: false,
    });
    expect((await fetch(`${mounted.url}../../outside`)).status).toBe(404);
    expect((await fetch(`${mounted.url}assets/..%2f..%2f..%2fpackage.json`)).status).toBe(404);
  });
});

describe('actions', () => {
  it('are refused when no token is configured', async () => {
    const id = await insertTask({ taskName: 'api.act.none' });
    const res = await readOnly.post(`api/tasks/${id}/cancel`, {}, { 'x-horsies-token': TOKEN });
    expect(res.status).toBe(403);
    expect(await statusOf(id)).toBe('PENDING');
  });

  it('are refused without the token, with a wrong one, or from another origin', async () => {
    const id = await insertTask({ taskName: 'api.act.refused' });
    expect((await withActions.post(`api/tasks/${id}/cancel`)).status).toBe(401);
    expect(
      (await withActions.post(`api/tasks/${id}/cancel`, {}, { 'x-horsies-token': 'wrong' })).status,
    ).toBe(401);
    const crossOrigin = { 'x-horsies-token': TOKEN, origin: 'https://evil.example' };
    expect((await withActions.post(`api/tasks/${id}/cancel`, {}, crossOrigin)).status).toBe(403);
    const crossSite = { 'x-horsies-token': TOKEN, 'sec-fetch-site': 'cross-site' };
    expect((await withActions.post(`api/tasks/${id}/cancel`, {}, crossSite)).status).toBe(403);
    expect(await statusOf(id)).toBe('PENDING');
  });

  it('cancel, resubmit, bulk resubmit, pause and resume change the rows with the token', async () => {
    const auth = { 'x-horsies-token': TOKEN, origin: withActions.url.replace(/\/$/, '') };
    const pending = await insertTask({ taskName: 'api.act' });
    expect((await withActions.post(`api/tasks/${pending}/cancel`, {}, auth)).body).toMatchObject({
      outcome: 'cancelled',
    });
    expect(await statusOf(pending)).toBe('CANCELLED');

    const failed = await insertTask({ taskName: 'api.act', status: 'FAILED' });
    expect((await withActions.post(`api/tasks/${failed}/resubmit`, {}, auth)).status).toBe(200);
    expect(await statusOf(failed)).toBe('PENDING');
    expect((await withActions.post(`api/tasks/${failed}/resubmit`, {}, auth)).status).toBe(409);

    const bulk = await insertTasks({
      taskName: 'api.act.bulk',
      status: 'FAILED',
      errorCode: 'E_BULK',
      count: 4,
    });
    const other = await insertTask({ taskName: 'api.act.bulk', status: 'FAILED', errorCode: 'E_OTHER' });
    const res = await withActions.post<{ ids: string[] }>(
      'api/dead-letters/resubmit',
      { taskName: 'api.act.bulk', errorCode: 'E_BULK' },
      auth,
    );
    expect(res.body.ids.sort()).toEqual([...bulk].sort());
    expect(await statusOf(other)).toBe('FAILED');

    await insertTask({ taskName: 'api.act', queue: 'pausable' });
    expect((await withActions.post('api/queues/pausable/pause', {}, auth)).status).toBe(200);
    const paused = async (): Promise<boolean | undefined> =>
      (
        await t.query<{ paused: boolean }>(
          `SELECT paused FROM {{schema}}.horsies_queue_state WHERE queue_name = 'pausable'`,
        )
      )[0]?.paused;
    expect(await paused()).toBe(true);
    expect((await withActions.post('api/queues/pausable/resume', {}, auth)).status).toBe(200);
    expect(await paused()).toBe(false);
    expect((await withActions.post('api/queues/Not A Queue/pause', {}, auth)).status).toBe(400);
  });
});

describe('mounted like Express', () => {
  it('serves under a stripped mount path and takes a body a parser already read', async () => {
    // What Express does for app.use('/admin/jobs', handle) behind express.json(): req.url loses the mount path,
    // req.originalUrl keeps it, and the body stream is consumed into req.body.
    const dashboard = createDashboard(app, { token: TOKEN });
    const server = createServer((req, res) => {
      const original = req.url ?? '/';
      if (!original.startsWith('/admin/jobs')) return void res.writeHead(404).end();
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        Object.assign(req, {
          originalUrl: original,
          url: original.slice('/admin/jobs'.length) || '/',
          body: text ? JSON.parse(text) : {},
        });
        dashboard.handle(req, res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    afterAll(async () => {
      await dashboard.close();
      server.closeAllConnections();
      server.close();
    });
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/admin/jobs`;
    const bare = await fetch(base, { redirect: 'manual' });
    expect(bare.status).toBe(308);
    expect(bare.headers.get('location')).toBe('/admin/jobs/');
    expect(await (await fetch(`${base}/`)).text()).toContain('<div id="app">');
    const failed = await insertTasks({
      taskName: 'api.express',
      status: 'FAILED',
      errorCode: 'E_EXPRESS',
      count: 2,
    });
    const res = await fetch(`${base}/api/dead-letters/resubmit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-horsies-token': TOKEN },
      body: JSON.stringify({ taskName: 'api.express', errorCode: 'E_EXPRESS' }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { ids: string[] }).ids.sort()).toEqual([...failed].sort());
  });
});

describe('live events', () => {
  it('one LISTEN connection serves every open stream, and a task finishing elsewhere reaches them', async () => {
    const streams = await Promise.all([0, 1, 2].map(() => openStream(`${readOnly.url}api/events`)));
    await eventually(async () => readOnly.dashboard.live.listening);
    // The feed's connection listens on three channels; its last statement is one of those LISTENs.
    const listeners = await t.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = ANY ($1)`,
      [['task_new', 'task_done', 'task_progress'].map((c) => `LISTEN "${t.schema}:${c}"`)],
    );
    expect(listeners[0]!.n).toBe(1);
    const id = await insertTask({ taskName: 'api.live', status: 'RUNNING' });
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET status = 'COMPLETED', completed_at = now(), finished_at = now(),
         claimed = false, result = '{"ok": 1}' WHERE id = $1`,
      [id],
    );
    for (const s of streams) {
      const event = await s.next((e) => e.finished.includes(id));
      expect(event.reason).toBe('notify');
    }
    for (const s of streams) s.close();
    await eventually(
      async () => readOnly.dashboard.live.clientCount === 0 && !readOnly.dashboard.live.listening,
    );
  });

  it('tells an open page to re-read once the feed listens: a change before that sent no notification it heard', async () => {
    // Only the listen sends an event with this reason (the poll's say 'poll', a notification's 'notify').
    expect(readOnly.dashboard.live.listening).toBe(false);
    const stream = await openStream(`${readOnly.url}api/events`);
    const event = await stream.next((e) => e.reason === 'listen');
    expect(readOnly.dashboard.live.listening).toBe(true);
    expect(event.finished).toEqual([]);
    stream.close();
    await eventually(async () => !readOnly.dashboard.live.listening);
  });
});

interface ChangeData {
  reason: string;
  finished: string[];
}

/** Reads a server-sent event stream; `next` resolves with the first change event that matches. */
async function openStream(
  url: string,
): Promise<{ next: (match: (e: ChangeData) => boolean) => Promise<ChangeData>; close: () => void }> {
  const controller = new AbortController();
  const response = await fetch(url, { signal: controller.signal });
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  return {
    async next(match) {
      const deadline = setTimeout(() => controller.abort(), 10_000);
      try {
        for (;;) {
          let end = buffer.indexOf('\n\n');
          while (end >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = frame.split('\n').find((l) => l.startsWith('data: '));
            if (frame.includes('event: change') && data) {
              const event = JSON.parse(data.slice(6)) as ChangeData;
              if (match(event)) return event;
            }
            end = buffer.indexOf('\n\n');
          }
          const { value, done } = await reader.read();
          if (done) throw new Error('stream ended before the event');
          buffer += decoder.decode(value, { stream: true });
        }
      } finally {
        clearTimeout(deadline);
      }
    },
    close: () => controller.abort(),
  };
}
