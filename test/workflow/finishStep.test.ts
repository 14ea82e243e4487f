/**
 * A worker's finish of a workflow task steps the workflow in the same transaction: one statement writes the
 * outcome and moves the workflow on (routines/horsies_finish_and_step.sql). It locks the workflow before the task,
 * as a control operation does, so that the two never wait on each other in a cycle.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Statement } from '../../src/db/sql.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

/** Counts the statements `app` runs, by name. */
function countStatements(app: ReturnType<typeof t.app>): Map<string, number> {
  const sent = new Map<string, number>();
  const run = app.db.run.bind(app.db);
  app.db.run = (<P, R>(stmt: Statement<P, R>, params: P, on?: Parameters<typeof run>[2]) => {
    sent.set(stmt.name, (sent.get(stmt.name) ?? 0) + 1);
    return run(stmt, params, on);
  }) as typeof app.db.run;
  return sent;
}

describe("a worker's finish of a workflow task", () => {
  it('writes the outcome and the step in one statement', async () => {
    const app = t.app();
    const add = app.task({ name: 'fs.add', input: z.object({ n: z.number() }), handler: ({ n }) => n + 1 });
    const sent = countStatements(app);
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

  it('locks the workflow before the task, so a control operation holding the workflow is not deadlocked', async () => {
    const app = t.app();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const held = app.task({
      name: 'fs.held',
      input: z.object({}),
      handler: async () => {
        started();
        await gate;
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
      await running;
      const [task] = await t.query<{ id: string }>(
        `SELECT id FROM {{schema}}.horsies_tasks WHERE workflow_id = $1`,
        [handle.id],
      );
      // As a cancel or a pause: the workflow's row first, then its tasks'.
      await control.query('BEGIN');
      await control.query(`SELECT 1 FROM "${t.schema}".horsies_workflows WHERE id = $1 FOR UPDATE`, [
        handle.id,
      ]);
      release();
      // The finish waits for the workflow, holding nothing of the task's.
      await eventually(async () => {
        const rows = await t.query(
          `SELECT 1 FROM pg_stat_activity
           WHERE query LIKE '%horsies_finish_and_step%' AND wait_event_type = 'Lock'`,
        );
        return rows.length > 0;
      });
      await control.query(`SET LOCAL lock_timeout = '5s'`);
      await control.query(`UPDATE "${t.schema}".horsies_tasks SET updated_at = now() WHERE id = $1`, [
        task!.id,
      ]);
      await control.query('COMMIT');
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 1 });
    } finally {
      release();
      await control.end();
      await worker.stop();
    }
  });
});
