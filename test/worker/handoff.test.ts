/**
 * `handoff`: an idle worker registers its free slots, and a single send inserts its task claimed and started for
 * that worker (every claim field, generation 1, attempt 1, in the send's own transaction) and tells it on its own
 * channel. What must not be handed over (a send in a caller's transaction, a delayed task, a task with a group key,
 * a paused queue) is inserted PENDING and claimed as before; a registration whose worker no longer holds its session
 * lock is dropped by the first send that finds it, and a worker whose LISTEN connection came back registers again; a
 * task whose notification was lost still runs, from the registration's list, at the next claim pass or renewal; a
 * worker that has handed out half its slots renews its registration in one statement; a worker of several queues
 * registers the unmetered ones with one count of slots, and one from before migration 28 is handed nothing; a stop
 * takes the registration back.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

interface Row {
  status: string;
  attempt: number;
  claim_generation: number;
  claimed_by_worker_id: string | null;
  sent_at: Date;
  claimed_at: Date | null;
  started_at: Date | null;
  worker_pid: number | null;
}

async function row(id: string): Promise<Row> {
  const [r] = await t.query<Row>(
    `SELECT status, attempt, claim_generation, claimed_by_worker_id, sent_at, claimed_at, started_at, worker_pid
     FROM {{schema}}.horsies_tasks WHERE id = $1`,
    [id],
  );
  return r as Row;
}

/** Sends `n` and checks the send handed it to `workerId` (claimed and started in its own transaction), and it ran. */
async function expectHandedOver(task: Task, workerId: string, n: number): Promise<void> {
  const handle = await task.send({ n });
  const r = await row(handle.id);
  expect(r.claimed_by_worker_id).toBe(workerId);
  expect(r.claimed_at).toEqual(r.sent_at);
  expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: n });
}

/**
 * A task of `queue` handed to the worker as the send does (RUNNING under its claim, taken from its registration's
 * slots and listed there), but without the notification: as if lost with the worker's LISTEN connection.
 */
async function handOverUnheard(workerId: string, queue: string, id: string, n: number): Promise<void> {
  await t.query(
    `INSERT INTO {{schema}}.horsies_tasks
       (id, task_name, queue_name, kwargs, status, claimed, claimed_at, claimed_by_worker_id, claim_generation,
        claim_expires_at, started_at, attempt)
     VALUES ($1, $2 || '.echo', $2, jsonb_build_object('n', $3::int), 'RUNNING', true, now(), $4, 1,
             now() + interval '1 minute', now(), 1)`,
    [id, queue, n, workerId],
  );
  await t.query(
    `UPDATE {{schema}}.horsies_idle_slots SET free = free - 1, handed = handed || $2::text WHERE worker_id = $1`,
    [workerId, id],
  );
}

async function registrations(workerId?: string) {
  return t.query<{ worker_id: string; queue_name: string; free: number; handed: string[]; token: string }>(
    `SELECT worker_id, queue_name, free, handed, token::text FROM {{schema}}.horsies_idle_slots
     WHERE $1::text IS NULL OR worker_id = $1 ORDER BY worker_id`,
    [workerId ?? null],
  );
}

type Task = ReturnType<typeof setup>['task'];

/** An app with one queue of its own (so that the file's other workers leave it alone) and a task that records runs. */
function setup(queue: string) {
  const app = t.app({ queues: [queue] });
  const ran: string[] = [];
  const task = app.task({
    name: `${queue}.echo`,
    queue,
    input: z.object({ n: z.number() }),
    handler: ({ n }, ctx) => {
      ran.push(ctx.taskId);
      return n;
    },
  });
  return { app, task, ran };
}

async function idleWorker(
  app: ReturnType<typeof setup>['app'],
  config: { pollIntervalMs?: number; concurrency?: number } = {},
) {
  const worker = createWorker(app, { concurrency: 3, handoff: true, maintenance: false, ...config });
  await worker.start();
  await eventually(async () => (await registrations(worker.id)).length === 1);
  return worker;
}

describe('hand-off of single sends to an idle worker', () => {
  it('starts the task for the worker in the send itself, with every claim field, and runs it once', async () => {
    const { app, task, ran } = setup('handoff_a');
    // No poll within the test: the task can only reach the worker through the send's notification.
    const worker = await idleWorker(app, { pollIntervalMs: 60_000 });
    const claimed: string[] = [];
    worker.on('task:claimed', (ids) => claimed.push(...ids));
    try {
      const [registered] = await registrations(worker.id);
      expect(registered).toMatchObject({ queue_name: 'handoff_a', free: 3, handed: [] });
      const handle = await task.send({ n: 7 });
      // Claimed and started in the send's transaction: one now() for all three.
      const sent = await row(handle.id);
      expect(sent).toMatchObject({
        attempt: 1,
        claim_generation: 1,
        claimed_by_worker_id: worker.id,
        worker_pid: process.pid,
      });
      expect(sent.claimed_at).toEqual(sent.sent_at);
      expect(sent.started_at).toEqual(sent.sent_at);
      expect(await registrations(worker.id)).toMatchObject([{ free: 2, handed: [handle.id] }]);
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 7 });
      expect(ran).toEqual([handle.id]);
      expect(claimed).toEqual([handle.id]);
      const attempts = await t.query<{ attempt: number; outcome: string; worker_id: string }>(
        'SELECT attempt, outcome, worker_id FROM {{schema}}.horsies_task_attempts WHERE task_id = $1',
        [handle.id],
      );
      expect(attempts).toEqual([{ attempt: 1, outcome: 'COMPLETED', worker_id: worker.id }]);
    } finally {
      await worker.stop();
    }
  });

  it('inserts PENDING what it must not hand over, and the worker claims it as before', async () => {
    const { app, task, ran } = setup('handoff_b');
    const worker = await idleWorker(app);
    try {
      const client = await t.pool.connect();
      let inTx: Awaited<ReturnType<typeof task.send>>;
      try {
        await client.query('BEGIN');
        inTx = await task.send({ n: 1 }, { tx: client });
        // The registration is not held by the open transaction: the worker could take it back meanwhile.
        expect(await registrations(worker.id)).toMatchObject([{ free: 3, handed: [] }]);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      const delayed = await task.send({ n: 2 }, { delayMs: 100 });
      const grouped = await task.send({ n: 3 }, { group: 'g' });
      await app.pauseQueue('handoff_b');
      const whilePaused = await task.send({ n: 4 });
      const handles = [inTx, delayed, grouped, whilePaused];
      for (const h of handles) {
        const r = await row(h.id);
        expect(r.claimed_at === null || r.claimed_at > r.sent_at).toBe(true);
      }
      await app.resumeQueue('handoff_b');
      await worker.runMaintenance();
      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
      expect(results).toEqual([1, 2, 3, 4].map((n) => ({ ok: true, value: n })));
      for (const h of handles) {
        const r = await row(h.id);
        expect(r.status).toBe('COMPLETED');
        expect(r.claimed_at?.getTime()).toBeGreaterThan(r.sent_at.getTime());
      }
      expect(new Set(ran)).toEqual(new Set(handles.map((h) => h.id)));
    } finally {
      await worker.stop();
    }
  });

  it('renews its registration once half its slots were handed over, in one statement, with no claim pass', async () => {
    const { app, task } = setup('handoff_h');
    // The statements the worker runs (the database is the real one; this only records their names).
    const ran: string[] = [];
    const run = app.db.run.bind(app.db);
    app.db.run = ((stmt, params, on) => {
      ran.push(stmt.name);
      return run(stmt, params, on);
    }) as typeof app.db.run;
    // No poll within the test: only the refill registers again.
    const worker = await idleWorker(app, { pollIntervalMs: 60_000 });
    try {
      const [initial] = await registrations(worker.id);
      ran.length = 0;
      const first = await task.send({ n: 1 });
      const second = await task.send({ n: 2 });
      await Promise.all([first, second].map((h) => h.result({ timeoutMs: 10_000 })));
      // Two of three slots taken: once a run ended, the registration was replaced by one with a new token, the
      // slot left and those freed.
      await eventually(async () => {
        const [r] = await registrations(worker.id);
        return r !== undefined && r.token !== initial?.token && r.handed.length === 0 && r.free >= 2;
      });
      // Renewed in place: never taken back, so a send meanwhile would have found it, and nothing claimed.
      expect(ran.filter((name) => name.startsWith('Idle') || name.startsWith('TaskClaim'))).toEqual([
        'IdleRegister',
      ]);
      await expectHandedOver(task, worker.id, 3);
    } finally {
      await worker.stop();
    }
  });

  it('runs, at the renewal, a task its old registration handed over whose notification never came', async () => {
    const { app, task, ran } = setup('handoff_r');
    // No poll within the test: only the renewal can find the lost hand-off.
    const worker = await idleWorker(app, { concurrency: 4, pollIntervalMs: 60_000 });
    try {
      const [initial] = await registrations(worker.id);
      expect(initial?.free).toBe(4);
      const lost = '00000000-0000-7000-8000-00000000e00e';
      await handOverUnheard(worker.id, 'handoff_r', lost, 9);
      // Two sends heard of: half the slots the worker knows of are taken, and it renews.
      const sent = [await task.send({ n: 1 }), await task.send({ n: 2 })];
      await Promise.all(sent.map((h) => h.result({ timeoutMs: 10_000 })));
      expect(await task.handle(lost).result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 9 });
      expect(ran.filter((id) => id === lost)).toHaveLength(1);
      const [renewed] = await registrations(worker.id);
      expect(renewed?.token).not.toBe(initial?.token);
    } finally {
      await worker.stop();
    }
  });

  it('serves a worker of several queues: one count of slots for the queues no cap meters', async () => {
    const queues = ['handoff_m1', 'handoff_m2', 'handoff_m3'];
    const app = t.app({ queues: [{ name: 'handoff_m1', maxConcurrency: 5 }, 'handoff_m2', 'handoff_m3'] });
    // The runs wait for the test: a run that ends sends task_done, which a worker with a capped queue answers with
    // a claim pass (room may have opened), and that pass registers anew.
    let release = (): void => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const [capped, second, third] = queues.map((queue) =>
      app.task({
        name: `${queue}.echo`,
        queue,
        input: z.object({ n: z.number() }),
        handler: async ({ n }) => {
          await gate;
          return n;
        },
      }),
    ) as [Task, Task, Task];
    // Five slots: two sends leave more than half of them, so no refill registers anew meanwhile.
    const worker = await idleWorker(app, { concurrency: 5, pollIntervalMs: 60_000 });
    try {
      const [registered] = await t.query<{ queue_names: string[]; free: number }>(
        'SELECT queue_names, free FROM {{schema}}.horsies_idle_slots WHERE worker_id = $1',
        [worker.id],
      );
      expect(registered).toEqual({ queue_names: ['handoff_m2', 'handoff_m3'], free: 5 });
      // One count of slots for both queues.
      const handed = [await third.send({ n: 1 }), await second.send({ n: 2 })];
      for (const h of handed) {
        const r = await row(h.id);
        expect(r).toMatchObject({ status: 'RUNNING', claimed_by_worker_id: worker.id });
        expect(r.claimed_at).toEqual(r.sent_at);
      }
      expect(await registrations(worker.id)).toMatchObject([{ free: 3, handed: handed.map((h) => h.id) }]);
      // A capped queue's task is claimed under its cap, as before.
      const underCap = await capped.send({ n: 3 });
      expect(await row(underCap.id)).toMatchObject({ claimed_by_worker_id: null });
      release();
      const results = await Promise.all([...handed, underCap].map((h) => h.result({ timeoutMs: 10_000 })));
      expect(results).toEqual([1, 2, 3].map((n) => ({ ok: true, value: n })));
      const r = await row(underCap.id);
      expect(r.claimed_at?.getTime()).toBeGreaterThan(r.sent_at.getTime());
    } finally {
      release();
      await worker.stop();
    }
  });

  it('drops a registration whose worker no longer holds its lock, and hands over to one that does', async () => {
    const { task } = setup('handoff_c');
    // queueNames null: a registration written by a worker from before migration 28.
    const register = (
      workerId: string,
      lockKey: string,
      channel: string,
      queueNames: string[] | null = ['handoff_c'],
    ) =>
      t.query(
        `INSERT INTO {{schema}}.horsies_idle_slots
           (queue_name, queue_names, worker_id, task_names, free, lock_key, channel, token, lease_ms)
         VALUES ('handoff_c', $4, $1, ARRAY['handoff_c.echo'], 5, $2, $3, 42, 30000)`,
        [workerId, lockKey, channel, queueNames],
      );
    // Nobody holds this lock: its worker is gone.
    await register('gone', '123456789', `${t.schema}:handoff_gone`);
    const toNobody = await task.send({ n: 1 });
    expect(await row(toNobody.id)).toMatchObject({ status: 'PENDING', claimed_by_worker_id: null });
    expect(await registrations('gone')).toEqual([]);

    // A session holds this one, and listens on its channel.
    const alive = new pg.Client({ connectionString: t.url });
    await alive.connect();
    try {
      await alive.query('SELECT pg_advisory_lock(987654321)');
      const channel = `${t.schema}:handoff_alive`;
      await alive.query(`LISTEN "${channel}"`);
      const heard = new Promise<string>((resolve) =>
        alive.once('notification', (m) => resolve(m.payload ?? '')),
      );
      // A live worker from before migration 28 is not handed anything: it claims as workers did before hand-offs.
      await register('older', '987654321', channel, null);
      const toOlder = await task.send({ n: 0 });
      expect(await row(toOlder.id)).toMatchObject({ status: 'PENDING', claimed_by_worker_id: null });
      expect(await registrations('older')).toMatchObject([{ free: 5, handed: [] }]);
      await register('alive', '987654321', channel);
      const handed = await task.send({ n: 2 });
      expect(await row(handed.id)).toMatchObject({
        status: 'RUNNING',
        attempt: 1,
        claim_generation: 1,
        claimed_by_worker_id: 'alive',
      });
      expect(JSON.parse(await heard)).toMatchObject({
        id: handed.id,
        task_name: 'handoff_c.echo',
        queue_name: 'handoff_c',
        kwargs: { n: 2 },
        claim_generation: 1,
        attempt: 1,
        token: 42,
      });
      expect(await registrations('alive')).toMatchObject([{ free: 4, handed: [handed.id] }]);
    } finally {
      await alive.end();
    }
    // The session ended, and its lock with it: the next send drops the registration.
    const after = await task.send({ n: 3 });
    expect(await row(after.id)).toMatchObject({ status: 'PENDING' });
    expect(await registrations('alive')).toEqual([]);
  });

  it('runs a handed task whose notification never came, from the list its registration keeps', async () => {
    const { app, task, ran } = setup('handoff_d');
    const worker = await idleWorker(app, { pollIntervalMs: 100 });
    try {
      const id = '00000000-0000-7000-8000-00000000d00d';
      await handOverUnheard(worker.id, 'handoff_d', id, 5);
      // The next claim pass (a poll) takes the registration back and runs the task.
      await eventually(async () => ran.includes(id));
      expect(await task.handle(id).result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 5 });
      expect(ran.filter((r) => r === id)).toHaveLength(1);
      // And registers again, with every slot free.
      await eventually(async () => (await registrations(worker.id))[0]?.free === 3);
    } finally {
      await worker.stop();
    }
  });

  it('registers again once its LISTEN connection is back, holding its lock on the new connection', async () => {
    const { app, task } = setup('handoff_g');
    const worker = await idleWorker(app, { pollIntervalMs: 200 });
    // The backend that holds the worker's lock: its LISTEN connection.
    const holder = async (): Promise<number | undefined> => {
      const [registration] = await t.query<{ lock_key: string }>(
        'SELECT lock_key::text FROM {{schema}}.horsies_idle_slots WHERE worker_id = $1',
        [worker.id],
      );
      if (!registration) return undefined;
      const [lock] = await t.query<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
           AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
        [registration.lock_key],
      );
      return lock?.pid;
    };
    try {
      const before = await eventually(holder);
      await t.query('SELECT pg_terminate_backend($1)', [before]);
      // Meanwhile a send finds the lock free: it drops the registration and inserts PENDING; the task still runs.
      const inGap = await task.send({ n: 1 });
      expect(await inGap.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 1 });
      // Registered again with room, on its new connection. (The send in the gap may have found the old lock not yet
      // released by the terminated backend and been handed over unheard: the renewal takes it back first.)
      const after = await eventually(async () => {
        const pid = await holder();
        const [registration] = await registrations(worker.id);
        return pid !== undefined && pid !== before && (registration?.free ?? 0) > 0 ? pid : undefined;
      });
      expect(after).not.toBe(before);
      await expectHandedOver(task, worker.id, 2);
    } finally {
      await worker.stop();
    }
  });

  it('takes the registration back when the worker stops, and a send after that is not handed over', async () => {
    const { app, task } = setup('handoff_e');
    const worker = await idleWorker(app);
    await worker.stop();
    expect(await registrations(worker.id)).toEqual([]);
    const later = await task.send({ n: 1 });
    expect(await row(later.id)).toMatchObject({ status: 'PENDING', claimed_by_worker_id: null });
  });

  it('registers nothing for a worker that does not take hand-offs', async () => {
    const { app } = setup('handoff_f');
    const worker = createWorker(app, { concurrency: 3, maintenance: false });
    const declined = worker.testSignals.producer.noHandoff;
    declined.enable();
    await worker.start();
    try {
      // Its first claim pass found the queue dry, and registered nothing.
      await declined.wait();
      expect(await registrations(worker.id)).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});
