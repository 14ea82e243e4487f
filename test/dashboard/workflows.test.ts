/**
 * The dashboard's workflow and schedule API against a real database and a real worker: a finished workflow's
 * detail with every node's status and its layers, the list by status and name through cursors, a child run and
 * its parent linked both ways, the workflow actions (pause, resume, cancel, retry-failed) refused without the
 * token and applied with it (404 for an unknown id, 409 where the status does not allow them), schedules with an
 * orphaned row, and trigger, pause and resume refused without the token and applied with it.
 */
import { get as httpGet } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import type { WorkflowDetail } from '../../src/dashboard/contract.js';
import { graphNodes } from '../../src/dashboard/ui/src/graph/columns.js';
import { eventually, useTestSchema } from '../support/db.js';
import { serveDashboard } from './support.js';

const TOKEN = 'workflow-test-token';
const t = await useTestSchema();
// Tasks on `held` are served by no worker: their workflows stay where a test puts them.
const app = t.app({ queues: [{ name: 'default' }, { name: 'held' }] });

const double = app.task({
  name: 'wf.double',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => n * 2,
});
const fail = app.task({
  name: 'wf.fail',
  input: z.object({ code: z.string() }),
  handler: ({ code }): number => {
    throw new TaskError(code, `failed with ${code}`);
  },
});
const add = app.task({
  name: 'wf.add',
  input: z.object({ values: z.array(z.number()) }),
  handler: ({ values }) => values.reduce((a, b) => a + b, 0),
});
app.schedule({
  name: 'nightly-double',
  task: double,
  input: { n: 21 },
  pattern: { kind: 'daily', at: '03:00' },
});

const fromApp = await serveDashboard(app, { token: TOKEN });
const fromDb = await serveDashboard(app.db, { token: TOKEN });
const readOnly = await serveDashboard(app);

const worker = createWorker(app, { concurrency: 4, pollIntervalMs: 100, queues: ['default'] });
beforeAll(() => worker.start());
afterAll(() => worker.stop());

/** A workflow's nodes from its detail, by id. */
async function nodesOf(id: string): Promise<Map<string, ReturnType<typeof graphNodes>[number]>> {
  const { body } = await readOnly.get<WorkflowDetail>(`api/workflows/${id}`);
  return new Map(graphNodes(body.graph).map((n) => [n.id, n]));
}

describe('workflows', () => {
  it("a finished workflow's detail has each node's status, in layers by depth", async () => {
    const wf = workflow(app, 'api.diamond');
    const a = wf.node(double, { input: { n: 1 } });
    const bad = wf.node(fail, { input: { code: 'BROKEN' } });
    const b = wf.node(double, { input: { n: a.result } });
    const joined = wf.node(add, { input: { values: [a.result, b.result] }, waitsFor: [a, b, bad] });
    const handle = await wf.build({ output: joined }).start();
    await handle.result({ timeoutMs: 15_000 });
    const { status, body } = await readOnly.get<WorkflowDetail>(`api/workflows/${handle.id}`);
    expect(status).toBe(200);
    expect(body.status).toBe('FAILED');
    expect(body.completedAt).not.toBeNull();
    const nodes = graphNodes(body.graph);
    // Each task name and status once in the answer, the nodes naming them by position.
    expect(body.graph.taskNames).toEqual(['wf.double', 'wf.fail', 'wf.add']);
    expect(nodes.map((n) => [n.id, n.dependencies])).toEqual([
      ['wf.double', []],
      ['wf.fail', []],
      ['wf.double#2', [0]],
      ['wf.add', [0, 1, 2]],
    ]);
    expect(body.graph.errorCode).toEqual({ 1: 'BROKEN', 3: 'UPSTREAM_SKIPPED' });
    expect(
      body.layers.map((l) => [
        l.kind,
        l.depth,
        l.kind === 'nodes' ? l.nodes.map((i) => [nodes[i]!.id, nodes[i]!.task, nodes[i]!.status]) : [],
      ]),
    ).toEqual([
      [
        'nodes',
        0,
        [
          ['wf.double', 'wf.double', 'COMPLETED'],
          ['wf.fail', 'wf.fail', 'FAILED'],
        ],
      ],
      ['nodes', 1, [['wf.double#2', 'wf.double', 'COMPLETED']]],
      ['nodes', 2, [['wf.add', 'wf.add', 'SKIPPED']]],
    ]);
    expect(body.counts).toEqual({ COMPLETED: 2, FAILED: 1, SKIPPED: 1 });
    expect((await readOnly.get(`api/workflows/nope`)).status).toBe(404);
  });

  it('lists newest first, by status and name, through cursors', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const wf = workflow(app, 'api.listed');
      wf.node(double, { input: { n: i } });
      ids.push((await wf.build().start()).id);
    }
    await eventually(async () => {
      const { body } = await readOnly.get<{ rows: { id: string }[] }>(
        'api/workflows?name=api.listed&status=COMPLETED',
      );
      return body.rows.length === 5;
    });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: {
        status: number;
        body: { rows: { id: string; name: string }[]; nextCursor: string | null };
      } = await readOnly.get(`api/workflows?name=api.listed&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.rows.map((r) => r.id));
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
    expect((await readOnly.get('api/workflows?status=NOPE')).status).toBe(400);
    expect((await readOnly.get('api/workflows?cursor=xyz')).status).toBe(400);
  });
});

const held = app.task({
  name: 'wf.held',
  queue: 'held',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => n,
});
let mended = false;
const flaky = app.task({
  name: 'wf.flaky',
  input: z.object({ n: z.number() }),
  handler: ({ n }): number => {
    if (!mended) throw new TaskError('NOT_YET', 'broken until the test mends it');
    return n;
  },
});
const childDef = (() => {
  const wf = workflow(app, 'api.child', { params: z.object({ n: z.number() }) });
  const only = wf.node(held, { id: 'child-held', input: { n: wf.params.n } });
  return wf.build({ output: only });
})();
const parentDef = (() => {
  const wf = workflow(app, 'api.parent');
  wf.node(held, { id: 'parent-held', input: { n: 1 } });
  const sub = wf.node(childDef, { id: 'sub', input: { n: 2 } });
  wf.node(add, { id: 'after', input: { values: [sub.result] } });
  return wf.build();
})();

interface Action {
  workflow: string;
  action: string;
  status: string;
  changed: string[];
  tasksCancelled?: number;
  tasksStopping?: number;
  reopened?: number;
}

async function statusOf(id: string): Promise<string | undefined> {
  const [row] = await t.query<{ status: string }>(
    'SELECT status FROM {{schema}}.horsies_workflows WHERE id = $1',
    [id],
  );
  return row?.status;
}

let releaseBlocking: () => void = () => undefined;
const blocking = app.task({
  name: 'wf.blocking',
  input: z.object({}),
  handler: () => new Promise<number>((resolve) => (releaseBlocking = () => resolve(1))),
});

describe("a node's shown status", () => {
  it('is RUNNING while its task runs (stored ENQUEUED), then what the node row says', async () => {
    const wf = workflow(app, 'api.blocking');
    const first = wf.node(blocking, { id: 'blocked', input: {} });
    wf.node(double, { id: 'after', input: { n: 1 }, waitsFor: [first] });
    const handle = await wf.build().start();
    await eventually(async () => (await nodesOf(handle.id)).get('blocked')?.status === 'RUNNING');
    const [stored] = await t.query<{ status: string }>(
      `SELECT status FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1 AND node_id = 'blocked'`,
      [handle.id],
    );
    expect(stored?.status).toBe('ENQUEUED');
    expect((await nodesOf(handle.id)).get('after')?.status).toBe('PENDING');
    releaseBlocking();
    await handle.result({ timeoutMs: 15_000 });
    const done = await nodesOf(handle.id);
    expect([done.get('blocked')?.status, done.get('after')?.status]).toEqual(['COMPLETED', 'COMPLETED']);
  });
});

describe('a large run', () => {
  it('sends its graph in columns, gzipped to a client that accepts it and plain to one that does not', async () => {
    const wf = workflow(app, 'api.large');
    let previous: ReturnType<typeof wf.node> | null = null;
    for (let i = 0; i < 2000; i += 1)
      previous = wf.node(held, { id: `step-${i}`, input: { n: i }, waitsFor: previous ? [previous] : [] });
    const handle = await wf.build().start();
    const path = `api/workflows/${handle.id}`;
    const plain = await rawGet(`${readOnly.url}${path}`, {});
    const zipped = await rawGet(`${readOnly.url}${path}`, { 'accept-encoding': 'gzip, deflate' });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.headers.vary).toBe('accept-encoding');
    expect(zipped.body.length).toBeLessThan(plain.body.length / 2);
    const body = JSON.parse(gunzipSync(zipped.body).toString()) as WorkflowDetail;
    expect(body).toEqual(JSON.parse(plain.body.toString()));
    // Each node once, its task name sent once for all of them.
    expect(body.graph.id).toHaveLength(2000);
    expect(body.graph.taskNames).toEqual(['wf.held']);
    expect(graphNodes(body.graph)[1999]).toMatchObject({
      id: 'step-1999',
      dependencies: [1998],
      status: 'PENDING',
    });
    expect((await fromApp.post(`${path}/cancel`, {}, { 'x-horsies-token': TOKEN })).status).toBe(200);
  });
});

/** A GET through node:http, which asks for no encoding unless told. */
function rawGet(
  url: string,
  headers: Record<string, string>,
): Promise<{ headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    httpGet(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

describe('workflow actions', () => {
  const auth = { 'x-horsies-token': TOKEN };

  it('have a detail page that links a child run and its parent both ways', async () => {
    const handle = await parentDef.start();
    const sub = (await nodesOf(handle.id)).get('sub');
    expect(sub).toMatchObject({ subworkflow: 'api.child', status: 'RUNNING' });
    const childId = sub!.childWorkflowId!;
    expect(typeof childId).toBe('string');
    const child = await readOnly.get<Record<string, unknown>>(`api/workflows/${childId}`);
    expect(child.body).toMatchObject({
      name: 'api.child',
      parentWorkflowId: handle.id,
      parentNodeId: 'sub',
      rootWorkflowId: handle.id,
      depth: 1,
    });
    // The list filtered by parent holds its child run alone.
    const children = await readOnly.get<{ rows: { id: string; parent_workflow_id: string }[] }>(
      `api/workflows?parent=${encodeURIComponent(handle.id)}`,
    );
    expect(children.body.rows.map((r) => [r.id, r.parent_workflow_id])).toEqual([[childId, handle.id]]);
    expect((await fromApp.post(`api/workflows/${handle.id}/cancel`, {}, auth)).status).toBe(200);
  });

  it('are refused without the token, with a wrong one and cross-site; nothing changes', async () => {
    const handle = await parentDef.start();
    for (const action of ['pause', 'resume', 'cancel', 'retry-failed']) {
      const path = `api/workflows/${handle.id}/${action}`;
      expect((await readOnly.post(path, {}, auth)).status).toBe(403);
      expect((await fromApp.post(path)).status).toBe(401);
      expect((await fromApp.post(path, {}, { 'x-horsies-token': 'wrong' })).status).toBe(401);
      expect((await fromApp.post(path, {}, { ...auth, origin: 'http://evil.test' })).status).toBe(403);
    }
    expect(await statusOf(handle.id)).toBe('RUNNING');
    expect((await fromApp.post(`api/workflows/${handle.id}/cancel`, {}, auth)).status).toBe(200);
  });

  it('answer 404 for an unknown id and for an unknown action', async () => {
    for (const action of ['pause', 'resume', 'cancel', 'retry-failed']) {
      const answer = await fromApp.post<{ error: string }>(`api/workflows/no-such-run/${action}`, {}, auth);
      expect(answer).toEqual({ status: 404, body: { error: 'no workflow with id no-such-run' } });
    }
    expect((await fromApp.post('api/workflows/no-such-run/explode', {}, auth)).status).toBe(404);
  });

  it('pause and resume a run with its child, cancel it, and refuse what its status does not allow', async () => {
    const handle = await parentDef.start();
    const childId = (await nodesOf(handle.id)).get('sub')!.childWorkflowId!;

    const paused = await fromApp.post<Action>(`api/workflows/${handle.id}/pause`, {}, auth);
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ workflow: handle.id, action: 'pause', status: 'PAUSED' });
    expect(new Set(paused.body.changed)).toEqual(new Set([handle.id, childId]));
    expect(await statusOf(childId)).toBe('PAUSED');
    // Already paused: nothing to do, still 200.
    expect(await fromApp.post(`api/workflows/${handle.id}/pause`, {}, auth)).toMatchObject({
      status: 200,
      body: { status: 'PAUSED', changed: [] },
    });

    // From a bare database URL too (no app: a child to start would wait for a worker's recovery pass).
    const resumed = await fromDb.post<Action>(`api/workflows/${handle.id}/resume`, {}, auth);
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ action: 'resume', status: 'RUNNING' });
    expect(new Set(resumed.body.changed)).toEqual(new Set([handle.id, childId]));
    expect(await statusOf(childId)).toBe('RUNNING');

    const cancelled = await fromApp.post<Action>(`api/workflows/${handle.id}/cancel`, {}, auth);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({
      action: 'cancel',
      status: 'CANCELLED',
      tasksCancelled: 2,
      tasksStopping: 0,
    });
    expect(new Set(cancelled.body.changed)).toEqual(new Set([handle.id, childId]));
    expect(await statusOf(childId)).toBe('CANCELLED');

    for (const action of ['pause', 'resume', 'retry-failed']) {
      const refused = await fromApp.post<{ error: string; status: string }>(
        `api/workflows/${handle.id}/${action}`,
        {},
        auth,
      );
      expect(refused.status, action).toBe(409);
      expect(refused.body.status).toBe('CANCELLED');
      expect(refused.body.error).toMatch(
        new RegExp(`^workflow ${handle.id} is CANCELLED: ${action} applies only to`),
      );
    }
    expect(await fromApp.post(`api/workflows/${handle.id}/cancel`, {}, auth)).toMatchObject({
      status: 200,
      body: { status: 'CANCELLED', changed: [] },
    });
  });

  it('retry-failed runs the failed node again and the run completes', async () => {
    mended = false;
    const wf = workflow(app, 'api.retry');
    const first = wf.node(double, { input: { n: 4 } });
    const shaky = wf.node(flaky, { id: 'shaky', input: { n: first.result } });
    const handle = await wf.build({ output: shaky }).start();
    expect(await handle.result({ timeoutMs: 15_000 })).toMatchObject({ ok: false });
    mended = true;
    const retried = await fromApp.post<Action>(`api/workflows/${handle.id}/retry-failed`, {}, auth);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({
      action: 'retry-failed',
      status: 'RUNNING',
      changed: [handle.id],
      reopened: 1,
    });
    await eventually(async () => (await statusOf(handle.id)) === 'COMPLETED');
    expect(await handle.result({ timeoutMs: 15_000 })).toEqual({ ok: true, value: 8 });
    const again = await fromApp.post<{ error: string }>(`api/workflows/${handle.id}/retry-failed`, {}, auth);
    expect(again.status).toBe(409);
  });
});

interface Schedules {
  fromApp: boolean;
  schedules: {
    name: string;
    orphaned: boolean | null;
    paused: boolean;
    task: string | null;
    lastTaskId: string | null;
  }[];
}

describe('schedules', () => {
  it('lists the declared schedules and an orphaned row; from a database URL, the rows only', async () => {
    await t.query(`INSERT INTO {{schema}}.horsies_schedule_state (schedule_name) VALUES ('removed-report')`);
    const { body } = await fromApp.get<Schedules>('api/schedules');
    expect(body.fromApp).toBe(true);
    const byName = Object.fromEntries(body.schedules.map((s) => [s.name, s]));
    expect(byName['nightly-double']).toMatchObject({ orphaned: false, task: 'wf.double', paused: false });
    expect(byName['removed-report']).toMatchObject({ orphaned: true, task: null });
    const bare = await fromDb.get<Schedules>('api/schedules');
    expect(bare.body.fromApp).toBe(false);
    // The worker's scheduler may have stored the declared one's row by now: every row, none known orphaned.
    expect(bare.body.schedules.map((s) => s.name)).toContain('removed-report');
    expect(bare.body.schedules.every((s) => s.orphaned === null && s.task === null)).toBe(true);
  });

  it('trigger, pause and resume are refused without the token and applied with it', async () => {
    const auth = { 'x-horsies-token': TOKEN };
    for (const verb of ['trigger', 'pause', 'resume']) {
      expect((await readOnly.post(`api/schedules/nightly-double/${verb}`)).status).toBe(403);
      expect((await fromApp.post(`api/schedules/nightly-double/${verb}`)).status).toBe(401);
      expect(
        (
          await fromApp.post(
            `api/schedules/nightly-double/${verb}`,
            {},
            { ...auth, origin: 'http://evil.test' },
          )
        ).status,
      ).toBe(403);
    }
    const paused = await fromApp.post('api/schedules/nightly-double/pause', {}, auth);
    expect(paused).toEqual({ status: 200, body: { schedule: 'nightly-double', paused: true } });
    const afterPause = await fromApp.get<Schedules>('api/schedules');
    expect(afterPause.body.schedules.find((s) => s.name === 'nightly-double')?.paused).toBe(true);
    await fromApp.post('api/schedules/nightly-double/resume', {}, auth);
    const afterResume = await fromApp.get<Schedules>('api/schedules');
    expect(afterResume.body.schedules.find((s) => s.name === 'nightly-double')?.paused).toBe(false);

    const triggered = await fromApp.post<{ taskId: string }>(
      'api/schedules/nightly-double/trigger',
      {},
      auth,
    );
    expect(triggered.status).toBe(200);
    const [task] = await t.query<{ task_name: string }>(
      'SELECT task_name FROM {{schema}}.horsies_tasks WHERE id = $1',
      [triggered.body.taskId],
    );
    expect(task?.task_name).toBe('wf.double');
    const listed = await fromApp.get<Schedules>('api/schedules');
    expect(listed.body.schedules.find((s) => s.name === 'nightly-double')?.lastTaskId).toBe(
      triggered.body.taskId,
    );

    // From a bare database: no declaration to send, so 409; pause and resume work on stored rows.
    const bare = await fromDb.post<{ error: string }>('api/schedules/nightly-double/trigger', {}, auth);
    expect(bare.status).toBe(409);
    expect(bare.body.error).toMatch(/needs the app/);
    expect((await fromDb.post('api/schedules/nightly-double/pause', {}, auth)).status).toBe(200);
    expect((await fromDb.post('api/schedules/nightly-double/resume', {}, auth)).status).toBe(200);
    expect((await fromApp.post('api/schedules/no-such/pause', {}, auth)).status).toBe(404);
    expect((await fromApp.post('api/schedules/no-such/trigger', {}, auth)).status).toBe(404);
  });
});
