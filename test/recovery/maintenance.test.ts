/**
 * Maintenance: expiry of PENDING tasks past their deadline, retention of old rows (batched), per-task and
 * per-queue retention of COMPLETED rows, and the loop that runs the services. Rows are made directly in any
 * state with SQL, so the services are exercised without a worker (except the end-to-end retention tests).
 *
 * The services act on the whole schema, so every test starts from empty tables.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { Expirer } from '../../src/recovery/Expirer.js';
import { Maintainer } from '../../src/recovery/Maintainer.js';
import type { MaintenanceService } from '../../src/recovery/Maintainer.js';
import { Retainer } from '../../src/recovery/Retainer.js';
import type { RetainerResult } from '../../src/recovery/Retainer.js';
import type { ResolvedRecoveryConfig } from '../../src/recovery/config.js';
import { factoriesFor } from '../support/factories.js';
import { eventually, testLogger, useTestSchema, waitForEvent } from '../support/db.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

beforeEach(async () => {
  await t.query(
    `TRUNCATE {{schema}}.horsies_task_attempts, {{schema}}.horsies_task_steps, {{schema}}.horsies_tasks,
              {{schema}}.horsies_heartbeats, {{schema}}.horsies_worker_states, {{schema}}.horsies_worker_stops`,
  );
});

const { insertTasks, insertTask, insertAttempt } = factoriesFor(t);

interface Row {
  id: string;
  status: string;
  error_code: string | null;
  finished_at: Date | null;
  result: unknown;
  retention_ms: string | null;
  purge_after: Date | null;
  good_until: Date | null;
}

async function row(id: string): Promise<Row | undefined> {
  const [r] = await t.query<Row & Record<string, unknown>>(
    'SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  return r;
}

async function existing(ids: string[]): Promise<string[]> {
  const rows = await t.query<{ id: string }>(
    'SELECT id FROM {{schema}}.horsies_tasks WHERE id = ANY($1::text[])',
    [ids],
  );
  return rows.map((r) => r.id).sort();
}

async function countAttempts(ids: string[]): Promise<number> {
  const [r] = await t.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM {{schema}}.horsies_task_attempts WHERE task_id = ANY($1::text[])',
    [ids],
  );
  return r!.n;
}

describe('Expirer', () => {
  it('expires PENDING tasks whose good_until passed, with TASK_EXPIRED and no attempt row', async () => {
    const app = t.app();
    const due = await insertTask({ taskName: 'exp.due', goodUntilAgoMs: 5_000 });
    const expirer = new Expirer(app.db, { batchSize: 100, maxBatchesPerRun: 5 });
    expect(await expirer.runOnce()).toEqual({ expired: 1 });
    const r = (await row(due))!;
    expect(r.status).toBe('EXPIRED');
    expect(r.error_code).toBe('TASK_EXPIRED');
    expect(r.finished_at).toBeInstanceOf(Date);
    expect(r.result).toEqual({ err: { code: 'TASK_EXPIRED', message: expect.any(String) } });
    expect(await countAttempts([due])).toBe(0);
    // Nothing left to do.
    expect(await expirer.runOnce()).toEqual({ expired: 0 });
  });

  it('leaves PENDING tasks with a future or no good_until alone', async () => {
    const app = t.app();
    const future = await insertTask({ taskName: 'exp.future', goodUntilAgoMs: -60_000 });
    const none = await insertTask({ taskName: 'exp.none', sentAgoMs: 30 * DAY_MS });
    const expirer = new Expirer(app.db, { batchSize: 100, maxBatchesPerRun: 5 });
    expect(await expirer.runOnce()).toEqual({ expired: 0 });
    expect((await row(future))!.status).toBe('PENDING');
    expect((await row(none))!.status).toBe('PENDING');
  });

  it('leaves tasks that are not PENDING alone even when their good_until passed', async () => {
    const app = t.app();
    const running = await insertTask({ taskName: 'exp.running', status: 'RUNNING', goodUntilAgoMs: 5_000 });
    const claimed = await insertTask({ taskName: 'exp.claimed', status: 'CLAIMED', goodUntilAgoMs: 5_000 });
    const completed = await insertTask({
      taskName: 'exp.completed',
      status: 'COMPLETED',
      goodUntilAgoMs: 5_000,
    });
    const before = (await row(completed))!;
    const expirer = new Expirer(app.db, { batchSize: 100, maxBatchesPerRun: 5 });
    expect(await expirer.runOnce()).toEqual({ expired: 0 });
    expect((await row(running))!.status).toBe('RUNNING');
    expect((await row(claimed))!.status).toBe('CLAIMED');
    expect(await row(completed)).toEqual(before);
  });

  it('works in bounded batches: at most batchSize × maxBatchesPerRun per pass', async () => {
    const app = t.app();
    const ids = await insertTasks({ taskName: 'exp.batch', goodUntilAgoMs: 1_000, count: 45 });
    const expirer = new Expirer(app.db, { batchSize: 10, maxBatchesPerRun: 3 });
    expect(await expirer.runOnce()).toEqual({ expired: 30 });
    const [afterFirst] = await t.query<{ pending: number; expired: number }>(
      `SELECT count(*) FILTER (WHERE status = 'PENDING')::int AS pending,
              count(*) FILTER (WHERE status = 'EXPIRED')::int AS expired
       FROM {{schema}}.horsies_tasks WHERE id = ANY($1::text[])`,
      [ids],
    );
    expect(afterFirst).toEqual({ pending: 15, expired: 30 });
    expect(await expirer.runOnce()).toEqual({ expired: 15 });
    expect(await expirer.runOnce()).toEqual({ expired: 0 });
  });

  it('resolves a waiter with TASK_EXPIRED once the pass expires its task', async () => {
    const app = t.app();
    const id = await insertTask({ taskName: 'exp.waited', goodUntilAgoMs: 1_000 });
    const waiting = app.handle(id).result({ timeoutMs: 10_000 });
    // The waiter is not resolved before the pass: the task is still PENDING.
    const early = await app.handle(id).result({ timeoutMs: 100 });
    expect(early.ok ? null : early.error.code).toBe('WAIT_TIMEOUT');
    expect((await row(id))!.status).toBe('PENDING');
    await new Expirer(app.db, { batchSize: 10, maxBatchesPerRun: 1 }).runOnce();
    const result = await waiting;
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.code).toBe('TASK_EXPIRED');
  });
});

describe('Retainer', () => {
  const app = t.app();
  const config = (overrides: Partial<ResolvedRecoveryConfig> = {}): ResolvedRecoveryConfig => ({
    ...app.config.recovery,
    ...overrides,
  });

  it('deletes terminal tasks older than terminalRecordRetentionHours with their attempts', async () => {
    const old = 31 * DAY_MS; // default retention is 720 h = 30 days
    const oldCompleted = await insertTask({ taskName: 'ret.old', status: 'COMPLETED', finishedAgoMs: old });
    const oldFailed = await insertTask({ taskName: 'ret.old', status: 'FAILED', finishedAgoMs: old });
    const oldCancelled = await insertTask({ taskName: 'ret.old', status: 'CANCELLED', finishedAgoMs: old });
    const oldExpired = await insertTask({ taskName: 'ret.old', status: 'EXPIRED', finishedAgoMs: old });
    const young = await insertTask({ taskName: 'ret.young', status: 'FAILED', finishedAgoMs: 29 * DAY_MS });
    const ancientPending = await insertTask({ taskName: 'ret.pending', sentAgoMs: 400 * DAY_MS });
    const ancientRunning = await insertTask({
      taskName: 'ret.running',
      status: 'RUNNING',
      sentAgoMs: 400 * DAY_MS,
    });
    await insertAttempt(oldCompleted, 1, 'COMPLETED');
    await insertAttempt(oldFailed, 1, 'FAILED');
    await insertAttempt(oldFailed, 2, 'FAILED');
    await insertAttempt(young, 1, 'FAILED');
    await insertAttempt(ancientRunning, 1, 'FAILED');
    const oldIds = [oldCompleted, oldFailed, oldCancelled, oldExpired];
    expect(await countAttempts(oldIds)).toBe(3);

    const result = await new Retainer(app.db, config()).runOnce();
    expect(result.tasks).toBe(4);
    expect(await existing(oldIds)).toEqual([]);
    expect(await countAttempts(oldIds)).toBe(0);
    expect((await existing([young, ancientPending, ancientRunning])).sort()).toEqual(
      [young, ancientPending, ancientRunning].sort(),
    );
    expect(await countAttempts([young])).toBe(1);
    expect(await countAttempts([ancientRunning])).toBe(1);
  });

  it('deletes in bounded batches, spreading a backlog over passes', async () => {
    const ids = await insertTasks({
      taskName: 'ret.batch',
      status: 'FAILED',
      finishedAgoMs: 2 * HOUR_MS,
      count: 450,
    });
    const keep = await insertTasks({
      taskName: 'ret.batch.young',
      status: 'FAILED',
      finishedAgoMs: 10 * 60_000,
      count: 5,
    });
    const retainer = new Retainer(
      app.db,
      config({ terminalRecordRetentionHours: 1, retentionBatchSize: 100, retentionMaxBatchesPerRun: 3 }),
    );
    expect((await retainer.runOnce()).tasks).toBe(300);
    expect(await existing(ids)).toHaveLength(150);
    expect((await retainer.runOnce()).tasks).toBe(150);
    expect(await existing(ids)).toHaveLength(0);
    expect((await retainer.runOnce()).tasks).toBe(0);
    expect(await existing(keep)).toHaveLength(5);
  });

  it('deletes heartbeats older than heartbeatRetentionHours and keeps younger ones', async () => {
    await t.query(
      `INSERT INTO {{schema}}.horsies_heartbeats (task_id, sender_id, role, sent_at)
       VALUES ('hb-old-1', 'w1', 'claimer', now() - interval '25 hours'),
              ('hb-old-2', 'w1', 'runner', now() - interval '48 hours'),
              ('hb-young', 'w1', 'runner', now() - interval '23 hours'),
              ('hb-now', 'w1', 'claimer', now())`,
    );
    const result = await new Retainer(app.db, config()).runOnce();
    expect(result).toEqual<RetainerResult>({ heartbeats: 2, workerStates: 0, tasks: 0, workflows: 0 });
    const rows = await t.query<{ task_id: string }>(
      'SELECT task_id FROM {{schema}}.horsies_heartbeats ORDER BY task_id',
    );
    expect(rows.map((r) => r.task_id)).toEqual(['hb-now', 'hb-young']);
  });

  it('deletes worker states older than workerStateRetentionHours and keeps younger ones', async () => {
    await t.query(
      `INSERT INTO {{schema}}.horsies_worker_states (worker_id, snapshot_at)
       VALUES ('ws-old', now() - interval '169 hours'),
              ('ws-young', now() - interval '167 hours'),
              ('ws-now', now())`,
    );
    const result = await new Retainer(app.db, config()).runOnce();
    expect(result).toEqual<RetainerResult>({ heartbeats: 0, workerStates: 1, tasks: 0, workflows: 0 });
    const rows = await t.query<{ worker_id: string }>(
      'SELECT worker_id FROM {{schema}}.horsies_worker_states ORDER BY worker_id',
    );
    expect(rows.map((r) => r.worker_id)).toEqual(['ws-now', 'ws-young']);
  });

  it('deletes worker stop records older than workerStateRetentionHours and keeps younger ones', async () => {
    await t.query(
      `INSERT INTO {{schema}}.horsies_worker_stops (worker_id, stopped_at)
       VALUES ('stop-old', now() - interval '169 hours'),
              ('stop-young', now() - interval '167 hours')`,
    );
    const result = await new Retainer(app.db, config()).runOnce();
    expect(result).toEqual<RetainerResult>({ heartbeats: 0, workerStates: 1, tasks: 0, workflows: 0 });
    const rows = await t.query<{ worker_id: string }>(
      'SELECT worker_id FROM {{schema}}.horsies_worker_stops ORDER BY worker_id',
    );
    expect(rows.map((r) => r.worker_id)).toEqual(['stop-young']);
  });

  it('keeps a table whose retention is null', async () => {
    await t.query(
      `INSERT INTO {{schema}}.horsies_heartbeats (task_id, sender_id, role, sent_at)
       VALUES ('hb-null', 'w1', 'claimer', now() - interval '1000 days')`,
    );
    await t.query(
      `INSERT INTO {{schema}}.horsies_worker_states (worker_id, snapshot_at)
       VALUES ('ws-null', now() - interval '1000 days')`,
    );
    const old = await insertTask({ taskName: 'ret.null', status: 'FAILED', finishedAgoMs: 1000 * DAY_MS });
    const result = await new Retainer(
      app.db,
      config({
        heartbeatRetentionHours: null,
        workerStateRetentionHours: null,
        terminalRecordRetentionHours: null,
      }),
    ).runOnce();
    expect(result).toEqual<RetainerResult>({ heartbeats: 0, workerStates: 0, tasks: 0, workflows: 0 });
    expect(await t.query('SELECT 1 FROM {{schema}}.horsies_heartbeats')).toHaveLength(1);
    expect(await t.query('SELECT 1 FROM {{schema}}.horsies_worker_states')).toHaveLength(1);
    expect(await existing([old])).toEqual([old]);

    // The same rows go once the retention is set again.
    expect(await new Retainer(app.db, config()).runOnce()).toEqual<RetainerResult>({
      heartbeats: 1,
      workerStates: 1,
      tasks: 1,
      workflows: 0,
    });
  });

  it('deletes COMPLETED tasks with their own retention once purge_after passed, however young', async () => {
    const purgeable = await insertTask({
      taskName: 'ret.own',
      status: 'COMPLETED',
      finishedAgoMs: 60_000,
      retentionMs: 0,
      purgeAfterAgoMs: 1_000,
    });
    await insertAttempt(purgeable, 1, 'COMPLETED');
    const notYet = await insertTask({
      taskName: 'ret.own',
      status: 'COMPLETED',
      finishedAgoMs: 60_000,
      retentionMs: 120_000,
      purgeAfterAgoMs: -60_000,
    });
    const plain = await insertTask({ taskName: 'ret.plain', status: 'COMPLETED', finishedAgoMs: 60_000 });
    const result = await new Retainer(app.db, config()).runOnce();
    expect(result.tasks).toBe(1);
    expect(await existing([purgeable])).toEqual([]);
    expect(await countAttempts([purgeable])).toBe(0);
    expect((await existing([notYet, plain])).sort()).toEqual([notYet, plain].sort());
  });

  it('keeps a COMPLETED task with a long retention past the default retention', async () => {
    const long = await insertTask({
      taskName: 'ret.long',
      status: 'COMPLETED',
      finishedAgoMs: 40 * DAY_MS,
      retentionMs: 365 * DAY_MS,
      purgeAfterAgoMs: -325 * DAY_MS,
    });
    const plainOld = await insertTask({
      taskName: 'ret.long.plain',
      status: 'COMPLETED',
      finishedAgoMs: 40 * DAY_MS,
    });
    const result = await new Retainer(app.db, config()).runOnce();
    expect(result.tasks).toBe(1);
    expect(await existing([long])).toEqual([long]);
    expect(await existing([plainOld])).toEqual([]);
  });

  it('ignores retention_ms on FAILED tasks: they are kept until the default retention', async () => {
    const youngFailed = await insertTask({
      taskName: 'ret.failed',
      status: 'FAILED',
      finishedAgoMs: 60_000,
      retentionMs: 0,
    });
    const oldFailed = await insertTask({
      taskName: 'ret.failed',
      status: 'FAILED',
      finishedAgoMs: 31 * DAY_MS,
      retentionMs: 365 * DAY_MS,
    });
    const result = await new Retainer(app.db, config()).runOnce();
    expect(result.tasks).toBe(1);
    expect(await existing([youngFailed])).toEqual([youngFailed]);
    expect(await existing([oldFailed])).toEqual([]);
  });
});

describe('retention of completed tasks, end to end', () => {
  it('keeps a task with retentionMs 0 for 10 s after it completes, then deletes it', async () => {
    const app = t.app();
    const quick = app.task({
      name: 'e2e.retention0',
      input: z.object({ n: z.number() }),
      retentionMs: 0,
      handler: ({ n }) => n + 1,
    });
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    const handle = await quick.send({ n: 41 });
    expect((await row(handle.id))!.retention_ms).toBe('0');
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 42 });
    const [times] = await t.query<{ seconds: number; status: string }>(
      `SELECT status, extract(epoch FROM purge_after - finished_at)::float AS seconds
       FROM {{schema}}.horsies_tasks WHERE id = $1`,
      [handle.id],
    );
    expect(times).toEqual({ status: 'COMPLETED', seconds: expect.closeTo(10, 1) });
    // Still readable right after completion, and a maintenance pass keeps it for now.
    expect(await app.handle(handle.id).result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 42 });
    const results: Array<[string, unknown]> = [];
    worker.on('maintenance:ran', (service, result) => results.push([service, result]));
    await worker.runMaintenance();
    expect(await row(handle.id)).toBeDefined();

    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET purge_after = now() - interval '1 second' WHERE id = $1`,
      [handle.id],
    );
    await worker.runMaintenance();
    expect(await row(handle.id)).toBeUndefined();
    expect(await countAttempts([handle.id])).toBe(0);
    expect(results).toContainEqual(['retainer', { heartbeats: 0, workerStates: 0, tasks: 1, workflows: 0 }]);
    await worker.stop();
  });

  it('stores a queue retention at send, and a task retention wins over its queue', async () => {
    const app = t.app({ queues: [{ name: 'default' }, { name: 'short', retentionMs: 0 }] });
    const onShort = app.task({
      name: 'e2e.queue.short',
      queue: 'short',
      input: z.object({}),
      handler: () => 'short',
    });
    const own = app.task({
      name: 'e2e.queue.own',
      queue: 'short',
      retentionMs: 3_600_000,
      input: z.object({}),
      handler: () => 'own',
    });
    const onDefault = app.task({ name: 'e2e.queue.default', input: z.object({}), handler: () => 'default' });
    const a = await onShort.send({});
    const b = await own.send({});
    const c = await onDefault.send({});
    const d = await onDefault.send({}, { queue: 'short' });
    expect((await row(a.id))!.retention_ms).toBe('0');
    expect((await row(b.id))!.retention_ms).toBe('3600000');
    expect((await row(c.id))!.retention_ms).toBeNull();
    expect((await row(d.id))!.retention_ms).toBe('0');

    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    for (const h of [a, b, c, d]) expect((await h.result({ timeoutMs: 10_000 })).ok).toBe(true);
    const purge = async (id: string): Promise<number | null> => {
      const [r] = await t.query<{ seconds: number | null }>(
        `SELECT extract(epoch FROM purge_after - finished_at)::float AS seconds
         FROM {{schema}}.horsies_tasks WHERE id = $1`,
        [id],
      );
      return r!.seconds;
    };
    expect(await purge(a.id)).toBeCloseTo(10, 1);
    expect(await purge(b.id)).toBeCloseTo(3600, 1);
    expect(await purge(c.id)).toBeNull();
    expect(await purge(d.id)).toBeCloseTo(10, 1);

    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET purge_after = now() - interval '1 second' WHERE id = $1`,
      [a.id],
    );
    const ran = waitForEvent(worker, 'maintenance:ran', (service) => service === 'retainer');
    await worker.runMaintenance();
    expect((await ran)[1]).toEqual({ heartbeats: 0, workerStates: 0, tasks: 1, workflows: 0 });
    expect(await existing([a.id, b.id, c.id, d.id])).toEqual([b.id, c.id, d.id].sort());
    await worker.stop();
  });
});

describe('Maintainer', () => {
  function service(name: string, calls: string[], run: () => unknown = () => ({ name })) {
    return {
      name,
      runs: 0,
      async runOnce() {
        this.runs += 1;
        calls.push(name);
        return run();
      },
    } satisfies MaintenanceService & { runs: number };
  }

  it('runs every service in order and reports each result', async () => {
    const calls: string[] = [];
    const a = service('a', calls, () => ({ did: 'a' }));
    const b = service('b', calls, () => ({ did: 'b' }));
    const maintainer = new Maintainer([a, b], { checkIntervalMs: 50 }, testLogger);
    const events: Array<[string, unknown]> = [];
    maintainer.on('maintenance:ran', (name, result) => events.push([name, result]));
    maintainer.start();
    await eventually(async () => a.runs >= 3 && b.runs >= 3);
    await maintainer.stop();
    expect(calls.slice(0, 4)).toEqual(['a', 'b', 'a', 'b']);
    expect(events.slice(0, 4)).toEqual([
      ['a', { did: 'a' }],
      ['b', { did: 'b' }],
      ['a', { did: 'a' }],
      ['b', { did: 'b' }],
    ]);
    // Every pass ran the services in order (the last may have been cut short by stop()).
    expect(calls.every((name, i) => name === (i % 2 === 0 ? 'a' : 'b'))).toBe(true);
  });

  it('leaves a service that does not run on start out of the first pass only', async () => {
    const calls: string[] = [];
    const recover = service('recover', calls);
    const figures = { ...service('figures', calls), runsOnStart: false };
    // The interval timer is under the test's control: the start pass runs, the next one only when time moves on.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const maintainer = new Maintainer([recover, figures], { checkIntervalMs: 1_000 }, testLogger);
      maintainer.start();
      await eventually(async () => recover.runs === 1);
      await maintainer.runOnce();
      // The start pass ran recover alone; the pass asked for after it ran both.
      expect(calls).toEqual(['recover', 'recover', 'figures']);
      vi.advanceTimersByTime(1_000);
      await eventually(async () => figures.runs === 2);
      expect(calls).toEqual(['recover', 'recover', 'figures', 'recover', 'figures']);
      await maintainer.stop();
      // A leader elected again starts with a recovery pass again, without the figures.
      maintainer.start();
      await eventually(async () => recover.runs === 4);
      await maintainer.stop();
      expect(figures.runs).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('reports a throwing service and still runs the next one', async () => {
    const calls: string[] = [];
    const boom = new Error('service broke');
    const bad = service('bad', calls, () => {
      throw boom;
    });
    const good = service('good', calls, () => 'fine');
    const maintainer = new Maintainer(
      [bad, good],
      { checkIntervalMs: 60_000, runOnStart: false },
      testLogger,
    );
    const errors: Array<[string, unknown]> = [];
    const ran: Array<[string, unknown]> = [];
    maintainer.on('maintenance:error', (name, error) => errors.push([name, error]));
    maintainer.on('maintenance:ran', (name, result) => ran.push([name, result]));
    await maintainer.runOnce();
    expect(calls).toEqual(['bad', 'good']);
    expect(errors).toEqual([['bad', boom]]);
    expect(ran).toEqual([['good', 'fine']]);
    // A later pass runs again: one failure does not disable the service.
    await maintainer.runOnce();
    expect(calls).toEqual(['bad', 'good', 'bad', 'good']);
    await maintainer.stop();
  });

  it('joins a pass already under way instead of starting a second one', async () => {
    const calls: string[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const slow = service('slow', calls, () => gate);
    const maintainer = new Maintainer([slow], { checkIntervalMs: 60_000, runOnStart: false }, testLogger);
    const first = maintainer.runOnce();
    const second = maintainer.runOnce();
    expect(second).toBe(first);
    release();
    await Promise.all([first, second]);
    expect(slow.runs).toBe(1);
    await maintainer.stop();
  });

  it('stop() is idempotent, waits for a pass under way, and ends the timer', async () => {
    const calls: string[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    let finished = false;
    const slow = service('slow', calls, async () => {
      await gate;
      finished = true;
    });
    const after = service('after', calls);
    // The interval timer is under the test's control: whether stop() ended it is seen by moving time on.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const maintainer = new Maintainer([slow, after], { checkIntervalMs: 20 }, testLogger);
    maintainer.start();
    await eventually(async () => slow.runs === 1);
    let stopped = false;
    const stopping = maintainer.stop().then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(finished).toBe(true);
    // The pass ended after the service under way: the next one did not start.
    expect(after.runs).toBe(0);
    await maintainer.stop();
    await maintainer.stop();
    // No timer passes any more: ten intervals later, nothing ran.
    vi.advanceTimersByTime(200);
    vi.useRealTimers();
    expect(slow.runs).toBe(1);
    expect(after.runs).toBe(0);
  });

  it('runs again after a stop when asked: runOnce(), or start() to resume the timer', async () => {
    const calls: string[] = [];
    const a = service('a', calls);
    const maintainer = new Maintainer([a], { checkIntervalMs: 20 }, testLogger);
    maintainer.start();
    await eventually(async () => a.runs >= 1);
    await maintainer.stop();
    const afterStop = a.runs;
    await maintainer.runOnce();
    expect(a.runs).toBe(afterStop + 1);
    maintainer.start();
    await eventually(async () => a.runs >= afterStop + 3);
    await maintainer.stop();
  });
});
