/**
 * What the transactional finish costs. `npx tsx scripts/bench-tx-finish.ts` (uses DATABASE_URL, or starts an embedded
 * PostgreSQL) runs ROUNDS interleaved rounds (default 3); each round drains TASKS tasks (default 5,000) in each of:
 *
 *   a. no-op: the handler returns its input (the queue's own cost);
 *   b. insert: the handler inserts one row on the app's pool (autocommit), then returns; the outcome goes through the
 *      completer's batch, as for any task;
 *   c. transactional: the handler inserts the same row through `ctx.transaction`, which writes the outcome in the
 *      same transaction (BEGIN, insert, fenced finish, COMMIT on one connection; no batch).
 *
 * The order of a, b and c rotates from round to round. Each drain runs on emptied tables with a new worker
 * (concurrency 10, snapshots and maintenance off), timed from the worker's start until every outcome is written.
 * With PREFETCH=1 the worker also prefetches (prefetch 490, claims of up to 500). Figures: tasks/s as the median of
 * the rounds [lowest, highest], and ratios taken within each round, then their median.
 */
import { pino } from 'pino';
import { z } from 'zod';
import { createApp, createWorker } from '../src/index.js';
import type { App, WorkerConfig } from '../src/index.js';
import { runScript, withDatabase } from './database.js';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const TASKS = Number(process.env.TASKS ?? 5_000);
const SCHEMA = 'bench_tx';
const CONFIG: WorkerConfig =
  process.env.PREFETCH === '1'
    ? { concurrency: 10, prefetch: { size: 490 }, claims: { batchSize: 500 } }
    : { concurrency: 10 };

type Variant = 'noop' | 'insert' | 'transactional';
const VARIANTS: Variant[] = ['noop', 'insert', 'transactional'];

function setup(databaseUrl: string) {
  const app = createApp({ databaseUrl, schema: SCHEMA, logger: pino({ level: 'warn' }) });
  const insert = `INSERT INTO ${SCHEMA}.effects (task_id, n) VALUES ($1, $2)`;
  const tasks = {
    noop: app.task({ name: 'noop', input: z.object({ i: z.number() }), handler: ({ i }) => i }),
    insert: app.task({
      name: 'insert',
      input: z.object({ i: z.number() }),
      handler: async ({ i }, ctx) => {
        await app.db.pool.query(insert, [ctx.taskId, i]);
        return i;
      },
    }),
    transactional: app.task({
      name: 'transactional',
      input: z.object({ i: z.number() }),
      handler: ({ i }, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insert, [ctx.taskId, i]);
          return i;
        }),
    }),
  };
  return { app, tasks };
}

async function reset(app: App): Promise<void> {
  await app.db.pool.query(
    `TRUNCATE ${SCHEMA}.horsies_tasks, ${SCHEMA}.horsies_task_steps, ${SCHEMA}.horsies_task_attempts, ${SCHEMA}.horsies_heartbeats,
              ${SCHEMA}.effects`,
  );
}

/** Tasks/s of one drain of `variant`. */
async function drain(b: ReturnType<typeof setup>, variant: Variant, tasks = TASKS): Promise<number> {
  await reset(b.app);
  await b.tasks[variant].sendMany(Array.from({ length: tasks }, (_, i) => ({ input: { i } })));
  await b.app.db.pool.query('CHECKPOINT').catch(() => undefined);
  const worker = createWorker(b.app, { snapshotIntervalMs: 0, maintenance: false, ...CONFIG });
  worker.on('worker:error', (error) => console.error('worker error:', error));
  try {
    let finished = 0;
    const done = new Promise<void>((resolve) =>
      worker.on('task:finished', (rows) => {
        finished += rows.length;
        if (finished >= tasks) resolve();
      }),
    );
    const started = performance.now();
    await worker.start();
    await done;
    const perS = tasks / ((performance.now() - started) / 1000);
    const [check] = (
      await b.app.db.pool.query<{ completed: number; effects: number }>(
        `SELECT (SELECT count(*)::int FROM ${SCHEMA}.horsies_tasks WHERE status = 'COMPLETED') AS completed,
                (SELECT count(*)::int FROM ${SCHEMA}.effects) AS effects`,
      )
    ).rows;
    const expectedEffects = variant === 'noop' ? 0 : tasks;
    if (check!.completed !== tasks || check!.effects !== expectedEffects) {
      throw new Error(`${variant}: ${check!.completed} completed, ${check!.effects} effects`);
    }
    return perS;
  } finally {
    await worker.stop();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function spread(values: number[], digits = 0): string {
  const f = (v: number): string => v.toFixed(digits);
  return `${f(median(values))} [${f(Math.min(...values))}, ${f(Math.max(...values))}]`;
}

runScript(() =>
  withDatabase(async (url) => {
    const b = setup(url);
    try {
      await b.app.migrate();
      await b.app.db.pool.query(
        `CREATE TABLE IF NOT EXISTS ${SCHEMA}.effects (task_id text NOT NULL, n int)`,
      );
      // A warm-up drain of each, not counted (plans, prepared statements, the pools' connections).
      for (const v of VARIANTS) await drain(b, v, 500);
      const results: Record<Variant, number[]> = { noop: [], insert: [], transactional: [] };
      for (let round = 0; round < ROUNDS; round += 1) {
        const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!);
        const line: string[] = [];
        for (const v of order) {
          const perS = await drain(b, v);
          results[v].push(perS);
          line.push(`${v} ${perS.toFixed(0)}/s`);
        }
        console.log(`round ${round + 1} (${order.join(', ')}): ${line.join(', ')}`);
      }
      const ratio = (x: Variant, y: Variant): number[] => results[x].map((v, i) => v / results[y][i]!);
      console.log(`\n${TASKS} tasks per drain, ${ROUNDS} rounds, worker ${JSON.stringify(CONFIG)}`);
      console.log(`no-op          ${spread(results.noop)} tasks/s`);
      console.log(`insert         ${spread(results.insert)} tasks/s`);
      console.log(`transactional  ${spread(results.transactional)} tasks/s`);
      console.log(`transactional / insert  ${spread(ratio('transactional', 'insert'), 2)}`);
      console.log(`insert / no-op          ${spread(ratio('insert', 'noop'), 2)}`);
      console.log(`transactional / no-op   ${spread(ratio('transactional', 'noop'), 2)}`);
    } finally {
      await b.app.close();
    }
  }),
);
