/**
 * The workflow recovery pass, on rows shaped by hand: workflows are started with no worker running (their root
 * tasks stay PENDING), then their rows are put into each half-done state a crash can leave, and one pass of
 * WorkflowRecovery must repair them. One workflow that cannot be repaired must not stop the others.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ManualClock } from '../../src/clock.js';
import { Database } from '../../src/db/Database.js';
import { Expirer } from '../../src/recovery/Expirer.js';
import { Retainer } from '../../src/recovery/Retainer.js';
import { WorkflowStepper } from '../../src/workflow/step.js';
import { WorkflowRecovery } from '../../src/workflow/WorkflowRecovery.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import type { WorkflowHandle } from '../../src/workflow/WorkflowHandle.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app();
const double = app.task({ name: 'double', input: z.object({ n: z.number() }), handler: ({ n }) => n * 2 });

// a → b → c, with b reading a's result and c reading b's.
const chain = (() => {
  const wf = workflow(app, 'chain');
  const a = wf.node(double, { input: { n: 1 }, id: 'a' });
  const b = wf.node(double, { input: { n: a.result }, id: 'b' });
  const c = wf.node(double, { input: { n: b.result }, id: 'c' });
  return wf.build({ output: c });
})();

/** A pass that sees every workflow as stale: its clock is a minute ahead. */
function recovery(): WorkflowRecovery {
  return new WorkflowRecovery(
    app.db,
    { graceMs: 30_000, batchSize: 100 },
    new ManualClock(new Date(Date.now() + 60_000)),
  );
}

async function nodes(handle: WorkflowHandle<unknown>) {
  return Object.fromEntries(
    (await handle.nodes()).map((n) => [
      n.id,
      { status: n.status, code: n.result?.ok === false ? n.result.error.code : null },
    ]),
  );
}

async function taskOf(handle: WorkflowHandle<unknown>, nodeId: string): Promise<string> {
  const node = (await handle.nodes()).find((n) => n.id === nodeId);
  return node!.taskId!;
}

/** Ends a task by hand, as a worker or the reaper would have, without stepping its workflow. */
async function endTask(
  id: string,
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'EXPIRED',
  result: unknown,
): Promise<void> {
  await t.query(
    `UPDATE {{schema}}.horsies_tasks
     SET status = $2::text, result = $3::jsonb, finished_at = now() - interval '1 minute',
         claimed = false, claim_expires_at = NULL,
         completed_at = CASE WHEN $2::text = 'COMPLETED' THEN now() - interval '1 minute' END,
         failed_at = CASE WHEN $2::text = 'FAILED' THEN now() - interval '1 minute' END
     WHERE id = $1`,
    [id, status, result === undefined ? null : JSON.stringify(result)],
  );
}

describe('the workflow recovery pass', () => {
  it('settles a node whose task completed without it, and enqueues the next node with the stored result', async () => {
    const handle = await chain.start();
    await endTask(await taskOf(handle, 'a'), 'COMPLETED', { ok: 2 });
    const result = await recovery().runOnce();
    expect(result.repaired).toEqual([{ id: handle.id, settled: 1, enqueued: 1, status: 'RUNNING' }]);
    expect(await nodes(handle)).toEqual({
      a: { status: 'COMPLETED', code: null },
      b: { status: 'ENQUEUED', code: null },
      c: { status: 'PENDING', code: null },
    });
    const b = await app.getTask(await taskOf(handle, 'b'));
    expect(b?.input).toEqual({ n: 2 });
    // A second pass finds nothing to do.
    expect((await recovery().runOnce()).repaired.map((r) => r.id)).not.toContain(handle.id);
  });

  it.each([
    ['FAILED', undefined, 'WORKER_CRASHED'],
    ['FAILED', { err: { code: 'OWN_CODE', message: 'stored' } }, 'OWN_CODE'],
    ['CANCELLED', undefined, 'TASK_CANCELLED'],
    ['EXPIRED', undefined, 'TASK_EXPIRED'],
    ['COMPLETED', undefined, 'RESULT_NOT_AVAILABLE'],
  ] as const)(
    'replays a %s task (stored result %j) as a failed node with %s, and skips what follows',
    async (status, stored, code) => {
      const handle = await chain.start();
      await endTask(await taskOf(handle, 'a'), status, stored);
      await recovery().runOnce();
      expect(await nodes(handle)).toEqual({
        a: { status: 'FAILED', code },
        b: { status: 'SKIPPED', code: 'UPSTREAM_SKIPPED' },
        c: { status: 'SKIPPED', code: 'UPSTREAM_SKIPPED' },
      });
      expect(await handle.result({ timeoutMs: 5_000 })).toMatchObject({
        ok: false,
        error: { code: 'WORKFLOW_FAILED', data: { node: 'a', error: { code } } },
      });
    },
  );

  it('fails a node whose task row vanished with TASK_NOT_FOUND', async () => {
    const handle = await chain.start();
    await t.query('DELETE FROM {{schema}}.horsies_tasks WHERE id = $1', [await taskOf(handle, 'a')]);
    await recovery().runOnce();
    expect((await nodes(handle)).a).toEqual({ status: 'FAILED', code: 'TASK_NOT_FOUND' });
  });

  it('enqueues a READY node that has no task', async () => {
    const handle = await chain.start();
    await endTask(await taskOf(handle, 'a'), 'COMPLETED', { ok: 7 });
    // a settled and b made READY by hand (counters included), as if the step died before the enqueue.
    await t.query(
      `UPDATE {{schema}}.horsies_workflow_tasks
       SET status = CASE node_index WHEN 0 THEN 'COMPLETED' ELSE 'READY' END,
           result = CASE node_index WHEN 0 THEN '{"ok": 7}'::jsonb END,
           completed_at = CASE node_index WHEN 0 THEN now() END,
           deps_completed = CASE node_index WHEN 1 THEN 1 ELSE 0 END
       WHERE workflow_id = $1 AND node_index IN (0, 1)`,
      [handle.id],
    );
    await t.query('UPDATE {{schema}}.horsies_workflows SET nodes_terminal = 1 WHERE id = $1', [handle.id]);
    await recovery().runOnce();
    expect((await nodes(handle)).b).toEqual({ status: 'ENQUEUED', code: null });
    expect((await app.getTask(await taskOf(handle, 'b')))?.input).toEqual({ n: 7 });
  });

  it('evaluates a PENDING node whose dependencies all ended, recounting its counters', async () => {
    const handle = await chain.start();
    await endTask(await taskOf(handle, 'a'), 'COMPLETED', { ok: 3 });
    // a settled by hand without telling b (its counters still say nothing ended).
    await t.query(
      `UPDATE {{schema}}.horsies_workflow_tasks SET status = 'COMPLETED', result = '{"ok": 3}', completed_at = now()
       WHERE workflow_id = $1 AND node_index = 0`,
      [handle.id],
    );
    await recovery().runOnce();
    expect(await nodes(handle)).toMatchObject({ b: { status: 'ENQUEUED' }, c: { status: 'PENDING' } });
    expect((await app.getTask(await taskOf(handle, 'b')))?.input).toEqual({ n: 3 });
  });

  it('finishes a RUNNING workflow whose nodes are all terminal', async () => {
    const handle = await chain.start();
    await t.query(
      `UPDATE {{schema}}.horsies_workflow_tasks
       SET status = 'COMPLETED', result = jsonb_build_object('ok', node_index * 10), completed_at = now()
       WHERE workflow_id = $1`,
      [handle.id],
    );
    await recovery().runOnce();
    expect(await handle.status()).toBe('COMPLETED');
    expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 20 });
  });

  it('reports a workflow it cannot repair and repairs the others in the same pass', async () => {
    const poisoned = await chain.start();
    const healthy = await chain.start();
    await endTask(await taskOf(poisoned, 'a'), 'COMPLETED', { ok: 1 });
    await endTask(await taskOf(healthy, 'a'), 'COMPLETED', { ok: 1 });
    // A hand-edited wiring that cannot be read: enqueuing b fails.
    await t.query(
      `UPDATE {{schema}}.horsies_workflow_tasks SET input_template = '{"static": null, "refs": "oops"}'
       WHERE workflow_id = $1 AND node_index = 1`,
      [poisoned.id],
    );
    const result = await recovery().runOnce();
    expect(result.failed.map((f) => f.id)).toEqual([poisoned.id]);
    expect(result.repaired.map((r) => r.id)).toContain(healthy.id);
    expect((await nodes(healthy)).b).toEqual({ status: 'ENQUEUED', code: null });
    // The failed repair rolled back: the poisoned workflow is as it was, for an operator to look at.
    expect((await nodes(poisoned)).a).toEqual({ status: 'ENQUEUED', code: null });
  });

  it('settles the node of a run that ended after its workflow was cancelled, its step lost', async () => {
    const handle = await chain.start();
    const a = await taskOf(handle, 'a');
    // a is running on a worker when the workflow is cancelled: its node stays open, the task asked to stop.
    await t.query(
      `UPDATE {{schema}}.horsies_tasks
       SET status = 'RUNNING', claimed = true, claimed_at = now(), started_at = now(), attempt = 1,
           claimed_by_worker_id = 'gone', claim_generation = claim_generation + 1,
           claim_expires_at = now() + interval '1 minute'
       WHERE id = $1`,
      [a],
    );
    await handle.cancel();
    expect(await nodes(handle)).toEqual({
      a: { status: 'RUNNING', code: null },
      b: { status: 'SKIPPED', code: 'WORKFLOW_CANCELLED' },
      c: { status: 'SKIPPED', code: 'WORKFLOW_CANCELLED' },
    });
    // The run still returned; the step that would have recorded it on its node was lost.
    await endTask(a, 'COMPLETED', { ok: 2 });
    const result = await recovery().runOnce();
    expect(result.repaired.filter((r) => r.id === handle.id)).toEqual([
      { id: handle.id, settled: 1, enqueued: 0, status: 'CANCELLED' },
    ]);
    expect((await nodes(handle)).a).toEqual({ status: 'COMPLETED', code: null });
    expect(await handle.status()).toBe('CANCELLED');
    const [counts] = await t.query<{ nodes_terminal: number; nodes_total: number }>(
      'SELECT nodes_terminal, nodes_total FROM {{schema}}.horsies_workflows WHERE id = $1',
      [handle.id],
    );
    expect(counts).toEqual({ nodes_terminal: 3, nodes_total: 3 });
    // Settled, it is not looked at again.
    expect((await recovery().runOnce()).repaired.map((r) => r.id)).not.toContain(handle.id);
  });

  it('leaves alone a workflow that changed within the grace period', async () => {
    const handle = await chain.start();
    await endTask(await taskOf(handle, 'a'), 'COMPLETED', { ok: 1 });
    const now = new WorkflowRecovery(app.db, { graceMs: 30_000, batchSize: 100 });
    expect((await now.runOnce()).repaired.map((r) => r.id)).not.toContain(handle.id);
    expect((await nodes(handle)).a?.status).toBe('ENQUEUED');
  });
});

describe('retention of workflows', () => {
  it('prunes terminal workflows finished longer ago than terminalRecordRetentionHours, with their nodes', async () => {
    const old = await chain.start();
    const recent = await chain.start();
    const live = await chain.start();
    for (const handle of [old, recent]) {
      await t.query(
        `UPDATE {{schema}}.horsies_workflow_tasks
         SET status = 'COMPLETED', result = '{"ok": 1}', completed_at = now() WHERE workflow_id = $1`,
        [handle.id],
      );
      await t.query(
        `UPDATE {{schema}}.horsies_workflows
         SET status = 'COMPLETED', result = '{"ok": 1}', nodes_terminal = nodes_total, completed_at = $2
         WHERE id = $1`,
        [handle.id, handle === old ? new Date(Date.now() - 3 * 3_600_000) : new Date()],
      );
    }
    const result = await new Retainer(app.db, {
      ...app.config.recovery,
      terminalRecordRetentionHours: 2,
    }).runOnce();
    expect(result.workflows).toBe(1);
    expect(await old.status()).toBeNull();
    const [nodesLeft] = await t.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1',
      [old.id],
    );
    expect(nodesLeft!.n).toBe(0);
    expect(await recent.status()).toBe('COMPLETED');
    expect(await live.status()).toBe('RUNNING');
  });
});

describe('workflow tasks ended outside a worker', () => {
  it('a cancel of a pending node task fails the node TASK_CANCELLED at once and skips what follows', async () => {
    const handle = await chain.start();
    expect(await app.cancel(await taskOf(handle, 'a'))).toMatchObject({ outcome: 'cancelled' });
    expect(await nodes(handle)).toEqual({
      a: { status: 'FAILED', code: 'TASK_CANCELLED' },
      b: { status: 'SKIPPED', code: 'UPSTREAM_SKIPPED' },
      c: { status: 'SKIPPED', code: 'UPSTREAM_SKIPPED' },
    });
    expect(await handle.status()).toBe('FAILED');
  });

  it('an expired node task fails its node TASK_EXPIRED in the same expiry pass', async () => {
    const wf = workflow(app, 'expiring');
    const late = wf.node(double, { input: { n: 1 }, goodUntil: new Date(Date.now() + 60_000), id: 'late' });
    wf.node(double, { input: { n: late.result }, id: 'after' });
    const handle = await wf.build().start();
    const stepper = new WorkflowStepper(app.db, (_id, error) => {
      throw error;
    });
    const expirer = new Expirer(
      app.db,
      { batchSize: 100, maxBatchesPerRun: 1 },
      new ManualClock(new Date(Date.now() + 120_000)),
      (rows) => {
        stepper.add(rows);
        return stepper.idle();
      },
    );
    expect((await expirer.runOnce()).expired).toBeGreaterThanOrEqual(1);
    expect(await nodes(handle)).toEqual({
      late: { status: 'FAILED', code: 'TASK_EXPIRED' },
      after: { status: 'SKIPPED', code: 'UPSTREAM_SKIPPED' },
    });
  });
});

describe('a workflow step after a migration changed the columns of its statements', () => {
  it('prepares them anew and steps at once, leaving nothing to the recovery pass', async () => {
    // One connection, so that the step's statements are prepared where the next step runs.
    const db = new Database({ connectionString: t.url, schema: t.schema, poolSize: 1 });
    const errors: unknown[] = [];
    const stepper = new WorkflowStepper(db, (_id, error) => errors.push(error));
    const end = async (handle: WorkflowHandle<unknown>, node: number, id: string) => {
      const taskId = await taskOf(handle, id);
      await endTask(taskId, 'COMPLETED', { ok: 2 ** (node + 1) });
      stepper.add([{ id: taskId, status: 'COMPLETED', workflow_id: handle.id, workflow_node: node }]);
      await stepper.idle();
    };
    try {
      const handle = await chain.start();
      await end(handle, 0, 'a');
      // A migration adds a column: `SELECT w.*` of the workflow's lock now returns one more.
      await t.query(`ALTER TABLE {{schema}}.horsies_workflows ADD COLUMN later_migration text`);
      await end(handle, 1, 'b');
      expect(errors).toEqual([]);
      expect(await nodes(handle)).toEqual({
        a: { status: 'COMPLETED', code: null },
        b: { status: 'COMPLETED', code: null },
        c: { status: 'ENQUEUED', code: null },
      });
      expect((await app.getTask(await taskOf(handle, 'c')))?.input).toEqual({ n: 4 });
    } finally {
      await t.query(`ALTER TABLE {{schema}}.horsies_workflows DROP COLUMN IF EXISTS later_migration`);
      await db.end();
    }
  });
});
