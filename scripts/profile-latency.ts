/**
 * Where a single send's time to its handler goes. `npm run profile:latency` (uses DATABASE_URL, or starts an embedded
 * PostgreSQL) sends SENDS no-op tasks one at a time (default 300, after WARMUP of 20 not counted), GAP_MS apart
 * (default 50, as the benchmark's latency scenario: the processes fall idle between sends), in two phases:
 *
 * 1. No worker: `send()` alone, alternated with the same one-row INSERT of a bare two-column table through the app's
 *    own pool (the baseline: what any durable insert costs on this machine after an idle gap).
 * 2. A worker running (THROUGHPUT default or high, concurrency 10): for each send, when `send()` returned, when the
 *    `task_new` notification reached a second listening connection in this process, and when the handler started,
 *    each from just before the `send()` call; and the worker's own hop, from the notification to the handler.
 *
 * It prints p50, p90 and p99 of each, the start apart for the sends that handed their task to the worker (`handoff`)
 * and those it claimed, the sends slower than OUTLIER_MS (default 9) with when they happened, and, when
 * `pg_stat_statements` is loaded, the server's execution time per call of each statement of phase 2 (with
 * `pg_stat_statements.track = all`, also of the statements inside horsies' functions).
 * horsies is the built package (dist/), as an application runs it; FROM=src runs the source instead.
 */
import { pino } from 'pino';
import pg from 'pg';
import { z } from 'zod';
import { channels } from '../src/db/Listener.js';
import { runScript, withDatabase } from './database.js';

const built = 'index.js';
const { createApp, createWorker }: typeof import('../src/index.js') =
  process.env.FROM === 'src' ? await import('../src/index.js') : await import(`../dist/${built}`);

const SENDS = Number(process.env.SENDS ?? 300);
const WARMUP = Number(process.env.WARMUP ?? 20);
const GAP_MS = Number(process.env.GAP_MS ?? 50);
const OUTLIER_MS = Number(process.env.OUTLIER_MS ?? 9);
const THROUGHPUT = process.env.THROUGHPUT === 'high' ? ('high' as const) : ('default' as const);
const SCHEMA = 'profile_latency';

/** The q-th percentile (0 to 100) of `values`, nearest rank. */
function percentile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((q / 100) * sorted.length) - 1))] ?? NaN;
}

function line(label: string, values: readonly number[]): string {
  const f = (q: number): string => percentile(values, q).toFixed(2).padStart(7);
  return `${label.padEnd(44)}${f(50)}${f(90)}${f(99)}`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function profile(databaseUrl: string): Promise<void> {
  const app = createApp({ databaseUrl, schema: SCHEMA, logger: pino({ level: 'warn' }) });
  await app.db.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await app.migrate();
  await app.db.pool.query(`CREATE TABLE ${SCHEMA}.baseline (id bigint, kwargs jsonb)`);
  let started: ((at: number) => void) | null = null;
  const noop = app.task({
    name: 'noop',
    input: z.object({ i: z.number() }),
    handler: () => {
      started?.(performance.now());
      return null;
    },
  });

  // Phase 1: the send alone, against a bare insert through the same pool.
  const alone: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < WARMUP + SENDS; i++) {
    let at = performance.now();
    await noop.send({ i });
    if (i >= WARMUP) alone.push(performance.now() - at);
    await sleep(GAP_MS);
    at = performance.now();
    await app.db.pool.query({
      name: 'profile_latency_baseline',
      text: `INSERT INTO ${SCHEMA}.baseline VALUES ($1, $2)`,
      values: [i, { i }],
    });
    if (i >= WARMUP) bare.push(performance.now() - at);
    await sleep(GAP_MS);
  }

  // Phase 2: a worker running, and a second connection listening where the worker does.
  const worker = createWorker(app, { concurrency: 10, throughput: THROUGHPUT });
  await worker.start();
  const listener = new pg.Client({ connectionString: databaseUrl });
  await listener.connect();
  let notified: ((at: number) => void) | null = null;
  listener.on('notification', () => notified?.(performance.now()));
  await listener.query(`LISTEN "${channels.taskNew(SCHEMA)}"`);
  await sleep(1000); // the worker settles into its idle wait
  const statements = await app.db.pool
    .query('SELECT pg_stat_statements_reset()')
    .then(() => true)
    .catch(() => false);
  const sent: number[] = [];
  const heard: number[] = [];
  const ran: number[] = [];
  const hop: number[] = [];
  const outliers: string[] = [];
  const ids: string[] = [];
  const t0 = performance.now();
  for (let i = 0; i < WARMUP + SENDS; i++) {
    const start = new Promise<number>((resolve) => (started = resolve));
    const note = new Promise<number>((resolve) => (notified = resolve));
    const at = performance.now();
    const handle = await noop.send({ i });
    const returned = performance.now();
    const [startedAt, notedAt] = await Promise.all([start, note]);
    if (i >= WARMUP) {
      ids.push(handle.id);
      sent.push(returned - at);
      heard.push(notedAt - at);
      ran.push(startedAt - at);
      hop.push(startedAt - notedAt);
      if (startedAt - at > OUTLIER_MS) {
        outliers.push(
          `  send ${i} at ${((at - t0) / 1000).toFixed(1)} s: returned ${(returned - at).toFixed(1)} ms, ` +
            `notified ${(notedAt - at).toFixed(1)}, started ${(startedAt - at).toFixed(1)} (${handle.id})`,
        );
      }
    }
    await sleep(GAP_MS);
  }
  await worker.stop();
  await listener.end();

  console.log(`${SENDS} sends ${GAP_MS} ms apart, throughput ${THROUGHPUT}; ms from just before send()`);
  console.log(`${''.padEnd(44)}    p50    p90    p99`);
  console.log('no worker');
  console.log(line('  send() returned', alone));
  console.log(line('  a bare two-column INSERT (same pool)', bare));
  console.log('worker running');
  console.log(line('  send() returned', sent));
  console.log(line('  task_new heard by a second connection', heard));
  console.log(line('  handler started', ran));
  console.log(line("  the worker's hop: notification to handler", hop));
  // A send that handed its task over wrote it claimed at its own sent_at (see horsies_send_one).
  const { rows: handedRows } = await app.db.pool.query<{ id: string; handed: boolean }>(
    `SELECT id, claimed_at = sent_at AS handed FROM ${SCHEMA}.horsies_tasks WHERE id = ANY ($1)`,
    [ids],
  );
  const handed = new Set(handedRows.filter((r) => r.handed).map((r) => r.id));
  const split = (yes: boolean) => ran.filter((_, k) => handed.has(ids[k] as string) === yes);
  console.log(line(`  handler started, handed over (${handed.size})`, split(true)));
  console.log(line(`  handler started, claimed (${ids.length - handed.size})`, split(false)));
  console.log(`starts slower than ${OUTLIER_MS} ms: ${outliers.length}`);
  for (const o of outliers) console.log(o);
  if (statements) {
    const { rows } = await app.db.pool.query<{ calls: string; ms: string; query: string }>(
      `SELECT calls, round((total_exec_time / calls)::numeric, 3) AS ms,
              left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS query
       FROM pg_stat_statements WHERE calls >= 10 AND (toplevel OR current_setting('pg_stat_statements.track') = 'all') AND query ILIKE '%${SCHEMA}%'
       ORDER BY total_exec_time DESC LIMIT 20`,
    );
    console.log('\nserver (pg_stat_statements), worker running: calls, execution ms/call, statement');
    for (const r of rows) console.log(`  ${r.calls}  ${r.ms}  ${r.query}`);
  } else {
    console.log('\nserver figures skipped: pg_stat_statements is not loaded (shared_preload_libraries)');
  }
  await app.db.pool.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
  await app.close();
}

runScript(() => withDatabase(profile));
