/**
 * What one statement costs the Node.js process with each PostgreSQL driver: node-postgres (`pg`, which horsies
 * uses) and `postgres` (which pipelines queries on a connection). `npm run bench:driver` at the repository root.
 *
 * The statement has the shape of the worker's claim: text arrays of ten ids as parameters, ten rows back with the
 * claim's columns (text, integers, a jsonb payload, two timestamps). It reads no table, so what differs between the
 * rows below is the client's work and the round trip, not the server's. Both drivers use a prepared statement.
 *
 * Rows:
 * - one at a time: CALLS statements in sequence on one connection; wall time and this process's CPU per call.
 * - 4 in flight: the same, four statements outstanding at a time: `pg` on four pooled connections (it runs one
 *   statement per connection at a time), `postgres` on one connection (pipelined) and on four.
 *
 * Rounds are interleaved (pg, postgres, pg, postgres, ...); the figures are medians over the rounds.
 */
import pg from 'pg';
import postgres from 'postgres';
import { startPostgres } from './env/postgres.js';

const CALLS = Number(process.env.CALLS ?? 5_000);
const ROUNDS = Number(process.env.ROUNDS ?? 5);

const TEXT = `SELECT g::text || '-' || $1::text[][1] AS id, 'bench.noop' AS task_name, 'default' AS queue_name,
         0 AS priority, jsonb_build_object('seq', g) AS kwargs, 1 AS claim_generation, 0 AS retry_count,
         0 AS max_retries, 1 AS attempt, now() AS enqueued_at, NULL::text AS workflow_id,
         NULL::int AS workflow_node, 'RUNNING' AS status, now() AS started_at
  FROM generate_series(1, cardinality($2::text[])) AS g`;

const IDS = Array.from({ length: 10 }, (_, i) => `0196a2c4-0000-7000-8000-${String(i).padStart(12, '0')}`);

interface Sample {
  wallUs: number;
  cpuUs: number;
  /** Of cpuUs, the time in the kernel (socket writes and reads, polling). */
  systemUs: number;
}

type Call = () => Promise<unknown>;

async function measure(call: Call, inFlight: number): Promise<Sample> {
  for (let i = 0; i < 200; i += 1) await call(); // warm-up: prepared, JIT-compiled
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < CALLS) {
        next += 1;
        await call();
      }
    }),
  );
  const wallUs = ((performance.now() - t0) * 1000) / CALLS;
  const cpu = process.cpuUsage(cpu0);
  return { wallUs, cpuUs: (cpu.user + cpu.system) / CALLS, systemUs: cpu.system / CALLS };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const env = await startPostgres();
  const pool = new pg.Pool({ connectionString: env.url, max: 4 });
  const sql1 = postgres(env.url, { max: 1, onnotice: () => undefined });
  const sql4 = postgres(env.url, { max: 4, onnotice: () => undefined });
  const values = [IDS, IDS];
  const subjects: [string, Call, number][] = [
    ['pg, one at a time', () => pool.query({ name: 'driver_cost', text: TEXT, values }), 1],
    ['postgres, one at a time', () => sql1.unsafe(TEXT, values, { prepare: true }), 1],
    ['pg, 4 in flight on 4 connections', () => pool.query({ name: 'driver_cost', text: TEXT, values }), 4],
    ['postgres, 4 in flight on 1 connection', () => sql1.unsafe(TEXT, values, { prepare: true }), 4],
    ['postgres, 4 in flight on 4 connections', () => sql4.unsafe(TEXT, values, { prepare: true }), 4],
  ];
  const samples = new Map<string, Sample[]>(subjects.map(([name]) => [name, []]));
  try {
    for (let round = 1; round <= ROUNDS; round += 1) {
      for (const [name, call, inFlight] of subjects) samples.get(name)!.push(await measure(call, inFlight));
      process.stderr.write(`round ${round}/${ROUNDS} done\n`);
    }
  } finally {
    await pool.end();
    await sql1.end();
    await sql4.end();
    await env.stop();
  }
  console.log(`${CALLS} calls per sample, ${ROUNDS} interleaved rounds, medians (range):`);
  console.log(
    'driver and concurrency                    wall µs/call           Node.js CPU µs/call    of it in the kernel',
  );
  for (const [name] of subjects) {
    const s = samples.get(name)!;
    const wall = s.map((x) => x.wallUs);
    const cpu = s.map((x) => x.cpuUs);
    const system = s.map((x) => x.systemUs);
    const cell = (v: number[]): string =>
      `${median(v).toFixed(0)} (${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)})`.padEnd(22);
    console.log(`${name.padEnd(41)} ${cell(wall)} ${cell(cpu)} ${cell(system)}`);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
