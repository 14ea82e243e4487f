/**
 * The fault run of the transactional finish, shared by its test (a short run) and `scripts/fault-tx-finish.ts` (the
 * full one): worker processes of `test/fixtures/exactlyOnceApp.ts` drain `tx.effect` tasks on a PostgreSQL server of
 * the run's own while random ones are killed with SIGKILL and replaced, and the server is once stopped the way a
 * crash would stop it (an immediate shutdown) and started again. Each handler inserts one row into `effects` through
 * `ctx.transaction`, so at the end every COMPLETED task must have exactly one row, written by its completing attempt,
 * and no other task any.
 *
 * Imports nothing of vitest: the script runs it under plain tsx.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { z } from 'zod';
import { createApp } from '../../src/index.js';
import { isTransientDatabaseError } from '../../src/db/Database.js';
import { freePort, startEmbeddedServer } from '../../src/dev/EmbeddedServer.js';
import type { EmbeddedServer } from '../../src/dev/EmbeddedServer.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SCHEMA = 'fault_tx';

/** Settings of one fault run. */
export interface FaultRunOptions {
  /** SIGKILLs to deal. */
  kills: number;
  /** Worker processes alive at once. */
  workers: number;
  /** Handlers per worker process. Default 4. */
  concurrency?: number;
  /** After how many kills the server is crashed and restarted (once). Default: half of `kills`. */
  restartAfterKills?: number;
  /** Pause between two kills, drawn uniformly from this range (ms). Default [200, 500]. */
  killEveryMs?: [number, number];
  /**
   * How long a process runs tasks before it may be killed (ms). Default 1,000: a process killed as soon as it is up
   * would run almost nothing, and the run would be mostly boots.
   */
  minUptimeMs?: number;
  /** Tasks sent per batch; a batch is sent whenever fewer than half of it are left to run. Default 200. */
  batch?: number;
  /** Longest a handler waits with its transaction open, after its write (ms). Default 40. */
  holdMs?: number;
  /** Seed of the random choices (printed, so a run can be replayed). */
  seed: number;
  /** Progress lines. */
  log?: (line: string) => void;
}

/** What a fault run found. Every count under "violations" must be 0. */
export interface FaultRunSummary {
  seed: number;
  kills: number;
  serverRestarts: number;
  chaosMs: number;
  drainMs: number;
  tasks: number;
  completed: number;
  failed: number;
  /** Tasks still not terminal at the end (a violation when > 0). */
  open: number;
  attempts: number;
  /** Attempts written off by the reaper (runs cut short by a kill or the restart). */
  crashedAttempts: number;
  /** Tasks whose handler reached its end more than once: without the transaction, each would have two effects. */
  ranToEndTwice: number;
  violations: {
    /** COMPLETED tasks with no row or several rows in `effects`. */
    completedWithoutOneEffect: number;
    /** Rows in `effects` of a task that is not COMPLETED. */
    effectsOfUncompleted: number;
    /** Rows written by another attempt than the one that completed the task. */
    effectsOfAnotherAttempt: number;
    /** Tasks with more than one COMPLETED attempt row. */
    completedTwice: number;
  };
}

interface WorkerProcess {
  child: ChildProcess;
  /** When it logged that its worker started, or null before. */
  readyAt: number | null;
  exited: Promise<void>;
}

/** Runs one fault run and returns what it found; the server and its data directory are removed afterwards. */
export async function runFaultRun(options: FaultRunOptions): Promise<FaultRunSummary> {
  const log = options.log ?? (() => undefined);
  const random = seeded(options.seed);
  const [minGap, maxGap] = options.killEveryMs ?? [200, 500];
  const batch = options.batch ?? 200;
  const minUptimeMs = options.minUptimeMs ?? 1_000;
  const restartAt = options.restartAfterKills ?? Math.floor(options.kills / 2);
  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-fault-tx-'));
  const port = await freePort();
  let server: EmbeddedServer | null = await startEmbeddedServer({ dataDir, port, persistent: true });
  const url = server.url;
  const side = new pg.Pool({ connectionString: url, max: 3 });
  side.on('error', () => undefined);
  const app = createApp({ databaseUrl: url, schema: SCHEMA, logger: pino({ level: 'silent' }) });
  // The same name and input as the fixture's task; it never runs here.
  const effect = app.task({
    name: 'tx.effect',
    input: z.object({ ms: z.number().int().min(0) }),
    retry: {
      maxRetries: 100,
      retryOn: ['WORKER_CRASHED', 'UNHANDLED_ERROR'],
      backoff: 'constant',
      baseDelayMs: 50,
    },
    handler: () => null,
  });
  const workers: WorkerProcess[] = [];
  try {
    await app.migrate();
    await side.query(
      `CREATE TABLE ${SCHEMA}.effects (task_id text NOT NULL, attempt int NOT NULL, worker_pid int NOT NULL);
       CREATE INDEX ON ${SCHEMA}.effects (task_id);
       CREATE TABLE ${SCHEMA}.test_runs (task_id text NOT NULL, worker_pid int NOT NULL);`,
    );
    const env = {
      ...process.env,
      DATABASE_URL: url,
      HORSIES_SCHEMA: SCHEMA,
      HORSIES_LOG_LEVEL: 'info',
      HORSIES_TEST_RECOVERY: JSON.stringify(RECOVERY),
    };
    const args = ['--concurrency', String(options.concurrency ?? 4), '--poll-interval', '200'];
    for (let i = 0; i < options.workers; i += 1) workers.push(startWorker(env, args));

    const open = (): Promise<number> =>
      count(
        side,
        `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_tasks WHERE status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')`,
      );
    const holdMs = options.holdMs ?? 40;
    const topUp = async (): Promise<void> => {
      const left = await open();
      if (left < 0 || left >= batch / 2) return;
      await effect
        .sendMany(Array.from({ length: batch }, () => ({ input: { ms: Math.floor(random() * holdMs) } })))
        .catch(() => undefined); // the server may be away; the next round tries again
    };

    const started = Date.now();
    let kills = 0;
    let restarts = 0;
    await topUp();
    while (kills < options.kills) {
      await sleep(minGap + random() * (maxGap - minGap));
      await topUp();
      for (const [i, w] of workers.entries()) {
        // A process that ended on its own (it could not reach the server while it was away) is replaced.
        if (w.child.exitCode !== null || w.child.signalCode !== null) workers[i] = startWorker(env, args);
      }
      // Kill only processes that have run tasks for a while: a process killed while it boots exercises nothing.
      const eligible = (): WorkerProcess[] =>
        workers.filter((w) => w.readyAt !== null && Date.now() - w.readyAt >= minUptimeMs);
      let ready = eligible();
      while (ready.length === 0) {
        await sleep(50);
        ready = eligible();
      }
      const victim = ready[Math.floor(random() * ready.length)]!;
      victim.child.kill('SIGKILL');
      await victim.exited;
      workers[workers.indexOf(victim)] = startWorker(env, args);
      kills += 1;
      if (kills % 25 === 0) log(`${kills} kills, ${Date.now() - started} ms`);
      if (kills === restartAt && server) {
        log('PostgreSQL: immediate shutdown, then start');
        await server.crash();
        server = null;
        server = await startEmbeddedServer({ dataDir, port, persistent: true });
        restarts += 1;
      }
    }
    const chaosMs = Date.now() - started;
    for (const [i, w] of workers.entries()) {
      if (w.child.exitCode !== null || w.child.signalCode !== null) workers[i] = startWorker(env, args);
    }
    const deadline = Date.now() + 240_000;
    while ((await open()) !== 0 && Date.now() < deadline) await sleep(200);
    const drainMs = Date.now() - started;
    const summary = await summarize(side);
    return { seed: options.seed, kills, serverRestarts: restarts, chaosMs, drainMs, ...summary };
  } finally {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await app.close();
    await side.end();
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// Fast recovery, as in the chaos test: a run is written off 800 ms after its last heartbeat.
const RECOVERY = {
  claimerHeartbeatIntervalMs: 100,
  claimedStaleThresholdMs: 800,
  runnerHeartbeatIntervalMs: 100,
  runningStaleThresholdMs: 800,
  checkIntervalMs: 250,
};

function startWorker(env: NodeJS.ProcessEnv, args: string[]): WorkerProcess {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'worker', 'test/fixtures/exactlyOnceApp.ts', ...args],
    { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const w: WorkerProcess = {
    child,
    readyAt: null,
    exited: new Promise((res) => child.once('exit', () => res())),
  };
  let tail = '';
  const onData = (chunk: Buffer): void => {
    if (w.readyAt !== null) return;
    tail = (tail + chunk.toString()).slice(-4_000);
    if (tail.includes('"worker started"')) w.readyAt = Date.now();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  return w;
}

async function summarize(
  side: pg.Pool,
): Promise<Omit<FaultRunSummary, 'seed' | 'kills' | 'serverRestarts' | 'chaosMs' | 'drainMs'>> {
  const { rows } = await side.query<Record<string, number>>(
    `WITH done AS (
       SELECT a.task_id, a.attempt FROM ${SCHEMA}.horsies_task_attempts a WHERE a.outcome = 'COMPLETED'
     ), per_task AS (
       SELECT e.task_id, count(*) AS n FROM ${SCHEMA}.effects e GROUP BY e.task_id
     )
     SELECT
       (SELECT count(*)::int FROM ${SCHEMA}.horsies_tasks) AS tasks,
       (SELECT count(*)::int FROM ${SCHEMA}.horsies_tasks WHERE status = 'COMPLETED') AS completed,
       (SELECT count(*)::int FROM ${SCHEMA}.horsies_tasks WHERE status = 'FAILED') AS failed,
       (SELECT count(*)::int FROM ${SCHEMA}.horsies_tasks
         WHERE status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')) AS open,
       (SELECT count(*)::int FROM ${SCHEMA}.horsies_task_attempts) AS attempts,
       (SELECT count(*)::int FROM ${SCHEMA}.horsies_task_attempts WHERE outcome = 'WORKER_FAILURE') AS crashed,
       (SELECT count(*)::int FROM (SELECT task_id FROM ${SCHEMA}.test_runs GROUP BY task_id HAVING count(*) > 1) r)
         AS ran_twice,
       (SELECT count(*)::int FROM ${SCHEMA}.horsies_tasks t LEFT JOIN per_task p ON p.task_id = t.id
         WHERE t.status = 'COMPLETED' AND coalesce(p.n, 0) <> 1) AS completed_without_one,
       (SELECT count(*)::int FROM ${SCHEMA}.effects e JOIN ${SCHEMA}.horsies_tasks t ON t.id = e.task_id
         WHERE t.status <> 'COMPLETED') AS effects_of_uncompleted,
       (SELECT count(*)::int FROM ${SCHEMA}.effects e JOIN ${SCHEMA}.horsies_tasks t ON t.id = e.task_id
         WHERE t.status = 'COMPLETED' AND NOT EXISTS (
           SELECT 1 FROM done d WHERE d.task_id = e.task_id AND d.attempt = e.attempt)) AS effects_of_other,
       (SELECT count(*)::int FROM (SELECT task_id FROM done GROUP BY task_id HAVING count(*) > 1) d)
         AS completed_twice`,
  );
  const r = rows[0]!;
  return {
    tasks: r.tasks!,
    completed: r.completed!,
    failed: r.failed!,
    open: r.open!,
    attempts: r.attempts!,
    crashedAttempts: r.crashed!,
    ranToEndTwice: r.ran_twice!,
    violations: {
      completedWithoutOneEffect: r.completed_without_one!,
      effectsOfUncompleted: r.effects_of_uncompleted!,
      effectsOfAnotherAttempt: r.effects_of_other!,
      completedTwice: r.completed_twice!,
    },
  };
}

/** One count, or -1 while the server is away. */
async function count(side: pg.Pool, text: string): Promise<number> {
  try {
    return (await side.query<{ n: number }>(text)).rows[0]!.n;
  } catch (error) {
    if (isTransientDatabaseError(error)) return -1;
    throw error;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((res) => setTimeout(res, ms));
}

/** A small seeded generator (mulberry32), so a run can be replayed with its seed. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}
