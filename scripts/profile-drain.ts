/**
 * Where a drain's time goes. `npm run profile:drain` (uses DATABASE_URL, or starts an embedded PostgreSQL) drains
 * TASKS no-op tasks (default 20,000) with one worker (CONCURRENCY, default 10; THROUGHPUT, default or high, or a
 * comma-separated list of them taken in turn by the ROUNDS; PREFETCH, a number or auto, default the worker's;
 * START_PREFETCHED, 1 or 0; PREFETCH_WINDOW_MS with auto; COMPLETION_DELAY_MS, default the worker's;
 * VACUUM_THRESHOLD, a number or off, default the app's; MAINTENANCE=0 runs no maintenance leader at all; METRICS=0
 * creates the app without metrics, so the leader reads no cluster figures; KEEP=1 leaves the schema behind;
 * PATCH_SQL=<file> applies that SQL after the migrations, for experiments; BACKLOG=<n> queues n more tasks behind
 * them, which the drain does not wait for, as the benchmark's backlog scenario does) and prints:
 * tasks/s; the CPU time per task of the PostgreSQL server drained through (its postmaster and the processes under
 * it, read from /proc, so only for a server on this Linux machine: other servers beside it are not counted) and of
 * this process (split into its main thread and the others, where V8 compiles optimized code and
 * helps the garbage collector: a first drain in a fresh process pays for that compilation); how long after the
 * last handler run the last outcome was written (the drain's tail); and, per statement the
 * worker sent, the calls, tasks per call and time per call as the client saw it, beside the server's execution
 * time, WAL records, bytes and full-page images when `pg_stat_statements` is loaded.
 * With CPU_PROFILE=<file>, this process's CPU profile of the drain alone (not the setup's sends) is written there
 * (open it in Chrome's DevTools), and the functions with the most self time are printed. With HEAP_PROFILE=<file>,
 * a sampling profile of what this process allocated during the drain, garbage included, is written there, and the
 * functions that allocated the most are printed (bytes per task). With TIMELINE=<ms>, the drain in steps of that
 * many milliseconds from the worker's start: tasks finished, this process's CPU, that PostgreSQL server's CPU
 * (counted by /proc in 10 ms ticks: read it over several steps; with both cores busy the two add up to twice the
 * step), statements sent and tasks they carried. ROUNDS=<n> drains n times in this process, each on a fresh schema
 * and worker: the first pays for compiling the worker's code, the later ones show it warm. horsies is the built
 * package (dist/), as an application runs it; FROM=src runs the source instead. With SERVER_PROFILE=<file>, Linux
 * `perf` samples the processes of the PostgreSQL server drained through (no other server's) alive at the drain's
 * first finished outcome (the worker's connections are open by then) until its end, writes the samples there and
 * prints the share of the server's CPU each part of the executor took (scripts/serverProfile.ts; a server on this machine only). With WAL_STATS=1, the WAL written from
 * the worker's start to the last outcome, per kind of record (heap update, row lock, index insert, commit...), in
 * records and bytes per task, read with the `pg_walinspect` extension (created in the database if missing; it needs
 * a superuser). The WAL of the whole server: run it on a quiet one.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import type { HeapProfiler, Profiler } from 'node:inspector';
import { pino } from 'pino';
import { z } from 'zod';
import type { Statement } from '../src/db/sql.js';
import { runScript, withDatabase } from './database.js';
import { postmasterPid, processTreeCpuMs, threadCpuMs } from './processCpu.js';
import { type ServerProfile, startServerProfile } from './serverProfile.js';

// The package as an application runs it (dist/, built by `npm run build:lib`, which `npm run profile:drain` runs
// first), or with FROM=src the source through tsx, whose CPU profile names the source files.
const built = 'index.js';
const { createApp, createWorker }: typeof import('../src/index.js') =
  process.env.FROM === 'src' ? await import('../src/index.js') : await import(`../dist/${built}`);

const TASKS = Number(process.env.TASKS ?? 20_000);
const BACKLOG = Number(process.env.BACKLOG ?? 0);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 10);
const PREFETCH =
  process.env.PREFETCH === undefined
    ? undefined
    : process.env.PREFETCH === 'auto'
      ? 'auto'
      : Number(process.env.PREFETCH);
// One per round, taken in turn.
const THROUGHPUTS = (process.env.THROUGHPUT ?? 'default')
  .split(',')
  .map((t) => (t === 'high' ? ('high' as const) : ('default' as const)));
const START_PREFETCHED =
  process.env.START_PREFETCHED === undefined ? undefined : process.env.START_PREFETCHED === '1';
const SCHEMA = 'profile_drain';
const CPU_PROFILE = process.env.CPU_PROFILE;
const HEAP_PROFILE = process.env.HEAP_PROFILE;
const SERVER_PROFILE = process.env.SERVER_PROFILE;
const WAL_STATS = process.env.WAL_STATS === '1';

interface Timing {
  calls: number;
  ms: number;
  rows: number;
}

/** What happened in one step of the timeline. */
interface Step {
  finished: number;
  /** This process's CPU time (µs) at the step's first event. */
  cpuAt: number;
  /** The PostgreSQL server's CPU time (ms) at the step's first event. */
  serverAt: number;
  /** Per statement: calls sent in the step, tasks they carried. */
  sent: Map<string, { calls: number; rows: number }>;
}

const TIMELINE_MS = Number(process.env.TIMELINE ?? 0);
const steps: Step[] = [];
let timelineStart = 0;
/** The postmaster of the server the drain talks to: only its processes count, not other servers on the machine. */
let serverPid: number | null = null;

function stepNow(): Step {
  const at = Math.floor((performance.now() - timelineStart) / TIMELINE_MS);
  while (steps.length <= at) {
    const cpu = process.cpuUsage();
    steps.push({
      finished: 0,
      cpuAt: cpu.user + cpu.system,
      serverAt: processTreeCpuMs(serverPid),
      sent: new Map(),
    });
  }
  return steps[at]!;
}

async function profile(databaseUrl: string, throughput: 'high' | 'default'): Promise<void> {
  const vacuumThreshold = process.env.VACUUM_THRESHOLD;
  const app = createApp({
    databaseUrl,
    schema: SCHEMA,
    logger: pino({ level: 'warn' }),
    metrics: process.env.METRICS !== '0',
    recovery:
      vacuumThreshold === undefined
        ? undefined
        : { vacuumThreshold: vacuumThreshold === 'off' ? null : Number(vacuumThreshold) },
  });
  await app.db.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await app.migrate();
  const backend = await app.db.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  serverPid = postmasterPid(backend.rows[0]!.pid);
  if (serverPid === null) console.log('PostgreSQL CPU not measured: the server is not on this machine');
  // An experiment's SQL, applied to the migrated schema (a changed function, say).
  if (process.env.PATCH_SQL) await app.db.pool.query(readFileSync(process.env.PATCH_SQL, 'utf8'));
  // When the last of the drained tasks ran: what follows until its outcome is written is the drain's tail.
  let runs = 0;
  let lastRunAt = 0;
  const noop = app.task({
    name: 'noop',
    input: z.object({ i: z.number() }),
    handler: () => {
      if (++runs === TASKS) lastRunAt = performance.now();
      return null;
    },
  });
  await noop.sendMany(Array.from({ length: TASKS }, (_, i) => ({ input: { i } })));
  // A backlog behind the drained tasks, in claim order: the drain stops after the first TASKS, as the benchmark's
  // backlog scenario does, with the table's statistics taken after the sends.
  for (let sent = 0; sent < BACKLOG; sent += 10_000) {
    const n = Math.min(10_000, BACKLOG - sent);
    await noop.sendMany(Array.from({ length: n }, (_, i) => ({ input: { i: TASKS + sent + i } })));
  }
  if (BACKLOG > 0) await app.db.pool.query(`ANALYZE ${SCHEMA}.horsies_tasks`);
  await app.db.pool.query('CHECKPOINT');
  const statements = await app.db.pool
    .query('SELECT pg_stat_statements_reset()')
    .then(() => true)
    .catch(() => false);

  // Every statement the worker sends goes through Database.run: time it there.
  const timings = new Map<string, Timing>();
  const run = app.db.run.bind(app.db);
  app.db.run = async <P, R>(stmt: Statement<P, R>, params: P, on?: Parameters<typeof run>[2]) => {
    const started = performance.now();
    const rows = await run(stmt, params, on);
    const t = timings.get(stmt.name) ?? { calls: 0, ms: 0, rows: 0 };
    t.calls += 1;
    t.ms += performance.now() - started;
    const first = rows[0] as { claimed?: unknown[] } | undefined;
    const count = Array.isArray(first?.claimed) ? first.claimed.length : rows.length;
    t.rows += count;
    timings.set(stmt.name, t);
    if (TIMELINE_MS && timelineStart) {
      const sent = stepNow().sent;
      const s = sent.get(stmt.name) ?? { calls: 0, rows: 0 };
      s.calls += 1;
      s.rows += count;
      sent.set(stmt.name, s);
    }
    return rows;
  };

  const worker = createWorker(app, {
    concurrency: CONCURRENCY,
    prefetch: {
      size: PREFETCH,
      startAhead: START_PREFETCHED,
      windowMs: process.env.PREFETCH_WINDOW_MS ? Number(process.env.PREFETCH_WINDOW_MS) : undefined,
    },
    outcomes: {
      delayMs: process.env.COMPLETION_DELAY_MS ? Number(process.env.COMPLETION_DELAY_MS) : undefined,
    },
    throughput,
    snapshotIntervalMs: 0,
    // The leader's maintenance runs, as in an application: its vacuum check is part of a long drain's cost.
    maintenance: process.env.MAINTENANCE !== '0',
  });
  let finished = 0;
  let serverProfile = null as ServerProfile | null; // set in the listener
  const done = new Promise<void>((resolve) =>
    worker.on('task:finished', (rows) => {
      if (SERVER_PROFILE && finished === 0) serverProfile = startServerProfile(SERVER_PROFILE, serverPid);
      finished += rows.length;
      if (TIMELINE_MS) stepNow().finished += rows.length;
      if (finished >= TASKS) resolve();
    }),
  );
  const session = CPU_PROFILE || HEAP_PROFILE ? new Session() : null;
  session?.connect();
  if (session && CPU_PROFILE) {
    await session.post('Profiler.enable');
    // A sample every 100 µs (the default 1 ms gives a few hundred samples for a drain of 10,000).
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    await session.post('Profiler.start');
  }
  if (session && HEAP_PROFILE) {
    await session.post('HeapProfiler.enable');
    // Every 4 KiB allocated, with what the collector freed since: the garbage is what costs.
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  const wal0 = WAL_STATS ? await walInsertPosition(app.db.pool) : null;
  const threads0 = threadCpuMs();
  const pg0 = processTreeCpuMs(serverPid);
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  timelineStart = started;
  await worker.start();
  const startMs = performance.now() - started;
  await done;
  const ended = performance.now();
  const seconds = (ended - started) / 1000;
  const pgEnd = processTreeCpuMs(serverPid);
  const wal1 = WAL_STATS ? await walInsertPosition(app.db.pool) : null;
  const pgUs = ((pgEnd - pg0) / TASKS) * 1000;
  await serverProfile?.stop();
  const cpu = process.cpuUsage(cpu0);
  const threads = threadCpuMs();
  const cpuProfile = session && CPU_PROFILE ? (await session.post('Profiler.stop')).profile : null;
  const heapProfile =
    session && HEAP_PROFILE ? (await session.post('HeapProfiler.stopSampling')).profile : null;
  session?.disconnect();
  await worker.stop();

  console.log(
    `${TASKS} tasks, concurrency ${CONCURRENCY}, throughput ${throughput}, prefetch ${worker.config.prefetchAuto ? 'auto' : worker.config.prefetch}` +
      `${worker.config.startPrefetched ? ' started' : ''}: ${Math.round(TASKS / seconds)} tasks/s; ` +
      `CPU per task: PostgreSQL ${Math.round(pgUs)} µs, this process ${Math.round((cpu.user + cpu.system) / TASKS)} µs ` +
      `(${Math.round(cpu.system / TASKS)} µs of it in the kernel; ` +
      `main thread ${Math.round(((threads.main - threads0.main) / TASKS) * 1000)} µs, ` +
      `other threads ${Math.round(((threads.others - threads0.others) / TASKS) * 1000)} µs); ` +
      `last outcome written ${(ended - lastRunAt).toFixed(1)} ms after the last run`,
  );
  if (TIMELINE_MS) printTimeline(startMs, cpu0.user + cpu0.system + cpu.user + cpu.system, pgEnd);
  console.log('statement            calls  tasks/call  client ms/call');
  for (const [name, t] of [...timings].filter(([, t]) => t.calls >= 10)) {
    console.log(
      `${name.padEnd(20)} ${String(t.calls).padStart(5)}  ${(t.rows / t.calls).toFixed(1).padStart(10)}  ` +
        `${(t.ms / t.calls).toFixed(2).padStart(14)}`,
    );
  }
  if (cpuProfile && CPU_PROFILE) {
    writeFileSync(CPU_PROFILE, JSON.stringify(cpuProfile));
    printSelfTimes(cpuProfile);
  }
  if (heapProfile && HEAP_PROFILE) {
    writeFileSync(HEAP_PROFILE, JSON.stringify(heapProfile));
    printAllocations(heapProfile);
  }
  serverProfile?.print(pgUs);
  if (wal0 !== null && wal1 !== null) await printWalStats(app.db.pool, wal0, wal1);
  if (statements) {
    const { rows } = await app.db.pool.query<{
      calls: string;
      ms: string;
      wal: string;
      bytes: string;
      fpi: string;
      query: string;
    }>(
      `SELECT calls, round((total_exec_time / calls)::numeric, 3) AS ms, wal_records / calls AS wal,
              wal_bytes / calls AS bytes, wal_fpi / calls AS fpi,
              left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS query
       FROM pg_stat_statements WHERE calls >= 10 AND toplevel AND query ILIKE '%${SCHEMA}%'
       ORDER BY total_exec_time DESC LIMIT 6`,
    );
    console.log(
      '\nserver (pg_stat_statements): calls, execution ms/call, WAL records, bytes and full-page images per call, statement',
    );
    for (const r of rows) console.log(`  ${r.calls}  ${r.ms}  ${r.wal}  ${r.bytes}  ${r.fpi}  ${r.query}`);
  } else {
    console.log('\nserver figures skipped: pg_stat_statements is not loaded (shared_preload_libraries)');
  }
  if (!process.env.KEEP) await app.db.pool.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
  await app.close();
}

type Pool = ReturnType<typeof createApp>['db']['pool'];

async function walInsertPosition(pool: Pool): Promise<string> {
  const { rows } = await pool.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
  return rows[0]!.lsn;
}

/** The WAL between two positions per kind of record, per task, largest first (pg_walinspect). */
async function printWalStats(pool: Pool, from: string, to: string): Promise<void> {
  await pool.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  const { rows } = await pool.query<{ kind: string; records: string; bytes: string; fpi: string }>(
    `SELECT "resource_manager/record_type" AS kind, count AS records, combined_size AS bytes, fpi_size AS fpi
     FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) WHERE count > 0 ORDER BY combined_size DESC`,
    [from, to],
  );
  const total = rows.reduce((sum, r) => sum + Number(r.bytes), 0);
  console.log(
    `\nWAL of the drain by kind of record (pg_walinspect): ${(total / TASKS).toFixed(0)} bytes per task in all; ` +
      'records, bytes and full-page image bytes per task',
  );
  for (const r of rows.filter((r) => Number(r.bytes) >= total / 1000)) {
    console.log(
      `  ${r.kind.padEnd(28)} ${(Number(r.records) / TASKS).toFixed(2).padStart(7)}  ` +
        `${(Number(r.bytes) / TASKS).toFixed(0).padStart(6)}  ${(Number(r.fpi) / TASKS).toFixed(0).padStart(6)}`,
    );
  }
}

/** The drain step by step: tasks finished, and each statement's calls (tasks carried) in the step. */
function printTimeline(startMs: number, cpuEnd: number, serverEnd: number): void {
  console.log(
    `timeline: worker.start() returned after ${startMs.toFixed(1)} ms; cpu is this process's, server the ` +
      "PostgreSQL processes' (in 10 ms ticks)",
  );
  let total = 0;
  steps.forEach((step, i) => {
    total += step.finished;
    // This process's CPU from the step's first event to the next step's (about the step).
    const cpuMs = ((steps[i + 1]?.cpuAt ?? cpuEnd) - step.cpuAt) / 1000;
    const serverMs = (steps[i + 1]?.serverAt ?? serverEnd) - step.serverAt;
    const sent = [...step.sent]
      .map(([name, s]) => `${name} ${s.calls}${s.rows ? ` (${s.rows})` : ''}`)
      .join(', ');
    console.log(
      `  ${String(i * TIMELINE_MS).padStart(6)} ms  finished ${String(step.finished).padStart(5)}  ` +
        `total ${String(total).padStart(6)}  cpu ${cpuMs.toFixed(0).padStart(3)} ms  ` +
        `server ${serverMs.toFixed(0).padStart(3)} ms  ${sent}`,
    );
  });
}

/** The 25 functions with the most self time in a CPU profile, as shares of the busy (not idle) time. */
function printSelfTimes(profile: Profiler.Profile): void {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let busy = 0;
  profile.samples?.forEach((id, i) => {
    const frame = nodes.get(id)!.callFrame;
    if (frame.functionName === '(idle)') return;
    const us = profile.timeDeltas?.[i] ?? 0;
    const where = frame.url ? ` ${frame.url.split('/').slice(-2).join('/')}:${frame.lineNumber + 1}` : '';
    const key = `${frame.functionName || '(anonymous)'}${where}`;
    self.set(key, (self.get(key) ?? 0) + us);
    busy += us;
  });
  console.log(
    `\nthis process, self time of the drain's busy ${Math.round(busy / 1000)} ms (profile in ${CPU_PROFILE}):`,
  );
  for (const [key, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
    console.log(`  ${((us / busy) * 100).toFixed(1).padStart(5)}%  ${key}`);
  }
}

/** The 25 functions that allocated the most during the drain (sampled), in bytes per task. */
function printAllocations(profile: HeapProfiler.SamplingHeapProfile): void {
  const self = new Map<string, number>();
  let total = 0;
  const visit = (node: HeapProfiler.SamplingHeapProfileNode): void => {
    const frame = node.callFrame;
    const where = frame.url ? ` ${frame.url.split('/').slice(-2).join('/')}:${frame.lineNumber + 1}` : '';
    const key = `${frame.functionName || '(anonymous)'}${where}`;
    self.set(key, (self.get(key) ?? 0) + node.selfSize);
    total += node.selfSize;
    for (const child of node.children) visit(child);
  };
  visit(profile.head);
  console.log(
    `\nthis process, allocated during the drain: about ${Math.round(total / TASKS)} bytes per task ` +
      `(profile in ${HEAP_PROFILE}):`,
  );
  for (const [key, bytes] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
    console.log(`  ${String(Math.round(bytes / TASKS)).padStart(6)} B  ${key}`);
  }
}

runScript(() =>
  withDatabase(async (databaseUrl) => {
    for (let round = 0; round < Number(process.env.ROUNDS ?? 1); round++) {
      steps.length = 0;
      await profile(databaseUrl, THROUGHPUTS[round % THROUGHPUTS.length]!);
    }
  }),
);
