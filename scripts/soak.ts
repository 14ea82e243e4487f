/**
 * The soak: `npm run soak -- [options]` (uses DATABASE_URL, or starts an embedded PostgreSQL). Worker processes of
 * scripts/soak/app.ts drain a steady stream of no-op tasks for `--minutes` (default 30), with a workflow started
 * every 2 seconds and two schedules (every 5 seconds, every minute) beside, while the retainer deletes what finished
 * more than `--retention-minutes` ago (default 3; maintenance every 5 s). Then it stops by itself: the workers get
 * SIGTERM, the schema is dropped.
 *
 * Before the soak, a drain of `--drain` tasks (default 20,000) measures the workers' capacity; the send rate is half
 * of it unless `--rate` (tasks/s) says otherwise. The sender sends with `sendMany` every 100 ms what is due at that
 * rate, so a late tick is made up at the next. It runs in this process and the workers in their own (`--workers`,
 * default 2, `--concurrency` each, default 10): a sender in the event loop of busy workers would wait for their
 * handlers and claims, and its tasks' send-to-start would count that wait.
 *
 * Every minute it prints a line and appends it to the JSON-lines file `--out` (default soak.jsonl): tasks completed
 * that minute (the stream's, and the workflows' and schedules'), send-to-start p50/p99 of the stream's tasks
 * (`started_at - sent_at` of those finished that minute), tasks still pending, size (table, TOAST and indexes) and
 * index size of `horsies_tasks` and `horsies_task_attempts`, their live and dead rows, the autovacuums and vacuums
 * that minute (horsies' own vacuum check runs VACUUM: counted as a vacuum), rows deleted (the retainer), WAL bytes
 * written that minute (the whole server's), and the CPU of the workers and of this process.
 *
 * The plateau, judged on the task and attempt tables' sizes, their index sizes, and send-to-start p50 and p99: the
 * minutes are split in thirds; a series has reached a plateau when the last third's mean is at most 10% (sizes) or
 * 25% (latencies) above the middle third's, and the last third's least-squares slope, carried over the third's
 * length, adds at most that share of its mean. Below 1 MiB (sizes) or 5 ms (latencies) a difference counts as
 * noise. The run passes when every judged series has; it needs at least 6 minutes (else: too short to judge).
 * `--chart <file>` writes an SVG of the minutes (scripts/soak/chart.ts; `tsx scripts/soak/chart.ts in.jsonl out.svg`
 * draws one from a JSON-lines file later).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { runScript, withDatabase } from './database.js';
import { defineSoakApp } from './soak/app.js';
import { drawChart } from './soak/chart.js';
import { judgePlateau, type Minute, type Verdict } from './soak/plateau.js';

const ROOT = resolve(import.meta.dirname, '..');
const SCHEMA = 'soak';
const TICK_MS = 100;
const WORKFLOW_EVERY_MS = 2_000;

const { values: opts } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    rate: { type: 'string' },
    drain: { type: 'string', default: '20000' },
    workers: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '10' },
    'retention-minutes': { type: 'string', default: '3' },
    out: { type: 'string', default: 'soak.jsonl' },
    chart: { type: 'string' },
  },
});

function positive(name: string, value: string | undefined, min = 1): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < min)
    throw new Error(`--${name} must be a number of at least ${min}, not ${value}`);
  return n;
}

const MINUTES = Math.round(positive('minutes', opts.minutes));
const RATE = opts.rate === undefined ? null : positive('rate', opts.rate);
const DRAIN = Math.round(positive('drain', opts.drain, 100));
const WORKERS = Math.round(positive('workers', opts.workers));
const CONCURRENCY = Math.round(positive('concurrency', opts.concurrency));
// Tasks finished in the last minute must still be there when the minute is read.
const RETENTION_MS = positive('retention-minutes', opts['retention-minutes'], 2) * 60_000;
const OUT = opts.out!;
const CHART = opts.chart;

type Pool = ReturnType<typeof defineSoakApp>['app']['db']['pool'];

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface WorkerProcess {
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<void>;
  tail(): string;
}

function startWorker(env: NodeJS.ProcessEnv): WorkerProcess {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/main.ts',
      'worker',
      'scripts/soak/workerApp.ts',
      '--concurrency',
      String(CONCURRENCY),
    ],
    { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let tail = '';
  let onReady = (): void => undefined;
  const ready = new Promise<void>((r) => (onReady = r));
  const onData = (chunk: Buffer): void => {
    tail = (tail + chunk.toString()).slice(-4_000);
    if (tail.includes('"worker started"')) onReady();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return { child, ready, exited, tail: () => tail };
}

/** CPU time (ms) of a process, from /proc (Linux); 0 once it is gone. */
function cpuMsOf(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

interface Counters {
  at: number;
  lsn: string;
  workersCpuMs: number;
  selfCpuMs: number;
  stats: Map<string, { autovacuums: number; vacuums: number; deleted: number }>;
}

async function counters(pool: Pool, workers: WorkerProcess[]): Promise<Counters> {
  const { rows } = await pool.query<{
    relname: string;
    autovacuums: string;
    vacuums: string;
    deleted: string;
  }>(
    `SELECT relname, autovacuum_count AS autovacuums, vacuum_count AS vacuums, n_tup_del AS deleted
     FROM pg_stat_user_tables WHERE schemaname = $1`,
    [SCHEMA],
  );
  const [wal] = (await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows;
  const cpu = process.cpuUsage();
  return {
    at: Date.now(),
    lsn: wal!.lsn,
    workersCpuMs: workers.reduce((sum, w) => sum + cpuMsOf(w.child.pid), 0),
    selfCpuMs: (cpu.user + cpu.system) / 1000,
    stats: new Map(
      rows.map((r) => [
        r.relname,
        { autovacuums: Number(r.autovacuums), vacuums: Number(r.vacuums), deleted: Number(r.deleted) },
      ]),
    ),
  };
}

/** One minute's figures: what finished in [from, to) (the server's clock), and the tables now. */
async function readMinute(
  pool: Pool,
  minute: number,
  from: Date,
  to: Date,
  before: Counters,
  after: Counters,
  sent: number,
  sendLagMs: number,
): Promise<Minute> {
  const [done] = (
    await pool.query<{ stream: number; others: number; q: number[] | null }>(
      `SELECT count(*) FILTER (WHERE task_name = 'soak.noop')::int AS stream,
              count(*) FILTER (WHERE task_name <> 'soak.noop')::int AS others,
              percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - sent_at))
                FILTER (WHERE task_name = 'soak.noop') AS q
       FROM ${SCHEMA}.horsies_tasks
       WHERE finished_at >= $1 AND finished_at < $2 AND completed_at IS NOT NULL`,
      [from, to],
    )
  ).rows.map((r) => ({ ...r, p50: r.q ? r.q[0]! * 1000 : null, p99: r.q ? r.q[1]! * 1000 : null }));
  const [wf] = (
    await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_workflows WHERE completed_at >= $1 AND completed_at < $2`,
      [from, to],
    )
  ).rows;
  const [pending] = (
    await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_tasks WHERE NOT claimed AND finished_at IS NULL`,
    )
  ).rows;
  const tables = new Map(
    (
      await pool.query<{ name: string; total: string; indexes: string; live: string; dead: string }>(
        `SELECT c.relname AS name, pg_total_relation_size(c.oid) AS total, pg_indexes_size(c.oid) AS indexes,
                s.n_live_tup AS live, s.n_dead_tup AS dead
         FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
         WHERE s.schemaname = $1 AND c.relname IN ('horsies_tasks', 'horsies_task_attempts')`,
        [SCHEMA],
      )
    ).rows.map((r) => [r.name, r]),
  );
  const [wal] = (
    await pool.query<{ bytes: string }>('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn) AS bytes', [
      after.lsn,
      before.lsn,
    ])
  ).rows;
  const table = (name: string) => {
    const t = tables.get(name);
    const a = after.stats.get(name);
    const b = before.stats.get(name);
    return {
      bytes: Number(t?.total ?? 0),
      indexBytes: Number(t?.indexes ?? 0),
      live: Number(t?.live ?? 0),
      dead: Number(t?.dead ?? 0),
      autovacuums: (a?.autovacuums ?? 0) - (b?.autovacuums ?? 0),
      vacuums: (a?.vacuums ?? 0) - (b?.vacuums ?? 0),
      deleted: (a?.deleted ?? 0) - (b?.deleted ?? 0),
    };
  };
  const wallMs = after.at - before.at;
  return {
    minute,
    at: to.toISOString(),
    sent,
    completed: done!.stream,
    otherCompleted: done!.others,
    workflowsCompleted: wf!.n,
    p50Ms: done!.p50 === null ? null : round(done!.p50, 1),
    p99Ms: done!.p99 === null ? null : round(done!.p99, 1),
    pending: pending!.n,
    tasks: table('horsies_tasks'),
    attempts: table('horsies_task_attempts'),
    walBytes: Number(wal!.bytes),
    workersCpuPct: round(((after.workersCpuMs - before.workersCpuMs) / wallMs) * 100, 0),
    senderCpuPct: round(((after.selfCpuMs - before.selfCpuMs) / wallMs) * 100, 0),
    sendLagMaxMs: Math.round(sendLagMs),
  };
}

function round(n: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

const MiB = (bytes: number): string => `${(bytes / 1_048_576).toFixed(1)}`;

function printMinute(m: Minute): void {
  console.log(
    `min ${String(m.minute).padStart(3)}  done ${String(m.completed).padStart(6)} (+${m.otherCompleted} wf/sched, ` +
      `${m.workflowsCompleted} wf)  start p50 ${m.p50Ms ?? '-'} p99 ${m.p99Ms ?? '-'} ms  pending ${m.pending}  ` +
      `tasks ${MiB(m.tasks.bytes)}/${MiB(m.tasks.indexBytes)} MiB live ${m.tasks.live} dead ${m.tasks.dead}  ` +
      `attempts ${MiB(m.attempts.bytes)}/${MiB(m.attempts.indexBytes)} MiB dead ${m.attempts.dead}  ` +
      `vacuum ${m.tasks.vacuums}+${m.tasks.autovacuums}a/${m.attempts.vacuums}+${m.attempts.autovacuums}a  ` +
      `purged ${m.tasks.deleted}  WAL ${MiB(m.walBytes)} MiB  cpu workers ${m.workersCpuPct}% sender ${m.senderCpuPct}%` +
      (m.sendLagMaxMs > 1_000 ? `  sender late ${m.sendLagMaxMs} ms` : ''),
  );
}

/** Tasks of the stream completed so far. */
async function completedStream(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_tasks WHERE task_name = 'soak.noop' AND completed_at IS NOT NULL`,
  );
  return rows[0]!.n;
}

async function soak(databaseUrl: string, signal: AbortSignal): Promise<Verdict | null> {
  const { app, noop, diamond } = defineSoakApp(
    { databaseUrl, schema: SCHEMA, logger: pino({ level: 'warn' }) },
    RETENTION_MS,
  );
  const pool = app.db.pool;
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await app.migrate();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    HORSIES_SCHEMA: SCHEMA,
    HORSIES_LOG_LEVEL: 'info',
    SOAK_RETENTION_MS: String(RETENTION_MS),
  };
  delete env.HORSIES_LISTEN_URL;
  const workers = Array.from({ length: WORKERS }, () => startWorker(env));
  // Rejects when a worker process exits, the sender or the workflow starter fails; resolves on an abort.
  let fail = (_error: unknown): void => undefined;
  const failed = new Promise<void>((resolve, reject) => {
    fail = reject;
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
  failed.catch(() => undefined);
  for (const w of workers) {
    void w.exited.then(() => fail(new Error(`a worker process exited early:\n${w.tail()}`)));
  }
  const waitFor = (ms: number): Promise<void> => Promise.race([sleep(Math.max(0, ms)), failed]);
  try {
    await Promise.race([Promise.all(workers.map((w) => w.ready)), failed]);
    if (signal.aborted) return null;
    console.log(`${WORKERS} worker processes x concurrency ${CONCURRENCY} started`);

    // Capacity: a drain of DRAIN tasks sent at once.
    const drainStart = performance.now();
    await noop.sendMany(Array.from({ length: DRAIN }, (_, i) => ({ input: { i } })));
    while ((await completedStream(pool)) < DRAIN) {
      if (signal.aborted) return null;
      await waitFor(100);
    }
    const capacity = DRAIN / ((performance.now() - drainStart) / 1000);
    const rate = RATE ?? Math.max(1, Math.round(capacity / 2));
    console.log(
      `capacity: ${DRAIN} tasks drained at ${Math.round(capacity)} tasks/s; soak at ${rate} tasks/s` +
        `${RATE === null ? ' (half of it)' : ' (--rate)'} for ${MINUTES} min, retention ${RETENTION_MS / 60_000} min; ` +
        `minutes in ${OUT}`,
    );
    writeFileSync(OUT, '');

    // The sender, the workflow starter and the minutes, until MINUTES are over.
    const started = performance.now();
    const endAt = started + MINUTES * 60_000;
    const running = (): boolean => !signal.aborted && performance.now() < endAt;
    let sent = 0;
    let sentThisMinute = 0;
    let lagMax = 0;
    let workflowsStarted = 0;
    const sender = (async () => {
      let next = started;
      while (running()) {
        const now = performance.now();
        lagMax = Math.max(lagMax, now - next);
        const due = Math.floor(((now - started) / 1000) * rate) - sent;
        if (due > 0) {
          await noop.sendMany(Array.from({ length: due }, (_, i) => ({ input: { i: sent + i } })));
          sent += due;
          sentThisMinute += due;
        }
        next += TICK_MS;
        const wait = next - performance.now();
        if (wait > 0) await waitFor(wait);
        else next = performance.now(); // behind: the next send's count makes it up
      }
    })();
    const starter = (async () => {
      while (running()) {
        await diamond.start({ n: workflowsStarted++ });
        await waitFor(WORKFLOW_EVERY_MS);
      }
    })();
    sender.catch(fail);
    starter.catch(fail);
    const minutes: Minute[] = [];
    let before = await counters(pool, workers);
    let from = (await pool.query<{ now: Date }>('SELECT now()')).rows[0]!.now;
    for (let minute = 1; minute <= MINUTES; minute += 1) {
      await waitFor(started + minute * 60_000 - performance.now());
      if (signal.aborted) break;
      const to = (await pool.query<{ now: Date }>('SELECT now()')).rows[0]!.now;
      const after = await counters(pool, workers);
      const m = await readMinute(pool, minute, from, to, before, after, sentThisMinute, lagMax);
      sentThisMinute = 0;
      lagMax = 0;
      minutes.push(m);
      appendFileSync(OUT, `${JSON.stringify(m)}\n`);
      printMinute(m);
      before = after;
      from = to;
    }
    await Promise.all([sender, starter]);
    if (signal.aborted) return null;
    console.log(`sent ${sent} tasks and started ${workflowsStarted} workflows`);
    const verdict = judgePlateau(minutes);
    if (CHART) {
      writeFileSync(CHART, drawChart(minutes, verdict));
      console.log(`chart in ${CHART}`);
    }
    return verdict;
  } finally {
    fail = () => undefined; // the workers' exits from here on are the stop's
    for (const w of workers) w.child.kill('SIGTERM');
    const gone = await Promise.race([
      Promise.all(workers.map((w) => w.exited)).then(() => true),
      sleep(40_000).then(() => false),
    ]);
    if (!gone) for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => undefined);
    await app.close();
  }
}

runScript(async () => {
  const abort = new AbortController();
  process.once('SIGINT', () => abort.abort());
  process.once('SIGTERM', () => abort.abort());
  let verdict: Verdict | null = null;
  await withDatabase(async (url) => {
    verdict = await soak(url, abort.signal);
  });
  if (verdict === null) {
    console.log('stopped before the end: no verdict');
    return;
  }
  const v: Verdict = verdict;
  if (v.judged) {
    for (const s of v.series) console.log(`  ${s.ok ? 'flat ' : 'GROWS'} ${s.name}: ${s.detail}`);
  }
  console.log(`verdict: ${v.summary}`);
  // runScript exits 0 once this returns: a run without a plateau exits 1 here.
  if (v.judged && !v.ok) process.exit(1);
});
