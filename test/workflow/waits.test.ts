import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InputValidationError, SignalError, WorkflowDefinitionError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { WorkflowTimers } from '../../src/workflow/WorkflowTimers.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

const approval = z.object({ approved: z.boolean(), by: z.string() });

describe('wait nodes', () => {
  const app = t.app();
  const ship = app.task({
    name: 'waits.ship',
    input: z.object({ approved: z.boolean(), by: z.string(), order: z.string() }),
    handler: ({ approved, by, order }) => `${order}:${approved ? 'shipped' : 'held'} by ${by}`,
  });
  const note = app.task({
    name: 'waits.note',
    input: z.object({ code: z.string() }),
    handler: ({ code }) => `noted ${code}`,
  });
  const worker = createWorker(app, { concurrency: 2 });
  afterAll(() => worker.stop());

  const wf = workflow(app, 'waits.approval', { params: z.object({ order: z.string() }) });
  const approved = wf.waitFor('approval', { schema: approval, key: wf.params.order });
  const shipped = wf.node(ship, {
    input: { approved: approved.result.approved, by: approved.result.by, order: wf.params.order },
  });
  const flow = wf.build({ output: shipped });

  it('completes with a signal delivered while it waits, its dependents reading the payload', async () => {
    await worker.start();
    const handle = await flow.start({ order: 'o-1' });
    expect((await handle.nodes()).map((n) => [n.id, n.status])).toEqual([
      ['approval', 'RUNNING'],
      ['waits.ship', 'PENDING'],
    ]);
    const receipt = await handle.signal(approved, { approved: true, by: 'ann' });
    expect(receipt.delivered).toBe('resumed');
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'o-1:shipped by ann' });
    expect(await handle.resultFor(approved)).toEqual({ ok: true, value: { approved: true, by: 'ann' } });
    // A delivery to an ended node stores nothing.
    expect((await handle.signal(approved, { approved: false, by: 'bob' })).delivered).toBe('ignored');
  });

  it('validates the payload before anything is stored', async () => {
    const handle = await flow.start({ order: 'o-2' });
    await expect(
      handle.signal(approved, { approved: 'yes' } as unknown as { approved: boolean; by: string }),
    ).rejects.toBeInstanceOf(InputValidationError);
    await expect(app.emit('approval', { approved: 1 }, { key: 'o-2' })).rejects.toBeInstanceOf(
      InputValidationError,
    );
    await expect(app.emit('no-such-signal', {})).rejects.toMatchObject({ code: 'UNKNOWN_SIGNAL' });
    await expect(app.signal(handle.id, 'waits.ship', {})).rejects.toBeInstanceOf(SignalError);
    const [stored] = await t.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM {{schema}}.horsies_workflow_signals WHERE workflow_id = $1',
      [handle.id],
    );
    expect(stored?.n).toBe(0);
    await handle.cancel();
    expect((await handle.nodes()).map((x) => x.status)).toEqual(['SKIPPED', 'SKIPPED']);
  });

  it('keeps a signal sent before the node is reached, and ignores a repeated delivery id', async () => {
    const gate = workflow(app, 'waits.late');
    const first = gate.sleep({ ms: 60_000 });
    const wait = gate.waitFor('approval', { schema: approval, waitsFor: [first] });
    const def = gate.build({ output: wait });
    const handle = await def.start();
    expect((await handle.signal(wait, { approved: true, by: 'early' }, { id: 'd-1' })).delivered).toBe(
      'kept',
    );
    expect((await handle.signal(wait, { approved: false, by: 'again' }, { id: 'd-1' })).delivered).toBe(
      'duplicate',
    );
    expect((await handle.signal(wait, { approved: false, by: 'second' }, { id: 'd-2' })).delivered).toBe(
      'kept',
    );
    // The sleep ends (its timer made due), the wait starts and completes with the first signal kept.
    await t.query(
      `UPDATE {{schema}}.horsies_workflow_tasks SET wait_due_at = now() WHERE workflow_id = $1 AND node_index = 0`,
      [handle.id],
    );
    const timers = new WorkflowTimers(app.db, { batchSize: 100 });
    expect((await timers.runOnce()).fired).toEqual([{ id: handle.id, nodes: [0], settled: 2 }]);
    expect(await handle.result({ timeoutMs: 5_000 })).toEqual({
      ok: true,
      value: { approved: true, by: 'early' },
    });
  });

  it('fails WAIT_TIMEOUT after its timeout; allowFailedDeps dependents still run', async () => {
    const timed = workflow(app, 'waits.timeout');
    const wait = timed.waitFor('approval', { schema: approval, timeoutMs: 50 });
    const after = timed.node(note, {
      input: { code: 'late' },
      waitsFor: [wait],
      allowFailedDeps: true,
    });
    const skipped = timed.node(note, { id: 'skipped', input: { code: 'x' }, waitsFor: [wait] });
    const def = timed.build({ successPolicy: { cases: [[after]], optional: [wait, skipped] } });
    const handle = await def.start();
    const timers = new WorkflowTimers(app.db, { batchSize: 100 });
    // The timer is due 50 ms after the start; each pass reads the due timers once.
    await eventually(async () => (await timers.runOnce()).fired.some((f) => f.id === handle.id));
    const outcome = await handle.resultFor(wait);
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(outcome.error.code).toBe('WAIT_TIMEOUT');
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok).toBe(true);
    expect((await handle.nodes()).map((n) => [n.id, n.status])).toEqual([
      ['approval', 'FAILED'],
      ['waits.note', 'COMPLETED'],
      ['skipped', 'SKIPPED'],
    ]);
  });

  it('refuses a second schema for one signal name, and bad timers, at build', () => {
    const bad = workflow(app, 'waits.bad');
    bad.waitFor('approval', { schema: z.object({ other: z.string() }) });
    bad.waitFor('x', { schema: approval, timeoutMs: -1 });
    bad.sleep({ ms: 1.5 });
    let error: unknown;
    try {
      bad.build();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect((error as WorkflowDefinitionError).problems.map((p) => p.field)).toEqual([
      'nodes.approval.schema',
      'nodes.x.timeoutMs',
      'nodes.sleep.ms',
    ]);
  });
});

describe('events', () => {
  const app = t.app();
  const paid = z.object({ amount: z.number(), emitter: z.number() });
  const wf = workflow(app, 'events.order', { params: z.object({ order: z.string() }) });
  const payment = wf.waitFor('order.paid', { schema: paid, key: wf.params.order });
  const flow = wf.build({ output: payment });

  it('resumes exactly the runs waiting on the key, once each, under 20 concurrent emitters', async () => {
    const waiting = await Promise.all(Array.from({ length: 12 }, () => flow.start({ order: 'k-1' })));
    const others = await Promise.all(Array.from({ length: 4 }, () => flow.start({ order: 'k-2' })));
    const receipts = await Promise.all(
      Array.from({ length: 20 }, (_, emitter) =>
        app.emit('order.paid', { amount: 10, emitter }, { key: 'k-1' }),
      ),
    );
    const resumedBy = new Map<string, number>();
    receipts.forEach((receipt, emitter) => {
      for (const run of receipt.resumed) {
        expect(resumedBy.has(run.workflowId)).toBe(false);
        resumedBy.set(run.workflowId, emitter);
      }
    });
    expect([...resumedBy.keys()].sort()).toEqual(waiting.map((h) => h.id).sort());
    for (const handle of waiting) {
      expect(await handle.result({ timeoutMs: 5_000 })).toEqual({
        ok: true,
        value: { amount: 10, emitter: resumedBy.get(handle.id) },
      });
    }
    for (const handle of others) expect(await handle.status()).toBe('RUNNING');
    const [stored] = await t.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM {{schema}}.horsies_workflow_signals WHERE workflow_id = ANY ($1)`,
      [others.map((h) => h.id)],
    );
    expect(stored?.n).toBe(0);
  });

  it("delivers inside the caller's transaction, and not at all when it rolls back", async () => {
    const handle = await flow.start({ order: 'k-tx' });
    await expect(
      app.db.transaction(async (tx) => {
        const receipt = await app.emit('order.paid', { amount: 1, emitter: -1 }, { key: 'k-tx', tx });
        expect(receipt.resumed.map((r) => r.workflowId)).toEqual([handle.id]);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await handle.status()).toBe('RUNNING');
    await app.db.transaction((tx) =>
      app.emit('order.paid', { amount: 2, emitter: -2 }, { key: 'k-tx', tx, id: 'pay-1' }),
    );
    expect(await handle.result({ timeoutMs: 5_000 })).toEqual({
      ok: true,
      value: { amount: 2, emitter: -2 },
    });
    // An event reaches only runs waiting when it commits: a run started afterwards still waits.
    const later = await flow.start({ order: 'k-tx' });
    expect(await handle.status()).toBe('COMPLETED');
    expect((await later.nodes())[0]?.status).toBe('RUNNING');
  });
});

describe('waits under control', () => {
  const app = t.app();
  const echo = app.task({
    name: 'control.echo',
    input: z.object({ by: z.string() }),
    handler: ({ by }) => `echo ${by}`,
  });
  const worker = createWorker(app, { concurrency: 2 });
  afterAll(() => worker.stop());

  const wf = workflow(app, 'control.approval');
  const wait = wf.waitFor('control.decision', { schema: approval, timeoutMs: 60_000 });
  const after = wf.node(echo, { input: { by: wait.result.by } });
  const flow = wf.build({ output: after });

  it('fails WAIT_TIMEOUT, then waits again after retry-failed and completes with a signal', async () => {
    await worker.start();
    const handle = await flow.start();
    // The timer made due now; the maintenance service fires it.
    await t.query(
      `UPDATE {{schema}}.horsies_workflow_tasks SET wait_due_at = now() WHERE workflow_id = $1 AND node_index = 0`,
      [handle.id],
    );
    await new WorkflowTimers(app.db, { batchSize: 100 }).runOnce();
    const failed = await handle.result({ timeoutMs: 5_000 });
    expect(failed.ok).toBe(false);
    expect(
      (await handle.nodes()).map((n) => [n.id, n.status, n.result?.ok === false && n.result.error.code]),
    ).toEqual([
      ['control.decision', 'FAILED', 'WAIT_TIMEOUT'],
      ['control.echo', 'SKIPPED', 'UPSTREAM_SKIPPED'],
    ]);
    // A signal to an ended node is ignored: nothing is stored for a later retry to find.
    expect((await handle.signal(wait, { approved: true, by: 'late' })).delivered).toBe('ignored');
    expect((await handle.retryFailed()).reopened).toBe(2);
    expect((await handle.nodes())[0]?.status).toBe('RUNNING');
    expect((await handle.signal(wait, { approved: true, by: 'again' })).delivered).toBe('resumed');
    expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 'echo again' });
  });

  it('takes a signal while paused; its dependents start on resume', async () => {
    const paused = workflow(app, 'control.paused');
    const w = paused.waitFor('control.decision', { schema: approval });
    const next = paused.node(echo, { input: { by: w.result.by } });
    const def = paused.build({ output: next });
    const handle = await def.start();
    await handle.pause();
    expect((await handle.signal(w, { approved: true, by: 'pat' })).delivered).toBe('resumed');
    expect((await handle.nodes()).map((n) => [n.id, n.status])).toEqual([
      ['control.decision', 'COMPLETED'],
      ['control.echo', 'PENDING'],
    ]);
    await handle.resume();
    expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 'echo pat' });
  });

  it("ends a child run through a signal, and its parent's node takes the child's result", async () => {
    const child = workflow(app, 'control.child');
    const cw = child.waitFor('control.decision', { schema: approval });
    const childDef = child.build({ output: cw });
    const parent = workflow(app, 'control.parent');
    const sub = parent.node(childDef);
    const out = parent.node(echo, { input: { by: sub.result.by } });
    const parentDef = parent.build({ output: out });
    const handle = await parentDef.start();
    const [node] = await handle.nodes();
    const [link] = await t.query<{ child_workflow_id: string }>(
      'SELECT child_workflow_id FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1 AND node_index = 0',
      [handle.id],
    );
    expect(node?.status).toBe('RUNNING');
    expect(
      (await childDef.handle(link!.child_workflow_id).signal(cw, { approved: true, by: 'kid' })).delivered,
    ).toBe('resumed');
    expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 'echo kid' });
  });
});
