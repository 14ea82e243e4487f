/**
 * Operations on stored tasks: listing by filter, cancelling, and resubmitting terminal tasks. Rows are made
 * directly with SQL in any state, or for real through a worker where the path through the worker matters.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ClockNow, TaskResubmit } from '../../src/db/admin.js';
import { TaskClaim, TaskStartMany } from '../../src/db/tasks.js';
import { ConfigError, TaskError } from '../../src/errors.js';
import type { TaskFilter } from '../../src/client/operations.js';
import type { TaskStatus } from '../../src/types.js';
import { factoriesFor } from '../support/factories.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();

const { insertTasks, insertTask, insertAttempt } = factoriesFor(t);

interface Row {
  id: string;
  task_name: string;
  status: string;
  claimed: boolean;
  error_code: string | null;
  failed_reason: string | null;
  result: unknown;
  finished_at: Date | null;
  failed_at: Date | null;
  completed_at: Date | null;
  cancel_requested_at: Date | null;
  good_until: Date | null;
  attempt: number;
  retry_count: number;
  resubmit_count: number;
  resubmitted_at: Date | null;
  updated_at: Date;
}

async function row(id: string): Promise<Row> {
  const [r] = await t.query<Row & Record<string, unknown>>(
    'SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  if (!r) throw new Error(`no row ${id}`);
  return r;
}

async function attemptsOf(id: string): Promise<Array<{ attempt: number; outcome: string }>> {
  return t.query(
    'SELECT attempt, outcome FROM {{schema}}.horsies_task_attempts WHERE task_id = $1 ORDER BY attempt',
    [id],
  );
}

async function statusCounts(taskName: string): Promise<Record<string, number>> {
  const rows = await t.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE task_name = $1 GROUP BY status`,
    [taskName],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

const ids = (tasks: Array<{ id: string }>): string[] => tasks.map((x) => x.id);

describe('app.countTasks', () => {
  it('counts tasks by status for a filter, with every status present', async () => {
    const app = t.app();
    await insertTasks({ taskName: 'ops.count', status: 'FAILED', count: 3 });
    await insertTasks({ taskName: 'ops.count', status: 'COMPLETED', count: 2 });
    await insertTasks({ taskName: 'ops.count', count: 4 });
    await insertTasks({ taskName: 'ops.count.other', status: 'FAILED', count: 5 });
    expect(await app.countTasks({ taskName: 'ops.count' })).toEqual({
      PENDING: 4,
      CLAIMED: 0,
      RUNNING: 0,
      COMPLETED: 2,
      FAILED: 3,
      CANCELLED: 0,
      EXPIRED: 0,
    });
    expect((await app.countTasks({ taskName: 'ops.count', status: ['FAILED', 'PENDING'] })).COMPLETED).toBe(
      0,
    );
    await expect(app.countTasks({ status: 'DONE' as never })).rejects.toThrow(ConfigError);
  });
});

describe('app.listTasks', () => {
  it('filters by status and task name, newest finished first', async () => {
    const app = t.app();
    const failed3 = await insertTask({ taskName: 'ops.list.a', status: 'FAILED', finishedAgoMs: 3_000 });
    const failed1 = await insertTask({ taskName: 'ops.list.a', status: 'FAILED', finishedAgoMs: 1_000 });
    const failed2 = await insertTask({ taskName: 'ops.list.a', status: 'FAILED', finishedAgoMs: 2_000 });
    const completed = await insertTask({ taskName: 'ops.list.a', status: 'COMPLETED' });
    const pending = await insertTask({ taskName: 'ops.list.a' });
    const otherName = await insertTask({ taskName: 'ops.list.b', status: 'FAILED' });

    const failed = await app.listTasks({ status: 'FAILED', taskName: 'ops.list.a' });
    expect(ids(failed)).toEqual([failed1, failed2, failed3]);
    expect(failed.every((x) => x.status === 'FAILED' && x.taskName === 'ops.list.a')).toBe(true);

    const byName = ids(await app.listTasks({ taskName: 'ops.list.a' }));
    expect(byName.sort()).toEqual([failed1, failed2, failed3, completed, pending].sort());
    expect(byName).not.toContain(otherName);

    // Every status of the whole schema includes tasks of both names.
    const allFailed = ids(await app.listTasks({ status: 'FAILED' }, { limit: 10_000 }));
    expect(allFailed).toEqual(expect.arrayContaining([failed1, failed2, failed3, otherName]));
    expect(allFailed).not.toContain(completed);
  });

  it('filters by several statuses, queue and error code', async () => {
    const app = t.app();
    const name = 'ops.list.multi';
    const failedTimeout = await insertTask({ taskName: name, status: 'FAILED', errorCode: 'TIMEOUT_X' });
    const failedOther = await insertTask({ taskName: name, status: 'FAILED', errorCode: 'OTHER_X' });
    const cancelled = await insertTask({ taskName: name, status: 'CANCELLED' });
    const expired = await insertTask({ taskName: name, status: 'EXPIRED', queue: 'slow' });
    const completed = await insertTask({ taskName: name, status: 'COMPLETED', queue: 'slow' });
    await insertTask({ taskName: name, status: 'RUNNING' });

    const several = ids(await app.listTasks({ taskName: name, status: ['CANCELLED', 'EXPIRED'] }));
    expect(several.sort()).toEqual([cancelled, expired].sort());

    const slow = ids(await app.listTasks({ taskName: name, queue: 'slow' }));
    expect(slow.sort()).toEqual([expired, completed].sort());

    expect(ids(await app.listTasks({ taskName: name, errorCode: 'TIMEOUT_X' }))).toEqual([failedTimeout]);
    expect(ids(await app.listTasks({ taskName: name, status: 'FAILED', errorCode: 'OTHER_X' }))).toEqual([
      failedOther,
    ]);
    expect(await app.listTasks({ taskName: name, status: 'COMPLETED', queue: 'default' })).toEqual([]);
  });

  it('filters by finish time: finishedAfter inclusive, finishedBefore exclusive', async () => {
    const app = t.app();
    const name = 'ops.list.time';
    const base = Date.UTC(2030, 0, 1, 12, 0, 0);
    const at = (minutes: number) => new Date(base + minutes * 60_000);
    const t0 = await insertTask({ taskName: name, status: 'FAILED', finishedAt: at(0) });
    const t10 = await insertTask({ taskName: name, status: 'FAILED', finishedAt: at(10) });
    const t20 = await insertTask({ taskName: name, status: 'COMPLETED', finishedAt: at(20) });
    await insertTask({ taskName: name }); // not finished: never matches a time bound

    expect(ids(await app.listTasks({ taskName: name, finishedAfter: at(10) }))).toEqual([t20, t10]);
    expect(ids(await app.listTasks({ taskName: name, finishedBefore: at(10) }))).toEqual([t0]);
    expect(
      ids(await app.listTasks({ taskName: name, finishedAfter: at(0), finishedBefore: at(20) })),
    ).toEqual([t10, t0]);
    expect(await app.listTasks({ taskName: name, finishedAfter: at(21) })).toEqual([]);
    const info = (await app.listTasks({ taskName: name, finishedAfter: at(20) }))[0]!;
    expect(info.finishedAt).toEqual(at(20));
  });

  it('pages with limit and offset', async () => {
    const app = t.app();
    const name = 'ops.list.page';
    const made: string[] = [];
    for (let i = 5; i >= 1; i -= 1) {
      made.push(await insertTask({ taskName: name, status: 'FAILED', finishedAgoMs: i * 1000 }));
    }
    const newestFirst = [...made].reverse();
    expect(ids(await app.listTasks({ taskName: name }))).toEqual(newestFirst);
    expect(ids(await app.listTasks({ taskName: name }, { limit: 2 }))).toEqual(newestFirst.slice(0, 2));
    expect(ids(await app.listTasks({ taskName: name }, { limit: 2, offset: 2 }))).toEqual(
      newestFirst.slice(2, 4),
    );
    expect(ids(await app.listTasks({ taskName: name }, { limit: 2, offset: 4 }))).toEqual(
      newestFirst.slice(4),
    );
    expect(await app.listTasks({ taskName: name }, { offset: 5 })).toEqual([]);
  });

  it('rejects a bad filter or page with a ConfigError', async () => {
    const app = t.app();
    await expect(app.listTasks({ status: 'BOGUS' as TaskStatus })).rejects.toBeInstanceOf(ConfigError);
    await expect(app.listTasks({ status: [] })).rejects.toBeInstanceOf(ConfigError);
    await expect(app.listTasks({ nope: 1 } as unknown as TaskFilter)).rejects.toThrow(ConfigError);
    await expect(app.listTasks({ nope: 1 } as unknown as TaskFilter)).rejects.toThrow(/nope/);
    await expect(app.listTasks({ finishedAfter: '2030-01-01' as unknown as Date })).rejects.toThrow(
      ConfigError,
    );
    await expect(app.listTasks({}, { limit: 0 })).rejects.toThrow(ConfigError);
    await expect(app.listTasks({}, { offset: -1 })).rejects.toThrow(ConfigError);
  });
});

describe('cancel', () => {
  it('cancels a PENDING task at once, and its waiter gets TASK_CANCELLED', async () => {
    const app = t.app();
    const task = app.task({ name: 'ops.cancel.pending', input: z.object({}), handler: () => 'ran' });
    const handle = await task.send({});
    const waiting = handle.result({ timeoutMs: 10_000 });
    expect(await handle.cancel()).toEqual({ id: handle.id, outcome: 'cancelled', previousStatus: 'PENDING' });
    const r = await row(handle.id);
    expect(r.status).toBe('CANCELLED');
    expect(r.error_code).toBe('TASK_CANCELLED');
    expect(r.finished_at).toBeInstanceOf(Date);
    expect(r.cancel_requested_at).toBeInstanceOf(Date);
    const result = await waiting;
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.code).toBe('TASK_CANCELLED');
    // A worker never runs it.
    const worker = createWorker(app, { maintenance: false });
    await worker.start();
    await worker.stop();
    expect((await row(handle.id)).status).toBe('CANCELLED');
    expect(await attemptsOf(handle.id)).toEqual([]);
  });

  it('cancels a CLAIMED task at once, and the claimer can no longer start it', async () => {
    const app = t.app();
    const task = app.task({ name: 'ops.cancel.claimed', input: z.object({}), handler: () => 'ran' });
    const handle = await task.send({});
    const [claim] = await app.db.run(TaskClaim, {
      queue: 'default',
      taskNames: ['ops.cancel.claimed'],
      limit: 1,
      leaseMs: 30_000,
      worker: { workerId: 'w-cancel', hostname: 'h', pid: 1, processName: 'vitest' },
    });
    expect(claim?.id).toBe(handle.id);
    expect(await app.cancel(handle.id)).toEqual({
      id: handle.id,
      outcome: 'cancelled',
      previousStatus: 'CLAIMED',
    });
    const r = await row(handle.id);
    expect(r).toMatchObject({ status: 'CANCELLED', claimed: false, error_code: 'TASK_CANCELLED' });
    expect(r.finished_at).toBeInstanceOf(Date);
    const started = await app.db.run(TaskStartMany, {
      workerId: 'w-cancel',
      tasks: [{ id: handle.id, token: claim!.claim_token }],
    });
    expect(started).toEqual([]);
    expect((await row(handle.id)).status).toBe('CANCELLED');
    expect(await attemptsOf(handle.id)).toEqual([]);
  });

  it('requests the cancel of a RUNNING task and notifies its worker, once', async () => {
    const app = t.app();
    const id = await insertTask({ taskName: 'ops.cancel.running', status: 'RUNNING', attempt: 1 });
    const channel = `${t.schema}:task_cancel`;
    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    const heard: string[] = [];
    try {
      client.on('notification', (n) => {
        if (n.channel === channel) heard.push(n.payload ?? '');
      });
      await client.query(`LISTEN "${channel}"`);

      expect(await app.cancel(id)).toEqual({ id, outcome: 'cancel_requested', previousStatus: 'RUNNING' });
      const first = await row(id);
      expect(first.status).toBe('RUNNING');
      expect(first.claimed).toBe(true);
      expect(first.finished_at).toBeNull();
      expect(first.cancel_requested_at).toBeInstanceOf(Date);
      await eventually(async () => heard.some((p) => p.split(',').includes(id)));

      // A second request keeps the first time and sends no second notification.
      expect(await app.handle(id).cancel()).toEqual({
        id,
        outcome: 'cancel_requested',
        previousStatus: 'RUNNING',
      });
      expect((await row(id)).cancel_requested_at).toEqual(first.cancel_requested_at);
      // Notifications arrive in commit order: once the sentinel is heard, anything the second cancel sent is too.
      await t.query(`SELECT pg_notify($1, 'sentinel')`, [channel]);
      await eventually(async () => heard.includes('sentinel'));
      expect(heard.filter((p) => p.split(',').includes(id))).toHaveLength(1);
    } finally {
      await client.end();
    }
  });

  it('changes nothing on a finished task', async () => {
    const app = t.app();
    const id = await insertTask({ taskName: 'ops.cancel.done', status: 'COMPLETED' });
    const before = await row(id);
    expect(await app.cancel(id)).toEqual({ id, outcome: 'already_finished', previousStatus: 'COMPLETED' });
    expect(await row(id)).toEqual(before);
    const failed = await insertTask({ taskName: 'ops.cancel.done', status: 'FAILED' });
    expect(await app.cancel(failed)).toMatchObject({ outcome: 'already_finished', previousStatus: 'FAILED' });
    expect((await row(failed)).status).toBe('FAILED');
  });

  it('reports an unknown id as not_found', async () => {
    const app = t.app();
    expect(await app.cancel('no-such-task')).toEqual({
      id: 'no-such-task',
      outcome: 'not_found',
      previousStatus: null,
    });
  });
});

describe('resubmit', () => {
  it('puts FAILED, CANCELLED and EXPIRED tasks back to PENDING by id, keeping their history', async () => {
    const app = t.app();
    const name = 'ops.resubmit.ids';
    const failed = await insertTask({ taskName: name, status: 'FAILED', attempt: 2 });
    await insertAttempt(failed, 1, 'FAILED');
    await insertAttempt(failed, 2, 'FAILED');
    await t.query('UPDATE {{schema}}.horsies_tasks SET retry_count = 1, max_retries = 1 WHERE id = $1', [
      failed,
    ]);
    const cancelled = await insertTask({ taskName: name, status: 'CANCELLED', goodUntilAgoMs: -3_600_000 });
    const expired = await insertTask({ taskName: name, status: 'EXPIRED', goodUntilAgoMs: 60_000 });
    const completed = await insertTask({ taskName: name, status: 'COMPLETED' });
    const pending = await insertTask({ taskName: name });
    const running = await insertTask({ taskName: name, status: 'RUNNING', attempt: 1 });
    const goodUntilBefore = (await row(cancelled)).good_until;
    const completedBefore = await row(completed);

    const result = await app.resubmit({ ids: [failed, cancelled, expired, completed, pending, running] });
    expect(result.ids.sort()).toEqual([failed, cancelled, expired].sort());

    for (const id of [failed, cancelled, expired]) {
      const r = await row(id);
      expect(r).toMatchObject({
        status: 'PENDING',
        retry_count: 0,
        resubmit_count: 1,
        finished_at: null,
        failed_at: null,
        result: null,
        error_code: null,
        failed_reason: null,
        claimed: false,
        cancel_requested_at: null,
      });
      expect(r.resubmitted_at).toBeInstanceOf(Date);
    }
    const f = await row(failed);
    expect(f.attempt).toBe(2);
    expect(await attemptsOf(failed)).toEqual([
      { attempt: 1, outcome: 'FAILED' },
      { attempt: 2, outcome: 'FAILED' },
    ]);
    // A deadline already passed is cleared (or the task would only expire again); a future one is kept.
    expect((await row(expired)).good_until).toBeNull();
    expect((await row(cancelled)).good_until).toEqual(goodUntilBefore);

    expect(await row(completed)).toEqual(completedBefore);
    expect((await row(pending)).resubmit_count).toBe(0);
    expect((await row(running)).status).toBe('RUNNING');
    expect(await app.resubmit({ ids: [] })).toEqual({ ids: [] });
    expect(await app.resubmit({ ids: ['no-such-task'] })).toEqual({ ids: [] });
  });

  it('resubmits by filter FAILED only by default, and refuses statuses that cannot be resubmitted', async () => {
    const app = t.app();
    const name = 'ops.resubmit.filter';
    const failed = await insertTasks({ taskName: name, status: 'FAILED', count: 3 });
    const cancelled = await insertTask({ taskName: name, status: 'CANCELLED' });
    const otherFailed = await insertTask({ taskName: 'ops.resubmit.filter.other', status: 'FAILED' });

    const result = await app.resubmit({ taskName: name });
    expect(result.ids.sort()).toEqual([...failed].sort());
    expect((await row(cancelled)).status).toBe('CANCELLED');
    expect((await row(otherFailed)).status).toBe('FAILED');
    expect((await app.resubmit({ taskName: name, status: 'CANCELLED' })).ids).toEqual([cancelled]);

    await expect(app.resubmit({ status: 'COMPLETED' })).rejects.toBeInstanceOf(ConfigError);
    await expect(app.resubmit({ status: ['FAILED', 'PENDING'] })).rejects.toBeInstanceOf(ConfigError);
    await expect(app.resubmit({ status: 'NOPE' as TaskStatus })).rejects.toBeInstanceOf(ConfigError);
    await expect(
      app.resubmit({ taskName: name, bogus: true } as unknown as { taskName: string }),
    ).rejects.toBeInstanceOf(ConfigError);
    // Nothing was changed by the refused calls.
    expect((await row(otherFailed)).status).toBe('FAILED');
  });

  it('treats a filter whose status is undefined like one without status (FAILED only)', async () => {
    const app = t.app();
    const name = 'ops.resubmit.undefinedStatus';
    const failed = await insertTask({ taskName: name, status: 'FAILED' });
    const cancelled = await insertTask({ taskName: name, status: 'CANCELLED' });
    const expired = await insertTask({ taskName: name, status: 'EXPIRED' });
    // What the CLI builds from its options when --status is not given.
    const result = await app.resubmit({ taskName: name, status: undefined });
    expect(result.ids).toEqual([failed]);
    expect((await row(cancelled)).status).toBe('CANCELLED');
    expect((await row(expired)).status).toBe('EXPIRED');
  });

  it('resubmits 1,000 failed tasks in batches; a worker then completes them with attempt numbers continuing', async () => {
    const app = t.app();
    let ready = false;
    const flaky = app.task({
      name: 'ops.bulk',
      input: z.object({ i: z.number() }),
      handler: ({ i }) => (ready ? i : new TaskError('NOT_READY', 'the flag is off')),
    });
    const other = app.task({
      name: 'ops.bulk.other',
      input: z.object({ i: z.number() }),
      handler: () => new TaskError('ALWAYS_FAILS', 'never works'),
    });
    const handles = await flaky.sendMany(Array.from({ length: 1000 }, (_, i) => ({ input: { i } })));
    const others = await other.sendMany(Array.from({ length: 25 }, (_, i) => ({ input: { i } })));
    const failing = createWorker(app, { concurrency: 100, maintenance: false, pollIntervalMs: 100 });
    await failing.start();
    await eventually(async () => (await statusCounts('ops.bulk')).FAILED === 1000, 60_000);
    await eventually(async () => (await statusCounts('ops.bulk.other')).FAILED === 25, 60_000);
    await failing.stop();
    const othersBefore = await t.query(
      'SELECT * FROM {{schema}}.horsies_tasks WHERE task_name = $1 ORDER BY id',
      ['ops.bulk.other'],
    );

    const began = performance.now();
    const result = await app.resubmit({ taskName: 'ops.bulk', status: 'FAILED', batchSize: 100 });
    const elapsed = performance.now() - began;
    console.log(`resubmit of 1,000 FAILED tasks (batchSize 100): ${elapsed.toFixed(1)} ms`);
    expect(result.ids).toHaveLength(1000);
    expect(new Set(result.ids)).toEqual(new Set(ids(handles)));
    const [state] = await t.query<Record<string, number>>(
      `SELECT count(*) FILTER (WHERE status = 'PENDING')::int AS pending,
              count(*) FILTER (WHERE resubmit_count = 1 AND retry_count = 0 AND attempt = 1
                               AND finished_at IS NULL AND result IS NULL AND error_code IS NULL)::int AS reset
       FROM {{schema}}.horsies_tasks WHERE task_name = 'ops.bulk'`,
    );
    expect(state).toEqual({ pending: 1000, reset: 1000 });

    ready = true;
    const draining = createWorker(app, { concurrency: 100, maintenance: false, pollIntervalMs: 100 });
    await draining.start();
    await eventually(async () => (await statusCounts('ops.bulk')).COMPLETED === 1000, 60_000);
    await draining.stop();

    const [done] = await t.query<Record<string, number>>(
      `SELECT count(*)::int AS tasks,
              count(*) FILTER (WHERE t.status = 'COMPLETED' AND t.attempt = 2 AND t.resubmit_count = 1)::int AS ok,
              count(*) FILTER (WHERE a1.outcome = 'FAILED' AND a1.error_code = 'NOT_READY')::int AS first_failed,
              count(*) FILTER (WHERE a2.outcome = 'COMPLETED')::int AS second_completed,
              count(*) FILTER (WHERE (SELECT count(*) FROM {{schema}}.horsies_task_attempts x
                                      WHERE x.task_id = t.id) = 2)::int AS two_attempts
       FROM {{schema}}.horsies_tasks t
       LEFT JOIN {{schema}}.horsies_task_attempts a1 ON a1.task_id = t.id AND a1.attempt = 1
       LEFT JOIN {{schema}}.horsies_task_attempts a2 ON a2.task_id = t.id AND a2.attempt = 2
       WHERE t.task_name = 'ops.bulk'`,
    );
    expect(done).toEqual({
      tasks: 1000,
      ok: 1000,
      first_failed: 1000,
      second_completed: 1000,
      two_attempts: 1000,
    });
    expect(await handles[123]!.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 123 });

    const othersAfter = await t.query(
      'SELECT * FROM {{schema}}.horsies_tasks WHERE task_name = $1 ORDER BY id',
      ['ops.bulk.other'],
    );
    expect(othersAfter).toEqual(othersBefore);
    expect(ids(othersAfter as Array<{ id: string }>).sort()).toEqual(ids(others).sort());
  }, 180_000);

  it('never picks up again within one call a task it resubmitted, but a later call does', async () => {
    const app = t.app();
    const name = 'ops.resubmit.again';
    const always = app.task({
      name,
      input: z.object({ i: z.number() }),
      handler: () => new TaskError('STILL_BROKEN', 'fails every time'),
    });
    const handles = await always.sendMany(Array.from({ length: 20 }, (_, i) => ({ input: { i } })));
    const worker = createWorker(app, { concurrency: 20, maintenance: false, pollIntervalMs: 50 });
    await worker.start();
    const allFailedWith = (resubmits: number) =>
      eventually(async () => {
        const [c] = await t.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks
           WHERE task_name = $1 AND status = 'FAILED' AND resubmit_count = $2`,
          [name, resubmits],
        );
        return c!.n === handles.length;
      });
    await allFailedWith(0);

    // The statement, with the call's start time fixed: what it resubmitted and failed again is skipped.
    const [clock] = await app.db.run(ClockNow, {});
    const filter = {
      statuses: ['FAILED'],
      taskName: name,
      queue: null,
      errorCode: null,
      finishedAfter: null,
      finishedBefore: null,
      ids: null,
      notResubmittedSince: clock!.now,
      limit: 1000,
    };
    expect(await app.db.run(TaskResubmit, filter)).toHaveLength(20);
    await allFailedWith(1);
    expect(await app.db.run(TaskResubmit, filter)).toEqual([]);

    // A new call starts later: the same tasks were resubmitted before it began, so it takes them again.
    const second = await app.resubmit({ taskName: name });
    expect(second.ids.sort()).toEqual(ids(handles).sort());
    await allFailedWith(2);
    const r = await row(handles[0]!.id);
    expect(r.attempt).toBe(3);
    expect(await attemptsOf(handles[0]!.id)).toHaveLength(3);

    // A bulk call racing the worker (which fails each task again within milliseconds) ends, and returns each id
    // once.
    const third = await app.resubmit({ taskName: name, batchSize: 3 });
    expect(third.ids).toHaveLength(20);
    expect(new Set(third.ids).size).toBe(20);
    await allFailedWith(3);
    await worker.stop();
  });
});
