/**
 * Claim throughput with no caps against a cluster-wide cap, per-queue limits, a rate limiter on each queue (set
 * high enough never to bind: what the limited claim and start cost) and a per-group limit with the tasks spread over
 * 1,000 groups, and a soft cluster cap with claims held beyond it (their starts wait for the cap), in one run on one
 * database. `npm run bench:caps` (uses DATABASE_URL, or starts an embedded PostgreSQL; TASKS and ROUNDS size it, ONLY
 * keeps the settings whose name contains it). Prints tasks/s per setting (median and min–max over interleaved rounds),
 * each setting's ratio to the one without limits, and the database's transactions per task.
 */
import { pino } from 'pino';
import { z } from 'zod';
import { createApp, createWorker } from '../src/index.js';
import type { AppConfig } from '../src/index.js';
import { runScript, withDatabase } from './database.js';

const TASKS = Number(process.env.TASKS ?? 6_000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const WORKERS = Number(process.env.WORKERS ?? 2);
const CONCURRENCY = 8;

const settings: Record<string, Partial<AppConfig>> = {
  'no caps': {},
  'cluster cap 12': { clusterWideCap: 12 },
  // 16 slots claim up to 12 + 4, and 4 claimed tasks at a time wait for room to start.
  'soft cluster cap 12, buffer 4': { clusterWideCap: 12, capMode: 'soft', prefetchBuffer: 4 },
  'queue limits 6+6': {
    queues: [
      { name: 'a', maxConcurrency: 6 },
      { name: 'b', maxConcurrency: 6 },
    ],
  },
  'cluster cap 12 + queue limits 6+6': {
    clusterWideCap: 12,
    queues: [
      { name: 'a', maxConcurrency: 6 },
      { name: 'b', maxConcurrency: 6 },
    ],
  },
  'rate limiter per queue': {
    queues: [
      { name: 'a', rateLimit: { max: 1_000_000, intervalMs: 1000 } },
      { name: 'b', rateLimit: { max: 1_000_000, intervalMs: 1000 } },
    ],
  },
  '1,000 groups, 4 per group': {
    queues: [
      { name: 'a', maxConcurrencyPerGroup: 4 },
      { name: 'b', maxConcurrencyPerGroup: 4 },
    ],
  },
};

/** Settings whose tasks are sent in groups, and how many groups. */
const GROUPS: Record<string, number> = { '1,000 groups, 4 per group': 1_000 };

interface Sample {
  rate: number;
  /** Transactions the database committed or rolled back per task, during the drain. */
  xactsPerTask: number;
}

async function round(databaseUrl: string, name: string, extra: Partial<AppConfig>): Promise<Sample> {
  const config: AppConfig = {
    databaseUrl,
    schema: 'bench_caps',
    queues: ['a', 'b'],
    logger: pino({ level: 'warn' }),
    ...extra,
  };
  const producer = createApp(config);
  await producer.db.pool.query('DROP SCHEMA IF EXISTS bench_caps CASCADE');
  await producer.migrate();
  const noop = producer.task({ name: 'noop', input: z.object({ i: z.number() }), handler: () => null });
  for (const queue of ['a', 'b']) {
    const groups = GROUPS[name];
    await noop.sendMany(
      Array.from({ length: TASKS / 2 }, (_, i) =>
        groups === undefined ? { input: { i }, queue } : { input: { i }, queue, group: `g${i % groups}` },
      ),
    );
  }
  const apps = Array.from({ length: WORKERS }, () => createApp(config));
  const workers = apps.map((app) => {
    app.task({ name: 'noop', input: z.object({ i: z.number() }), handler: () => null });
    return createWorker(app, { concurrency: CONCURRENCY, snapshotIntervalMs: 0, maintenance: false });
  });
  let done = 0;
  const finished = new Promise<void>((resolve) => {
    for (const w of workers) {
      w.on('task:finished', (rows) => {
        done += rows.length;
        if (done >= TASKS) resolve();
      });
    }
  });
  const xacts = async (): Promise<number> => {
    const { rows } = await producer.db.pool.query<{ n: string }>(
      `SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()`,
    );
    return Number(rows[0]!.n);
  };
  const xacts0 = await xacts();
  const started = performance.now();
  await Promise.all(workers.map((w) => w.start()));
  await finished;
  const rate = TASKS / ((performance.now() - started) / 1000);
  await Promise.all(workers.map((w) => w.stop()));
  await Promise.all(apps.map((a) => a.close()));
  // A backend reports its transactions to pg_stat_database when it exits (an idle one, up to 10 s later).
  await new Promise((resolve) => setTimeout(resolve, 500));
  const xactsPerTask = ((await xacts()) - xacts0) / TASKS;
  await producer.close();
  process.stdout.write(
    `  ${name}: ${Math.round(rate)} tasks/s, ${xactsPerTask.toFixed(2)} transactions per task\n`,
  );
  return { rate, xactsPerTask };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

async function measure(url: string): Promise<void> {
  const only = process.env.ONLY;
  const chosen = Object.entries(settings).filter(
    ([name]) => name === 'no caps' || !only || name.includes(only),
  );
  const samples = new Map<string, Sample[]>(chosen.map(([k]) => [k, []]));
  for (let r = 1; r <= ROUNDS; r += 1) {
    console.log(
      `round ${r}/${ROUNDS} (${TASKS} no-op tasks over 2 queues, ${WORKERS} workers x ${CONCURRENCY})`,
    );
    for (const [name, extra] of chosen) samples.get(name)!.push(await round(url, name, extra));
  }
  const base = median(samples.get('no caps')!.map((s) => s.rate));
  console.log(
    '\nsetting                              tasks/s (median, min–max)   vs no caps  transactions/task',
  );
  for (const [name, sampled] of samples) {
    const values = sampled.map((s) => s.rate);
    const m = median(values);
    const range = `${Math.round(Math.min(...values))}–${Math.round(Math.max(...values))}`;
    console.log(
      `${name.padEnd(36)} ${String(Math.round(m)).padStart(7)} (${range})`.padEnd(64) +
        `${(m / base).toFixed(2)}x`.padEnd(12) +
        median(sampled.map((s) => s.xactsPerTask)).toFixed(2),
    );
  }
}

runScript(() => withDatabase(measure));
