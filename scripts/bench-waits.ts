/**
 * What runs that wait cost the queue. `npx tsx scripts/bench-waits.ts` (uses DATABASE_URL, or starts an embedded
 * PostgreSQL):
 *
 *   a. TASKS (default 10,000) no-op tasks drained by one worker (concurrency 10) on empty tables: tasks/s;
 *   b. WAITING (default 10,000) runs started, each waiting at a wait node for an event with its own key: the
 *      time to start them, the task rows and busy worker slots they hold (none expected);
 *   c. the drain of a. again beside those waiting runs: tasks/s, and its ratio to a;
 *   d. one event emitted per waiting run (sequentially, with a worker running their next nodes): each emit's time
 *      (its run's wait node is COMPLETED when the emit returns: the resume), p50/p99/max, and the time until
 *      every run has completed.
 */
import { pino } from 'pino';
import { z } from 'zod';
import { createApp, createWorker, workflow } from '../src/index.js';
import type { App } from '../src/index.js';
import { runScript, withDatabase } from './database.js';

const TASKS = Number(process.env.TASKS ?? 10_000);
const WAITING = Number(process.env.WAITING ?? 10_000);
const SCHEMA = 'bench_waits';

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

async function count(app: App, sql: string): Promise<number> {
  const { rows } = await app.db.pool.query<{ n: number }>(sql);
  return rows[0]!.n;
}

async function drain(
  app: App,
  noop: { sendMany(items: { input: { i: number } }[]): Promise<unknown> },
): Promise<number> {
  await noop.sendMany(Array.from({ length: TASKS }, (_, i) => ({ input: { i } })));
  await app.db.pool.query('CHECKPOINT').catch(() => undefined);
  const worker = createWorker(app, { concurrency: 10, snapshotIntervalMs: 0, maintenance: false });
  let finished = 0;
  const done = new Promise<void>((resolve) =>
    worker.on('task:finished', (rows) => {
      finished += rows.length;
      if (finished >= TASKS) resolve();
    }),
  );
  const started = performance.now();
  await worker.start();
  await done;
  const perS = TASKS / ((performance.now() - started) / 1000);
  await worker.stop();
  return perS;
}

async function bench(databaseUrl: string): Promise<void> {
  const app = createApp({ databaseUrl, schema: SCHEMA, logger: pino({ level: 'warn' }) });
  await app.migrate();
  const noop = app.task({ name: 'noop', input: z.object({ i: z.number() }), handler: ({ i }) => i });
  const wf = workflow(app, 'bench.waits', { params: z.object({ key: z.string() }) });
  const go = wf.waitFor('bench.go', { schema: z.object({ i: z.number() }), key: wf.params.key });
  const after = wf.node(noop, { input: { i: go.result.i } });
  const flow = wf.build({ output: after });

  const a = await drain(app, noop);
  console.log(
    `a. drain of ${TASKS.toLocaleString('en-US')} no-op tasks, empty tables: ${a.toFixed(0)} tasks/s`,
  );
  await app.db.pool.query(`TRUNCATE ${SCHEMA}.horsies_tasks, ${SCHEMA}.horsies_task_attempts CASCADE`);

  const startedAt = performance.now();
  for (let from = 0; from < WAITING; from += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, WAITING - from) }, (_, j) => flow.start({ key: `k${from + j}` })),
    );
  }
  const startMs = performance.now() - startedAt;
  const waiting = await count(
    app,
    `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_workflow_tasks WHERE wait_kind = 'signal' AND status = 'RUNNING'`,
  );
  const taskRows = await count(app, `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_tasks`);
  console.log(
    `b. ${WAITING.toLocaleString('en-US')} runs started in ${(startMs / 1000).toFixed(1)} s; ${waiting} nodes waiting, ` +
      `${taskRows} task rows, 0 worker slots (no worker ran)`,
  );

  const c = await drain(app, noop);
  console.log(
    `c. the same drain beside ${waiting.toLocaleString('en-US')} waiting runs: ${c.toFixed(0)} tasks/s ` +
      `(${((c / a) * 100).toFixed(0)}% of a)`,
  );
  await app.db.pool.query(`DELETE FROM ${SCHEMA}.horsies_tasks WHERE workflow_id IS NULL`);

  const worker = createWorker(app, { concurrency: 10, snapshotIntervalMs: 0, maintenance: false });
  await worker.start();
  const emits: number[] = [];
  let resumed = 0;
  const emitStart = performance.now();
  for (let i = 0; i < WAITING; i += 1) {
    const t0 = performance.now();
    const receipt = await app.emit('bench.go', { i }, { key: `k${i}` });
    emits.push(performance.now() - t0);
    resumed += receipt.resumed.length;
  }
  const emitMs = performance.now() - emitStart;
  for (;;) {
    const open = await count(
      app,
      `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_workflows WHERE status <> 'COMPLETED'`,
    );
    if (open === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const allMs = performance.now() - emitStart;
  await worker.stop();
  const sorted = emits.sort((x, y) => x - y);
  console.log(
    `d. ${resumed.toLocaleString('en-US')} runs resumed by ${WAITING.toLocaleString('en-US')} emits in ` +
      `${(emitMs / 1000).toFixed(1)} s; emit (= resume) p50 ${percentile(sorted, 50).toFixed(1)} ms, ` +
      `p99 ${percentile(sorted, 99).toFixed(1)} ms, max ${sorted[sorted.length - 1]!.toFixed(1)} ms; ` +
      `every run completed ${(allMs / 1000).toFixed(1)} s after the first emit`,
  );
  await app.close();
}

runScript(() => withDatabase(bench));
