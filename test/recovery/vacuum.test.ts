/**
 * The leader's vacuum of the task table: claims walk over the index entries of every task claimed since the
 * last vacuum, and the vacuum check removes them once enough rows changed since. Tasks are drained by a real
 * worker; the counts are PostgreSQL's own statistics, which a backend reports when it exits, at most a second late
 * while busy, or within ten seconds of going idle.
 */
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { App } from '../../src/client/App.js';
import { TaskTableVacuumState } from '../../src/db/maintenance.js';
import { ConfigError } from '../../src/errors.js';
import { databaseClock } from '../../src/clock.js';
import { Vacuumer } from '../../src/recovery/Vacuumer.js';
import { vacuumLoop } from '../../src/recovery/services.js';
import type { VacuumerResult } from '../../src/recovery/Vacuumer.js';
import { createWorker } from '../../src/worker/Worker.js';
import { thrown } from '../support/assertions.js';
import { insertTask } from '../support/factories.js';
import { drainWith, eventually, testLogger, useTestSchema, waitForEvent } from '../support/db.js';

// A database of its own: the other test files' open transactions would keep the rows this file's vacuums remove.
const t = await useTestSchema({ ownDatabase: true });

/** Index pages (and heap pages) the claim's selection reads to find the first pending task of `queue`. */
async function claimPagesRead(queue: string): Promise<number> {
  const client = await t.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL enable_seqscan = off');
    const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: { 'Shared Hit Blocks': number } }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
       SELECT id FROM "${t.schema}".horsies_tasks
       WHERE NOT claimed AND finished_at IS NULL AND queue_name = $1 AND enqueued_at <= now()
       ORDER BY priority, enqueued_at, id LIMIT 1`,
      [queue],
    );
    await client.query('COMMIT');
    const plan = rows[0]!['QUERY PLAN'][0].Plan;
    return (
      plan['Shared Hit Blocks'] + ((plan as { 'Shared Read Blocks'?: number })['Shared Read Blocks'] ?? 0)
    );
  } finally {
    client.release();
  }
}

/** A reader of the table's statistics, and the vacuums' connections. */
const reader = t.app();
// Autovacuum would start the counts again at moments of its own choosing.
await t.query('ALTER TABLE {{schema}}.horsies_tasks SET (autovacuum_enabled = false)');

async function tableState(): Promise<{ changed: number; dead: number }> {
  const [state] = await reader.db.run(TaskTableVacuumState, { schema: t.schema });
  return state!;
}

async function deadRows(): Promise<number> {
  return (await tableState()).dead;
}

/**
 * Sends `count` no-op tasks to `queue` and drains them with a worker of an app of its own, then waits for the
 * statistics to count the two updates of each task's row (claimed and started, then finished), which its
 * connections report as they exit.
 */
async function drain(queue: string, count: number): Promise<void> {
  const { changed } = await tableState();
  const app = new App({
    databaseUrl: t.url,
    schema: t.schema,
    logger: testLogger,
    queues: [{ name: queue }],
  });
  const noop = app.task({
    name: `vacuum.${queue}`,
    queue,
    input: z.object({ i: z.number() }),
    handler: () => null,
  });
  try {
    await drainWith(createWorker(app, { maintenance: false, concurrency: 10 }), noop, count);
  } finally {
    await app.close();
  }
  await eventually(async () => (await tableState()).changed - changed >= 2 * count);
}

describe('the vacuum check', () => {
  it('vacuums the task table once enough rows changed since its last vacuum, and claims stop reading claimed tasks', async () => {
    const vacuumer = new Vacuumer(reader.db, { threshold: 1000, scaleFactor: 0.05 }, testLogger);
    expect(await vacuumer.runOnce()).toEqual({ changed: 0, live: 0, vacuumed: false });
    await drain('drained', 3000);
    const waiting = await insertTask(t, {
      taskName: 'vacuum.drained',
      queue: 'drained',
      status: 'PENDING',
      sentAgoMs: 0,
    });
    // The first read also visits the dead rows, to mark their index entries dead; later ones only skip them.
    await claimPagesRead('drained');
    const before = await claimPagesRead('drained');
    expect(before).toBeGreaterThan(20);

    // Below the threshold, and below the threshold plus the share of the live rows: nothing happens.
    const high = await new Vacuumer(reader.db, { threshold: 100_000, scaleFactor: 0 }, testLogger).runOnce();
    expect(high.vacuumed).toBe(false);
    const scaled = await new Vacuumer(reader.db, { threshold: 1000, scaleFactor: 2 }, testLogger).runOnce();
    expect(scaled.vacuumed).toBe(false);
    expect(await claimPagesRead('drained')).toBe(before);

    // Each drained task's row was updated twice, not in place: claimed and started, then finished.
    const ran = await vacuumer.runOnce();
    expect(ran).toEqual({ changed: 6000, live: expect.any(Number), vacuumed: true, ms: expect.any(Number) });
    expect(await deadRows()).toBe(0);
    // The claim finds the pending task at once, and it is still there to be run.
    expect(await claimPagesRead('drained')).toBeLessThanOrEqual(3);
    const pending =
      await t.query(`SELECT id, status FROM {{schema}}.horsies_tasks WHERE queue_name = 'drained'
                                   AND finished_at IS NULL`);
    expect(pending).toEqual([{ id: waiting, status: 'PENDING' }]);
    // Counting starts again from the vacuum.
    expect(await vacuumer.runOnce()).toMatchObject({ changed: 0, vacuumed: false });
  });

  it('does not vacuum again for rows an open transaction kept, until as many rows changed again', async () => {
    const vacuumer = new Vacuumer(reader.db, { threshold: 1000, scaleFactor: 0 }, testLogger);
    expect((await vacuumer.runOnce()).vacuumed).toBe(false);
    const holder = await t.pool.connect();
    try {
      // A snapshot taken before the drain: vacuum may not remove the row versions it still sees.
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query(`SELECT count(*) FROM "${t.schema}".horsies_tasks`);
      await drain('held', 2000);
      expect(await vacuumer.runOnce()).toMatchObject({ changed: 4000, vacuumed: true });
      expect(await deadRows()).toBeGreaterThanOrEqual(4000);
      expect(await vacuumer.runOnce()).toMatchObject({ changed: 0, vacuumed: false });
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    await drain('held', 300);
    expect(await vacuumer.runOnce()).toMatchObject({ changed: 600, vacuumed: false });
    // Another vacuum (an operator's here, autovacuum's in general) starts the count again.
    await t.query('VACUUM {{schema}}.horsies_tasks');
    expect(await deadRows()).toBe(0);
    expect(await vacuumer.runOnce()).toMatchObject({ changed: 0, vacuumed: false });
    await drain('held', 500);
    expect(await vacuumer.runOnce()).toMatchObject({ changed: 1000, vacuumed: true });
  });

  it("runs the vacuum on a connection of its own, without the app's statement timeout", async () => {
    const app = new App({
      databaseUrl: t.url,
      schema: t.schema,
      logger: testLogger,
      poolSize: 1,
      statementTimeoutMs: 60_000,
    });
    try {
      const settings = 'SELECT current_setting($1) AS timeout, pg_backend_pid() AS pid';
      const separate = await app.db.withOwnConnection(
        async (client) => (await client.query(settings, ['statement_timeout'])).rows[0],
      );
      const pooled = (await app.db.pool.query(settings, ['statement_timeout'])).rows[0];
      expect(pooled.timeout).toBe('1min');
      expect(separate.timeout).not.toBe('1min');
      expect(separate.pid).not.toBe(pooled.pid);

      // The vacuum goes through it.
      const own = vi.spyOn(app.db, 'withOwnConnection');
      const vacuumer = new Vacuumer(app.db, { threshold: 1000, scaleFactor: 0 }, testLogger);
      await vacuumer.runOnce();
      await drain('timed', 600);
      expect(await vacuumer.runOnce()).toMatchObject({ changed: 1200, vacuumed: true });
      expect(own).toHaveBeenCalledTimes(1);
    } finally {
      await app.close();
    }
  });

  it('runs on the maintenance leader, on a timer of its own, unless the threshold is null', async () => {
    const recovery = { vacuumThreshold: 1000, vacuumCheckIntervalMs: 100 };
    const app = t.app({ queues: [{ name: 'led' }], recovery });
    const noop = app.task({
      name: 'vacuum.led',
      queue: 'led',
      input: z.object({ i: z.number() }),
      handler: () => null,
    });
    const worker = createWorker(app, { concurrency: 10 });
    const vacuumed = waitForEvent(
      worker,
      'maintenance:ran',
      (service, result) => service === 'vacuum' && (result as VacuumerResult).vacuumed,
      // The worker's connections stay open: an idle one reports its statistics within 10 s.
      30_000,
    );
    await worker.start();
    const handles = await noop.sendMany(Array.from({ length: 1500 }, (_, i) => ({ input: { i } })));
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
    const [, result] = (await vacuumed) as [string, VacuumerResult];
    expect(result.changed).toBeGreaterThanOrEqual(1000);
    // Counted in the app's metrics.
    const metrics = await app.metrics!.registry.getMetricsAsJSON();
    const count = metrics.find((m) => m.name === 'horsies_task_table_vacuums_total')!.values[0]!.value;
    const seconds = metrics.find((m) => m.name === 'horsies_task_table_vacuum_seconds_total')!.values[0]!
      .value;
    expect(count).toBeGreaterThanOrEqual(1);
    expect(seconds).toBeGreaterThan(0);
    // The checks go on every 100 ms, not at the maintenance passes' 30 s: two more come within seconds.
    const check = () => waitForEvent(worker, 'maintenance:ran', (service) => service === 'vacuum', 3_000);
    await check();
    await check();
    await worker.stop();

    const off = t.app({
      queues: [{ name: 'led' }],
      recovery: { vacuumThreshold: null, vacuumCheckIntervalMs: 100 },
    });
    const quiet = createWorker(off, { concurrency: 1 });
    const services = new Set<string>();
    quiet.on('maintenance:ran', (service) => services.add(service));
    const retained = waitForEvent(quiet, 'maintenance:ran', (service) => service === 'retainer');
    await quiet.start();
    await retained;
    await quiet.stop();
    expect(services.has('reaper')).toBe(true);
    expect(services.has('vacuum')).toBe(false);
    // Without a threshold there is no vacuum loop for the leader to start: no check can ever run.
    const ctx = {
      db: off.db,
      recovery: off.config.recovery,
      clock: databaseClock,
      afterFinish: async () => {},
    };
    expect(vacuumLoop(ctx, testLogger)).toBeNull();
    expect(vacuumLoop({ ...ctx, recovery: app.config.recovery }, testLogger)).not.toBeNull();
  });

  it('refuses a threshold under 1,000 rows or a negative scale factor, naming the fields', () => {
    const { problems } = thrown(
      () =>
        new App({
          databaseUrl: t.url,
          schema: t.schema,
          logger: testLogger,
          recovery: { vacuumThreshold: 10, vacuumScaleFactor: -1, vacuumCheckIntervalMs: 5 },
        }),
      ConfigError,
    );
    expect(problems.map((p) => p.field).sort()).toEqual([
      'recovery.vacuumCheckIntervalMs',
      'recovery.vacuumScaleFactor',
      'recovery.vacuumThreshold',
    ]);
  });
});
