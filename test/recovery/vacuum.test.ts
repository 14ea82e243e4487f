/**
 * The leader's vacuum of the task table: claims walk over the index entries of every task claimed since the
 * last vacuum, and the vacuum check removes them once the table's dead rows pass the threshold. Tasks are drained
 * by a real worker; the dead rows are PostgreSQL's own statistics, which a backend reports when it exits or within
 * about a second of going idle.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { App } from '../../src/client/App.js';
import { TaskTableVacuumState } from '../../src/db/maintenance.js';
import { ConfigError } from '../../src/errors.js';
import { Vacuumer } from '../../src/recovery/Vacuumer.js';
import type { VacuumerResult } from '../../src/recovery/Vacuumer.js';
import { createWorker } from '../../src/worker/Worker.js';
import { thrown } from '../support/assertions.js';
import {
  databaseUrl,
  drainWith,
  eventually,
  testLogger,
  useTestSchema,
  waitForEvent,
} from '../support/db.js';

const t = await useTestSchema();

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

async function deadRows(app: App): Promise<number> {
  const [state] = await app.db.run(TaskTableVacuumState, { schema: t.schema });
  return state!.dead;
}

describe('the vacuum check', () => {
  it('vacuums the task table once its dead rows pass the threshold, and claims stop reading claimed tasks', async () => {
    const app = t.app({ queues: [{ name: 'drained' }] });
    const noop = app.task({
      name: 'vacuum.noop',
      queue: 'drained',
      input: z.object({ i: z.number() }),
      handler: () => null,
    });
    // A stopped worker's connections have exited, so their statistics are in.
    await drainWith(createWorker(app, { maintenance: false, concurrency: 10 }), noop, 3000);
    await noop.send({ i: -1 });
    // Each drained task left two dead versions of its row: the pending one and the running one.
    const dead = await eventually(async () => {
      const n = await deadRows(app);
      return n >= 6000 ? n : undefined;
    });
    // The first read also visits the dead rows, to mark their index entries dead; later ones only skip them.
    await claimPagesRead('drained');
    const before = await claimPagesRead('drained');
    expect(before).toBeGreaterThan(20);

    // Below the threshold, and below the threshold plus the share of the live rows: nothing happens.
    const high = await new Vacuumer(app.db, { threshold: dead + 1, scaleFactor: 0 }, testLogger).runOnce();
    expect(high).toEqual({ dead, live: expect.any(Number), vacuumed: false });
    const scaled = await new Vacuumer(app.db, { threshold: 1000, scaleFactor: 2 }, testLogger).runOnce();
    expect(scaled.vacuumed).toBe(false);
    expect(await claimPagesRead('drained')).toBe(before);

    const ran = await new Vacuumer(app.db, { threshold: 1000, scaleFactor: 0.05 }, testLogger).runOnce();
    expect(ran).toEqual({ dead, live: expect.any(Number), vacuumed: true, ms: expect.any(Number) });
    expect(await deadRows(app)).toBeLessThan(100);
    // The claim finds the pending task at once, and it is still there to be run.
    expect(await claimPagesRead('drained')).toBeLessThanOrEqual(3);
    const pending = await t.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE queue_name = 'drained' AND status = 'PENDING'`,
    );
    expect(pending).toEqual([{ n: 1 }]);
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
    const results: VacuumerResult[] = [];
    worker.on('maintenance:ran', (service, result) => {
      if (service === 'vacuum') results.push(result as VacuumerResult);
    });
    const vacuumed = waitForEvent(
      worker,
      'maintenance:ran',
      (service, result) => service === 'vacuum' && (result as VacuumerResult).vacuumed,
      30_000,
    );
    await worker.start();
    const handles = await noop.sendMany(Array.from({ length: 1500 }, (_, i) => ({ input: { i } })));
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
    const [, result] = (await vacuumed) as [string, VacuumerResult];
    await worker.stop();
    expect(result.dead).toBeGreaterThanOrEqual(1000);
    // Checks below the threshold came first, many of them: the check runs every 100 ms, not every 30 s.
    expect(results.filter((r) => !r.vacuumed).length).toBeGreaterThan(3);

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
    await new Promise((resolve) => setTimeout(resolve, 500));
    await quiet.stop();
    expect(services.has('reaper')).toBe(true);
    expect(services.has('vacuum')).toBe(false);
  });

  it('refuses a threshold under 1,000 rows or a negative scale factor, naming the fields', () => {
    const { problems } = thrown(
      () =>
        new App({
          databaseUrl: databaseUrl(),
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
