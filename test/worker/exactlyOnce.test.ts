/**
 * The transactional finish (`ctx.transaction`): a handler's writes and its task's completion commit together or
 * not at all. Covered: the commit with a send inside; a TaskError or a throw rolling back; a claim lost in the
 * middle of the callback (caught by the fence, or by the heartbeats' abort), after which the task runs again and
 * completes once; a timeout, a cancel (heard by the worker, or only by the fence) and a shutdown ending the
 * transaction; heartbeats going on while it runs; a pool the handler names; blocking tasks and a second call refused;
 * the workflow step following the commit.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ManualClock } from '../../src/clock.js';
import { TaskError, TaskTransactionError } from '../../src/errors.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { createWorker } from '../../src/worker/Worker.js';
import { eventually, trackStarts, useTestSchema, waitForEvent } from '../support/db.js';
import { requestCancelSilently } from '../support/factories.js';
import { fixtureModule, importFixture } from '../support/fixtures.js';
import { gate } from '../support/gate.js';

const t = await useTestSchema();
await t.query(
  'CREATE TABLE {{schema}}.effects (task_id text NOT NULL, note text, attempt int, worker_pid int)',
);
// The fixture module is imported again by the blocking task's thread, with the environment as it is then.
const fixture = await importFixture(
  { schema: t.schema, keep: true },
  () => import('../fixtures/exactlyOnceApp.js'),
);
afterAll(() => fixture.app.close());
// One row per key: a second writer of the same key waits for the first transaction to end.
await t.query('CREATE TABLE {{schema}}.keyed (key text PRIMARY KEY)');

const effects = async (taskId: string): Promise<string[]> =>
  (
    await t.query<{ note: string }>('SELECT note FROM {{schema}}.effects WHERE task_id = $1 ORDER BY note', [
      taskId,
    ])
  ).map((r) => r.note);
const attempts = async (taskId: string): Promise<[number, string, string | null][]> =>
  (
    await t.query<{ attempt: number; outcome: string; error_code: string | null }>(
      'SELECT attempt, outcome, error_code FROM {{schema}}.horsies_task_attempts WHERE task_id = $1 ORDER BY attempt',
      [taskId],
    )
  ).map((r) => [r.attempt, r.outcome, r.error_code]);
const insertEffect = `INSERT INTO "${t.schema}".effects (task_id, note) VALUES ($1, $2)`;

/** Inserts `key` from a connection of the test's own, failing (55P03) if a transaction still holds it. */
async function insertKeyNow(key: string): Promise<void> {
  const client = await t.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query("SET LOCAL lock_timeout = '3s'");
    await client.query(`INSERT INTO "${t.schema}".keyed (key) VALUES ($1)`, [key]);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

/** A promise with its resolve function, for handlers the test holds in place. */

describe('the transactional finish', () => {
  it('commits the handler writes, a send with tx and the completion together', async () => {
    const app = t.app();
    const child = app.task({
      name: 'tx.child',
      input: z.object({ from: z.string() }),
      handler: () => 'child',
    });
    const work = app.task({
      name: 'tx.commit',
      input: z.object({ n: z.number() }),
      handler: ({ n }, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insertEffect, [ctx.taskId, 'written']);
          const sent = await child.send({ from: ctx.taskId }, { tx });
          return { doubled: n * 2, child: sent.id };
        }),
    });
    const worker = createWorker(app, { maintenance: false });
    const finished = waitForEvent(worker, 'task:finished', (rows) => rows.length > 0);
    await worker.start();
    const handle = await work.send({ n: 21 });
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok).toBe(true);
    const value = (result as { ok: true; value: { doubled: number; child: string } }).value;
    expect(value.doubled).toBe(42);
    expect(await effects(handle.id)).toEqual(['written']);
    expect(await attempts(handle.id)).toEqual([[1, 'COMPLETED', null]]);
    // The task sent inside the transaction exists and ran.
    expect(await child.handle(value.child).result({ timeoutMs: 10_000 })).toEqual({
      ok: true,
      value: 'child',
    });
    // The worker reports the committed outcome like any written one.
    const [rows, lost] = await finished;
    expect(rows.find((r: { id: string }) => r.id === handle.id)).toMatchObject({ status: 'COMPLETED' });
    expect(lost).toEqual([]);
    await worker.stop();
  });

  it('runs at the isolation level the callback sets first', async () => {
    const app = t.app();
    const work = app.task({
      name: 'tx.serializable',
      input: z.object({}),
      handler: (_input, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE');
          await tx.query(insertEffect, [ctx.taskId, 'serializable']);
          const { rows } = await tx.query<{ level: string }>('SELECT current_setting($1) AS level', [
            'transaction_isolation',
          ]);
          return rows[0]!.level;
        }),
    });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    const handle = await work.send({});
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'serializable' });
    expect(await effects(handle.id)).toEqual(['serializable']);
    await worker.stop();
  });

  it('rolls back on a returned TaskError, records the failure, and commits once on the retry', async () => {
    const app = t.app();
    // Its rows show which sends survived.
    const followUp = app.task({
      name: 'tx.followUp',
      input: z.object({ attempt: z.number() }),
      handler: () => 0,
    });
    const work = app.task({
      name: 'tx.flaky',
      input: z.object({}),
      retry: { maxRetries: 2, retryOn: ['FLAKY'], baseDelayMs: 0 },
      handler: (_input, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insertEffect, [ctx.taskId, `attempt ${ctx.attempt}`]);
          await followUp.send({ attempt: ctx.attempt }, { tx });
          return ctx.attempt === 1 ? new TaskError('FLAKY', 'first attempt fails') : 'second';
        }),
    });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    const handle = await work.send({});
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'second' });
    expect(await effects(handle.id)).toEqual(['attempt 2']);
    // The send of the rolled-back attempt is gone with it.
    const sent = await t.query<{ kwargs: { attempt: number } }>(
      "SELECT kwargs FROM {{schema}}.horsies_tasks WHERE task_name = 'tx.followUp'",
    );
    expect(sent.map((r) => r.kwargs.attempt)).toEqual([2]);
    expect(await attempts(handle.id)).toEqual([
      [1, 'FAILED', 'FLAKY'],
      [2, 'COMPLETED', null],
    ]);
    await worker.stop();
  });

  it('rolls back on a throw (mapped as usual) and on a result JSON cannot carry', async () => {
    class Boom extends Error {}
    const app = t.app();
    const thrower = app.task({
      name: 'tx.throws',
      input: z.object({}),
      errorCodes: [[Boom, 'BOOM']],
      handler: (_input, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insertEffect, [ctx.taskId, 'doomed']);
          throw new Boom('no');
        }),
    });
    const unserializable = app.task({
      name: 'tx.bigint',
      input: z.object({}),
      handler: (_input, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insertEffect, [ctx.taskId, 'doomed']);
          return { big: 1n };
        }),
    });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    const [a, b] = [await thrower.send({}), await unserializable.send({})];
    const ra = await a.result({ timeoutMs: 10_000 });
    const rb = await b.result({ timeoutMs: 10_000 });
    expect(ra.ok ? null : ra.error.code).toBe('BOOM');
    expect(rb.ok ? null : rb.error.code).toBe('RESULT_NOT_SERIALIZABLE');
    expect(await effects(a.id)).toEqual([]);
    expect(await effects(b.id)).toEqual([]);
    expect(await attempts(a.id)).toEqual([[1, 'FAILED', 'BOOM']]);
    await worker.stop();
  });

  it('rolls back a claim lost in the middle of the callback; the task runs again and completes once', async () => {
    const app = t.app({
      // Heartbeats far apart: the worker does not notice the loss, so the fence at the commit is what catches it.
      recovery: { runnerHeartbeatIntervalMs: 60_000, runningStaleThresholdMs: 120_000 },
    });
    const clock = new ManualClock();
    const held = gate();
    const entered = gate();
    const seen: unknown[] = [];
    const work = app.task({
      name: 'tx.reaped',
      input: z.object({}),
      retry: { maxRetries: 3, retryOn: ['WORKER_CRASHED'], baseDelayMs: 0 },
      handler: async (_input, ctx) => {
        try {
          return await ctx.transaction(async (tx) => {
            await tx.query(insertEffect, [ctx.taskId, `attempt ${ctx.attempt}`]);
            if (ctx.attempt === 1) {
              entered.open();
              await held.wait;
            }
            return `attempt ${ctx.attempt}`;
          });
        } catch (error) {
          seen.push(error);
          throw error;
        }
      },
    });
    // One slot: the worker running the first attempt cannot take the task again while that run lingers.
    const first = createWorker(app, { maintenance: false, clock, concurrency: 1 });
    await first.start();
    const handle = await work.send({});
    await entered.wait;

    // The reaper, an hour ahead, finds the run stale: WORKER_CRASHED, back to PENDING for a retry, which another
    // worker runs to completion while the first run still sleeps inside its transaction.
    clock.advance(3_600_000);
    await first.runMaintenance();
    const second = createWorker(app, { maintenance: false });
    const started = trackStarts(second);
    await second.start();
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'attempt 2' });
    await started(handle.id);

    // The first run wakes and tries to commit: the fence finds the task gone, everything rolls back.
    const lost = waitForEvent(first, 'task:finished', (_rows, ids) => ids.includes(handle.id));
    held.open();
    await lost;
    expect(seen).toHaveLength(1);
    expect(seen[0]).toBeInstanceOf(TaskTransactionError);
    expect((seen[0] as TaskTransactionError).code).toBe('TASK_CLAIM_LOST');
    expect(await effects(handle.id)).toEqual(['attempt 2']);
    expect(await attempts(handle.id)).toEqual([
      [1, 'WORKER_FAILURE', 'WORKER_CRASHED'],
      [2, 'COMPLETED', null],
    ]);
    const [row] = await t.query<{ status: string; result: unknown }>(
      'SELECT status, result FROM {{schema}}.horsies_tasks WHERE id = $1',
      [handle.id],
    );
    expect(row).toEqual({ status: 'COMPLETED', result: { ok: 'attempt 2' } });
    await Promise.all([first.stop(), second.stop()]);
  });

  it('ends the transaction at once when the heartbeats find the claim lost', async () => {
    const app = t.app({ recovery: { runnerHeartbeatIntervalMs: 100, runningStaleThresholdMs: 1_000 } });
    const clock = new ManualClock();
    const held = gate();
    const entered = gate();
    const seen: unknown[] = [];
    const work = app.task({
      name: 'tx.lostByHeartbeat',
      input: z.object({}),
      // The retry waits until the first run has ended (this worker has one slot).
      retry: { maxRetries: 3, retryOn: ['WORKER_CRASHED'], backoff: 'constant', baseDelayMs: 2_000 },
      handler: async (_input, ctx) => {
        try {
          return await ctx.transaction(async (tx) => {
            await tx.query(`INSERT INTO "${t.schema}".keyed (key) VALUES ($1)`, [`hb-${ctx.attempt}`]);
            await tx.query(insertEffect, [ctx.taskId, `attempt ${ctx.attempt}`]);
            if (ctx.attempt === 1) {
              entered.open();
              await held.wait; // ignores its signal on purpose
            }
            return ctx.attempt;
          });
        } catch (error) {
          seen.push(error);
          throw error;
        }
      },
    });
    const worker = createWorker(app, {
      maintenance: false,
      clock,
      concurrency: 1,
      shutdown: { abortGraceMs: 10_000 },
    });
    await worker.start();
    const handle = await work.send({});
    await entered.wait;
    clock.advance(3_600_000);
    const lost = waitForEvent(worker, 'task:lost', (ids) => ids.includes(handle.id));
    await worker.runMaintenance();
    await lost;
    // The abort closed the transaction while the handler still waits: its row lock is gone.
    await insertKeyNow('hb-1');
    held.open();
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 2 });
    await eventually(async () => seen.length === 1);
    expect((seen[0] as TaskTransactionError).code).toBe('TRANSACTION_ABORTED');
    expect(await effects(handle.id)).toEqual(['attempt 2']);
    await worker.stop();
  });

  it('a timeout ends the transaction: rolled back, TASK_TIMEOUT', async () => {
    const app = t.app();
    const work = app.task({
      name: 'tx.timeout',
      input: z.object({}),
      timeoutMs: 300,
      handler: (_input, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(`INSERT INTO "${t.schema}".keyed (key) VALUES ('timeout')`);
          await tx.query(insertEffect, [ctx.taskId, 'late']);
          // A statement still running when the timeout fires is cancelled.
          await tx.query('SELECT pg_sleep(30)');
          return 'never';
        }),
    });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    const handle = await work.send({});
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('TASK_TIMEOUT');
    expect(await effects(handle.id)).toEqual([]);
    await insertKeyNow('timeout');
    await worker.stop();
  });

  it('a cancel rolls back: CANCELLED, nothing written, whether the signal or the fence sees it first', async () => {
    const app = t.app();
    const work = app.task({
      name: 'tx.cancelled',
      input: z.object({}),
      handler: (_input, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insertEffect, [ctx.taskId, 'cancelled']);
          // The cancel request commits on another connection just before this transaction's completion.
          await app.cancel(ctx.taskId);
          return 'done';
        }),
    });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    const handle = await work.send({});
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('TASK_CANCELLED');
    expect(await effects(handle.id)).toEqual([]);
    expect(await attempts(handle.id)).toEqual([[1, 'FAILED', 'TASK_CANCELLED']]);
    await worker.stop();
  });

  it('the fence refuses a completion over a cancel request the worker has not heard of', async () => {
    const app = t.app();
    const seen: unknown[] = [];
    const work = app.task({
      name: 'tx.cancelledUnheard',
      input: z.object({}),
      handler: async (_input, ctx) => {
        try {
          return await ctx.transaction(async (tx) => {
            await tx.query(insertEffect, [ctx.taskId, 'cancelled']);
            // A cancel request written without its notification (triggers off for this session), so the worker
            // learns of it only from the fence; its poll for cancel requests is a minute away.
            await requestCancelSilently(t, ctx.taskId);
            return 'done';
          });
        } catch (error) {
          seen.push(error);
          throw error;
        }
      },
    });
    const worker = createWorker(app, { maintenance: false, pollIntervalMs: 60_000 });
    await worker.start();
    const handle = await work.send({});
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('TASK_CANCELLED');
    expect((seen[0] as TaskTransactionError).code).toBe('TASK_CLAIM_LOST');
    expect(await effects(handle.id)).toEqual([]);
    expect(await attempts(handle.id)).toEqual([[1, 'FAILED', 'TASK_CANCELLED']]);
    await worker.stop();
  });

  it('heartbeats go on while transactions hold every handler, even with a small app pool', async () => {
    const recovery = {
      runnerHeartbeatIntervalMs: 100,
      runningStaleThresholdMs: 800,
      claimerHeartbeatIntervalMs: 100,
      claimedStaleThresholdMs: 800,
      checkIntervalMs: 200,
    };
    // The app's pool has fewer connections than the worker has handlers.
    const app = t.app({ poolSize: 2, recovery });
    const work = app.task({
      name: 'tx.long',
      input: z.object({ i: z.number() }),
      handler: ({ i }, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insertEffect, [ctx.taskId, 'long']);
          // Held open for twice the stale threshold.
          await tx.query('SELECT pg_sleep(1.6)');
          return i;
        }),
    });
    const worker = createWorker(app, { concurrency: 4, maintenance: false });
    // The reaper runs in another worker, on a pool of its own, as it would on another machine.
    const reaper = createWorker(t.app({ recovery }), { concurrency: 1 });
    let reaped = 0;
    reaper.on('maintenance:ran', (service, result) => {
      if (service === 'reaper') {
        const r = result as { retried: string[]; failed: string[] };
        reaped += r.retried.length + r.failed.length;
      }
    });
    await reaper.start();
    await worker.start();
    const handles = await work.sendMany([0, 1, 2, 3].map((i) => ({ input: { i } })));
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 15_000 })));
    expect(results).toEqual([0, 1, 2, 3].map((i) => ({ ok: true, value: i })));
    expect(reaped).toBe(0);
    for (const h of handles) {
      expect(await effects(h.id)).toEqual(['long']);
      expect(await attempts(h.id)).toEqual([[1, 'COMPLETED', null]]);
    }
    await Promise.all([worker.stop(), reaper.stop()]);
  });

  it('a shutdown stops a transaction with policy stop (rolled back) and lets one with continue commit', async () => {
    const app = t.app();
    const entered = { stop: gate(), continue: gate() };
    const finishLine = gate();
    const make = (policy: 'stop' | 'continue') =>
      app.task({
        name: `tx.shutdown.${policy}`,
        input: z.object({}),
        shutdown: policy,
        handler: (_input, ctx) =>
          ctx.transaction(async (tx) => {
            await tx.query(insertEffect, [ctx.taskId, policy]);
            entered[policy].open();
            await finishLine.wait;
            await tx.query('SELECT 1');
            return policy;
          }),
      });
    const stopping = make('stop');
    const continuing = make('continue');
    // A short grace: the stopped handler ignores its signal, and its outcome is written once the grace is over.
    const worker = createWorker(app, { maintenance: false, concurrency: 2, shutdown: { abortGraceMs: 200 } });
    await worker.start();
    const [s, c] = [await stopping.send({}), await continuing.send({})];
    await Promise.all([entered.stop.wait, entered.continue.wait]);
    const stopped = worker.stop();
    // The stop policy's abort has ended its transaction before the handlers go on.
    await eventually(async () => {
      const r = await s.result({ timeoutMs: 50 });
      return !r.ok && r.error.code !== 'WAIT_TIMEOUT' ? r : undefined;
    });
    finishLine.open();
    await stopped;
    const rs = await s.result({ timeoutMs: 1_000 });
    expect(rs.ok ? null : rs.error.code).toBe('WORKER_SHUTDOWN');
    expect(await c.result({ timeoutMs: 1_000 })).toEqual({ ok: true, value: 'continue' });
    expect(await effects(s.id)).toEqual([]);
    expect(await effects(c.id)).toEqual(['continue']);
  });

  it('takes the connection from a pool the handler names', async () => {
    const app = t.app();
    let acquired = 0;
    const own = t.pool;
    const onAcquire = (): void => {
      acquired += 1;
    };
    own.on('acquire', onAcquire);
    const work = app.task({
      name: 'tx.ownPool',
      input: z.object({}),
      handler: (_input, ctx) =>
        ctx.transaction(
          async (tx) => {
            await tx.query(insertEffect, [ctx.taskId, 'own pool']);
            return 'ok';
          },
          { pool: own },
        ),
    });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    const before = acquired;
    const handle = await work.send({});
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'ok' });
    expect(acquired).toBeGreaterThan(before);
    expect(await effects(handle.id)).toEqual(['own pool']);
    own.off('acquire', onAcquire);
    await worker.stop();
  });

  it('refuses a blocking task, with a message that says why', async () => {
    const worker = createWorker(fixture.app, {
      maintenance: false,
      appModule: fixtureModule('exactlyOnceApp.ts'),
    });
    await worker.start();
    const handle = await fixture.blockingTransaction.send({});
    const result = await handle.result({ timeoutMs: 20_000 });
    expect(result.ok ? null : result.error.code).toBe('UNHANDLED_ERROR');
    expect(result.ok ? '' : result.error.message).toMatch(
      /TaskTransactionError: task \S+: ctx.transaction\(\) is not available to blocking tasks/,
    );
    await worker.stop();
  });

  it('refuses a second transaction once one committed; the first outcome stands', async () => {
    const app = t.app();
    const again: unknown[] = [];
    const twice = app.task({
      name: 'tx.twice',
      input: z.object({}),
      handler: async (_input, ctx) => {
        await ctx.transaction(async (tx) => {
          await tx.query(insertEffect, [ctx.taskId, 'first']);
          return 'first';
        });
        await ctx
          .transaction(async (tx) => {
            await tx.query(insertEffect, [ctx.taskId, 'second']);
            return 'second';
          })
          .catch((error: unknown) => again.push(error));
        return 'ignored: the outcome was committed with the first transaction';
      },
    });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    // The result is there once the first transaction commits; the handler's second try comes after it.
    const ran = waitForEvent(worker, 'task:ran');
    const h = await twice.send({});
    expect(await h.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'first' });
    expect((await ran)[0]).toBe(h.id);
    expect(await effects(h.id)).toEqual(['first']);
    expect((again[0] as TaskTransactionError).code).toBe('TRANSACTION_UNAVAILABLE');
    await worker.stop();
  });

  it('the workflow step follows a transactional completion', async () => {
    const app = t.app();
    const first = app.task({
      name: 'tx.wf.first',
      input: z.object({}),
      handler: (_input, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insertEffect, [ctx.taskId, 'first']);
          return 5;
        }),
    });
    const second = app.task({
      name: 'tx.wf.second',
      input: z.object({ value: z.number() }),
      handler: ({ value }) => value + 1,
    });
    const wf = workflow(app, 'tx.wf');
    const a = wf.node(first, { input: {} });
    const b = wf.node(second, { input: { value: a.result } });
    const flow = wf.build({ output: b });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    const run = await flow.start();
    expect(await run.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 6 });
    await worker.stop();
  });
});
