/**
 * Subworkflows: a node that runs a whole workflow definition, with parameters wired from upstream results. Typed
 * results and failures (SUBWORKFLOW_FAILED with the child's summary), parameters the child refuses, definitions
 * refused (a cycle through nested workflows, one name for two definitions), and the nesting cases of the
 * recovery pass on rows left half done.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ManualClock } from '../../src/clock.js';
import { TaskError, WorkflowDefinitionError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { WorkflowRecovery } from '../../src/workflow/WorkflowRecovery.js';
import { thrown } from '../support/assertions.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
// `work` is served by the worker below; `idle` by nobody (the recovery cases shape rows by hand).
const app = t.app({ queues: [{ name: 'work' }, { name: 'idle' }] });

const measure = app.task({
  name: 'measure',
  queue: 'work',
  input: z.object({ text: z.string() }),
  handler: ({ text }) => ({ length: text.length, words: text.split(/\s+/).length }),
});
const double = app.task({
  name: 'double',
  queue: 'work',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => n * 2,
});
const refuse = app.task({
  name: 'refuse',
  queue: 'work',
  input: z.object({ n: z.number() }),
  handler: ({ n }): number => {
    throw new TaskError('REFUSED', `refused ${n}`);
  },
});
const parked = app.task({
  name: 'parked',
  queue: 'idle',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => n,
});

// The child: measures a text, then doubles its word count. Result type { words: number; doubled: number }.
const child = (() => {
  const wf = workflow(app, 'measure-text', { params: z.object({ text: z.string() }) });
  const m = wf.node(measure, { input: { text: wf.params.text } });
  const d = wf.node(double, { input: { n: m.result.words } });
  const out = wf.node(
    app.task({
      name: 'summary',
      queue: 'work',
      input: z.object({ words: z.number(), doubled: z.number() }),
      handler: (input) => input,
    }),
    { input: { words: m.result.words, doubled: d.result } },
  );
  return wf.build({ output: out });
})();

const worker = createWorker(app, { concurrency: 8, pollIntervalMs: 100, queues: ['work'] });
beforeAll(() => worker.start());
afterAll(() => worker.stop());

describe('a subworkflow node', () => {
  it("takes its child's result, typed, and feeds it on; the child records its parent, root and depth", async () => {
    const typed = workflow(app, 'typed-only', { params: z.object({ text: z.string() }) });
    const nested = typed.node(child, { input: { text: typed.params.text }, id: 'nested' });
    // @ts-expect-error a number (words) cannot feed a string parameter
    typed.node(child, { input: { text: nested.result.words }, id: 'mistyped' });
    const parent = workflow(app, 'with-child-typed', { params: z.object({ text: z.string() }) });
    const n2 = parent.node(child, { input: { text: parent.params.text } });
    parent.node(double, { input: { n: n2.result.doubled } });
    const handle = await parent.build().start({ text: 'one two three' });
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result).toMatchObject({ ok: true, value: { double: { ok: true, value: 12 } } });
    const [node] = await handle.nodes();
    expect(node).toMatchObject({ id: 'measure-text', status: 'COMPLETED' });
    expect(node!.result).toEqual({ ok: true, value: { words: 3, doubled: 6 } });
    const [run] = await app.listWorkflows({ name: 'measure-text', limit: 1 });
    expect(run).toMatchObject({ parentId: handle.id, parentNodeIndex: 0, rootId: handle.id, depth: 1 });
    expect(run!.status).toBe('COMPLETED');
  });

  it('fails SUBWORKFLOW_FAILED with the child’s status, node counts and first error; its dependents are skipped', async () => {
    const broken = workflow(app, 'broken-child');
    const ok = broken.node(double, { input: { n: 1 } });
    const bad = broken.node(refuse, { input: { n: 2 }, waitsFor: [ok] });
    broken.node(double, { input: { n: bad.result } });
    const brokenDef = broken.build();
    const wf = workflow(app, 'with-broken-child');
    const nested = wf.node(brokenDef, { id: 'nested' });
    wf.node(double, { input: { n: 1 }, waitsFor: [nested], id: 'after' });
    const handle = await wf.build().start();
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result).toMatchObject({
      ok: false,
      error: { code: 'WORKFLOW_FAILED', data: { node: 'nested', error: { code: 'SUBWORKFLOW_FAILED' } } },
    });
    const nodeResult = await handle.resultFor(nested);
    expect(nodeResult.ok).toBe(false);
    if (!nodeResult.ok) {
      expect(nodeResult.error.code).toBe('SUBWORKFLOW_FAILED');
      expect(nodeResult.error.data).toEqual({
        workflowId: expect.any(String),
        status: 'FAILED',
        nodes: { COMPLETED: 1, FAILED: 1, SKIPPED: 1 },
        error: expect.objectContaining({
          code: 'WORKFLOW_FAILED',
          data: expect.objectContaining({ node: 'refuse' }),
        }),
      });
    }
    expect(Object.fromEntries((await handle.nodes()).map((n) => [n.id, n.status]))).toEqual({
      nested: 'FAILED',
      after: 'SKIPPED',
    });
  });

  it('fails VALIDATION_FAILED when the child refuses the parameters wired to it', async () => {
    const wf = workflow(app, 'bad-params');
    const number = wf.node(double, { input: { n: 2 } });
    // The wiring is typed; a value from outside the types (an `any`) is caught by the child's schema at start.
    const nested = wf.node(child, { input: { text: number.result as unknown as string }, id: 'nested' });
    const handle = await wf.build({ output: nested }).start();
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result).toMatchObject({ ok: false, error: { code: 'WORKFLOW_FAILED' } });
    expect(await handle.resultFor(nested)).toMatchObject({
      ok: false,
      error: { code: 'VALIDATION_FAILED', message: expect.stringContaining('measure-text') },
    });
  });
});

describe('definitions with subworkflows', () => {
  it('refuse a cycle through nested workflows, a name used by two definitions, and task options on the node', () => {
    const a1 = workflow(app, 'cycle-a');
    a1.node(double, { input: { n: 1 } });
    const a = a1.build();
    const b1 = workflow(app, 'cycle-b');
    b1.node(a, {});
    const b = b1.build();
    // A second workflow named cycle-a that runs cycle-b, which runs cycle-a.
    const again = workflow(app, 'cycle-a');
    again.node(b, { id: 'loop' });
    const cycle = thrown(() => again.build(), WorkflowDefinitionError);
    expect(cycle.problems).toContainEqual(
      expect.objectContaining({ field: 'nodes.loop.workflow', message: expect.stringContaining('cycle') }),
    );

    const twin = workflow(app, 'measure-text');
    twin.node(double, { input: { n: 1 } });
    const impostor = twin.build();
    const user = workflow(app, 'uses-impostor');
    user.node(impostor, { id: 'twin', input: undefined });
    const clash = thrown(() => user.build(), WorkflowDefinitionError);
    expect(clash.problems).toContainEqual(
      expect.objectContaining({
        field: 'nodes.twin.workflow',
        message: expect.stringContaining('registered'),
      }),
    );

    const opts = workflow(app, 'node-options');
    opts.node(a, { id: 'tuned', ...({ queue: 'work', priority: 3 } as object) });
    const options = thrown(() => opts.build(), WorkflowDefinitionError);
    expect(options.problems.map((p) => p.field)).toEqual(['nodes.tuned.queue', 'nodes.tuned.priority']);
  });
});

describe('the recovery pass, on nested workflows', () => {
  const recovery = () =>
    new WorkflowRecovery(
      app.db,
      { graceMs: 30_000, batchSize: 100, children: app.workflows },
      new ManualClock(new Date(Date.now() + 60_000)),
    );
  const idleChild = (() => {
    const wf = workflow(app, 'idle-child', { params: z.object({ n: z.number() }) });
    wf.node(parked, { input: { n: wf.params.n } });
    return wf;
  })().build();

  it('starts the child of a READY subworkflow node that has none', async () => {
    const wf = workflow(app, 'ready-without-child');
    const nested = wf.node(idleChild, { input: { n: 4 }, id: 'nested' });
    const def = wf.build({ output: nested });
    // A worker that did not know the child left the node READY without one.
    app.workflows.delete('idle-child');
    const handle = await def.start();
    app.workflows.set('idle-child', idleChild);
    expect((await handle.nodes())[0]).toMatchObject({ status: 'READY' });
    const [row] = await t.query<{ child: string | null }>(
      'SELECT child_workflow_id AS child FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1',
      [handle.id],
    );
    expect(row!.child).toBeNull();
    const pass = await recovery().runOnce();
    expect(pass.repaired).toContainEqual({ id: handle.id, settled: 0, enqueued: 1, status: 'RUNNING' });
    const [linked] = await t.query<{ status: string; child: string | null }>(
      'SELECT status, child_workflow_id AS child FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1',
      [handle.id],
    );
    expect(linked).toMatchObject({ status: 'RUNNING', child: expect.any(String) });
    expect(await app.getWorkflow(linked!.child!).info()).toMatchObject({
      parentId: handle.id,
      status: 'RUNNING',
    });
  });

  it('settles a subworkflow node whose child finished while the node still runs, and finishes the parent', async () => {
    const wf = workflow(app, 'child-finished');
    const nested = wf.node(idleChild, { input: { n: 5 }, id: 'nested' });
    const handle = await wf.build({ output: nested }).start();
    const [{ child }] = (await t.query<{ child: string }>(
      'SELECT child_workflow_id AS child FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1',
      [handle.id],
    )) as [{ child: string }];
    // The child ended, and the step of its parent never ran (a crash between the two).
    await t.query(
      `UPDATE {{schema}}.horsies_workflow_tasks SET status = 'COMPLETED', result = '{"ok": 5}', completed_at = now()
       WHERE workflow_id = $1`,
      [child],
    );
    await t.query(
      `UPDATE {{schema}}.horsies_workflows SET status = 'COMPLETED', result = '{"ok": 5}', nodes_terminal = 1,
              completed_at = now() WHERE id = $1`,
      [child],
    );
    const pass = await recovery().runOnce();
    expect(pass.repaired).toContainEqual({ id: handle.id, settled: 1, enqueued: 0, status: 'COMPLETED' });
    expect(await handle.result({ timeoutMs: 1_000 })).toEqual({ ok: true, value: 5 });
  });
});
