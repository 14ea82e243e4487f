/**
 * A workflow of 200 nodes in a real browser against a real database and worker: stages of fan-out, joins whose
 * input is wired from upstream results, and a subworkflow node. The graph's edges, read from the SVG, are the
 * stored dependencies; a node's detail shows which upstream node each wired input came from; the timeline's spans
 * carry the rows' times, in enqueue order. Screenshots go to docs/dashboard/ with HORSIES_DOCS_SCREENSHOTS=1.
 */
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { useTestSchema } from '../support/db.js';
import { closePages, launchBrowser, SCREENSHOTS } from './browser.js';
import { serveDashboard } from './support.js';

const t = await useTestSchema();
const app = t.app({ queues: [{ name: 'default' }] });

const load = app.task({
  name: 'shards.load',
  input: z.object({ shard: z.number() }),
  handler: ({ shard }) => ({ shard, rows: shard * 10 }),
});
const step = app.task({
  name: 'shards.step',
  input: z.object({ shard: z.number() }),
  handler: ({ shard }) => ({ shard, rows: shard }),
});
const merge = app.task({
  name: 'shards.merge',
  input: z.object({ parts: z.array(z.unknown()) }),
  handler: ({ parts }) => ({ merged: parts.length }),
});

const STAGES = 20;
const WIDTH = 10;

let worker: Worker;
let context: BrowserContext;
let closeBrowser: () => Promise<void>;
const served = await serveDashboard(app, { live: { debounceMs: 100, pollMs: 60_000 } });

async function open(path: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${served.url}#/${path}`);
  return page;
}

beforeAll(async () => {
  worker = createWorker(app, { concurrency: 8, pollIntervalMs: 50, queues: ['default'] });
  await worker.start();
  ({ context, close: closeBrowser } = await launchBrowser());
}, 120_000);

afterEach(async (ctx) => closePages(context, ctx.task.result?.state === 'fail', 'graph'));

afterAll(async () => {
  await closeBrowser?.();
  await worker?.stop();
});

/**
 * 199 task nodes in 20 stages of 10 (the last stage 9): a node of stage s waits for the node of stage s-1 in its
 * column, and every third column joins two nodes of the stage before through its wired input; then one subworkflow.
 */
function buildRun() {
  const audit = workflow(app, 'shards.audit');
  audit.node(load, { input: { shard: -1 } });
  const auditDef = audit.build();
  const wf = workflow(app, 'shards.nightly');
  let previous: ReturnType<typeof wf.node>[] = [];
  for (let s = 0; s < STAGES; s += 1) {
    const stage: ReturnType<typeof wf.node>[] = [];
    const width = s === STAGES - 1 ? WIDTH - 1 : WIDTH;
    for (let c = 0; c < width; c += 1) {
      const id = `s${s}-c${c}`;
      if (s === 0) stage.push(wf.node(load, { id, input: { shard: c } }));
      else if (c % 3 === 0)
        stage.push(
          wf.node(merge, {
            id,
            input: { parts: [previous[c]!.result, previous[(c + 4) % WIDTH]!.result] },
          }),
        );
      else stage.push(wf.node(step, { id, input: { shard: c }, waitsFor: [previous[c]!] }));
    }
    previous = stage;
  }
  wf.node(auditDef, { id: 'audit', input: {}, waitsFor: [previous[0]!] });
  return wf.build();
}

describe('a 200-node workflow in a browser', () => {
  it('draws the stored dependencies as edges, shows a node wired input, and orders the timeline', async () => {
    const handle = await buildRun().start();
    await handle.result({ timeoutMs: 60_000 });
    const stored = await t.query<{ node_id: string; node_index: number; dependencies: number[] }>(
      'SELECT node_id, node_index, dependencies FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1',
      [handle.id],
    );
    expect(stored).toHaveLength(200);
    const idOf = new Map(stored.map((r) => [r.node_index, r.node_id]));
    const expected = stored.flatMap((r) => r.dependencies.map((d) => `${idOf.get(d)}>${r.node_id}`)).sort();

    const page = await open(`workflow/${encodeURIComponent(handle.id)}`);
    const svg = page.getByTestId('graph-svg');
    await svg.locator('[data-node]').nth(199).waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('graph').getAttribute('data-engine')).toBe('elkjs');
    const drawn = await svg
      .locator('polyline[data-from]')
      .evaluateAll((lines) =>
        lines.map((l) => `${l.getAttribute('data-from')}>${l.getAttribute('data-to')}`),
      );
    expect(drawn.sort()).toEqual(expected);
    // Every node says its status in words as well as by colour.
    const statuses = await svg
      .locator('[data-node]')
      .evaluateAll((nodes) =>
        nodes.map((n) => [n.getAttribute('data-status'), n.querySelector('.gstatus')?.textContent]),
      );
    for (const [attribute, text] of statuses) expect(text).toBe(attribute);
    await page.screenshot({ path: `${SCREENSHOTS}/workflow-graph.png` });

    // A join's detail: its two inputs come from the nodes it waits for.
    // Out of view at first: the find box selects it and brings it into view, and it can be clicked there.
    await page.getByTestId('graph-find').fill('s5-c3');
    await page.getByTestId('graph-find').press('Enter');
    await page.getByTestId('node-detail').getByTestId('node-wired').waitFor();
    await page.getByRole('button', { name: 'close node detail' }).click();
    await svg.locator('[data-node="s5-c3"]').click();
    const detail = page.getByTestId('node-detail');
    await detail.getByTestId('node-wired').waitFor();
    expect(
      await detail
        .locator('[data-testid="node-wired"] tbody tr')
        .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-from'))),
    ).toEqual(['s4-c3', 's4-c7']);
    const input = JSON.parse(await detail.getByTestId('node-input').innerText()) as { parts: unknown[] };
    // s4-c3 is a join itself (every third column), s4-c7 a step.
    expect(input.parts).toEqual([{ merged: 2 }, { shard: 7, rows: 7 }]);
    expect(JSON.parse(await detail.getByTestId('node-result').innerText())).toEqual({ merged: 2 });
    await detail.getByTestId('node-attempts').locator('[data-span]').first().waitFor();
    expect(await detail.getByTestId('node-task-link').getAttribute('href')).toMatch(/^#\/task\//);
    await page.screenshot({ path: `${SCREENSHOTS}/workflow-node.png` });

    // The timeline: every node's span with the rows' times, in enqueue order.
    const rows = await t.query<{
      node_id: string;
      enqueued_at: Date;
      started_at: Date | null;
      finished_at: Date;
    }>(
      `SELECT n.node_id, COALESCE(n.enqueued_at, k.enqueued_at) AS enqueued_at, k.started_at,
              COALESCE(k.finished_at, n.completed_at) AS finished_at
       FROM {{schema}}.horsies_workflow_tasks n LEFT JOIN {{schema}}.horsies_tasks k ON k.id = n.task_id
       WHERE n.workflow_id = $1`,
      [handle.id],
    );
    const spans = await page
      .getByTestId('timeline')
      .locator('[data-span]')
      .evaluateAll((gs) =>
        gs.map((g) => ({
          id: g.getAttribute('data-span')!,
          queued: g.getAttribute('data-queued'),
          started: g.getAttribute('data-started'),
          finished: g.getAttribute('data-finished'),
        })),
      );
    expect(spans).toHaveLength(200);
    const byId = new Map(rows.map((r) => [r.node_id, r]));
    for (const span of spans) {
      const row = byId.get(span.id)!;
      expect(span.queued).toBe(row.enqueued_at.toISOString());
      expect(span.started).toBe(row.started_at?.toISOString() ?? null);
      expect(span.finished).toBe(row.finished_at.toISOString());
    }
    const queued = spans.map((s) => s.queued!);
    expect(queued).toEqual([...queued].sort());
    // A node waits for its dependencies: none is enqueued before one it waits for finished.
    for (const r of stored) {
      for (const d of r.dependencies) {
        expect(byId.get(r.node_id)!.enqueued_at.getTime()).toBeGreaterThanOrEqual(
          byId.get(idOf.get(d)!)!.finished_at.getTime(),
        );
      }
    }
    await page.getByTestId('timeline').screenshot({ path: `${SCREENSHOTS}/workflow-timeline.png` });

    // The subworkflow node links to its child run.
    await page.getByTestId('graph-find').fill('audit');
    await page.getByTestId('graph-find').press('Enter');
    const audit = svg.locator('[data-node="audit"]');
    const child = await audit.getAttribute('data-child');
    expect(child).toBeTruthy();
    await audit.getByTestId('child-link').click();
    await page.getByTestId('workflow-id').getByText(child!).waitFor();
  }, 120_000);

  it('answers 400 for a node index that is not a number and 404 for an unknown node', async () => {
    expect((await served.get('api/workflows/x/nodes/abc')).status).toBe(400);
    expect((await served.get('api/workflows/x/nodes/3')).status).toBe(404);
    expect((await served.get('api/workflows/x/timeline')).status).toBe(404);
  });
});
