/**
 * Capacity: queue limits and the cluster cap hold across worker processes, strict priority between queues and
 * FIFO within a priority, leases of dead claimers stop counting once they expire, pause and resume, the
 * per-task limit, and tasks no worker can run.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskClaim } from '../../src/db/tasks.js';
import { databaseUrl, eventually, useTestSchema, waitForEvent } from '../support/db.js';
import { startWorkerProcess } from '../support/processes.js';
import { runCli } from '../support/cli.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();
await t.query(
  `CREATE TABLE {{schema}}.cap_runs (task_id text, queue text, label text, started bigint, finished bigint, pid int)`,
);

/** Most runs that overlapped in time, from recorded [started, finished] intervals. */
function maxOverlap(runs: { started: string | number; finished: string | number }[]): number {
  const events = runs.flatMap((r) => [
    [Number(r.started), 1],
    [Number(r.finished), -1],
  ]);
  // Ends before starts at the same instant: touching intervals do not overlap.
  events.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let now = 0;
  let max = 0;
  for (const [, delta] of events) max = Math.max(max, (now += delta!));
  return max;
}

describe('caps across worker processes', () => {
  it('never exceed a queue limit or the cluster cap', async () => {
    const appConfig = {
      queues: [
        { name: 'high', priority: 1, maxConcurrency: 3 },
        { name: 'low', priority: 2 },
      ],
      clusterWideCap: 5,
    };
    const env = {
      databaseUrl: databaseUrl(),
      schema: t.schema,
      appConfig,
      module: 'test/fixtures/capacityApp.ts',
    };
    const workers = [0, 1, 2].map(() =>
      startWorkerProcess(env, ['--concurrency', '4', '--poll-interval', '100']),
    );
    await Promise.all(workers.map((w) => w.ready));

    const producer = t.app({ queues: appConfig.queues });
    const work = producer.task({
      name: 'cap.work',
      input: z.object({ ms: z.number(), label: z.string() }),
      handler: () => 'unused',
    });
    const sampled = { total: 0, high: 0 };
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [row] = await t.query<{ total: number; high: number }>(
          `SELECT count(*)::int AS total, count(*) FILTER (WHERE queue_name = 'high')::int AS high
           FROM {{schema}}.horsies_tasks WHERE status IN ('CLAIMED', 'RUNNING')`,
        );
        sampled.total = Math.max(sampled.total, row!.total);
        sampled.high = Math.max(sampled.high, row!.high);
      }
    })();
    const handles = [
      ...(await work.sendMany(
        Array.from({ length: 40 }, (_, i) => ({ input: { ms: 40, label: `h${i}` }, queue: 'high' })),
      )),
      ...(await work.sendMany(
        Array.from({ length: 40 }, (_, i) => ({ input: { ms: 40, label: `l${i}` }, queue: 'low' })),
      )),
    ];
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 60_000 })));
    sampling = false;
    await sampler;

    const runs = await t.query<{ queue: string; started: string; finished: string }>(
      'SELECT queue, started, finished FROM {{schema}}.cap_runs',
    );
    expect(runs).toHaveLength(80);
    const overall = maxOverlap(runs);
    const high = maxOverlap(runs.filter((r) => r.queue === 'high'));
    console.log(
      `caps: sampled in flight max ${sampled.total} (cap 5), high max ${sampled.high} (limit 3); runs overlapping max ${overall}, high ${high}`,
    );
    expect(sampled.total).toBeLessThanOrEqual(5);
    expect(sampled.high).toBeLessThanOrEqual(3);
    expect(overall).toBeLessThanOrEqual(5);
    expect(high).toBeLessThanOrEqual(3);
    // The caps were reached, so the limits (not idleness) bounded the runs.
    expect(overall).toBe(5);
    expect(high).toBe(3);
    for (const w of workers) w.child.kill('SIGTERM');
    expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0, 0]);
  }, 90_000);
});

describe('hard cap, in one process', () => {
  it('holds with a worker whose claims start tasks and one with synchronous starts, whose claims only claim', async () => {
    const queue = 'cap_sync';
    const app = t.app({ queues: [queue], clusterWideCap: 2 });
    const runs: { started: number; finished: number }[] = [];
    const task = app.task({
      name: 'cap.sync',
      input: z.object({ i: z.number() }),
      queue,
      handler: async ({ i }) => {
        const started = performance.now();
        await new Promise((resolve) => setTimeout(resolve, 20));
        runs.push({ started, finished: performance.now() });
        return i;
      },
    });
    const workers = [
      createWorker(app, { concurrency: 3, pollIntervalMs: 100, maintenance: false }),
      createWorker(app, {
        concurrency: 3,
        pollIntervalMs: 100,
        maintenance: false,
        claims: { synchronousStarts: true },
      }),
    ];
    const ran = new Map<string, number>();
    workers.forEach((w, n) => w.on('task:started', () => ran.set(String(n), (ran.get(String(n)) ?? 0) + 1)));
    const handles = await task.sendMany(Array.from({ length: 24 }, (_, i) => ({ input: { i } })));
    await Promise.all(workers.map((w) => w.start()));
    try {
      for (const [i, h] of handles.entries())
        expect(await h.result({ timeoutMs: 20_000 })).toEqual({ ok: true, value: i });
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
    expect(maxOverlap(runs)).toBeLessThanOrEqual(2);
    // Both kinds of worker ran tasks.
    expect([...ran.keys()].sort()).toEqual(['0', '1']);
  });
});

describe('ordering across worker processes', () => {
  it('claims a lower-priority queue only when no higher-priority task waits, and FIFO within a priority', async () => {
    const appConfig = {
      queues: [
        { name: 'first', priority: 1 },
        { name: 'second', priority: 2 },
      ],
    };
    const producer = t.app({ queues: appConfig.queues });
    const work = producer.task({
      name: 'cap.work',
      input: z.object({ ms: z.number(), label: z.string() }),
      handler: () => 'unused',
    });
    // Everything waits before any worker starts, so the order is the workers' choice alone.
    const second = await work.sendMany(
      Array.from({ length: 30 }, (_, i) => ({ input: { ms: 15, label: `s${i}` }, queue: 'second' })),
    );
    const first = await work.sendMany(
      Array.from({ length: 30 }, (_, i) => ({ input: { ms: 15, label: `f${i}` }, queue: 'first' })),
    );
    const env = {
      databaseUrl: databaseUrl(),
      schema: t.schema,
      appConfig,
      module: 'test/fixtures/capacityApp.ts',
    };
    const workers = [0, 1].map(() =>
      startWorkerProcess(env, ['--concurrency', '2', '--poll-interval', '100']),
    );
    await Promise.all([...first, ...second].map((h) => h.result({ timeoutMs: 60_000 })));

    const rows = await t.query<{ id: string; queue_name: string; enqueued_at: Date; claimed_at: Date }>(
      `SELECT id, queue_name, enqueued_at, claimed_at FROM {{schema}}.horsies_tasks WHERE id = ANY($1)`,
      [[...first, ...second].map((h) => h.id)],
    );
    const firstRows = rows.filter((r) => r.queue_name === 'first');
    const secondRows = rows.filter((r) => r.queue_name === 'second');
    // Claims running at the same moment in two workers may interleave by a few milliseconds (SKIP LOCKED
    // passes over rows another claim holds); anything beyond that is a real inversion.
    const overlapMs = 20;
    const inversions = secondRows.filter((s) =>
      firstRows.some((f) => f.claimed_at.getTime() > s.claimed_at.getTime() + overlapMs),
    );
    expect(inversions).toEqual([]);
    const fifo = [firstRows, secondRows].flatMap((queue) =>
      queue.filter((a) =>
        queue.some(
          (b) =>
            b.enqueued_at.getTime() < a.enqueued_at.getTime() &&
            b.claimed_at.getTime() > a.claimed_at.getTime() + overlapMs,
        ),
      ),
    );
    expect(fifo).toEqual([]);
    const pids = await t.query<{ pid: number }>(
      `SELECT DISTINCT pid FROM {{schema}}.cap_runs WHERE task_id = ANY($1)`,
      [[...first, ...second].map((h) => h.id)],
    );
    expect(pids.length).toBe(2);
    for (const w of workers) w.child.kill('SIGTERM');
    expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0]);
  }, 90_000);
});

describe('ordering', () => {
  it('serves higher-priority queues first, and FIFO by enqueued_at within a priority', async () => {
    const app = t.app({
      queues: [
        { name: 'bulk', priority: 50 },
        { name: 'urgent', priority: 1 },
      ],
    });
    const order: string[] = [];
    const task = app.task({
      name: 'order.work',
      input: z.object({ label: z.string() }),
      handler: ({ label }) => {
        order.push(label);
      },
    });
    await task.sendMany(
      Array.from({ length: 5 }, (_, i) => ({ input: { label: `bulk${i}` }, queue: 'bulk' })),
    );
    await task.sendMany(
      Array.from({ length: 5 }, (_, i) => ({ input: { label: `urgent${i}` }, queue: 'urgent' })),
    );
    await task.send({ label: 'bulk-vip' }, { queue: 'bulk', priority: 1 });
    const worker = createWorker(app, { concurrency: 1, queues: ['bulk', 'urgent'] });
    await worker.start();
    await eventually(async () => order.length === 11);
    await worker.stop();
    expect(order).toEqual([
      'urgent0',
      'urgent1',
      'urgent2',
      'urgent3',
      'urgent4',
      'bulk-vip',
      'bulk0',
      'bulk1',
      'bulk2',
      'bulk3',
      'bulk4',
    ]);
  });
});

describe('leases', () => {
  const ghost = { workerId: 'ghost', hostname: 'gone', pid: 1, processName: 'dead' };

  for (const capMode of ['hard', 'soft'] as const) {
    it(`${capMode} cap: claims of a dead worker stop counting once their lease expires`, async () => {
      const queue = `lease_${capMode}`;
      const app = t.app({
        queues: [queue],
        clusterWideCap: 2,
        capMode,
        prefetchBuffer: capMode === 'soft' ? 2 : 0,
      });
      const task = app.task({
        name: `lease.${capMode}`,
        input: z.object({ i: z.number() }),
        queue,
        handler: ({ i }) => i,
      });
      await task.sendMany(Array.from({ length: 8 }, (_, i) => ({ input: { i } })));
      // A worker that claims as much as the cap (plus buffer) allows, then dies without a heartbeat.
      const held = capMode === 'soft' ? 4 : 2;
      const ghostClaims = await app.db.run(TaskClaim, {
        queue,
        taskNames: [task.name],
        limit: held,
        leaseMs: 1_500,
        worker: ghost,
      });
      expect(ghostClaims).toHaveLength(held);
      const claimedAt = Date.now();

      const worker = createWorker(app, { concurrency: 2, pollIntervalMs: 100 });
      const firstClaim = waitForEvent(worker, 'task:claimed', () => true, 10_000);
      await worker.start();
      await firstClaim;
      const waited = Date.now() - claimedAt;
      // Nothing could be claimed while the dead worker's leases were valid.
      expect(waited).toBeGreaterThanOrEqual(1_300);
      await eventually(async () => {
        const [row] = await t.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE queue_name = $1 AND status = 'COMPLETED'`,
          [queue],
        );
        return row!.n === 8 - held;
      });
      // The ghost's claims are still CLAIMED (the reaper, with its default threshold, has not requeued them).
      const [left] = await t.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE queue_name = $1 AND status = 'CLAIMED' AND claimed_by_worker_id = 'ghost'`,
        [queue],
      );
      expect(left!.n).toBe(held);
      await worker.stop();
    });
  }
});

describe('pause, per-task limit, tasks without a worker', () => {
  it('a paused queue is not claimed from until resumed; queues list shows it', async () => {
    const app = t.app({ queues: ['open', 'held'] });
    const task = app.task({ name: 'pause.work', input: z.object({}), handler: () => 'done' });
    await app.pauseQueue('held');
    const worker = createWorker(app, { pollIntervalMs: 100 });
    await worker.start();
    const open = await task.send({}, { queue: 'open' });
    const held = await task.send({}, { queue: 'held' });
    expect(await open.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'done' });
    expect((await held.result({ timeoutMs: 500 })).ok).toBe(false);
    expect((await app.getTask(held.id))?.status).toBe('PENDING');
    const listed = await runCli(['queues', 'list', '--schema', t.schema, '--json'], {
      DATABASE_URL: databaseUrl(),
    });
    const rows = listed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { queue: string; paused: boolean; counts: Record<string, number> });
    expect(rows.find((r) => r.queue === 'held')).toMatchObject({ paused: true, counts: { PENDING: 1 } });
    expect(rows.find((r) => r.queue === 'open')).toMatchObject({ paused: false, counts: { COMPLETED: 1 } });
    const resumed = await runCli(['queues', 'resume', 'held', '--schema', t.schema], {
      DATABASE_URL: databaseUrl(),
    });
    expect(resumed.stdout).toContain('resumed');
    expect(await held.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'done' });
    await worker.stop();
  });

  it('limits runs of one task per worker while other tasks use the free slots', async () => {
    const app = t.app();
    let active = 0;
    let peak = 0;
    const runOne = async () => {
      active += 1;
      peak = Math.max(peak, active);
      await new Promise((r) => setTimeout(r, 40));
      active -= 1;
    };
    const limited = app.task({
      name: 'limit.one',
      input: z.object({ i: z.number() }),
      maxConcurrentPerWorker: 2,
      handler: runOne,
    });
    let otherPeak = 0;
    let otherActive = 0;
    const free = app.task({
      name: 'limit.other',
      input: z.object({ i: z.number() }),
      handler: async () => {
        otherActive += 1;
        otherPeak = Math.max(otherPeak, otherActive);
        await new Promise((r) => setTimeout(r, 40));
        otherActive -= 1;
      },
    });
    const worker = createWorker(app, { concurrency: 6 });
    const handles = [
      ...(await limited.sendMany(Array.from({ length: 12 }, (_, i) => ({ input: { i } })))),
      ...(await free.sendMany(Array.from({ length: 12 }, (_, i) => ({ input: { i } })))),
    ];
    await worker.start();
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 20_000 })));
    await worker.stop();
    expect(peak).toBe(2);
    expect(otherPeak).toBeGreaterThanOrEqual(3);
  });

  it('leaves a task no live worker registered PENDING and reports it', async () => {
    const producer = t.app({ queues: ['orphans'] });
    const orphan = producer.task({ name: 'orphan.unknown', input: z.object({}), handler: () => 'never' });
    const served = producer.task({ name: 'orphan.known', input: z.object({}), handler: () => 'served' });
    const workerApp = t.app({ queues: ['orphans'] });
    workerApp.task({ name: 'orphan.known', input: z.object({}), handler: () => 'served' });
    const worker = createWorker(workerApp, { snapshotIntervalMs: 200 });
    await worker.start();
    const lost = await orphan.send({});
    const ok = await served.send({});
    expect(await ok.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'served' });
    const queues = await eventually(async () => {
      const list = await producer.listQueues();
      const row = list.find((q) => q.queue === 'orphans');
      return row && row.noWorker === 1 ? row : undefined;
    });
    expect(queues).toMatchObject({ counts: { PENDING: 1, COMPLETED: 1 }, noWorker: 1 });
    expect((await producer.getTask(lost.id))?.status).toBe('PENDING');
    const listed = await runCli(['tasks', 'list', '--schema', t.schema, '--status', 'pending', '--json'], {
      DATABASE_URL: databaseUrl(),
    });
    const rows = listed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; noWorker: boolean });
    expect(rows.find((r) => r.id === lost.id)?.noWorker).toBe(true);
    await worker.stop();
  });
});
