/**
 * `ctx.step()`: a task of five steps whose worker is SIGKILLed after the third is retried elsewhere and runs
 * steps 4 and 5 only (each step's body counted in `step_runs`); a stale run's step write is refused by the fence;
 * steps are listed by `getTask` and the dashboard's task page, and go with their task.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { StepJournal } from '../../src/worker/StepJournal.js';
import { createWorker } from '../../src/worker/Worker.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { factoriesFor } from '../support/factories.js';
import { fastRecovery, fixtureModule, importFixture } from '../support/fixtures.js';
import { startWorkerProcess } from '../support/processes.js';
import { serveDashboard } from '../dashboard/support.js';

const t = await useTestSchema();
await t.query(
  'CREATE TABLE {{schema}}.step_runs (task_id text NOT NULL, step int NOT NULL, attempt int NOT NULL)',
);
const fixture = await importFixture(
  { schema: t.schema, recovery: fastRecovery },
  () => import('../fixtures/stepsApp.js'),
);
afterAll(() => fixture.app.close());
const { insertTask } = factoriesFor(t);
const dashboard = await serveDashboard(fixture.app);

describe('ctx.step', () => {
  it('runs each step once across a crash: steps 1-3 on the first attempt, 4-5 on the retry', async () => {
    const victim = startWorkerProcess(
      {
        databaseUrl: databaseUrl(),
        schema: t.schema,
        recovery: fastRecovery,
        module: 'test/fixtures/stepsApp.ts',
      },
      ['--concurrency', '1', '--no-maintenance'],
    );
    await victim.ready;
    const handle = await fixture.fiveSteps.send({ stopAfter: 3 });
    // Killed once the third step's result is stored (the handler then waits forever): its body's own write comes
    // before that store, and a kill between the two would rightly run the third step again.
    await eventually(async () => {
      const [row] = await t.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM {{schema}}.horsies_task_steps WHERE task_id = $1',
        [handle.id],
      );
      return row?.n === 3;
    });
    victim.child.kill('SIGKILL');
    expect(await victim.exited).toBe('SIGKILL');

    const survivor = createWorker(fixture.app, { concurrency: 1, appModule: fixtureModule('stepsApp.ts') });
    await survivor.start();
    try {
      expect(await handle.result({ timeoutMs: 30_000 })).toEqual({ ok: true, value: [10, 20, 30, 40, 50] });
    } finally {
      await survivor.stop();
    }
    const runs = await t.query<{ step: number; attempt: number }>(
      'SELECT step, attempt FROM {{schema}}.step_runs WHERE task_id = $1 ORDER BY step, attempt',
      [handle.id],
    );
    expect(runs.map((r) => [r.step, r.attempt])).toEqual([
      [1, 1],
      [2, 1],
      [3, 1],
      [4, 2],
      [5, 2],
    ]);
    const info = await fixture.app.getTask(handle.id, { steps: true });
    expect(info?.steps?.map((s) => [s.name, s.result, s.attempt])).toEqual([
      ['step-1', 10, 1],
      ['step-2', 20, 1],
      ['step-3', 30, 1],
      ['step-4', 40, 2],
      ['step-5', 50, 2],
    ]);
    // The steps go with their task.
    await t.query('DELETE FROM {{schema}}.horsies_tasks WHERE id = $1', [handle.id]);
    const [left] = await t.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM {{schema}}.horsies_task_steps WHERE task_id = $1',
      [handle.id],
    );
    expect(left?.n).toBe(0);
  });

  it("refuses a stale run's write by the fence; a later run gets the stored result without running", async () => {
    const id = await insertTask({ taskName: 'steps.fenced', status: 'RUNNING' });
    const [row] = await t.query<{ claimed_by_worker_id: string; claim_token: string }>(
      'SELECT claimed_by_worker_id, claim_token FROM {{schema}}.horsies_tasks WHERE id = $1',
      [id],
    );
    const owner = { id, workerId: row!.claimed_by_worker_id, token: row!.claim_token };
    let ran = 0;
    const body = async () => {
      ran += 1;
      return { n: ran };
    };
    const stale = new StepJournal(fixture.app.db, { ...owner, token: randomUUID() });
    await expect(stale.run('charge', body)).rejects.toMatchObject({ code: 'TASK_CLAIM_LOST' });
    const elsewhere = new StepJournal(fixture.app.db, { ...owner, workerId: 'another-worker' });
    await expect(elsewhere.run('charge', body)).rejects.toMatchObject({ code: 'TASK_CLAIM_LOST' });
    expect(await fixture.app.getTask(id, { steps: true }).then((i) => i?.steps)).toEqual([]);

    expect(await new StepJournal(fixture.app.db, owner).run('charge', body)).toEqual({ n: 3 });
    expect(await new StepJournal(fixture.app.db, owner).run('charge', body)).toEqual({ n: 3 });
    expect(ran).toBe(3);
    // The task page lists them.
    const page = await dashboard.get<{ steps: { name: string; result: unknown }[] }>(`api/tasks/${id}/steps`);
    expect(page.body.steps.map((st) => [st.name, st.result])).toEqual([['charge', { n: 3 }]]);
    const journal = new StepJournal(fixture.app.db, owner);
    await expect(journal.run('bad', () => 10n)).rejects.toMatchObject({ code: 'PAYLOAD_NOT_SERIALIZABLE' });
    await expect(journal.run('bad', () => 1)).rejects.toMatchObject({ code: 'STEP_INVALID' });
  });
});
