/**
 * Workflows end to end against a real PostgreSQL and a real worker: joins, skips, failed dependencies, success
 * policies, results, onError, retries inside a node, idempotent and transactional starts, and the definition's
 * validation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../src/client/App.js';
import {
  InputValidationError,
  TaskError,
  WorkflowDefinitionError,
  WorkflowMismatchError,
} from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { rejection, thrown } from '../support/assertions.js';
import { databaseUrl, testLogger, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app();

const double = app.task({
  name: 'double',
  input: z.object({ n: z.number() }),
  handler: ({ n }) => n * 2,
});
const add = app.task({
  name: 'add',
  input: z.object({ values: z.array(z.number()) }),
  handler: ({ values }) => values.reduce((a, b) => a + b, 0),
});
const fail = app.task({
  name: 'fail',
  input: z.object({ code: z.string() }),
  handler: ({ code }): number => {
    throw new TaskError(code, `failed with ${code}`);
  },
});
const collect = app.task({
  name: 'collect',
  input: z.object({ outcomes: z.array(z.unknown()) }),
  handler: ({ outcomes }) => outcomes,
});
let flakyRuns = 0;
const flaky = app.task({
  name: 'flaky',
  input: z.object({ n: z.number() }),
  retry: { maxRetries: 2, retryOn: ['FLAKY'], backoff: 'constant', baseDelayMs: 0 },
  handler: ({ n }, ctx) => {
    flakyRuns += 1;
    if (ctx.attempt === 1) throw new TaskError('FLAKY', 'first attempt fails');
    return n + 100;
  },
});

const worker = createWorker(app, { concurrency: 8, pollIntervalMs: 200 });
beforeAll(() => worker.start());
afterAll(() => worker.stop());

async function statuses(handle: { nodes(): Promise<{ id: string; status: string }[]> }) {
  return Object.fromEntries((await handle.nodes()).map((n) => [n.id, n.status]));
}

describe('joins', () => {
  it('all: a failure skips its dependents and theirs; the workflow fails naming the node', async () => {
    const wf = workflow(app, 'all-skips');
    const a = wf.node(double, { input: { n: 1 } });
    const bad = wf.node(fail, { input: { code: 'BROKEN' } });
    const joined = wf.node(add, { input: { values: [a.result] }, waitsFor: [a, bad] });
    const after = wf.node(double, { input: { n: joined.result } });
    const side = wf.node(double, { input: { n: a.result } });
    const handle = await wf.build({ output: after }).start();
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.error.code).toBe('WORKFLOW_FAILED');
      expect(result.error.data).toMatchObject({ node: 'fail', error: { code: 'BROKEN' } });
    }
    expect(await statuses(handle)).toEqual({
      double: 'COMPLETED',
      fail: 'FAILED',
      add: 'SKIPPED',
      'double#2': 'SKIPPED',
      'double#3': 'COMPLETED',
    });
    expect(await handle.resultFor(after)).toMatchObject({ ok: false, error: { code: 'UPSTREAM_SKIPPED' } });
    expect(await handle.resultFor(side)).toEqual({ ok: true, value: 4 });
    expect(await handle.status()).toBe('FAILED');
  });

  it('any: ready at the first completed dependency; skipped when none completes', async () => {
    const wf = workflow(app, 'any');
    const bad = wf.node(fail, { input: { code: 'NOPE' } });
    const good = wf.node(double, { input: { n: 5 } });
    const first = wf.node(collect, { input: { outcomes: [bad.outcome, good.outcome] }, join: 'any' });
    const bad2 = wf.node(fail, { input: { code: 'NOPE' } });
    const none = wf.node(collect, { input: { outcomes: [bad.outcome, bad2.outcome] }, join: 'any' });
    const handle = await wf.build().start();
    await handle.result({ timeoutMs: 10_000 });
    const firstResult = await handle.resultFor(first);
    expect(firstResult.ok).toBe(true);
    // `good` completed before `first` was enqueued; `bad` may or may not have ended by then.
    expect((firstResult as { value: unknown[] }).value[1]).toEqual({ ok: true, value: 10 });
    expect(await handle.resultFor(none)).toMatchObject({ ok: false, error: { code: 'UPSTREAM_SKIPPED' } });
  });

  it('quorum: ready at n completions; skipped once n cannot be reached', async () => {
    const wf = workflow(app, 'quorum');
    const ones = [1, 2, 3].map((n) => wf.node(double, { input: { n } }));
    const reached = wf.node(collect, {
      input: { outcomes: ones.map((o) => o.outcome) },
      join: { quorum: 2 },
    });
    const bads = [1, 2].map(() => wf.node(fail, { input: { code: 'NO' } }));
    const unreachable = wf.node(collect, {
      input: { outcomes: [...bads, ones[0]!].map((o) => o.outcome) },
      join: { quorum: 2 },
    });
    const handle = await wf.build().start();
    await handle.result({ timeoutMs: 10_000 });
    const got = await handle.resultFor(reached);
    expect(got.ok).toBe(true);
    const completed = (got as { value: { ok: boolean }[] }).value.filter((o) => o.ok);
    expect(completed.length).toBeGreaterThanOrEqual(2);
    expect(await handle.resultFor(unreachable)).toMatchObject({
      ok: false,
      error: { code: 'UPSTREAM_SKIPPED' },
    });
  });

  it('allowFailedDeps: the consumer runs and gets each outcome, UPSTREAM_SKIPPED for a skipped one', async () => {
    const wf = workflow(app, 'lenient');
    const ok = wf.node(double, { input: { n: 2 } });
    const bad = wf.node(fail, { input: { code: 'BAD' } });
    const skipped = wf.node(double, { input: { n: 0 }, waitsFor: [bad] });
    const report = wf.node(collect, {
      input: { outcomes: [ok.outcome, bad.outcome, skipped.outcome] },
      allowFailedDeps: true,
    });
    const handle = await wf.build({ output: report }).start();
    const result = await handle.result({ timeoutMs: 10_000 });
    // The failed node still fails the workflow (no success policy), but the consumer ran.
    expect(result).toMatchObject({ ok: false, error: { code: 'WORKFLOW_FAILED', data: { node: 'fail' } } });
    expect(await handle.resultFor(report)).toEqual({
      ok: true,
      value: [
        { ok: true, value: 4 },
        { ok: false, error: { code: 'BAD', message: 'failed with BAD' } },
        { ok: false, error: expect.objectContaining({ code: 'UPSTREAM_SKIPPED' }) },
      ],
    });
  });
});

describe('results and success', () => {
  it('without an output node, the result maps each terminal node to its outcome', async () => {
    const wf = workflow(app, 'terminal-map');
    const a = wf.node(double, { input: { n: 1 } });
    wf.node(double, { input: { n: a.result }, id: 'b' });
    wf.node(add, { input: { values: [a.result, 10] }, id: 'c' });
    const result = await (await wf.build().start()).result({ timeoutMs: 10_000 });
    expect(result).toEqual({ ok: true, value: { b: { ok: true, value: 4 }, c: { ok: true, value: 12 } } });
  });

  it('a success policy: one case met is success; optional nodes never fail it', async () => {
    const wf = workflow(app, 'policy');
    const primary = wf.node(fail, { input: { code: 'DOWN' }, id: 'primary' });
    const fallback = wf.node(double, { input: { n: 21 }, id: 'fallback' });
    const extra = wf.node(fail, { input: { code: 'MEH' }, id: 'extra' });
    const handle = await wf
      .build({ output: fallback, successPolicy: { cases: [[primary], [fallback]], optional: [extra] } })
      .start();
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 42 });
    expect(await handle.status()).toBe('COMPLETED');
  });

  it('a success policy not met: the first required failure, or WORKFLOW_SUCCESS_CASE_NOT_MET', async () => {
    const wf = workflow(app, 'policy-failed');
    const a = wf.node(fail, { input: { code: 'A_DOWN' }, id: 'a' });
    const b = wf.node(double, { input: { n: 1 }, id: 'b' });
    const c = wf.node(double, { input: { n: a.result }, id: 'c' });
    const handle = await wf.build({ successPolicy: { cases: [[a, b]], optional: [a] } }).start();
    expect(await handle.result({ timeoutMs: 10_000 })).toMatchObject({
      ok: false,
      error: { code: 'WORKFLOW_SUCCESS_CASE_NOT_MET' },
    });
    void c;
    const wf2 = workflow(app, 'policy-failed-required');
    const x = wf2.node(fail, { input: { code: 'X_DOWN' }, id: 'x' });
    const y = wf2.node(double, { input: { n: 1 }, id: 'y' });
    const handle2 = await wf2.build({ successPolicy: { cases: [[x, y]] } }).start();
    expect(await handle2.result({ timeoutMs: 10_000 })).toMatchObject({
      ok: false,
      error: { code: 'WORKFLOW_FAILED', data: { node: 'x', error: { code: 'X_DOWN' } } },
    });
  });

  it('retries a node inside it before the node fails or completes', async () => {
    const wf = workflow(app, 'retried');
    const f = wf.node(flaky, { input: { n: 1 } });
    const after = wf.node(double, { input: { n: f.result } });
    const before = flakyRuns;
    const handle = await wf.build({ output: after }).start();
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 202 });
    expect(flakyRuns - before).toBe(2);
    const [node] = await handle.nodes();
    expect(await app.getTask(node!.taskId!)).toMatchObject({ attemptCount: 2, retryCount: 1 });
  });

  it('a node can override its retry policy', async () => {
    const wf = workflow(app, 'no-retry');
    const f = wf.node(flaky, { input: { n: 1 }, retry: { maxRetries: 0 } });
    const handle = await wf.build({ output: f }).start();
    expect(await handle.result({ timeoutMs: 10_000 })).toMatchObject({
      ok: false,
      error: { code: 'WORKFLOW_FAILED', data: { error: { code: 'FLAKY' } } },
    });
  });

  it("a node's override gives retries to a task that has none, and the worker follows it", async () => {
    let runs = 0;
    const once = app.task({
      name: 'fails-once',
      input: z.object({ n: z.number() }),
      handler: ({ n }, ctx) => {
        runs += 1;
        if (ctx.attempt === 1) throw new TaskError('UPSTREAM_DOWN', 'first attempt fails');
        return n;
      },
    });
    const wf = workflow(app, 'retry-added');
    const f = wf.node(once, {
      input: { n: 5 },
      retry: { maxRetries: 2, retryOn: ['UPSTREAM_DOWN'], backoff: 'constant', baseDelayMs: 0 },
    });
    const handle = await wf.build({ output: f }).start();
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 5 });
    expect(runs).toBe(2);
  });
});

describe('onError', () => {
  it('fail (default): the other branches run on; the workflow fails at its end', async () => {
    const wf = workflow(app, 'fail-goes-on');
    wf.node(fail, { input: { code: 'EARLY' } });
    const a = wf.node(double, { input: { n: 1 } });
    const b = wf.node(double, { input: { n: a.result } });
    const handle = await wf.build().start();
    expect((await handle.result({ timeoutMs: 10_000 })).ok).toBe(false);
    expect(await handle.resultFor(b)).toEqual({ ok: true, value: 4 });
  });

  it('pause: the workflow pauses at the failure and enqueues nothing more', async () => {
    const wf = workflow(app, 'pause-on-error', { onError: 'pause' });
    const bad = wf.node(fail, { input: { code: 'STOP' } });
    const later = wf.node(double, { input: { n: 1 }, waitsFor: [bad], allowFailedDeps: true });
    const handle = await wf.build().start();
    expect(await handle.result({ timeoutMs: 1_000 })).toMatchObject({
      ok: false,
      error: { code: 'WAIT_TIMEOUT' },
    });
    await expect.poll(() => handle.status()).toBe('PAUSED');
    expect(await statuses(handle)).toEqual({ fail: 'FAILED', double: 'PENDING' });
    const [row] = await t.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE workflow_id = $1',
      [handle.id],
    );
    expect(row!.n).toBe(1);
    void later;
  });
});

describe('start', () => {
  const wf = workflow(app, 'idempotent', { params: z.object({ n: z.number() }) });
  const d = wf.node(double, { input: { n: wf.params.n } });
  const def = wf.build({ output: d });

  it('with an explicit id is idempotent: the same start returns the first run', async () => {
    const first = await def.start({ n: 4 }, { id: 'wf-idem-1' });
    const second = await def.start({ n: 4 }, { id: 'wf-idem-1' });
    expect(second.id).toBe(first.id);
    expect(await second.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 8 });
    const [row] = await t.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE workflow_id = 'wf-idem-1'",
    );
    expect(row!.n).toBe(1);
    const mismatch = await rejection(def.start({ n: 5 }, { id: 'wf-idem-1' }), WorkflowMismatchError);
    expect(mismatch.workflowId).toBe('wf-idem-1');
  });

  it("inside the caller's transaction: a rollback leaves nothing behind", async () => {
    const client = await t.pool.connect();
    const id = await (async () => {
      try {
        await client.query('BEGIN');
        return (await def.start({ n: 1 }, { tx: client })).id;
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    })();
    const rows = await t.query(
      `SELECT 'w' FROM {{schema}}.horsies_workflows WHERE id = $1
       UNION ALL SELECT 'n' FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1
       UNION ALL SELECT 't' FROM {{schema}}.horsies_tasks WHERE workflow_id = $1`,
      [id],
    );
    expect(rows).toEqual([]);
    expect(await def.handle(id).result({ timeoutMs: 2_000 })).toMatchObject({
      ok: false,
      error: { code: 'WORKFLOW_NOT_FOUND' },
    });
  });

  it("inside the caller's transaction: leaves that transaction's commit durable", async () => {
    // A start returns a handle the caller relies on: its commit must wait for the disk like the caller's own writes
    // (a step that follows a task's outcome may skip the wait; a start may not).
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      await def.start({ n: 2 }, { tx: client });
      const { rows } = await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
      expect(rows[0]!.synchronous_commit).toBe('on');
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('checks its parameters before storing anything', async () => {
    const error = await rejection(def.start({ n: 'four' } as unknown as { n: number }), InputValidationError);
    expect(error.issues).toEqual([expect.objectContaining({ path: ['n'] })]);
    // Named as what it is: a workflow's parameters, not the input of a task.
    expect(error).toMatchObject({ subject: 'workflow', taskName: def.name });
    expect(error.message).toMatch(
      new RegExp(`^parameters of workflow "${def.name}" failed validation:\\n  - n: `),
    );
    const rows = await t.query("SELECT 1 FROM {{schema}}.horsies_workflows WHERE params ->> 'n' = 'four'");
    expect(rows).toEqual([]);
  });
});

describe('definition', () => {
  it('reports every problem at once', () => {
    const other = createApp({ databaseUrl: databaseUrl(), schema: t.schema, logger: testLogger });
    const foreign = other.task({ name: 'foreign', input: z.object({}), handler: () => 1 });
    const wf = workflow(app, 'broken');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    wf.node(double, { input: { n: 2 }, id: 'a' });
    const b = wf.node(double, { input: { n: a.result }, waitsFor: ['c'], id: 'b' });
    wf.node(double, { input: { n: b.result }, id: 'c' });
    wf.node(double, { input: { n: 1 }, waitsFor: ['nowhere'], id: 'd' });
    wf.node(collect, { input: { outcomes: [a.result] }, join: { quorum: 3 }, id: 'e' });
    wf.node(add, { input: { values: [1n as unknown as number] }, id: 'f' });
    wf.node(foreign, { input: {}, id: 'g' });
    wf.node(double, { input: { n: 1 }, queue: 'nope', id: 'h' });
    const error = thrown(() => wf.build(), WorkflowDefinitionError);
    const fields = error.problems.map((p) => `${p.field}: ${p.message}`);
    expect(fields).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^nodes\.a\.id: is used by two nodes/),
        expect.stringMatching(/^nodes\.b\.input: reads from a node that is not in waitsFor/),
        expect.stringMatching(/^nodes\.d\.waitsFor: is not a node of this workflow/),
        expect.stringMatching(/^nodes\.e\.join\.quorum: must be an integer from 1 to its 1 dependencies/),
        expect.stringMatching(/^nodes\.e\.input: may run without every dependency completed/),
        expect.stringMatching(/^nodes\.f\.input: static input cannot be stored as JSON/),
        expect.stringMatching(/^nodes\.g\.task: is not a task of this workflow's app/),
        expect.stringMatching(/^nodes\.h\.queue: is not one of the app's queues/),
        expect.stringMatching(/^nodes: form a cycle/),
      ]),
    );
    void other.close();
  });

  it('refuses a workflow with no root and one with nodes of another workflow', () => {
    const wf = workflow(app, 'rootless');
    wf.node(double, { input: { n: 1 }, waitsFor: ['y'], id: 'x' });
    wf.node(double, { input: { n: 1 }, waitsFor: ['x'], id: 'y' });
    thrown(() => wf.build(), WorkflowDefinitionError);
    const one = workflow(app, 'one');
    const stranger = one.node(double, { input: { n: 1 } });
    const two = workflow(app, 'two');
    two.node(double, { input: { n: stranger.result } });
    const error = thrown(() => two.build(), WorkflowDefinitionError);
    expect(error.problems.map((p) => p.message)).toContain('reads from a node of another workflow');
  });
});
