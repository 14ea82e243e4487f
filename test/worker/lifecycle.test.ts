/** The transitions of the core lifecycle, observed in the rows. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskClaim, TaskClaimAndStart, TaskFinishMany, TaskStartMany } from '../../src/db/tasks.js';
import type { ClaimAndStartRow, TaskFinish, WorkerIdentity } from '../../src/db/tasks.js';
import { TaskError } from '../../src/errors.js';
import { eventually, useTestSchema, waitForEvent, trackStarts } from '../support/db.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();

const identity = (workerId: string): WorkerIdentity => ({
  workerId,
  hostname: 'test-host',
  pid: 4242,
  processName: 'vitest',
});

interface Row {
  id: string;
  status: string;
  claimed: boolean;
  claimed_at: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
  failed_at: Date | null;
  finished_at: Date | null;
  enqueued_at: Date;
  sent_at: Date;
  claimed_by_worker_id: string | null;
  claim_generation: number;
  claim_token: string | null;
  error_code: string | null;
  result: unknown;
  attempt: number;
  worker_hostname: string | null;
  worker_pid: number | null;
}

async function row(id: string): Promise<Row> {
  const [r] = await t.query<Row & Record<string, unknown>>(
    'SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  if (!r) throw new Error(`no row ${id}`);
  return r;
}

/** A COMPLETED outcome with `result` (JSON text), as the worker `workerId` holding claim `token` writes it. */
function completion(id: string, workerId: string, token: string, result: string): TaskFinish {
  return {
    id,
    workerId,
    token,
    status: 'COMPLETED',
    result,
    errorCode: null,
    errorMessage: null,
    failedReason: null,
    retryDelayMs: 0,
    crashed: false,
  };
}

async function attempts(id: string): Promise<Record<string, unknown>[]> {
  return t.query('SELECT * FROM {{schema}}.horsies_task_attempts WHERE task_id = $1 ORDER BY attempt', [id]);
}

describe('PENDING → CLAIMED → RUNNING → COMPLETED', () => {
  it('records every status and timestamp on the way, and one attempt row', async () => {
    const app = t.app();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const gated = app.task({
      name: 'lifecycle.gated',
      input: z.object({ x: z.number() }),
      handler: async ({ x }) => {
        await gate;
        return { doubled: x * 2 };
      },
    });
    const handle = await gated.send({ x: 21 });
    expect((await row(handle.id)).status).toBe('PENDING');

    const worker = createWorker(app, { concurrency: 2 });
    const started = waitForEvent(worker, 'task:started', (id) => id === handle.id);
    await worker.start();
    await started;
    const running = await row(handle.id);
    expect(running.status).toBe('RUNNING');
    expect(running.claimed).toBe(true);
    expect(running.claimed_by_worker_id).toBe(worker.id);
    expect(running.claim_generation).toBe(1);
    expect(running.attempt).toBe(1);
    expect(running.claimed_at).toBeInstanceOf(Date);
    expect(running.started_at!.getTime()).toBeGreaterThanOrEqual(running.claimed_at!.getTime());
    expect(running.worker_pid).toBe(process.pid);
    expect(running.worker_hostname).toBeTruthy();

    release();
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result).toEqual({ ok: true, value: { doubled: 42 } });
    const done = await row(handle.id);
    expect(done.status).toBe('COMPLETED');
    expect(done.claimed).toBe(false);
    expect(done.completed_at).toBeInstanceOf(Date);
    expect(done.finished_at).toEqual(done.completed_at);
    expect(done.failed_at).toBeNull();
    expect(done.result).toEqual({ ok: { doubled: 42 } });
    expect(done.sent_at.getTime()).toBeLessThanOrEqual(done.claimed_at!.getTime());

    const rows = await attempts(handle.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      attempt: 1,
      outcome: 'COMPLETED',
      will_retry: false,
      error_code: null,
      worker_id: worker.id,
      worker_pid: process.pid,
    });
    expect(rows[0]!.started_at).toEqual(running.started_at);
    await worker.stop();
  });

  it('gives the handler its context, whose functions work when taken out of it', async () => {
    const app = t.app();
    const seen: Record<string, unknown>[] = [];
    const described = app.task({
      name: 'lifecycle.context',
      input: z.object({}),
      handler: (_input, ctx) => {
        const {
          taskId,
          taskName,
          queue,
          attempt,
          retryCount,
          workflow,
          signal,
          logger,
          progress,
          transaction,
        } = ctx;
        seen.push({ taskId, taskName, queue, attempt, retryCount, workflow, aborted: signal.aborted });
        logger.info('a line from the handler');
        progress({ done: 1, total: 2 });
        return transaction(async (tx) => {
          const [{ n }] = (await tx.query<{ n: number }>('SELECT 41 + 1 AS n')).rows as [{ n: number }];
          return { n };
        });
      },
    });
    const handle = await described.send({});
    const worker = createWorker(app, { concurrency: 2 });
    await worker.start();
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: { n: 42 } });
    await worker.stop();
    expect(seen).toEqual([
      {
        taskId: handle.id,
        taskName: 'lifecycle.context',
        queue: 'default',
        attempt: 1,
        retryCount: 0,
        workflow: null,
        aborted: false,
      },
    ]);
    const [stored] = await t.query<{ progress: unknown }>(
      'SELECT progress FROM {{schema}}.horsies_tasks WHERE id = $1',
      [handle.id],
    );
    expect(stored!.progress).toEqual({ done: 1, total: 2 });
  });

  it('shows CLAIMED between the claim and the start', async () => {
    const app = t.app();
    const task = app.task({ name: 'lifecycle.claimonly', input: z.object({}), handler: () => 'ok' });
    const handle = await task.send({});
    const [claimed] = await app.db.run(TaskClaim, {
      queue: 'default',
      taskNames: ['lifecycle.claimonly'],
      limit: 10,
      leaseMs: 30_000,
      worker: identity('w-claim'),
    });
    expect(claimed?.id).toBe(handle.id);
    const r = await row(handle.id);
    expect(r.status).toBe('CLAIMED');
    expect(r.claimed).toBe(true);
    expect(r.claimed_at).toBeInstanceOf(Date);
    expect(r.started_at).toBeNull();
    expect(r.claimed_by_worker_id).toBe('w-claim');
    const [lease] = await t.query<{ seconds: number }>(
      'SELECT extract(epoch FROM claim_expires_at - claimed_at)::float AS seconds FROM {{schema}}.horsies_tasks WHERE id = $1',
      [handle.id],
    );
    expect(lease!.seconds).toBeCloseTo(30, 0);
  });
});

describe('RUNNING → FAILED', () => {
  it('turns a throw into UNHANDLED_ERROR with a FAILED attempt row', async () => {
    const app = t.app();
    const boom = app.task({
      name: 'lifecycle.throws',
      input: z.object({}),
      handler: () => {
        throw new RangeError('out of range');
      },
    });
    const worker = createWorker(app);
    await worker.start();
    const handle = await boom.send({});
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error).toBeInstanceOf(TaskError);
    expect(result.error.code).toBe('UNHANDLED_ERROR');
    expect(result.error.message).toContain('RangeError: out of range');
    const r = await row(handle.id);
    expect(r.status).toBe('FAILED');
    expect(r.error_code).toBe('UNHANDLED_ERROR');
    expect(r.failed_at).toBeInstanceOf(Date);
    expect(r.completed_at).toBeNull();
    const rows = await attempts(handle.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ attempt: 1, outcome: 'FAILED', error_code: 'UNHANDLED_ERROR' });
    await worker.stop();
  });

  it('stores a returned or thrown TaskError with its code and data', async () => {
    const app = t.app();
    const returns = app.task({
      name: 'lifecycle.returnsError',
      input: z.object({ n: z.number() }),
      handler: ({ n }) => (n < 0 ? new TaskError('NEGATIVE_INPUT', 'n must be >= 0', { n }) : n),
    });
    const throws = app.task({
      name: 'lifecycle.throwsError',
      input: z.object({}),
      handler: () => {
        throw new TaskError('QUOTA_EXCEEDED', 'over quota');
      },
    });
    const worker = createWorker(app);
    await worker.start();
    const [a, b, c] = await Promise.all([returns.send({ n: -1 }), returns.send({ n: 5 }), throws.send({})]);
    const ra = await a.result({ timeoutMs: 10_000 });
    expect(ra.ok).toBe(false);
    if (!ra.ok) {
      expect(ra.error.code).toBe('NEGATIVE_INPUT');
      expect(ra.error.data).toEqual({ n: -1 });
    }
    expect(await b.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 5 });
    const rc = await c.result({ timeoutMs: 10_000 });
    expect(rc.ok ? null : rc.error.code).toBe('QUOTA_EXCEEDED');
    expect((await attempts(c.id))[0]).toMatchObject({
      outcome: 'FAILED',
      error_code: 'QUOTA_EXCEEDED',
      error_message: 'over quota',
    });
    await worker.stop();
  });

  it('fails with VALIDATION_FAILED when the stored input no longer matches the schema', async () => {
    const app = t.app();
    let handlerCalled = false;
    const strict = app.task({
      name: 'lifecycle.strict',
      input: z.object({ email: z.email() }),
      handler: () => {
        handlerCalled = true;
        return 'ran';
      },
    });
    let ran = false;
    const handle = await strict.send({ email: 'a@example.com' });
    // A row edited by hand (or written by older code) that the schema rejects.
    await t.query(`UPDATE {{schema}}.horsies_tasks SET kwargs = '{"email": 12}' WHERE id = $1`, [handle.id]);
    const worker = createWorker(app);
    worker.on('task:started', () => (ran = true));
    await worker.start();
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(ran).toBe(true); // it started (an attempt) ...
    expect(result.ok ? null : result.error.code).toBe('VALIDATION_FAILED'); // ... but the handler never saw the input
    expect(handlerCalled).toBe(false);
    expect((await attempts(handle.id))[0]).toMatchObject({
      outcome: 'FAILED',
      error_code: 'VALIDATION_FAILED',
    });
    await worker.stop();
  });

  it('fails with RESULT_NOT_SERIALIZABLE when the handler returns what JSON cannot carry', async () => {
    const app = t.app();
    const big = app.task({ name: 'lifecycle.bigint', input: z.object({}), handler: () => ({ n: 10n }) });
    const worker = createWorker(app);
    await worker.start();
    const result = await (await big.send({})).result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('RESULT_NOT_SERIALIZABLE');
    await worker.stop();
  });
});

describe('scheduling and deadlines', () => {
  it('does not claim a task before its enqueued_at', async () => {
    const app = t.app();
    const later = app.task({ name: 'lifecycle.later', input: z.object({}), handler: () => 'ok' });
    const future = await later.send({}, { delayMs: 60_000 });
    const past = await later.send({}, { runAt: new Date(Date.now() - 1000) });
    const claimed = await app.db.run(TaskClaim, {
      queue: 'default',
      taskNames: ['lifecycle.later'],
      limit: 10,
      leaseMs: 30_000,
      worker: identity('w-later'),
    });
    expect(claimed.map((c) => c.id)).toEqual([past.id]);
    expect((await row(future.id)).status).toBe('PENDING');
  });

  it('runs a delayed task once its time comes, not before', async () => {
    const app = t.app();
    const delayed = app.task({ name: 'lifecycle.delayed', input: z.object({}), handler: () => 'ok' });
    const worker = createWorker(app, { pollIntervalMs: 100 });
    await worker.start();
    const handle = await delayed.send({}, { delayMs: 700 });
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'ok' });
    const r = await row(handle.id);
    expect(r.claimed_at!.getTime()).toBeGreaterThanOrEqual(r.enqueued_at.getTime());
    expect(r.enqueued_at.getTime() - r.sent_at.getTime()).toBeGreaterThanOrEqual(690);
    await worker.stop();
  });

  it('never claims a PENDING task whose good_until passed', async () => {
    const app = t.app();
    const stale = app.task({ name: 'lifecycle.stale', input: z.object({}), handler: () => 'ok' });
    const handle = await stale.send({}, { goodUntil: new Date(Date.now() - 1000) });
    const claimed = await app.db.run(TaskClaim, {
      queue: 'default',
      taskNames: ['lifecycle.stale'],
      limit: 10,
      leaseMs: 30_000,
      worker: identity('w-stale'),
    });
    expect(claimed).toHaveLength(0);
    expect((await row(handle.id)).status).toBe('PENDING');
  });

  it('expires a claimed task whose good_until passed before it started (CLAIMED → EXPIRED, no attempt)', async () => {
    const app = t.app();
    const soon = app.task({ name: 'lifecycle.soon', input: z.object({}), handler: () => 'ran' });
    const handle = await soon.send({}, { goodUntil: new Date(Date.now() + 60_000) });
    const [claimed] = await app.db.run(TaskClaim, {
      queue: 'default',
      taskNames: ['lifecycle.soon'],
      limit: 1,
      leaseMs: 30_000,
      worker: identity('w-soon'),
    });
    expect(claimed?.id).toBe(handle.id);
    // The deadline passes while the task sits claimed.
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET good_until = now() - interval '1 second' WHERE id = $1`,
      [handle.id],
    );
    const started = await app.db.run(TaskStartMany, {
      workerId: 'w-soon',
      tasks: [{ id: handle.id, token: claimed!.claim_token }],
    });
    expect(started).toEqual([expect.objectContaining({ id: handle.id, status: 'EXPIRED' })]);
    const r = await row(handle.id);
    expect(r).toMatchObject({
      status: 'EXPIRED',
      error_code: 'TASK_EXPIRED',
      claimed: false,
      started_at: null,
    });
    expect(r.finished_at).toBeInstanceOf(Date);
    expect(await attempts(handle.id)).toHaveLength(0);
    const result = await handle.result({ timeoutMs: 5_000 });
    expect(result.ok ? null : result.error.code).toBe('TASK_EXPIRED');
  });

  it('starts the tasks it has slots for in the claim itself (PENDING → RUNNING), and only claims the rest', async () => {
    const app = t.app();
    const step = app.task({
      name: 'lifecycle.step',
      input: z.object({ i: z.number() }),
      handler: () => null,
    });
    const handles = await step.sendMany([0, 1, 2, 3, 4].map((i) => ({ input: { i } })));
    const client = await app.db.pool.connect();
    try {
      const result = await app.db.run(
        TaskClaimAndStart,
        {
          queue: 'default',
          taskNames: ['lifecycle.step'],
          limit: 5,
          start: 2,
          leaseMs: 30_000,
          worker: identity('w-step'),
          waitForFlush: false,
        },
        client,
      );
      // Claim order is send order; the first two are started.
      const byId = new Map(result.map((r) => [r.id, r]));
      expect(result).toHaveLength(5);
      expect(handles.map((h) => [byId.get(h.id)?.status, byId.get(h.id)?.attempt])).toEqual([
        ['RUNNING', 1],
        ['RUNNING', 1],
        ['CLAIMED', 0],
        ['CLAIMED', 0],
        ['CLAIMED', 0],
      ]);
      // The claim commits asynchronously, for its own transaction only: the connection's next transaction (a
      // send, say) still waits for its flush.
      const { rows } = await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
      expect(rows[0]!.synchronous_commit).toBe('on');
    } finally {
      client.release();
    }
    const stored = await Promise.all(handles.map((h) => row(h.id)));
    expect(stored.map((r) => r.status)).toEqual(['RUNNING', 'RUNNING', 'CLAIMED', 'CLAIMED', 'CLAIMED']);
    // A task started by its claim carries every claim field, and its start is its claim's time.
    for (const r of stored.slice(0, 2)) {
      expect(r).toMatchObject({
        claimed: true,
        claimed_by_worker_id: 'w-step',
        claim_generation: 1,
        worker_hostname: 'test-host',
        worker_pid: 4242,
      });
      expect(r.started_at).toEqual(r.claimed_at);
    }
    for (const r of stored.slice(2)) expect(r.started_at).toBeNull();
    // The ones only claimed start later, as any claimed task does.
    const later = await app.db.run(TaskStartMany, {
      workerId: 'w-step',
      tasks: stored.slice(2).map((r) => ({ id: r.id, token: r.claim_token! })),
    });
    expect(later.map((r) => r.status)).toEqual(['RUNNING', 'RUNNING', 'RUNNING']);
    // A worker that claims with no free slot only claims.
    const more = await step.send({ i: 5 });
    const claimOnly = await app.db.run(TaskClaimAndStart, {
      queue: 'default',
      taskNames: ['lifecycle.step'],
      limit: 1,
      start: 0,
      leaseMs: 30_000,
      worker: identity('w-step'),
    });
    expect(claimOnly.map((c) => [c.id, c.status])).toEqual([[more.id, 'CLAIMED']]);
    expect((await row(more.id)).status).toBe('CLAIMED');
  });

  it('fences a task started by its claim like any other: a later claim makes its finish change nothing', async () => {
    const app = t.app();
    const task = app.task({ name: 'lifecycle.direct', input: z.object({}), handler: () => 'ok' });
    const handle = await task.send({});
    const claimAndStart = () =>
      app.db.run(TaskClaimAndStart, {
        queue: 'default',
        taskNames: ['lifecycle.direct'],
        limit: 1,
        start: 1,
        leaseMs: 30_000,
        worker: identity('w-1'),
      });
    const [first] = await claimAndStart();
    expect(first).toMatchObject({ status: 'RUNNING', attempt: 1, claim_generation: 1 });
    // The worker is taken for dead and its task handed back (as the reaper does), then claimed again.
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET status = 'PENDING', claimed = false, claimed_at = NULL,
         claimed_by_worker_id = NULL, claim_expires_at = NULL WHERE id = $1`,
      [handle.id],
    );
    const [second] = await claimAndStart();
    expect(second).toMatchObject({ status: 'RUNNING', attempt: 2, claim_generation: 2 });
    expect(second!.claim_token).not.toBe(first!.claim_token);
    const finish = (claim: ClaimAndStartRow) =>
      app.db.run(TaskFinishMany, {
        tasks: [completion(handle.id, 'w-1', claim.claim_token, `{"ok":${claim.claim_generation}}`)],
      });
    expect(await finish(first!)).toHaveLength(0);
    expect(await finish(second!)).toHaveLength(1);
    expect((await row(handle.id)).result).toEqual({ ok: 2 });
    expect((await attempts(handle.id)).map((a) => a.attempt)).toEqual([2]);
  });

  it('lets the worker expire a task claimed just before its deadline', async () => {
    const app = t.app();
    const tight = app.task({ name: 'lifecycle.tight', input: z.object({}), handler: () => 'ran' });
    const worker = createWorker(app);
    // Make the deadline pass between the claim and the start, as a slow start would.
    worker.on('task:claimed', (ids) => {
      void t.query(`UPDATE {{schema}}.horsies_tasks SET good_until = now() WHERE id = ANY($1)`, [ids]);
    });
    const handle = await tight.send({}, { goodUntil: new Date(Date.now() + 60_000) });
    const expired = waitForEvent(worker, 'task:expired', (id) => id === handle.id);
    await worker.start();
    // The start statement may win the race with the UPDATE above; only assert when it lost.
    const outcome = await Promise.race([
      expired.then(() => 'expired'),
      handle.result({ timeoutMs: 10_000 }).then(() => 'done'),
    ]);
    const r = await row(handle.id);
    if (outcome === 'expired') expect(r.status).toBe('EXPIRED');
    else expect(['COMPLETED', 'EXPIRED']).toContain(r.status);
    await worker.stop();
  });
});

describe('fencing', () => {
  it('ignores a start or finish that names an older claim generation', async () => {
    const app = t.app();
    const task = app.task({ name: 'lifecycle.fenced', input: z.object({}), handler: () => 'ok' });
    const handle = await task.send({});
    const claim = () =>
      app.db.run(TaskClaim, {
        queue: 'default',
        taskNames: ['lifecycle.fenced'],
        limit: 1,
        leaseMs: 30_000,
        worker: identity('w-1'),
      });
    const [first] = await claim();
    // The claim is handed back (as the reaper would) and the same worker claims the task again.
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL WHERE id = $1`,
      [handle.id],
    );
    const [second] = await claim();
    expect(second!.claim_generation).toBe(first!.claim_generation + 1);

    const staleStart = await app.db.run(TaskStartMany, {
      workerId: 'w-1',
      tasks: [{ id: handle.id, token: first!.claim_token }],
    });
    expect(staleStart).toHaveLength(0);
    const start = await app.db.run(TaskStartMany, {
      workerId: 'w-1',
      tasks: [{ id: handle.id, token: second!.claim_token }],
    });
    expect(start[0]?.status).toBe('RUNNING');

    const finish = (token: string) =>
      app.db.run(TaskFinishMany, { tasks: [completion(handle.id, 'w-1', token, '{"ok":"late"}')] });
    expect(await finish(first!.claim_token)).toHaveLength(0);
    expect((await row(handle.id)).status).toBe('RUNNING');
    expect(await attempts(handle.id)).toHaveLength(0);
    expect(await finish(second!.claim_token)).toHaveLength(1);
    // A replay of the same finish changes nothing and adds no second attempt row.
    expect(await finish(second!.claim_token)).toHaveLength(0);
    expect(await attempts(handle.id)).toHaveLength(1);
    expect((await row(handle.id)).result).toEqual({ ok: 'late' });
  });
});

describe('the worker', () => {
  it('claims only task names it has registered', async () => {
    const producerApp = t.app();
    const known = producerApp.task({ name: 'lifecycle.known', input: z.object({}), handler: () => 'ok' });
    const unknown = producerApp.task({ name: 'lifecycle.unknown', input: z.object({}), handler: () => 'ok' });
    const workerApp = t.app();
    workerApp.task({ name: 'lifecycle.known', input: z.object({}), handler: () => 'ok' });
    const worker = createWorker(workerApp);
    await worker.start();
    const orphan = await unknown.send({});
    const served = await known.send({});
    expect(await served.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'ok' });
    expect((await row(orphan.id)).status).toBe('PENDING');
    await worker.stop();
  });

  it('never holds more tasks than its concurrency', async () => {
    const app = t.app();
    let active = 0;
    let peak = 0;
    const busy = app.task({
      name: 'lifecycle.busy',
      input: z.object({ i: z.number() }),
      handler: async () => {
        active += 1;
        peak = Math.max(peak, active);
        await new Promise((r) => setTimeout(r, 5));
        active -= 1;
      },
    });
    const worker = createWorker(app, { concurrency: 3, outcomes: { batchSize: 3 } });
    let maxActive = 0;
    let maxHeld = 0;
    worker.on('task:claimed', () => {
      maxActive = Math.max(maxActive, worker.activeTasks);
      maxHeld = Math.max(maxHeld, worker.heldTasks);
    });
    await worker.start();
    const handles = await busy.sendMany(Array.from({ length: 60 }, (_, i) => ({ input: { i } })));
    let maxInDb = 0;
    await eventually(async () => {
      const [c] = await t.query<{ held: number; done: number }>(
        `SELECT count(*) FILTER (WHERE status IN ('CLAIMED', 'RUNNING'))::int AS held,
                count(*) FILTER (WHERE status = 'COMPLETED')::int AS done
         FROM {{schema}}.horsies_tasks WHERE task_name = 'lifecycle.busy'`,
      );
      maxInDb = Math.max(maxInDb, c!.held);
      return c!.done === handles.length;
    });
    expect(peak).toBeLessThanOrEqual(3);
    expect(maxActive).toBeLessThanOrEqual(3);
    // A task whose handler returned frees its slot while its outcome is written (it is still RUNNING in its
    // row meanwhile): the worker holds at most a batch of those (outcomes.batchSize 3) beside its 3 slots.
    expect(maxHeld).toBeLessThanOrEqual(6);
    expect(maxInDb).toBeLessThanOrEqual(6);
    await worker.stop();
  });

  it('goes on claiming while outcomes wait for a write, and stops once a batch of them waits', async () => {
    const app = t.app();
    const quick = app.task({
      name: 'lifecycle.unwritten',
      input: z.object({ i: z.number() }),
      handler: () => 'ok',
    });
    // Every finish writes attempt rows: with this lock held, the first write waits, and the outcomes after it too.
    const blocker = await t.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query(`LOCK TABLE "${t.schema}".horsies_task_attempts IN SHARE MODE`);
    const worker = createWorker(app, { concurrency: 2, outcomes: { batchSize: 4 } });
    const noRoom = worker.testSignals.producer.noRoom;
    noRoom.enable();
    let ran = 0;
    worker.on('task:ran', () => (ran += 1));
    try {
      await worker.start();
      const handles = await quick.sendMany(Array.from({ length: 30 }, (_, i) => ({ input: { i } })));
      // Two slots, and four outcomes may wait: runs go on until four wait and two more have ended.
      await eventually(async () => ran === 6);
      // A send wakes the claim loop, which claims nothing: the worker has no room.
      noRoom.clear();
      handles.push(await quick.send({ i: 30 }));
      await noRoom.wait();
      expect(ran).toBe(6);
      const [counts] = await t.query<{ pending: number; running: number }>(
        `SELECT count(*) FILTER (WHERE status = 'PENDING')::int AS pending,
                count(*) FILTER (WHERE status = 'RUNNING')::int AS running
         FROM {{schema}}.horsies_tasks WHERE task_name = 'lifecycle.unwritten'`,
      );
      expect(counts).toEqual({ pending: 25, running: 6 });
      await blocker.query('COMMIT');
      for (const h of handles)
        expect(await h.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'ok' });
    } finally {
      await blocker.query('ROLLBACK').catch(() => undefined);
      blocker.release();
      await worker.stop();
    }
  });

  it('stops claiming on stop() but lets running tasks finish', async () => {
    const app = t.app();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const slow = app.task({
      name: 'lifecycle.drain',
      input: z.object({ i: z.number() }),
      handler: async ({ i }) => {
        await gate;
        return i;
      },
    });
    const worker = createWorker(app, { concurrency: 1 });
    const started = trackStarts(worker);
    await worker.start();
    const first = await slow.send({ i: 1 });
    await started(first.id);
    const second = await slow.send({ i: 2 });
    const stopped = worker.stop();
    release();
    await stopped;
    expect((await row(first.id)).status).toBe('COMPLETED');
    expect((await row(second.id)).status).toBe('PENDING');
  });
});
