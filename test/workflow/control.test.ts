/**
 * Workflow control against a real PostgreSQL and real workers: pause with tasks pending, claimed and running, then
 * resume; retries held while paused; cancel with a cascade through two levels of subworkflows; a cancel racing
 * completions; retry-failed; and what a handler and getTask learn of a task's workflow node.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskClaim, TaskFinishMany, TaskStartMany } from '../../src/db/tasks.js';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import type { WorkflowHandle } from '../../src/workflow/WorkflowHandle.js';
import { step, stepWorkflow } from '../../src/workflow/step.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
// `work` is served by the worker below; `held` by nobody until a test says so, so its tasks stay where put.
const app = t.app({ queues: [{ name: 'work' }, { name: 'held' }] });

/** A gate per key: a task that waits on it runs until the test opens it. */
const gates = new Map<string, { open: () => void; opened: Promise<void> }>();
function gate(key: string): { open: () => void; opened: Promise<void> } {
  let entry = gates.get(key);
  if (!entry) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    entry = { open, opened };
    gates.set(key, entry);
  }
  return entry;
}

/** Runs of each task id, to show that no task runs twice. */
const runs = new Map<string, number>();
const seen: { taskId: string; workflow: unknown }[] = [];
const aborted = new Set<string>();

const waitFor = app.task({
  name: 'wait-for',
  queue: 'work',
  input: z.object({ key: z.string(), value: z.number() }),
  handler: async ({ key, value }, ctx) => {
    runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
    await Promise.race([
      gate(key).opened,
      new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true })),
    ]);
    if (ctx.signal.aborted) aborted.add(ctx.taskId);
    return value;
  },
});
const value = app.task({
  name: 'value',
  queue: 'held',
  input: z.object({ n: z.number() }),
  handler: ({ n }, ctx) => {
    runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
    seen.push({ taskId: ctx.taskId, workflow: ctx.workflow });
    return n;
  },
});
const sum = app.task({
  name: 'sum',
  queue: 'work',
  input: z.object({ values: z.array(z.number()) }),
  handler: ({ values }, ctx) => {
    runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
    return values.reduce((a, b) => a + b, 0);
  },
});
let flakyFailures = 0;
const flaky = app.task({
  name: 'flaky',
  queue: 'work',
  input: z.object({ n: z.number() }),
  // The retry waits a minute unless a test makes it due.
  retry: { maxRetries: 3, retryOn: ['FLAKY'], backoff: 'constant', baseDelayMs: 60_000 },
  handler: ({ n }, ctx) => {
    if (ctx.attempt === 1) {
      flakyFailures += 1;
      throw new TaskError('FLAKY', 'first attempt fails');
    }
    return n;
  },
});
let brokenUntil = 0;
const broken = app.task({
  name: 'broken',
  queue: 'work',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => {
    if (Date.now() < brokenUntil) throw new TaskError('BROKEN', 'not yet');
    return n;
  },
});

const worker = createWorker(app, { concurrency: 8, pollIntervalMs: 100, queues: ['work'] });
beforeAll(() => worker.start());
afterAll(() => worker.stop());

const fakeWorker = { workerId: 'fake-claimer', hostname: 'h', pid: 1, processName: 'vitest' };

async function nodeStatuses(handle: WorkflowHandle<unknown>): Promise<Record<string, string>> {
  return Object.fromEntries((await handle.nodes()).map((n) => [n.id, n.status]));
}

/** Tasks of a workflow that no node links (there must be none). */
async function unlinkedTasks(workflowIds: string[]): Promise<string[]> {
  const rows = await t.query<{ id: string }>(
    `SELECT t.id FROM {{schema}}.horsies_tasks t
     WHERE t.workflow_id = ANY ($1) AND NOT EXISTS (
       SELECT 1 FROM {{schema}}.horsies_workflow_tasks n WHERE n.task_id = t.id)`,
    [workflowIds],
  );
  return rows.map((r) => r.id);
}

async function taskRow(id: string) {
  const [row] = await t.query<{ status: string; attempt: number; claimed: boolean }>(
    'SELECT status, attempt, claimed FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  return row;
}

async function attemptCount(id: string): Promise<number> {
  const [row] = await t.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM {{schema}}.horsies_task_attempts WHERE task_id = $1',
    [id],
  );
  return row!.n;
}

describe('pause and resume', () => {
  it('with a task pending, one claimed and one running: each node ends as without the pause, no task runs twice', async () => {
    const wf = workflow(app, 'pause-each-state');
    const running = wf.node(waitFor, { id: 'running', input: { key: 'pause-1', value: 1 } });
    const claimed = wf.node(value, { id: 'claimed', input: { n: 10 } });
    const pending = wf.node(value, { id: 'pending', input: { n: 100 } });
    const total = wf.node(sum, {
      id: 'total',
      input: { values: [running.result, claimed.result, pending.result] },
    });
    const handle = await wf.build({ output: total }).start();
    const nodes = Object.fromEntries((await handle.nodes()).map((n) => [n.id, n]));
    const runningTask = nodes.running!.taskId!;
    const claimedTask = nodes.claimed!.taskId!;
    const pendingTask = nodes.pending!.taskId!;
    await eventually(async () => (await taskRow(runningTask))?.status === 'RUNNING');
    // Another worker claims one `held` task and has not started it yet.
    const [claim] = await app.db.run(TaskClaim, {
      queue: 'held',
      taskNames: ['value'],
      limit: 1,
      leaseMs: 30_000,
      worker: fakeWorker,
    });
    expect(claim).toMatchObject({ workflow_id: handle.id, workflow_node_id: expect.any(String) });
    const claimedNow = claim!.id;
    const stillPending = claimedNow === claimedTask ? pendingTask : claimedTask;

    expect(await handle.pause()).toEqual({ status: 'PAUSED', changed: [handle.id] });
    // The pending task never ran: withdrawn, its node READY again.
    expect(await taskRow(stillPending)).toBeUndefined();
    // The claimed one is handed back at its start, before any code runs, and given back by the next step.
    const started = await app.db.run(TaskStartMany, {
      workerId: fakeWorker.workerId,
      tasks: [{ id: claimedNow, token: claim!.claim_token, workflow: true }],
    });
    expect(started).toEqual([expect.objectContaining({ id: claimedNow, status: 'STOPPED' })]);
    expect(await taskRow(claimedNow)).toMatchObject({ status: 'PENDING', attempt: 0, claimed: false });
    await stepWorkflow(app.db, handle.id, { nodes: [claim!.workflow_node!] });
    expect(await taskRow(claimedNow)).toBeUndefined();
    expect(await attemptCount(claimedNow)).toBe(0);
    expect(await nodeStatuses(handle)).toEqual({
      running: 'RUNNING',
      claimed: 'READY',
      pending: 'READY',
      total: 'PENDING',
    });

    // The running task finishes while paused: its result is kept, and nothing new is enqueued.
    gate('pause-1').open();
    await eventually(async () => (await nodeStatuses(handle)).running === 'COMPLETED');
    expect(await handle.status()).toBe('PAUSED');
    expect(await nodeStatuses(handle)).toMatchObject({
      claimed: 'READY',
      pending: 'READY',
      total: 'PENDING',
    });

    expect(await handle.resume()).toEqual({ status: 'RUNNING', changed: [handle.id] });
    const held = createWorker(app, { concurrency: 2, pollIntervalMs: 100, queues: ['held'] });
    await held.start();
    try {
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 111 });
    } finally {
      await held.stop();
    }
    const after = await handle.nodes();
    expect(after.map((n) => [n.id, n.status])).toEqual([
      ['running', 'COMPLETED'],
      ['claimed', 'COMPLETED'],
      ['pending', 'COMPLETED'],
      ['total', 'COMPLETED'],
    ]);
    for (const node of after) expect(runs.get(node.taskId!)).toBe(1);
    expect(await unlinkedTasks([handle.id])).toEqual([]);
    // The handler was told its workflow and node.
    const claimedNode = after.find((n) => n.id === 'claimed')!;
    expect(seen.find((s) => s.taskId === claimedNode.taskId)?.workflow).toEqual({
      id: handle.id,
      nodeId: 'claimed',
      nodeIndex: 1,
    });
    expect((await app.getTask(claimedNode.taskId!))?.workflow).toEqual({
      id: handle.id,
      nodeId: 'claimed',
      nodeIndex: 1,
    });
  });

  it('holds a retry while paused (no claim takes it) and runs it on resume', async () => {
    const wf = workflow(app, 'pause-retry');
    const retried = wf.node(flaky, { input: { n: 7 } });
    const handle = await wf.build({ output: retried }).start();
    const [node] = await handle.nodes();
    await eventually(async () => (await taskRow(node!.taskId!))?.attempt === 1 && flakyFailures > 0);
    await eventually(async () => (await taskRow(node!.taskId!))?.status === 'PENDING');
    await handle.pause();
    // Due now, but the workflow is paused: no claim takes it.
    await t.query('UPDATE {{schema}}.horsies_tasks SET enqueued_at = now() WHERE id = $1', [node!.taskId]);
    const claims = await app.db.run(TaskClaim, {
      queue: 'work',
      taskNames: ['flaky'],
      limit: 10,
      leaseMs: 30_000,
      worker: fakeWorker,
    });
    expect(claims).toEqual([]);
    expect(await taskRow(node!.taskId!)).toMatchObject({ status: 'PENDING', attempt: 1 });
    await handle.resume();
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 7 });
    expect(await attemptCount(node!.taskId!)).toBe(2);
  });

  it('onError pause takes the same path: tasks not started are given back; resume leaves the failure as it is', async () => {
    const wf = workflow(app, 'on-error-pause', { onError: 'pause' });
    brokenUntil = Number.MAX_SAFE_INTEGER;
    const bad = wf.node(broken, { id: 'bad', input: { n: 1 } });
    const other = wf.node(value, { id: 'other', input: { n: 2 } });
    wf.node(sum, { id: 'after-bad', input: { values: [bad.result] } });
    wf.node(sum, { id: 'after-other', input: { values: [other.result] } });
    const handle = await wf.build().start();
    await eventually(async () => (await handle.status()) === 'PAUSED');
    expect(await nodeStatuses(handle)).toEqual({
      bad: 'FAILED',
      other: 'READY',
      'after-bad': 'PENDING',
      'after-other': 'PENDING',
    });
    expect(await unlinkedTasks([handle.id])).toEqual([]);
    await handle.resume();
    const held = createWorker(app, { concurrency: 2, pollIntervalMs: 100, queues: ['held'] });
    await held.start();
    try {
      const result = await handle.result({ timeoutMs: 10_000 });
      expect(result).toMatchObject({ ok: false, error: { code: 'WORKFLOW_FAILED' } });
    } finally {
      await held.stop();
    }
    expect(await nodeStatuses(handle)).toEqual({
      bad: 'FAILED',
      other: 'COMPLETED',
      'after-bad': 'SKIPPED',
      'after-other': 'COMPLETED',
    });

    // retry-failed runs the failed node and what was skipped after it; completed nodes keep their results.
    brokenUntil = 0;
    expect(await handle.retryFailed()).toMatchObject({ status: 'RUNNING', reopened: 2 });
    expect(await handle.result({ timeoutMs: 10_000 })).toMatchObject({
      ok: true,
      value: { 'after-bad': { ok: true, value: 1 }, 'after-other': { ok: true, value: 2 } },
    });
  });

  it('pause and resume do nothing to a workflow that is not running or paused, and report no workflow for an unknown id', async () => {
    const wf = workflow(app, 'control-noop');
    wf.node(sum, { input: { values: [1] } });
    const handle = await wf.build().start();
    await handle.result({ timeoutMs: 10_000 });
    expect(await handle.pause()).toEqual({ status: 'COMPLETED', changed: [] });
    expect(await handle.resume()).toEqual({ status: 'COMPLETED', changed: [] });
    expect(await handle.cancel()).toMatchObject({ status: 'COMPLETED', changed: [] });
    expect(await handle.retryFailed()).toMatchObject({ status: 'COMPLETED', changed: [] });
    const missing = app.getWorkflow('no-such-workflow');
    expect(await missing.pause()).toEqual({ status: null, changed: [] });
    expect(await missing.info()).toBeNull();
  });
});

describe('durability', () => {
  // Control operations, starts and recovery step with the default: their commit waits for the WAL flush, since a
  // caller acts on what they return. Only the worker's step after written outcomes opts out (recovery redoes it).
  it('a step waits for the disk unless asked not to', async () => {
    const wf = workflow(app, 'control-durable');
    wf.node(value, { input: { n: 1 } });
    const handle = await wf.build().start();
    const commitSetting = (options: { waitForFlush?: boolean }) =>
      app.db.transaction(async (tx) => {
        await step(app.db, tx, handle.id, { nodes: [], ...options });
        const [row] = (
          await tx.query<{ s: string }>('SELECT current_setting($1) AS s', ['synchronous_commit'])
        ).rows;
        return row!.s;
      });
    try {
      expect(await commitSetting({})).toBe('on');
      expect(await commitSetting({ waitForFlush: true })).toBe('on');
      expect(await commitSetting({ waitForFlush: false })).toBe('off');
    } finally {
      // Its task waits in the queue the next tests claim from by hand.
      await handle.cancel();
    }
  });
});

describe('cancel', () => {
  it('cascades through two levels of subworkflows: tasks not started cancelled, running ones stopped, nodes skipped', async () => {
    const inner = workflow(app, 'cancel-inner', { params: z.object({ key: z.string() }) });
    const innerRun = inner.node(waitFor, { id: 'inner-run', input: { key: inner.params.key, value: 3 } });
    const innerHeld = inner.node(value, { id: 'inner-held', input: { n: 4 } });
    inner.node(sum, { id: 'inner-sum', input: { values: [innerRun.result, innerHeld.result] } });
    const innerDef = inner.build();

    const middle = workflow(app, 'cancel-middle', { params: z.object({ key: z.string() }) });
    const nested = middle.node(innerDef, { id: 'inner', input: { key: middle.params.key } });
    middle.node(value, { id: 'middle-held', input: { n: 5 } });
    middle.node(sum, { id: 'middle-after', input: { values: [] }, waitsFor: [nested] });
    const middleDef = middle.build();

    const outer = workflow(app, 'cancel-outer');
    const mid = outer.node(middleDef, { id: 'middle', input: { key: 'cancel-cascade' } });
    outer.node(sum, { id: 'outer-after', input: { values: [] }, waitsFor: [mid] });
    const handle = await outer.build().start();

    const [middleRun] = await app.listWorkflows({ name: 'cancel-middle', limit: 1 });
    const [innerInfo] = await app.listWorkflows({ name: 'cancel-inner', limit: 1 });
    expect(middleRun).toMatchObject({ parentId: handle.id, rootId: handle.id, depth: 1 });
    expect(innerInfo).toMatchObject({ parentId: middleRun!.id, rootId: handle.id, depth: 2 });
    const innerHandle = app.getWorkflow(innerInfo!.id);
    const runningTask = (await innerHandle.nodes()).find((n) => n.id === 'inner-run')!.taskId!;
    await eventually(async () => (await taskRow(runningTask))?.status === 'RUNNING');

    const cancelled = await handle.cancel();
    expect(cancelled).toMatchObject({ status: 'CANCELLED', tasksCancelled: 2, tasksStopping: 1 });
    expect(new Set(cancelled.changed)).toEqual(new Set([handle.id, middleRun!.id, innerInfo!.id]));
    expect(await handle.result({ timeoutMs: 1_000 })).toMatchObject({
      ok: false,
      error: { code: 'WORKFLOW_CANCELLED' },
    });
    // The running task got its AbortSignal and still returned a value: its node keeps the result.
    await eventually(async () => (await nodeStatuses(innerHandle))['inner-run'] === 'COMPLETED');
    expect(aborted.has(runningTask)).toBe(true);
    expect(await innerHandle.resultFor('inner-run')).toEqual({ ok: true, value: 3 });
    expect(await nodeStatuses(innerHandle)).toEqual({
      'inner-run': 'COMPLETED',
      'inner-held': 'SKIPPED',
      'inner-sum': 'SKIPPED',
    });
    expect(await nodeStatuses(app.getWorkflow(middleRun!.id))).toEqual({
      inner: 'SKIPPED',
      'middle-held': 'SKIPPED',
      'middle-after': 'SKIPPED',
    });
    expect(await nodeStatuses(handle)).toEqual({ middle: 'SKIPPED', 'outer-after': 'SKIPPED' });
    for (const w of [handle, app.getWorkflow(middleRun!.id), innerHandle]) {
      expect(await w.status()).toBe('CANCELLED');
      const info = (await w.info())!;
      expect(info.nodesTerminal).toBe(info.nodesTotal);
    }
    const open = await t.query(
      `SELECT id FROM {{schema}}.horsies_tasks
       WHERE workflow_id = ANY ($1) AND status IN ('PENDING', 'CLAIMED', 'RUNNING')`,
      [[handle.id, middleRun!.id, innerInfo!.id]],
    );
    expect(open).toEqual([]);
    expect(await unlinkedTasks([handle.id, middleRun!.id, innerInfo!.id])).toEqual([]);
  });

  it('a run that returns after the cancel keeps its result on its node', async () => {
    const wf = workflow(app, 'cancel-late-return');
    const late = wf.node(value, { id: 'late', input: { n: 9 } });
    wf.node(sum, { id: 'after', input: { values: [late.result] } });
    const handle = await wf.build().start();
    // Another worker runs `late` (claimed and started by hand), so nothing here stops it.
    const [claim] = await app.db.run(TaskClaim, {
      queue: 'held',
      taskNames: ['value'],
      limit: 1,
      leaseMs: 30_000,
      worker: fakeWorker,
    });
    await app.db.run(TaskStartMany, {
      workerId: fakeWorker.workerId,
      tasks: [{ id: claim!.id, token: claim!.claim_token, workflow: true }],
    });
    expect(await handle.cancel()).toMatchObject({ status: 'CANCELLED', tasksCancelled: 0, tasksStopping: 1 });
    expect(await nodeStatuses(handle)).toEqual({ late: 'RUNNING', after: 'SKIPPED' });
    const [written] = await app.db.run(TaskFinishMany, {
      tasks: [
        {
          id: claim!.id,
          workerId: fakeWorker.workerId,
          token: claim!.claim_token,
          status: 'COMPLETED',
          result: JSON.stringify({ ok: 9 }),
          errorCode: null,
          errorMessage: null,
          failedReason: null,
          retryDelayMs: 0,
          crashed: false,
        },
      ],
    });
    expect(written).toMatchObject({ status: 'COMPLETED', workflow_id: handle.id });
    expect(await stepWorkflow(app.db, handle.id, { nodes: [0] })).toMatchObject({
      settled: 1,
      status: 'CANCELLED',
    });
    expect(await nodeStatuses(handle)).toEqual({ late: 'COMPLETED', after: 'SKIPPED' });
    expect(await handle.resultFor(late)).toEqual({ ok: true, value: 9 });
    expect(await handle.status()).toBe('CANCELLED');
    expect((await handle.info())!.nodesTerminal).toBe(2);
  });

  it('races a stream of completions on one workflow for 100 rounds: no deadlock, a consistent end', async () => {
    const wide = workflow(app, 'cancel-race');
    const parts = Array.from({ length: 12 }, (_, i) => wide.node(sum, { input: { values: [i] } }));
    wide.node(sum, { id: 'join', input: { values: parts.map((p) => p.result) } });
    const def = wide.build();
    const outcomes = new Map<string, number>();
    // Counted from before each start: a loaded machine may run a root task before start() has returned here.
    const finishedBy = new Map<string, number>();
    let onProgress: (() => void) | null = null;
    const count = (rows: { workflow_id: string | null }[]) => {
      for (const { workflow_id: id } of rows) if (id) finishedBy.set(id, (finishedBy.get(id) ?? 0) + 1);
      onProgress?.();
    };
    worker.on('task:finished', count);
    try {
      for (let round = 0; round < 100; round += 1) {
        const handle = await def.start();
        // Cancel after a varying number of this workflow's tasks have finished (0 to 12).
        const wanted = round % 13;
        if (wanted > 0) {
          await new Promise<void>((resolve) => {
            onProgress = () => {
              if ((finishedBy.get(handle.id) ?? 0) < wanted) return;
              onProgress = null;
              resolve();
            };
            onProgress();
          });
        }
        const result = await handle.cancel();
        outcomes.set(result.status!, (outcomes.get(result.status!) ?? 0) + 1);
        await eventually(async () => {
          const info = (await handle.info())!;
          return info.nodesTerminal === info.nodesTotal;
        });
        const rows = await t.query<{ node: string; task: string | null }>(
          `SELECT n.status AS node, t.status AS task FROM {{schema}}.horsies_workflow_tasks n
           LEFT JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id WHERE n.workflow_id = $1`,
          [handle.id],
        );
        for (const { node, task } of rows) {
          // A node's end agrees with its task's: completed with completed, skipped with cancelled or none.
          if (node === 'COMPLETED') expect(task).toBe('COMPLETED');
          else expect([node, task === null || task === 'CANCELLED']).toEqual(['SKIPPED', true]);
        }
        expect(await unlinkedTasks([handle.id])).toEqual([]);
      }
    } finally {
      worker.off('task:finished', count);
    }
    expect(outcomes.get('CANCELLED')).toBeGreaterThan(0);
  }, 120_000);
});
