/**
 * What several worker processes on one database wait on. `npx tsx scripts/profile-processes.ts` (uses
 * DATABASE_URL, or starts an embedded PostgreSQL) drains TASKS no-op tasks (default 10,000) pre-queued in a fresh
 * schema, with each number of worker processes in PROCESSES (default `1,2`), ROUNDS times (default 2), the numbers
 * taken in turn within each round so that a change of the machine's load falls on all of them. Each process is this
 * script run again as a child (`node --import tsx`), with one worker of CONCURRENCY (default 10) and THROUGHPUT
 * (`default` or `high`, default `high`), maintenance on, as an application runs it; they start at one signal.
 *
 * While they drain, one connection of its own samples every SAMPLE_MS (default 20) ms the client backends in
 * `pg_stat_activity` (state active, or idle in a transaction: the server waits for the client) with their wait
 * events, and the ungranted locks in `pg_locks` with their type, mode, class and relation. Printed per case: tasks/s;
 * the server's CPU per task (its postmaster and children, read from /proc: an embedded server only), also by the
 * backends' application name (`horsies:listen` for the LISTEN connections; the sampler's own share is shown too);
 * the workers' CPU per task, per process until its first outcome and after; the backend-samples by wait (`CPU` when
 * running), the waits that are not CPU with the statement that waited; the ungranted locks by kind; per statement
 * the worker processes sent, the calls and tasks per call; and the server's execution time per statement from
 * `pg_stat_statements` (the embedded server is restarted once to load it, with `track = all`, so the statements
 * inside horsies' functions are listed too). Then the median tasks/s of each case and its ratio to the first.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pino } from 'pino';
import { z } from 'zod';
import { createApp, createWorker } from '../src/index.js';
import type { Statement } from '../src/db/sql.js';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedServer } from '../src/index.js';
import { runScript } from './database.js';

const TASKS = Number(process.env.TASKS ?? 10_000);
const PROCESSES = (process.env.PROCESSES ?? '1,2').split(',').map(Number);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 10);
const THROUGHPUT = process.env.THROUGHPUT === 'default' ? 'default' : 'high';
const SAMPLE_MS = Number(process.env.SAMPLE_MS ?? 20);
const SCHEMA = 'profile_processes';
const SAMPLER_NAME = 'profile-processes sampler';

/**
 * CPU time (ms) of the server's processes: the postmaster and its children, by /proc (other PostgreSQL servers on
 * the machine are not counted). Backends that ended before the reading are not counted either.
 */
function serverCpuMs(postmaster: string): number {
  return [...serverCpuByPid(postmaster).values()].reduce((a, b) => a + b, 0);
}

/** CPU time (ms) of each of the server's processes, by process id. */
function serverCpuByPid(postmaster: string): Map<number, number> {
  const cpu = new Map<number, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // The fields after the command name (which may hold spaces): state is [0], ppid [1], utime [11], stime [12].
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (pid !== postmaster && fields[1] !== postmaster) continue;
      cpu.set(Number(pid), (Number(fields[11]) + Number(fields[12])) * 10); // USER_HZ is 100 on Linux
    } catch {
      // the process ended meanwhile
    }
  }
  return cpu;
}

/**
 * The database: DATABASE_URL (then no server CPU or statement figures), or an embedded PostgreSQL restarted once
 * with `pg_stat_statements` loaded.
 */
async function withServer(fn: (url: string, postmaster: string | null) => Promise<void>): Promise<void> {
  if (process.env.DATABASE_URL) return fn(process.env.DATABASE_URL, null);
  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-processes-'));
  try {
    const first = await startEmbeddedServer({ dataDir });
    const admin = new pg.Client(first.url);
    await admin.connect();
    await admin.query(`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`);
    await admin.query(`ALTER SYSTEM SET pg_stat_statements.track = 'all'`);
    await admin.end();
    await first.stop();
    const server = await startEmbeddedServer({ dataDir });
    try {
      const client = new pg.Client(server.url);
      await client.connect();
      await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      await client.end();
      const postmaster = readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]!.trim();
      await fn(server.url, postmaster);
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

interface StatementCount {
  calls: number;
  rows: number;
}

/** A child: one worker, ready, started on `start`, its finished count reported, its statements on `stop`. */
async function child(url: string): Promise<void> {
  const app = createApp({ databaseUrl: url, schema: SCHEMA, logger: pino({ level: 'warn' }) });
  app.task({ name: 'noop', input: z.object({ i: z.number() }), handler: () => null });
  const statements = new Map<string, StatementCount>();
  const run = app.db.run.bind(app.db);
  app.db.run = async <P, R>(stmt: Statement<P, R>, params: P, on?: Parameters<typeof run>[2]) => {
    const rows = await run(stmt, params, on);
    const s = statements.get(stmt.name) ?? { calls: 0, rows: 0 };
    const first = rows[0] as { claimed?: unknown[] } | undefined;
    s.calls += 1;
    s.rows += Array.isArray(first?.claimed) ? first.claimed.length : rows.length;
    statements.set(stmt.name, s);
    return rows;
  };
  const worker = createWorker(app, {
    concurrency: CONCURRENCY,
    throughput: THROUGHPUT,
    snapshotIntervalMs: 0,
  });
  let finished = 0;
  // CPU (µs) when the worker was asked to start, when it had started, at its first finished task.
  const marks = { start: 0, started: 0, first: 0 };
  worker.on('task:finished', (rows) => {
    if (finished === 0) marks.first = cpuNow();
    finished += rows.length;
  });
  let reported = 0;
  const reporter = setInterval(() => {
    if (finished === reported) return;
    reported = finished;
    process.stdout.write(`finished ${finished}\n`);
  }, 20);
  process.stdout.write('ready\n');
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'start') {
      marks.start = cpuNow();
      await worker.start();
      marks.started = cpuNow();
    }
    if (line === 'stop') {
      const end = cpuNow();
      await worker.stop();
      clearInterval(reporter);
      const stats: ChildStats = {
        cpuUs: end - marks.start,
        startUs: marks.started - marks.start,
        toFirstUs: marks.first - marks.start,
        finished,
        statements: Object.fromEntries(statements),
      };
      process.stdout.write(`stats ${JSON.stringify(stats)}\n`);
      await app.close();
      return;
    }
  }
}

function cpuNow(): number {
  const cpu = process.cpuUsage();
  return cpu.user + cpu.system;
}

interface ChildStats {
  /** CPU (µs) from the start signal to the drain's end, of it until the worker had started and until its first outcome. */
  cpuUs: number;
  startUs: number;
  toFirstUs: number;
  /** Tasks this process finished. */
  finished: number;
  statements: Record<string, StatementCount>;
}

interface Handle {
  child: ChildProcess;
  finished: number;
  ready: Promise<void>;
  stats: Promise<ChildStats>;
}

function spawnChild(url: string): Handle {
  const child = spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), fileURLToPath(import.meta.url), 'child'],
    {
      env: { ...process.env, PROFILE_URL: url },
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const handle = { child, finished: 0 } as Handle;
  const lines = createInterface({ input: child.stdout! });
  handle.ready = new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`child exited with ${code}`)));
    lines.on('line', (line) => line === 'ready' && resolve());
  });
  handle.stats = new Promise((resolve) =>
    lines.on('line', (line) => {
      if (line.startsWith('stats ')) resolve(JSON.parse(line.slice(6)));
    }),
  );
  lines.on('line', (line) => {
    const match = /^finished (\d+)$/.exec(line);
    if (match) handle.finished = Number(match[1]);
  });
  return handle;
}

/** Backend-samples by wait, and ungranted locks by kind, of every client backend but the sampler's. */
const SAMPLE = `
  WITH mine AS (
    SELECT pid, state, wait_event_type, wait_event, query
      FROM pg_stat_activity
     WHERE datname = current_database() AND backend_type = 'client backend'
       AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction'))
  SELECT coalesce((SELECT json_agg(json_build_array(
                     CASE WHEN state = 'idle in transaction' THEN 'Client:idle in transaction'
                          WHEN wait_event_type IS NULL THEN 'CPU'
                          ELSE wait_event_type || ':' || wait_event END,
                     left(regexp_replace(query, '\\s+', ' ', 'g'), 70))) FROM mine), '[]') AS backends,
         coalesce((SELECT json_agg(concat_ws(' ', l.locktype, l.mode, l.classid::regclass::text,
                                             l.relation::regclass::text))
                     FROM pg_locks l WHERE NOT l.granted AND l.pid IN (SELECT pid FROM mine)), '[]') AS ungranted`;

interface Profile {
  samples: number;
  waits: Map<string, number>;
  waitStatements: Map<string, number>;
  ungranted: Map<string, number>;
}

function bump(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

function startSampler(url: string): { stop(): Promise<Profile> } {
  const client = new pg.Client({ connectionString: url, application_name: SAMPLER_NAME });
  const profile: Profile = { samples: 0, waits: new Map(), waitStatements: new Map(), ungranted: new Map() };
  let running = true;
  const loop = (async () => {
    await client.connect();
    while (running) {
      const next = performance.now() + SAMPLE_MS;
      const { rows } = await client.query<{ backends: [string, string][]; ungranted: string[] }>(SAMPLE);
      profile.samples += 1;
      for (const [wait, query] of rows[0]!.backends) {
        bump(profile.waits, wait);
        if (wait !== 'CPU') bump(profile.waitStatements, `${wait} | ${query}`);
      }
      for (const lock of rows[0]!.ungranted) bump(profile.ungranted, lock);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
    }
    await client.end();
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return profile;
    },
  };
}

interface ServerStatement {
  query: string;
  calls: number;
  ms: number;
}

interface CaseResult {
  rate: number;
  serverUs: number | null;
  /** Server CPU (ms) by backend role. */
  byRole: Map<string, number>;
  server: ServerStatement[];
  workersUs: number;
  children: ChildStats[];
  profile: Profile;
  statements: Map<string, StatementCount>;
}

async function runCase(url: string, postmaster: string | null, processes: number): Promise<CaseResult> {
  const app = createApp({ databaseUrl: url, schema: SCHEMA, logger: pino({ level: 'warn' }) });
  await app.db.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await app.migrate();
  const noop = app.task({ name: 'noop', input: z.object({ i: z.number() }), handler: () => null });
  for (let from = 0; from < TASKS; from += 5_000) {
    const n = Math.min(5_000, TASKS - from);
    await noop.sendMany(Array.from({ length: n }, (_, i) => ({ input: { i: from + i } })));
  }
  await app.db.pool.query(`VACUUM ANALYZE ${SCHEMA}.horsies_tasks`);
  await app.db.pool.query('CHECKPOINT');
  await app.close();

  const children = Array.from({ length: processes }, () => spawnChild(url));
  try {
    await Promise.all(children.map((c) => c.ready));
    const stats0 = new pg.Client({ connectionString: url, application_name: SAMPLER_NAME });
    await stats0.connect();
    if (postmaster) await stats0.query('SELECT pg_stat_statements_reset()');
    const sampler = startSampler(url);
    const pg0 = postmaster ? serverCpuMs(postmaster) : 0;
    const byPid0 = postmaster ? serverCpuByPid(postmaster) : new Map<number, number>();
    const started = performance.now();
    for (const c of children) c.child.stdin!.write('start\n');
    while (children.reduce((sum, c) => sum + c.finished, 0) < TASKS) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const elapsedMs = performance.now() - started;
    const serverMs = postmaster ? serverCpuMs(postmaster) - pg0 : null;
    // The server's CPU by the application name of its backends (or the kind of process), over the drain.
    const byRole = new Map<string, number>();
    if (postmaster) {
      const byPid1 = serverCpuByPid(postmaster);
      const { rows: roles } = await stats0.query<{ pid: number; name: string }>(
        `SELECT pid, coalesce(nullif(application_name, ''), backend_type) AS name FROM pg_stat_activity`,
      );
      const names = new Map(roles.map((r) => [r.pid, r.name]));
      for (const [pid, ms] of byPid1) {
        const name = pid === Number(postmaster) ? 'postmaster' : (names.get(pid) ?? 'ended or other');
        byRole.set(name, (byRole.get(name) ?? 0) + ms - (byPid0.get(pid) ?? 0));
      }
    }
    const profile = await sampler.stop();
    // Execution time on the server, per statement (with track = all, also those run inside horsies' functions).
    const server = postmaster
      ? (
          await stats0.query<ServerStatement>(
            `SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query, calls::int AS calls,
                    total_exec_time AS ms
               FROM pg_stat_statements WHERE query ILIKE '%${SCHEMA}%' ORDER BY total_exec_time DESC LIMIT 14`,
          )
        ).rows
      : [];
    await stats0.end();
    for (const c of children) c.child.stdin!.write('stop\n');
    const stats = await Promise.all(children.map((c) => c.stats));
    const statements = new Map<string, StatementCount>();
    for (const s of stats) {
      for (const [name, count] of Object.entries(s.statements)) {
        const sum = statements.get(name) ?? { calls: 0, rows: 0 };
        sum.calls += count.calls;
        sum.rows += count.rows;
        statements.set(name, sum);
      }
    }
    return {
      rate: (TASKS / elapsedMs) * 1000,
      serverUs: serverMs === null ? null : (serverMs * 1000) / TASKS,
      server,
      byRole,
      workersUs: stats.reduce((sum, s) => sum + s.cpuUs, 0) / TASKS,
      children: stats,
      profile,
      statements,
    };
  } finally {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGKILL');
  }
}

function top(map: Map<string, number>, n: number): [string, number][] {
  return [...map].sort((a, b) => b[1] - a[1]).slice(0, n);
}

function print(processes: number, round: number, r: CaseResult): void {
  const total = [...r.profile.waits.values()].reduce((a, b) => a + b, 0);
  console.log(
    `\n== ${processes} process(es), round ${round}: ${Math.round(r.rate)} tasks/s; CPU per task: server ` +
      `${r.serverUs === null ? '?' : Math.round(r.serverUs)} µs, workers ${Math.round(r.workersUs)} µs; ${r.profile.samples} samples, ` +
      `${total} backend-samples (${(total / Math.max(1, r.profile.samples)).toFixed(2)} per sample)`,
  );
  console.log(
    '  server CPU per task by role: ' +
      top(r.byRole, 8)
        .map(([name, ms]) => `${name} ${((ms * 1000) / TASKS).toFixed(0)} µs`)
        .join(', '),
  );
  for (const c of r.children) {
    console.log(
      `  process: ${c.finished} tasks, CPU ${Math.round(c.cpuUs / 1000)} ms (start ${Math.round(c.startUs / 1000)} ms, ` +
        `to first outcome ${Math.round(c.toFirstUs / 1000)} ms, then ${Math.round((c.cpuUs - c.toFirstUs) / c.finished)} µs per task)`,
    );
  }
  for (const [wait, n] of top(r.profile.waits, 12)) {
    console.log(`  ${String(n).padStart(6)} ${((n / total) * 100).toFixed(1).padStart(5)}%  ${wait}`);
  }
  console.log('  waits by statement:');
  for (const [key, n] of top(r.profile.waitStatements, 12)) console.log(`  ${String(n).padStart(6)}  ${key}`);
  console.log('  ungranted locks:');
  for (const [key, n] of top(r.profile.ungranted, 8)) console.log(`  ${String(n).padStart(6)}  ${key}`);
  console.log('  statements: calls, tasks per call, calls per 1,000 tasks');
  for (const [name, s] of [...r.statements].sort((a, b) => b[1].calls - a[1].calls)) {
    if (s.calls < 5) continue;
    console.log(
      `  ${name.padEnd(32)} ${String(s.calls).padStart(7)} ${(s.rows / s.calls).toFixed(1).padStart(7)} ` +
        `${((s.calls / TASKS) * 1000).toFixed(1).padStart(8)}`,
    );
  }
  console.log('  server execution: calls, µs per task, µs per call, statement');
  for (const s of r.server) {
    console.log(
      `  ${String(s.calls).padStart(7)} ${((s.ms * 1000) / TASKS).toFixed(1).padStart(7)} ` +
        `${((s.ms * 1000) / s.calls).toFixed(0).padStart(7)}  ${s.query}`,
    );
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

async function main(): Promise<void> {
  if (process.argv[2] === 'child') return child(process.env.PROFILE_URL!);
  await withServer(async (url, postmaster) => {
    const rates = new Map<number, number[]>(PROCESSES.map((p) => [p, []]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const p of PROCESSES) {
        const r = await runCase(url, postmaster, p);
        rates.get(p)!.push(r.rate);
        print(p, round, r);
      }
    }
    const base = median(rates.get(PROCESSES[0]!)!);
    console.log(
      `\nmedian tasks/s (ratio to ${PROCESSES[0]}): ` +
        PROCESSES.map((p) => {
          const m = median(rates.get(p)!);
          return `${p}: ${Math.round(m)} (${(m / base).toFixed(2)}x)`;
        }).join(', '),
    );
  });
}

runScript(main);
