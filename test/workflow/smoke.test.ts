import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { testLogger, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

describe('workflow smoke', () => {
  const app = t.app();
  const fetchPage = app.task({
    name: 'wf.fetch',
    input: z.object({ url: z.string() }),
    handler: ({ url }) => ({ body: `body of ${url}`, status: 200 }),
  });
  const count = app.task({
    name: 'wf.count',
    input: z.object({ text: z.string() }),
    handler: ({ text }) => text.split(' ').length,
  });
  const sum = app.task({
    name: 'wf.sum',
    input: z.object({ values: z.array(z.number()) }),
    handler: ({ values }) => values.reduce((a, b) => a + b, 0),
  });
  const worker = createWorker(app, { concurrency: 4 });
  afterAll(() => worker.stop());

  it('runs a diamond to its output', async () => {
    await worker.start();
    const wf = workflow(app, 'diamond', { params: z.object({ url: z.string() }) });
    const page = wf.node(fetchPage, { input: { url: wf.params.url } });
    const a = wf.node(count, { input: { text: page.result.body } });
    const b = wf.node(count, { input: { text: 'one two three' }, waitsFor: [page] });
    const total = wf.node(sum, { input: { values: [a.result, b.result] } });
    const def = wf.build({ output: total });
    const handle = await def.start({ url: 'x y' });
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result).toEqual({ ok: true, value: 4 + 3 });
    const nodes = await handle.nodes();
    expect(nodes.map((n) => [n.id, n.status])).toEqual([
      ['wf.fetch', 'COMPLETED'],
      ['wf.count', 'COMPLETED'],
      ['wf.count#2', 'COMPLETED'],
      ['wf.sum', 'COMPLETED'],
    ]);
    expect(await handle.resultFor(page)).toEqual({ ok: true, value: { body: 'body of x y', status: 200 } });
    void TaskError;
    void testLogger;
  });
});
