/**
 * A worker's finish of a workflow task steps the workflow in the same transaction: one statement writes the
 * outcome and moves the workflow on (routines/horsies_finish_and_step.sql). It locks the workflow before the task,
 * as a control operation does, and skips one that another transaction holds: that outcome is written at once and
 * its node stepped after the commit.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { countStatements, eventually, useTestSchema } from '../support/db.js';
import { gate } from '../support/gate.js';

const t = await useTestSchema();

describe("a worker's finish of a workflow task", () => {
  it('writes the outcome and the step in one statement', async () => {
    const app = t.app();
    const add = app.task({ name: 'fs.add', input: z.object({ n: z.number() }), handler: ({ n }) => n + 1 });
    const sent = countStatements(app.db);
    const worker = createWorker(app, { concurrency: 2, maintenance: false });
    await worker.start();
    try {
      const wf = workflow(app, 'fs.chain');
      let last = wf.node(add, { input: { n: 0 } });
      for (let i = 1; i < 5; i += 1) last = wf.node(add, { input: { n: last.result } });
      const handle = await wf.build({ output: last }).start();
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 5 });
      expect(sent.get('TaskFinishStep')).toBe(5);
      expect(sent.get('TaskFinishMany')).toBeUndefined();
      expect(sent.get('WorkflowStepMany')).toBeUndefined();
    } finally {
      await worker.stop();
    }
  });

  it('writes the outcome of a workflow another transaction holds without waiting, and steps it after', async () => {
    const app = t.app();
    const running = gate();
    const release = gate();
    const held = app.task({
      name: 'fs.held',
      input: z.object({}),
      handler: async () => {
        running.open();
        await release.wait;
        return 1;
      },
    });
    const wf = workflow(app, 'fs.lock');
    const node = wf.node(held, { input: {} });
    const worker = createWorker(app, { concurrency: 1, maintenance: false });
    await worker.start();
    const control = new pg.Client({ connectionString: t.url });
    await control.connect();
    try {
      const handle = await wf.build({ output: node }).start();
      await running.wait;
      // As a cancel or a pause holds it.
      await control.query('BEGIN');
      await control.query(`SELECT 1 FROM "${t.schema}".horsies_workflows WHERE id = $1 FOR UPDATE`, [
        handle.id,
      ]);
      release.open();
      // The outcome commits while the workflow is held; its node waits for the step that follows.
      await eventually(async () => {
        const [task] = await t.query<{ status: string }>(
          `SELECT status FROM {{schema}}.horsies_tasks WHERE workflow_id = $1`,
          [handle.id],
        );
        return task?.status === 'COMPLETED';
      });
      const [open] = await t.query<{ status: string }>(
        `SELECT status FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1`,
        [handle.id],
      );
      expect(open?.status).not.toBe('COMPLETED');
      await control.query('COMMIT');
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 1 });
    } finally {
      release.open();
      await control.end();
      await worker.stop();
    }
  });
});
