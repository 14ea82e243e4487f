/**
 * Lag from a slot to its task, with the real clock: a schedule firing every second, run by `SCHEDULERS`
 * schedulers at once (default 1) for `DURATION_S` seconds (default 150), at the default check interval (1 s).
 * `npm run bench:scheduler` (uses DATABASE_URL, or starts an embedded PostgreSQL). Prints, over every slot:
 *
 * - insert lag: the task row's `created_at` (the database's time at the start of the inserting transaction)
 *   less its `sent_at` (the slot);
 * - commit lag: the local time at which the pass that sent it returned, less the slot (the task is visible to
 *   workers by then; this host's clock, the database on the same host or close to it).
 *
 * and checks that every slot of the run was sent exactly once.
 */
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { z } from 'zod';
import { createApp } from '../src/index.js';
import { Scheduler } from '../src/scheduler/Scheduler.js';
import { runScript, withDatabase } from './database.js';

const DURATION_S = Number(process.env.DURATION_S ?? 150);
const SCHEDULERS = Number(process.env.SCHEDULERS ?? 1);

function summary(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return `median ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms`;
}

runScript(() =>
  withDatabase(async (databaseUrl) => {
    const schema = `bench_sched_${randomBytes(3).toString('hex')}`;
    const apps = Array.from({ length: SCHEDULERS }, () =>
      createApp({ databaseUrl, schema, logger: pino({ level: 'warn' }), poolSize: 3 }),
    );
    const first = apps[0];
    if (!first) throw new Error('SCHEDULERS must be at least 1');
    await first.migrate();
    const commitLags: number[] = [];
    const schedulers = apps.map((app) => {
      app.task({ name: 'tick', input: z.object({}), handler: () => 'ok' });
      const scheduler = new Scheduler(app.db, {
        schedules: [{ name: 'lag', task: 'tick', input: {}, pattern: { kind: 'interval', seconds: 1 } }],
        tasks: app.tasks,
        logger: app.logger,
      });
      scheduler.on('scheduler:ran', (result) => {
        const returnedAt = Date.now();
        for (const sent of result.sent) commitLags.push(returnedAt - sent.slot.getTime());
      });
      return scheduler;
    });
    console.log(`${SCHEDULERS} scheduler(s), one 1-second schedule, ${DURATION_S} s, schema ${schema}`);
    for (const scheduler of schedulers) scheduler.start();
    await new Promise((resolve) => setTimeout(resolve, DURATION_S * 1000));
    await Promise.all(schedulers.map((s) => s.stop()));

    const { rows } = await first.db.pool.query<{ lag_ms: number; slot: Date }>(
      `SELECT extract(epoch FROM created_at - sent_at) * 1000 AS lag_ms, sent_at AS slot
       FROM "${schema}".horsies_tasks ORDER BY sent_at`,
    );
    const slots = rows.map((r) => r.slot.getTime());
    const gaps = slots.slice(1).filter((slot, i) => slot - (slots[i] as number) !== 1000).length;
    console.log(`slots sent: ${rows.length} (gaps or repeats between consecutive slots: ${gaps})`);
    console.log(
      `insert lag (slot to the inserting transaction): ${summary(rows.map((r) => Number(r.lag_ms)))}`,
    );
    console.log(`commit lag (slot to the pass returning):        ${summary(commitLags)}`);
    await first.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await Promise.all(apps.map((app) => app.close()));
  }),
);
