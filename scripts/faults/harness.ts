/**
 * The fault suite (`npm run faults`, and in short mode `test/recovery/faultSuite.test.ts`): a PostgreSQL server of
 * the run's own, worker processes of `workerApp.ts` draining tasks and workflows, and a seeded schedule of faults:
 *
 * - `kill`: SIGKILL of a random worker process (one that has run for a while), replaced at once;
 * - `restart`: PostgreSQL stopped the way a crash stops it (an immediate shutdown), then started again;
 * - `cut`: every connection through the proxy closed at once;
 * - `stall`: the proxy half-open for a while (nothing forwarded, nothing closed);
 * - `latency`: the proxy delays every chunk for a while;
 * - `listen`: the LISTEN connections' backends terminated (`pg_terminate_backend`).
 *
 * The workers reach the server through the proxy (and, with `pgbouncer`, through PgBouncer in transaction mode
 * behind it, their LISTEN connections through a second proxy straight to the server). Their handlers record every
 * execution in `fault_executions`, straight to the server. Once the schedule is over and the queue drained, the
 * invariants are checked on the rows (see {@link checkInvariants}) and returned with the run's figures.
 *
 * Every child (workers, server, PgBouncer) is stopped at the end, on an error, and when `signal` aborts.
 * Imports nothing of vitest: the script runs it under plain tsx.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { freePort, startEmbeddedServer } from '../../src/dev/EmbeddedServer.js';
import type { EmbeddedServer } from '../../src/dev/EmbeddedServer.js';
import { startPgBouncer } from '../pgbouncer.js';
import type { PgBouncer } from '../pgbouncer.js';
import { defineFaultApp, diamondResult } from './app.js';
import { bundleWorker } from './bundle.js';
import type { WorkerBundle } from './bundle.js';
import { FaultProxy } from './proxy.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SCHEMA = 'faults';

/** Kinds of faults the schedule deals. */
export type FaultKind = 'kill' | 'restart' | 'cut' | 'stall' | 'latency' | 'listen';

/** Settings of one fault run. */
export interface FaultOptions {
  /** Seed of every random choice (printed, so that a run can be replayed). */
  seed: number;
  /** Worker processes alive at once. */
  workers: number;
  /** Handlers per worker process. Default 8. */
  concurrency?: number;
  /** The workers' `--throughput` (`high`: tasks started ahead of the free slots). Default `default`. */
  throughput?: 'default' | 'high';
  /** The most tasks sent (plain tasks; workflows come on top). The run keeps a backlog until then. */
  tasks: number;
  /** Workflows started, spread over the schedule. */
  workflows: number;
  /** SIGKILLs to deal. The schedule runs until they are all dealt (within `maxMs`). */
  kills: number;
  /** PostgreSQL crash-restarts, spread over `durationMs`. */
  restarts: number;
  /** Proxy faults (each a cut, a stall or added latency) spread over `durationMs`. */
  netFaults: number;
  /** LISTEN connections dropped, spread over `durationMs`. */
  listenDrops: number;
  /** Planned length of the schedule (ms); kills are paced to fit in it. */
  durationMs: number;
  /**
   * Hard limit on the schedule (ms): past it no fault is dealt and the drain begins, which has `drainTimeoutMs` of its
   * own, so that a starved run still drains and reports instead of counting its undrained tasks as stuck.
   */
  maxMs: number;
  /** Longest wait for the drain after the last fault, or after `maxMs` (ms). Default 120,000. */
  drainTimeoutMs?: number;
  /** Put PgBouncer in transaction mode between the workers (and the run's own app) and the server. */
  pgbouncer?: boolean;
  /** A worker process is killed only once it has run tasks this long (ms). Default 500. */
  minUptimeMs?: number;
  /** Progress lines. */
  log?: (line: string) => void;
  /** Stops the run early (Ctrl-C); the invariants are still checked and everything is stopped. */
  signal?: AbortSignal;
}

/** One recorded fault. */
export interface FaultRecord {
  kind: FaultKind;
  /** When it began and ended (ms since the epoch); a kill's end is its process's exit. */
  startMs: number;
  endMs: number;
  /** Process ids hit (kills), connections closed (cuts), backends terminated (listen drops). */
  pids?: number[];
  /** A kill's victim: when it was spawned (process ids are reused over a long run). */
  spawnedMs?: number;
  detail?: string;
}

/** One invariant's verdict. */
export interface Invariant {
  name: string;
  ok: boolean;
  /** What was counted, for the printout. */
  detail: string;
}

/** What a fault run found. */
export interface FaultReport {
  seed: number;
  pgbouncer: boolean;
  faults: Record<FaultKind, number>;
  scheduleMs: number;
  /** From the end of the last fault to the moment every task and workflow was terminal (null: never drained). */
  drainMs: number | null;
  tasks: number;
  workflows: number;
  executions: number;
  /** Tasks executed more than once, over all tasks. */
  reExecutionRate: number;
  reExecutedTasks: number;
  /** Tasks whose send handed them to an idle worker (throughput high: the worker's `handoff`). */
  handedAtSend: number;
  /** Which kind of fault explained each earlier execution of a re-executed task. */
  explainedBy: Partial<Record<FaultKind, number>>;
  /** Worker processes that ended by themselves (could not reach the server) and were replaced. */
  selfExits: number;
  detection: {
    /** A killed worker's running task written off by the reaper: time from the kill (ms). */
    killToWriteOff: Stats | null;
    /** A restart's end to the next task completed (ms). */
    restartToFirstCompletion: Stats | null;
    /** A LISTEN drop to its listeners connected again (ms). */
    listenReconnect: Stats | null;
  };
  invariants: Invariant[];
  ok: boolean;
  /** When an invariant failed: the end of one worker's output at the end of the run. */
  workerOutput?: string;
}

/** Median, 95th percentile and largest of some durations (ms). */
export interface Stats {
  n: number;
  median: number;
  p95: number;
  max: number;
}

/** The short mode: a few dozen faults, well under a minute of schedule. */
export const SHORT_MODE: Omit<FaultOptions, 'seed'> = {
  workers: 3,
  tasks: 3_000,
  workflows: 20,
  kills: 24,
  restarts: 2,
  netFaults: 6,
  listenDrops: 3,
  durationMs: 30_000,
  maxMs: 80_000,
  drainTimeoutMs: 45_000,
};

/** The long mode: at least 1,000 kills and 10 restarts. */
export const LONG_MODE: Omit<FaultOptions, 'seed'> = {
  workers: 12,
  tasks: 200_000,
  workflows: 400,
  kills: 1_000,
  restarts: 12,
  netFaults: 40,
  listenDrops: 20,
  durationMs: 540_000,
  maxMs: 3_600_000,
  drainTimeoutMs: 180_000,
};

// A run is written off 2 s after its last heartbeat: quick detection, but above a busy machine's pauses.
const RECOVERY = {
  claimerHeartbeatIntervalMs: 200,
  claimedStaleThresholdMs: 2_000,
  runnerHeartbeatIntervalMs: 200,
  runningStaleThresholdMs: 2_000,
  checkIntervalMs: 250,
  workflowRecoveryGraceMs: 1_000,
};
/** How long after a network fault or restart ends a run it hit may still be written off (ms). */
const WINDOW_SLACK_MS = RECOVERY.runningStaleThresholdMs + 3_000;
/**
 * How long before a server crash a start that committed without waiting for its flush can still be undone by it:
 * the WAL writer flushes such commits within a few of its 200 ms rounds; generous for a loaded machine.
 */
const LOST_START_MS = 3_000;

interface WorkerProcess {
  child: ChildProcess;
  pid: number;
  startedAt: number;
  /** When it logged that its worker started, or null before. */
  readyAt: number | null;
  exited: Promise<void>;
  killed: boolean;
  /** The end of its output, for a failed run's report. */
  tail(): string;
}

/** Runs one fault run and returns what it found. */
export async function runFaults(options: FaultOptions): Promise<FaultReport> {
  const log = options.log ?? (() => undefined);
  const random = seeded(options.seed);
  const signal = options.signal ?? new AbortController().signal;
  const started = Date.now();
  const hardDeadline = started + options.maxMs;
  const over = (): boolean => signal.aborted || Date.now() > hardDeadline;
  const minUptimeMs = options.minUptimeMs ?? 500;
  const faults: FaultRecord[] = [];
  const workers: WorkerProcess[] = [];
  let selfExits = 0;
  let preparedErrors = 0;

  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-faults-'));
  // Entered by the server's own user when the run is root.
  chmodSync(dataDir, 0o755);
  const port = await freePort();
  let server: EmbeddedServer | null = null;
  let bouncer: PgBouncer | null = null;
  const proxies: FaultProxy[] = [];
  let side: pg.Pool | null = null;
  let runApp: ReturnType<typeof defineFaultApp> | null = null;
  let bundle: WorkerBundle | null = null;
  try {
    bundle = await bundleWorker(ROOT);
    const workerArgs = bundle.args;
    server = await startEmbeddedServer({ dataDir: join(dataDir, 'pg'), port, persistent: true });
    const serverUrl = server.url;
    side = new pg.Pool({ connectionString: serverUrl, max: 4 });
    side.on('error', () => undefined);
    const serverAddress = { host: '127.0.0.1', port };
    let workerUrl: string;
    let workerListenUrl: string | undefined;
    let appUrl = serverUrl;
    if (options.pgbouncer) {
      bouncer = await startPgBouncer(serverUrl, { poolSize: 30 });
      appUrl = bouncer.url;
      const pooled = await FaultProxy.start({ host: '127.0.0.1', port: bouncer.port });
      const direct = await FaultProxy.start(serverAddress);
      proxies.push(pooled, direct);
      workerUrl = withPort(serverUrl, pooled.port);
      workerListenUrl = withPort(serverUrl, direct.port);
    } else {
      const proxy = await FaultProxy.start(serverAddress);
      proxies.push(proxy);
      workerUrl = withPort(serverUrl, proxy.port);
    }
    // The run's own app: migrations, sends, workflow starts. Through PgBouncer too when asked.
    runApp = defineFaultApp(
      {
        databaseUrl: appUrl,
        schema: SCHEMA,
        preparedStatements: !options.pgbouncer,
        ...(options.pgbouncer ? { listenUrl: serverUrl } : {}),
        logger: pino({ level: 'silent' }),
        metrics: false,
        tracing: false,
      },
      async () => undefined,
    );
    await runApp.app.migrate();
    await side.query(
      `CREATE TABLE ${SCHEMA}.fault_executions (
         id uuid PRIMARY KEY, task_id text NOT NULL, attempt int NOT NULL, worker_pid int NOT NULL,
         started_ms bigint NOT NULL);
       CREATE INDEX ON ${SCHEMA}.fault_executions (task_id)`,
    );
    log(
      `fault run: seed ${options.seed}, ${options.workers} workers, ${options.kills} kills, ${options.restarts} ` +
        `restarts, ${options.netFaults} proxy faults, ${options.listenDrops} LISTEN drops over ~${Math.round(options.durationMs / 1000)} s` +
        (options.pgbouncer ? ', through PgBouncer (transaction mode)' : ''),
    );

    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: workerUrl,
      HORSIES_SCHEMA: SCHEMA,
      HORSIES_LOG_LEVEL: 'info',
      FAULTS_RECORD_URL: serverUrl,
      FAULTS_RECOVERY: JSON.stringify(RECOVERY),
      FAULTS_PREPARED: options.pgbouncer ? '0' : '1',
    };
    if (workerListenUrl) env.HORSIES_LISTEN_URL = workerListenUrl;
    else delete env.HORSIES_LISTEN_URL;
    const args = [
      '--concurrency',
      String(options.concurrency ?? 8),
      '--poll-interval',
      '250',
      '--throughput',
      options.throughput ?? 'default',
    ];
    const spawnWorker = (): WorkerProcess => {
      const w = startWorker(workerArgs, env, args, () => {
        preparedErrors += 1;
      });
      return w;
    };
    const replaceExited = (): void => {
      for (const [i, w] of workers.entries()) {
        if (!w.killed && (w.child.exitCode !== null || w.child.signalCode !== null)) {
          selfExits += 1;
          workers[i] = spawnWorker();
        }
      }
    };
    for (let i = 0; i < options.workers; i += 1) workers.push(spawnWorker());

    // Sends: a backlog of plain tasks while the schedule runs, and workflows spread over it.
    const sentIds = new Set<string>();
    let sent = 0;
    const workflowIds: Array<{ id: string; n: number }> = [];
    const open = (): Promise<number> =>
      count(
        side!,
        `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_tasks
         WHERE status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')`,
      );
    const openWorkflows = (): Promise<number> =>
      count(
        side!,
        `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_workflows
         WHERE status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')`,
      );
    // Starts the next workflow; false when the start failed (the server or pooler may be away: tried again later).
    // Each start names its workflow: a start that committed but whose answer a fault cut off is tried again and
    // returns the same workflow instead of a second one.
    const startWorkflow = async (): Promise<boolean> => {
      const n = workflowIds.length;
      try {
        const handle = await runApp!.diamond.start({ n }, { id: `fault-diamond-${n}` });
        workflowIds.push({ id: handle.id, n });
        return true;
      } catch {
        return false;
      }
    };
    const batch = 200;
    let scheduleOver = false;
    let round = 0;
    const feed = async (): Promise<void> => {
      while (!scheduleOver && !over()) {
        const left = await open();
        round += 1;
        if (left >= 0 && left < batch && sent < options.tasks && round % 8 === 0) {
          // Every eighth round, once the queue has drained (for 5 s at most), ten tasks one at a time and apart,
          // which idle workers taking hand-offs (throughput high) get from the send itself.
          for (let waited = 0; waited < 5_000 && (await open()) > 0 && !over(); waited += 50) await sleep(50);
          for (let i = 0; i < 10 && sent < options.tasks && !over(); i += 1) {
            try {
              sentIds.add((await runApp!.work.send({ n: sent, ms: Math.floor(random() * 60) })).id);
              sent += 1;
            } catch {
              // as below
            }
            await sleep(15);
          }
        } else if (left >= 0 && left < batch && sent < options.tasks) {
          const size = Math.min(batch, options.tasks - sent);
          const inputs = Array.from({ length: size }, (_, i) => ({
            input: { n: sent + i, ms: Math.floor(random() * 60) },
          }));
          try {
            const handles = await runApp!.work.sendMany(inputs);
            for (const h of handles) sentIds.add(h.id);
            sent += size;
          } catch {
            // the server or pooler may be away; the next round tries again (a send that did commit shows up
            // as a task that no one counted as sent: checked as "not lost" only for the ones acknowledged)
          }
        }
        const dueWorkflows = Math.min(
          options.workflows,
          Math.ceil(((Date.now() - started) / options.durationMs) * options.workflows),
        );
        while (workflowIds.length < dueWorkflows && !over()) {
          if (!(await startWorkflow())) break;
        }
        await sleep(150);
      }
    };

    // The schedule of the faults other than kills: points drawn over the run's progress (the share of kills
    // dealt, or of the planned length when there are no kills), then dealt in order, so that they stay spread
    // over the run however fast the kills go.
    const planned: Array<{ at: number; kind: FaultKind }> = [];
    const spread = (n: number, kind: FaultKind | (() => FaultKind)): void => {
      for (let i = 0; i < n; i += 1) {
        const slot = 0.95 / n;
        const at = 0.02 + slot * i + random() * slot * 0.8;
        planned.push({ at, kind: typeof kind === 'function' ? kind() : kind });
      }
    };
    let killsDealt = 0;
    const progress = (): number =>
      options.kills > 0 ? killsDealt / options.kills : (Date.now() - started) / options.durationMs;
    spread(options.restarts, 'restart');
    spread(options.netFaults, () => (['cut', 'stall', 'latency'] as const)[Math.floor(random() * 3)]!);
    spread(options.listenDrops, 'listen');
    planned.sort((a, b) => a.at - b.at);
    const listenReconnects: number[] = [];

    const deal = async (kind: FaultKind): Promise<void> => {
      const startMs = Date.now();
      if (kind === 'restart') {
        log(
          `restart: immediate shutdown of PostgreSQL, then start (${Math.round((startMs - started) / 1000)} s)`,
        );
        await server!.crash();
        server = null;
        server = await startEmbeddedServer({ dataDir: join(dataDir, 'pg'), port, persistent: true });
        faults.push({ kind, startMs, endMs: Date.now() });
      } else if (kind === 'cut') {
        const closed = proxies.reduce((n, p) => n + p.closeAll(), 0);
        faults.push({ kind, startMs, endMs: Date.now(), pids: [], detail: `${closed} connections closed` });
      } else if (kind === 'stall') {
        const ms = 1_000 + Math.floor(random() * 3_000);
        for (const p of proxies) p.stall(ms);
        faults.push({ kind, startMs, endMs: startMs + ms, detail: `${ms} ms half-open` });
      } else if (kind === 'latency') {
        const ms = 20 + Math.floor(random() * 200);
        const forMs = 2_000 + Math.floor(random() * 4_000);
        for (const p of proxies) p.delay(ms, forMs);
        faults.push({ kind, startMs, endMs: startMs + forMs, detail: `+${ms} ms for ${forMs} ms` });
      } else if (kind === 'listen') {
        // The side pool's first query after a restart fails on a dead connection, and listeners may be between
        // reconnects: a few tries before giving up on this drop.
        let pids = await listenerPids(side!);
        for (let i = 0; i < 20 && pids.length === 0 && !over(); i += 1) {
          await sleep(100);
          pids = await listenerPids(side!);
        }
        if (pids.length === 0) {
          log('listen: no LISTEN connection found to drop');
          return;
        }
        await side!
          .query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ANY($1)', [pids])
          .catch(() => undefined);
        faults.push({ kind, startMs, endMs: Date.now(), pids });
        void measureListenReconnect(side!, pids, startMs).then((ms) => {
          if (ms !== null) listenReconnects.push(ms);
        });
      }
    };

    const others = async (): Promise<void> => {
      for (const { at, kind } of planned) {
        while (progress() < at && !over()) await sleep(100);
        if (over()) return;
        await deal(kind).catch((error: unknown) => log(`${kind} failed: ${String(error)}`));
      }
    };

    const killer = async (): Promise<void> => {
      const gap = options.durationMs / Math.max(1, options.kills);
      let kills = 0;
      while (kills < options.kills && !over()) {
        const due = started + gap * (kills + 1) * (0.5 + random());
        while (Date.now() < due && !over()) await sleep(Math.min(100, due - Date.now()));
        replaceExited();
        const eligible = (): WorkerProcess[] =>
          workers.filter((w) => !w.killed && w.readyAt !== null && Date.now() - w.readyAt >= minUptimeMs);
        let ready = eligible();
        while (ready.length === 0 && !over()) {
          await sleep(50);
          replaceExited();
          ready = eligible();
        }
        if (over()) return;
        const victim = ready[Math.floor(random() * ready.length)]!;
        const startMs = Date.now();
        victim.killed = true;
        victim.child.kill('SIGKILL');
        workers[workers.indexOf(victim)] = spawnWorker();
        await victim.exited;
        faults.push({
          kind: 'kill',
          startMs,
          endMs: Date.now(),
          pids: [victim.pid],
          spawnedMs: victim.startedAt,
        });
        kills += 1;
        killsDealt = kills;
        if (kills % 50 === 0) log(`${kills} kills (${Math.round((Date.now() - started) / 1000)} s)`);
      }
    };

    const feeding = feed();
    await Promise.all([killer(), others()]);
    scheduleOver = true;
    await feeding;
    // The kills can run ahead of the planned length, and the workflows were due by time: start the ones the
    // schedule did not get to, so that every run starts as many as it was asked for.
    while (workflowIds.length < options.workflows && !over()) {
      if (!(await startWorkflow())) await sleep(150);
    }
    const scheduleEnd = Date.now();
    const lastFaultEnd = Math.max(scheduleEnd, ...faults.map((f) => f.endMs));
    log(`schedule over after ${Math.round((scheduleEnd - started) / 1000)} s; draining`);

    // The drain: every worker alive, until no task and no workflow is open.
    const drainDeadline = Math.max(Date.now(), lastFaultEnd) + (options.drainTimeoutMs ?? 120_000);
    let drainedAt: number | null = null;
    while (!signal.aborted && Date.now() < drainDeadline) {
      replaceExited();
      if ((await open()) === 0 && (await openWorkflows()) === 0) {
        drainedAt = Date.now();
        break;
      }
      await sleep(100);
    }
    const lastOutput = workers[0]?.tail() ?? '';
    for (const w of workers) {
      w.killed = true;
      w.child.kill('SIGKILL');
    }
    await Promise.all(workers.map((w) => w.exited));

    let rows: Rows;
    try {
      rows = await readRows(side);
    } catch (error) {
      // Ctrl-C reaches the server too (same process group, and the embedded server's own SIGINT hook stops it).
      if (signal.aborted)
        throw new Error('interrupted: the server stopped with the run; nothing was checked', {
          cause: error,
        });
      throw error;
    }
    const report = buildReport({
      options,
      faults,
      rows,
      sentIds,
      workflowIds,
      scheduleMs: scheduleEnd - started,
      drainMs: drainedAt === null ? null : Math.max(0, drainedAt - lastFaultEnd),
      selfExits,
      preparedErrors,
      listenReconnects,
    });
    if (!report.ok) report.workerOutput = lastOutput;
    return report;
  } finally {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await runApp?.app.close().catch(() => undefined);
    await side?.end().catch(() => undefined);
    for (const p of proxies) await p.stop().catch(() => undefined);
    await bouncer?.stop().catch(() => undefined);
    await server?.stop().catch(() => undefined);
    bundle?.remove();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function startWorker(
  command: string[],
  env: NodeJS.ProcessEnv,
  args: string[],
  onPreparedError: () => void,
): WorkerProcess {
  const child = spawn(process.execPath, [...command, ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const w: WorkerProcess = {
    child,
    pid: child.pid ?? -1,
    startedAt: Date.now(),
    readyAt: null,
    killed: false,
    tail: () => '',
    exited: new Promise((res) => child.once('exit', () => res())),
  };
  let tail = '';
  w.tail = () => tail;
  const onData = (chunk: Buffer): void => {
    const text = chunk.toString();
    // The errors PostgreSQL gives a named statement prepared on another server connection.
    if (/prepared statement "[^"]*" (does not exist|already exists)/.test(text)) onPreparedError();
    tail = (tail + text).slice(-3_000);
    if (w.readyAt === null && tail.includes('"worker started"')) w.readyAt = Date.now();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  return w;
}

async function listenerPids(side: pg.Pool): Promise<number[]> {
  try {
    const { rows } = await side.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
       WHERE application_name = 'horsies:listen' AND datname = current_database() AND pid <> pg_backend_pid()`,
    );
    return rows.map((r) => r.pid);
  } catch {
    return [];
  }
}

/** Time until as many listeners as were dropped are connected again (new backends), or null after 15 s. */
async function measureListenReconnect(side: pg.Pool, dropped: number[], at: number): Promise<number | null> {
  const deadline = at + 15_000;
  while (Date.now() < deadline) {
    const now = await listenerPids(side);
    if (now.filter((pid) => !dropped.includes(pid)).length >= dropped.length) return Date.now() - at;
    await sleep(25);
  }
  return null;
}

interface Rows {
  tasks: Array<{
    id: string;
    status: string;
    attempt: number;
    claimed: boolean;
    claimed_by_worker_id: string | null;
    completed_ms: number | null;
    sent_ms: number;
    workflow_id: string | null;
  }>;
  attempts: Array<{
    task_id: string;
    attempt: number;
    outcome: string;
    started: boolean;
    worker_pid: number | null;
    started_ms: number | null;
    finished_ms: number;
  }>;
  executions: Array<{ task_id: string; attempt: number; worker_pid: number; started_ms: number }>;
  workflows: Array<{
    id: string;
    status: string;
    result: unknown;
    nodes_total: number;
    nodes_terminal: number;
  }>;
  nodes: Array<{
    workflow_id: string;
    node_id: string;
    status: string;
    task_id: string | null;
    task_status: string | null;
  }>;
}

async function readRows(side: pg.Pool): Promise<Rows> {
  const q = async <T extends object>(text: string): Promise<T[]> => (await side.query<T>(text)).rows;
  return {
    tasks: await q(
      `SELECT id, status, attempt, claimed, claimed_by_worker_id, workflow_id,
              (extract(epoch FROM completed_at) * 1000)::float8 AS completed_ms,
              (extract(epoch FROM sent_at) * 1000)::float8 AS sent_ms
       FROM ${SCHEMA}.horsies_tasks`,
    ),
    attempts: await q(
      `SELECT task_id, attempt, outcome, started_at IS NOT NULL AS started, worker_pid,
              (extract(epoch FROM started_at) * 1000)::float8 AS started_ms,
              (extract(epoch FROM finished_at) * 1000)::float8 AS finished_ms
       FROM ${SCHEMA}.horsies_task_attempts`,
    ),
    executions: await q(
      `SELECT task_id, attempt, worker_pid, started_ms::float8 AS started_ms FROM ${SCHEMA}.fault_executions`,
    ),
    workflows: await q(
      `SELECT id, status, result, nodes_total, nodes_terminal FROM ${SCHEMA}.horsies_workflows`,
    ),
    nodes: await q(
      `SELECT n.workflow_id, n.node_id, n.status, n.task_id, t.status AS task_status
       FROM ${SCHEMA}.horsies_workflow_tasks n LEFT JOIN ${SCHEMA}.horsies_tasks t ON t.id = n.task_id`,
    ),
  };
}

const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED']);

interface ReportInput {
  options: FaultOptions;
  faults: FaultRecord[];
  rows: Rows;
  sentIds: Set<string>;
  workflowIds: Array<{ id: string; n: number }>;
  scheduleMs: number;
  drainMs: number | null;
  selfExits: number;
  preparedErrors: number;
  listenReconnects: number[];
}

/** Checks the invariants on the rows and gathers the figures. */
function buildReport(input: ReportInput): FaultReport {
  const { rows, faults } = input;
  const invariants: Invariant[] = [];
  const check = (name: string, bad: number, detail: string): void => {
    invariants.push({ name, ok: bad === 0, detail });
  };
  const tasksById = new Map(rows.tasks.map((t) => [t.id, t]));
  const attemptsByTask = groupBy(rows.attempts, (a) => a.task_id);
  const execsByTask = groupBy(rows.executions, (e) => e.task_id);
  // Starts commit without waiting for their WAL flush (synchronousStarts off, the default): a server crash just
  // after one undoes it, the task is PENDING again with its attempt count from before, and its next run carries
  // the same attempt number (docs/recovery.md, durability of each transition). An execution repeated under one
  // attempt number is that, when a restart came within the flush delay after it began.
  const restarts = faults.filter((f) => f.kind === 'restart');
  const startLost = (atMs: number): boolean =>
    restarts.some((f) => atMs <= f.startMs + 500 && atMs >= f.startMs - LOST_START_MS);
  let lostStarts = 0;

  // 1. Every task terminal, none lost, and (no handler fails by itself) every one COMPLETED.
  const lost = [...input.sentIds].filter((id) => !tasksById.has(id)).length;
  const open = rows.tasks.filter((t) => !TERMINAL.has(t.status)).length;
  const notCompleted = rows.tasks.filter((t) => TERMINAL.has(t.status) && t.status !== 'COMPLETED');
  check(
    'every sent task exists (none lost)',
    lost,
    `${input.sentIds.size} acknowledged sends, ${lost} missing`,
  );
  check('every task terminal (none stuck)', open, `${rows.tasks.length} tasks, ${open} not terminal`);
  check(
    'every task COMPLETED',
    notCompleted.length,
    `${notCompleted.length} ended otherwise` +
      (notCompleted.length
        ? ` (${summarizeBy(notCompleted, (t) => t.status)}; e.g. ${notCompleted[0]!.id})`
        : ''),
  );

  // 2. None COMPLETED twice; the task row, its attempt rows and the executions agree.
  let completedTwice = 0;
  let disagree = 0;
  let completedWithoutExecution = 0;
  for (const t of rows.tasks) {
    const done = (attemptsByTask.get(t.id) ?? []).filter((a) => a.outcome === 'COMPLETED');
    if (done.length > 1) completedTwice += 1;
    if ((t.status === 'COMPLETED') !== (done.length === 1)) disagree += 1;
    const d = done[0];
    if (d) {
      const runs = (execsByTask.get(t.id) ?? [])
        .filter((e) => e.attempt === d.attempt)
        .sort((a, b) => a.started_ms - b.started_ms);
      // Earlier runs of the same attempt whose start a restart undid do not count against it.
      const last = runs.at(-1);
      const earlierLost = runs.slice(0, -1).every((e) => startLost(e.started_ms));
      if (!last || !earlierLost || last.worker_pid !== d.worker_pid) completedWithoutExecution += 1;
    }
  }
  check('no task COMPLETED twice', completedTwice, `${completedTwice} tasks with several COMPLETED attempts`);
  check('task rows and attempt rows agree', disagree, `${disagree} tasks whose status and attempts differ`);
  check(
    'each completed attempt is one recorded execution, on the worker the attempt names',
    completedWithoutExecution,
    `${completedWithoutExecution} completed attempts without exactly one matching execution`,
  );

  // 3. Attempt numbers contiguous: 1..n per task, n = the task's attempt; executions within them, one per attempt.
  let gaps = 0;
  let execOutside = 0;
  let attemptRunTwice = 0;
  for (const t of rows.tasks) {
    const nums = (attemptsByTask.get(t.id) ?? []).map((a) => a.attempt).sort((a, b) => a - b);
    if (TERMINAL.has(t.status) && (nums.length !== t.attempt || nums.some((n, i) => n !== i + 1))) gaps += 1;
    const execs = execsByTask.get(t.id) ?? [];
    if (execs.some((e) => e.attempt < 1 || e.attempt > t.attempt)) execOutside += 1;
    const byAttempt = groupBy(execs, (e) => String(e.attempt));
    for (const same of byAttempt.values()) {
      if (same.length < 2) continue;
      const earlier = [...same].sort((a, b) => a.started_ms - b.started_ms).slice(0, -1);
      if (earlier.every((e) => startLost(e.started_ms))) lostStarts += earlier.length;
      else attemptRunTwice += 1;
    }
  }
  check(
    'attempt numbers contiguous (1..n per task)',
    gaps,
    `${gaps} tasks with a gap or an extra attempt row`,
  );
  check(
    'executions carry attempt numbers of their task',
    execOutside + attemptRunTwice,
    `${execOutside} tasks with an execution outside 1..attempt, ${attemptRunTwice} with an attempt executed twice` +
      ` (beside ${lostStarts} runs again under the same attempt number after a restart undid their start)`,
  );

  // 4. No attempt row for a run that never started.
  let neverStarted = 0;
  for (const a of rows.attempts) {
    if (!a.started) neverStarted += 1;
    else if (a.outcome !== 'WORKER_FAILURE') {
      const ran = (execsByTask.get(a.task_id) ?? []).some((e) => e.attempt === a.attempt);
      if (!ran) neverStarted += 1;
    }
  }
  check(
    'no attempt row for a run that never started',
    neverStarted,
    `${rows.attempts.length} attempt rows, ${neverStarted} without a start (or a finished one without an execution)`,
  );

  // 5. Every re-execution explained by a recorded fault.
  // The kill of the process that ran something at `atMs` on `pid`: spawned before, killed after (ids are reused).
  const killsByPid = new Map<number, FaultRecord[]>();
  for (const f of faults) {
    if (f.kind !== 'kill') continue;
    for (const pid of f.pids ?? []) killsByPid.set(pid, [...(killsByPid.get(pid) ?? []), f]);
  }
  const killOf = (pid: number, atMs: number): FaultRecord | undefined =>
    killsByPid.get(pid)?.find((k) => (k.spawnedMs ?? 0) <= atMs + 1_000 && k.startMs >= atMs - 1_000);
  const windows = faults.filter(
    (f) => f.kind === 'restart' || f.kind === 'cut' || f.kind === 'stall' || f.kind === 'latency',
  );
  const explainedBy: Partial<Record<FaultKind, number>> = {};
  let unexplained = 0;
  const unexplainedExamples: string[] = [];
  let reExecuted = 0;
  for (const [taskId, execs] of execsByTask) {
    if (execs.length < 2) continue;
    reExecuted += 1;
    const ordered = [...execs].sort((a, b) => a.started_ms - b.started_ms);
    for (let i = 0; i < ordered.length - 1; i += 1) {
      const e = ordered[i]!;
      const next = ordered[i + 1]!;
      let by: FaultKind | null = killOf(e.worker_pid, e.started_ms) ? 'kill' : null;
      if (!by) {
        const w = windows.find(
          (f) => f.startMs <= next.started_ms && f.endMs + WINDOW_SLACK_MS >= e.started_ms,
        );
        by = w?.kind ?? null;
      }
      if (by) explainedBy[by] = (explainedBy[by] ?? 0) + 1;
      else {
        unexplained += 1;
        if (unexplainedExamples.length < 3) {
          unexplainedExamples.push(
            `${taskId} attempt ${e.attempt} on pid ${e.worker_pid} at ${e.started_ms}`,
          );
        }
      }
    }
  }
  check(
    'every re-execution explained by a recorded fault',
    unexplained,
    `${reExecuted} tasks executed more than once; earlier executions explained by ` +
      `${
        Object.entries(explainedBy)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'nothing (none)'
      }; ${unexplained} unexplained` +
      (unexplainedExamples.length ? ` (${unexplainedExamples.join('; ')})` : ''),
  );

  // 6. Claims and leases released: no task left claimed, none held by any worker (all are dead now).
  const held = rows.tasks.filter((t) => t.claimed || (!TERMINAL.has(t.status) && t.claimed_by_worker_id));
  check('no task left claimed (leases released)', held.length, `${held.length} tasks still claimed`);

  // 7. Workflows: every one terminal and COMPLETED with the right result, its nodes consistent with their tasks.
  const wfById = new Map(rows.workflows.map((w) => [w.id, w]));
  let wfBad = 0;
  const wfExamples: string[] = [];
  for (const { id, n } of input.workflowIds) {
    const w = wfById.get(id);
    const ok =
      w !== undefined &&
      w.status === 'COMPLETED' &&
      w.nodes_terminal === w.nodes_total &&
      JSON.stringify(w.result) === JSON.stringify({ ok: diamondResult(n) });
    if (!ok) {
      wfBad += 1;
      if (wfExamples.length < 3)
        wfExamples.push(`${id}: ${w ? `${w.status} ${JSON.stringify(w.result)}` : 'missing'}`);
    }
  }
  let nodeBad = 0;
  for (const node of rows.nodes) {
    const consistent =
      node.status === 'COMPLETED'
        ? node.task_status === 'COMPLETED'
        : node.status === 'FAILED' || node.status === 'SKIPPED'
          ? node.task_status === null || TERMINAL.has(node.task_status)
          : false;
    if (!consistent) nodeBad += 1;
  }
  const orphanTasks = rows.tasks.filter((t) => t.workflow_id !== null && !wfById.has(t.workflow_id)).length;
  check(
    'every workflow COMPLETED with its result',
    wfBad,
    `${input.workflowIds.length} workflows started, ${wfBad} not COMPLETED with 2n+2` +
      (wfExamples.length ? ` (${wfExamples.join('; ')})` : ''),
  );
  check(
    "every workflow's nodes terminal and consistent with their tasks",
    nodeBad + orphanTasks,
    `${rows.nodes.length} nodes, ${nodeBad} inconsistent, ${orphanTasks} workflow tasks without their workflow`,
  );

  // 8. Through PgBouncer: no prepared-statement error in any worker's output.
  check(
    'the run sent tasks and started workflows',
    rows.tasks.length > 0 && (rows.workflows.length > 0 || input.options.workflows === 0) ? 0 : 1,
    `${rows.tasks.length} tasks, ${rows.workflows.length} workflows`,
  );
  if (input.options.pgbouncer) {
    check(
      'no prepared-statement error',
      input.preparedErrors,
      `${input.preparedErrors} in the workers' logs`,
    );
  }
  check(
    'the queue drained after the last fault',
    input.drainMs === null ? 1 : 0,
    input.drainMs === null ? 'not drained in time' : `in ${input.drainMs} ms`,
  );

  // Figures.
  const counts = { kill: 0, restart: 0, cut: 0, stall: 0, latency: 0, listen: 0 } as Record<
    FaultKind,
    number
  >;
  for (const f of faults) counts[f.kind] += 1;
  const writeOffs: number[] = [];
  for (const a of rows.attempts) {
    if (a.outcome !== 'WORKER_FAILURE' || a.worker_pid === null || a.started_ms === null) continue;
    const kill = killOf(a.worker_pid, a.started_ms);
    if (kill && a.finished_ms >= kill.startMs) writeOffs.push(a.finished_ms - kill.startMs);
  }
  const completions = rows.tasks
    .map((t) => t.completed_ms)
    .filter((ms): ms is number => ms !== null)
    .sort((a, b) => a - b);
  const restartRecovery: number[] = [];
  for (const f of faults) {
    if (f.kind !== 'restart') continue;
    const next = completions.find((ms) => ms >= f.endMs);
    if (next !== undefined) restartRecovery.push(next - f.endMs);
  }
  const report: FaultReport = {
    seed: input.options.seed,
    pgbouncer: input.options.pgbouncer ?? false,
    faults: counts,
    scheduleMs: input.scheduleMs,
    drainMs: input.drainMs,
    tasks: rows.tasks.length,
    workflows: rows.workflows.length,
    executions: rows.executions.length,
    reExecutedTasks: reExecuted,
    // Handed to an idle worker by its send: its first attempt started in the send's own transaction.
    handedAtSend: rows.tasks.filter((t) =>
      attemptsByTask.get(t.id)?.some((a) => a.attempt === 1 && a.started_ms === t.sent_ms),
    ).length,
    reExecutionRate: rows.tasks.length ? reExecuted / rows.tasks.length : 0,
    explainedBy,
    selfExits: input.selfExits,
    detection: {
      killToWriteOff: stats(writeOffs),
      restartToFirstCompletion: stats(restartRecovery),
      listenReconnect: stats(input.listenReconnects),
    },
    invariants,
    ok: invariants.every((i) => i.ok),
  };
  return report;
}

/** The report as lines of text: each invariant PASS or FAIL with its counts, then the figures. */
export function formatReport(r: FaultReport): string {
  const s = (x: Stats | null): string =>
    x ? `median ${x.median} ms, p95 ${x.p95} ms, max ${x.max} ms (n=${x.n})` : 'not measured';
  return [
    `invariants (seed ${r.seed}${r.pgbouncer ? ', through PgBouncer' : ''}):`,
    ...r.invariants.map((i) => `  ${i.ok ? 'PASS' : 'FAIL'}  ${i.name}: ${i.detail}`),
    'figures:',
    `  faults: ${Object.entries(r.faults)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
    `  schedule ${Math.round(r.scheduleMs / 1000)} s; drain after the last fault: ${r.drainMs === null ? 'never' : `${r.drainMs} ms`}`,
    `  tasks ${r.tasks} (workflows ${r.workflows}), executions ${r.executions}, re-executed tasks ${r.reExecutedTasks} ` +
      `(rate ${(r.reExecutionRate * 100).toFixed(2)} %)`,
    `  tasks handed to an idle worker by their send: ${r.handedAtSend}`,
    `  worker processes that exited by themselves and were replaced: ${r.selfExits}`,
    `  detection: kill to write-off of its running task: ${s(r.detection.killToWriteOff)}`,
    `  detection: restart to the next completion: ${s(r.detection.restartToFirstCompletion)}`,
    `  detection: LISTEN drop to listeners back: ${s(r.detection.listenReconnect)}`,
    `result: ${r.ok ? 'every invariant holds' : `${r.invariants.filter((i) => !i.ok).length} invariant(s) FAILED`}`,
    ...(r.workerOutput ? ["the end of a worker's output:", r.workerOutput] : []),
  ].join('\n');
}

function stats(values: number[]): Stats | null {
  if (values.length === 0) return null;
  const v = [...values].sort((a, b) => a - b);
  const at = (q: number): number => Math.round(v[Math.min(v.length - 1, Math.floor(q * v.length))]!);
  return { n: v.length, median: at(0.5), p95: at(0.95), max: Math.round(v[v.length - 1]!) };
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = map.get(k);
    if (list) list.push(item);
    else map.set(k, [item]);
  }
  return map;
}

function summarizeBy<T>(items: T[], key: (item: T) => string): string {
  return [...groupBy(items, key)].map(([k, v]) => `${k} ${v.length}`).join(', ');
}

function withPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}

/** One count, or -1 while the server cannot answer (away, or restarting). */
async function count(side: pg.Pool, text: string): Promise<number> {
  try {
    return (await side.query<{ n: number }>(text)).rows[0]!.n;
  } catch {
    return -1;
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
