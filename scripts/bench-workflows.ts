/**
 * What a workflow costs against plain tasks. `npm run bench:workflows` (uses DATABASE_URL, or starts an embedded
 * PostgreSQL) runs ROUNDS interleaved rounds (default 3) of, each on emptied tables and with a new worker
 * (concurrency 10, like the plain drain):
 *
 *   a. 10,000 no-op tasks sent with sendMany, then drained by one worker (tasks/s: the baseline);
 *   b. one workflow of 1 root, 10,000 parallel nodes and 1 join node waiting for all of them (nodes/s from the
 *      start's return to the result, and as a ratio to a); e. the start() of that workflow (target under 1 s);
 *   c. a chain of 500 nodes (time per step), against the send-to-start latency of single sends to the idle
 *      worker (median of LATENCY_SENDS, default 300);
 *   d. 1,000 workflows of 10 nodes (1 root, 8 parallel, 1 join), started before the worker (workflows/s).
 *
 * a, b and d run once more with prefetch 490 (claims of up to 500). COMPLETION_DELAY_MS sets the workers'
 * `outcomes.delayMs`. Figures are medians of the rounds with the lowest and highest in brackets. Then, for b, c
 * and d of the last round, each workflow statement's calls and time per call as the worker saw it (its lock waits
 * included).
 *
 * f. After horsies in each round, the same three shapes on DBOS Transact (same PostgreSQL) and on BullMQ's flows
 * (Redis), from bench/src/workflows/ (`npm --prefix bench ci`; `--peers dbos,bullmq-flow|all|none`, default all;
 * a peer whose package or server is missing is skipped with one line). Last, a summary block a script can read:
 * `target <name> <value> <goal> met|missed`. `--rounds N` or ROUNDS; smaller runs: TASKS, WIDE, CHAIN, SMALL.
 * PATCH_SQL=<file> applies that SQL to the schema after the migrations (schema `bench_workflows`), for experiments.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { z } from 'zod';
import type { Statement } from '../src/db/sql.js';
import { createApp, createWorker, workflow } from '../src/index.js';
import type { App, WorkerConfig } from '../src/index.js';
import { WorkflowAnchors, parsePeers } from '../bench/src/workflows/index.js';
import { runScript, withDatabase } from './database.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string' }, peers: { type: 'string' } } });
const ROUNDS = Number(args.rounds ?? process.env.ROUNDS ?? 3);
const PEERS = parsePeers(args.peers);
const TASKS = Number(process.env.TASKS ?? 10_000);
const WIDE = Number(process.env.WIDE ?? 10_000);
const CHAIN = Number(process.env.CHAIN ?? 500);
const SMALL_WORKFLOWS = Number(process.env.SMALL ?? 1_000);
const LATENCY_SENDS = Number(process.env.LATENCY_SENDS ?? 300);
const SCHEMA = 'bench_workflows';
const PREFETCH: WorkerConfig = { prefetch: { size: 490 }, claims: { batchSize: 500 } };

interface Timing {
  calls: number;
  ms: number;
}

/** Statement timings of the scenario being run (client side: round trip, lock waits included). */
let timings = new Map<string, Timing>();

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function setup(databaseUrl: string) {
  const app = createApp({ databaseUrl, schema: SCHEMA, logger: pino({ level: 'warn' }) });
  const noop = app.task({ name: 'noop', input: z.object({ i: z.number() }), handler: ({ i }) => i });
  const probes = new Map<number, (at: number) => void>();
  const probe = app.task({
    name: 'probe',
    input: z.object({ i: z.number() }),
    handler: ({ i }) => {
      probes.get(i)?.(performance.now());
      return i;
    },
  });

  const wide = workflow(app, 'bench.wide');
  const root = wide.node(noop, { input: { i: 0 }, id: 'root' });
  const middle = Array.from({ length: WIDE }, (_, i) =>
    wide.node(noop, { input: { i }, waitsFor: [root], id: `n${i}` }),
  );
  const join = wide.node(noop, { input: { i: 0 }, waitsFor: middle, id: 'join' });
  const wideDef = wide.build({ output: join });

  const chain = workflow(app, 'bench.chain');
  let previous = chain.node(noop, { input: { i: 0 }, id: 'c0' });
  for (let i = 1; i < CHAIN; i += 1)
    previous = chain.node(noop, { input: { i: previous.result }, id: `c${i}` });
  const chainDef = chain.build({ output: previous });

  const small = workflow(app, 'bench.small');
  const smallRoot = small.node(noop, { input: { i: 0 }, id: 'root' });
  const branches = Array.from({ length: 8 }, (_, i) =>
    small.node(noop, { input: { i: smallRoot.result }, id: `b${i}` }),
  );
  small.node(noop, { input: { i: 0 }, waitsFor: branches, id: 'join' });
  const smallDef = small.build();

  return { app, noop, probe, probes, wideDef, chainDef, smallDef };
}

type Bench = ReturnType<typeof setup>;

/** Empties the tables between samples, and writes the setup's dirty pages out before the timed part. */
async function reset(app: App): Promise<void> {
  timings = new Map();
  await app.db.pool.query(
    `TRUNCATE ${SCHEMA}.horsies_workflows, ${SCHEMA}.horsies_workflow_tasks, ${SCHEMA}.horsies_tasks,
              ${SCHEMA}.horsies_task_steps, ${SCHEMA}.horsies_workflow_signals, ${SCHEMA}.horsies_task_attempts,
              ${SCHEMA}.horsies_heartbeats`,
  );
}

async function checkpoint(app: App): Promise<void> {
  await app.db.pool.query('CHECKPOINT').catch(() => undefined);
}

async function withWorker<T>(
  app: App,
  config: WorkerConfig,
  fn: (worker: ReturnType<typeof createWorker>) => Promise<T>,
): Promise<T> {
  const worker = createWorker(app, {
    concurrency: 10,
    snapshotIntervalMs: 0,
    maintenance: false,
    ...(process.env.COMPLETION_DELAY_MS
      ? { outcomes: { delayMs: Number(process.env.COMPLETION_DELAY_MS) } }
      : {}),
    ...config,
  });
  worker.on('worker:error', (error) => console.error('worker error:', error));
  try {
    return await fn(worker);
  } finally {
    await worker.stop();
  }
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 600_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** a: tasks/s of a plain drain. */
async function plainDrain(b: Bench, config: WorkerConfig): Promise<number> {
  await reset(b.app);
  await b.noop.sendMany(Array.from({ length: TASKS }, (_, i) => ({ input: { i } })));
  await checkpoint(b.app);
  return withWorker(b.app, config, async (worker) => {
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
    return TASKS / ((performance.now() - started) / 1000);
  });
}

/** b and e: the wide workflow's start time and its nodes/s from the start's return to its result. */
async function wideWorkflow(b: Bench, config: WorkerConfig): Promise<{ startMs: number; nodesPerS: number }> {
  await reset(b.app);
  await checkpoint(b.app);
  return withWorker(b.app, config, async (worker) => {
    await worker.start();
    timings = new Map();
    const t0 = performance.now();
    const handle = await b.wideDef.start();
    const t1 = performance.now();
    const result = await handle.result({ timeoutMs: 600_000 });
    const t2 = performance.now();
    if (!result.ok) throw new Error(`wide workflow: ${result.error.code}`);
    return { startMs: t1 - t0, nodesPerS: (WIDE + 2) / ((t2 - t1) / 1000) };
  });
}

/** c: the chain's time per step, and the send-to-start latency of single sends, both in ms. */
async function chainAndLatency(b: Bench): Promise<{ stepMs: number; gapMs: number; latencyMs: number }> {
  await reset(b.app);
  await checkpoint(b.app);
  return withWorker(b.app, {}, async (worker) => {
    await worker.start();
    const latencies: number[] = [];
    for (let i = 0; i < LATENCY_SENDS + 10; i += 1) {
      const handlerStart = new Promise<number>((resolve) => b.probes.set(i, resolve));
      // The task may finish before its send returns its id: finished ids are kept until it is known.
      const seen = new Set<string>();
      let id: string | undefined;
      let done = (): void => {};
      const finished = new Promise<void>((resolve) => (done = resolve));
      const on = (rows: { id: string }[]): void => {
        for (const r of rows) seen.add(r.id);
        if (id !== undefined && seen.has(id)) {
          worker.off('task:finished', on);
          done();
        }
      };
      worker.on('task:finished', on);
      const sent = performance.now();
      ({ id } = await b.probe.send({ i }));
      on([]);
      const startedAt = await handlerStart;
      await finished;
      b.probes.delete(i);
      if (i >= 10) latencies.push(startedAt - sent);
    }
    timings = new Map();
    const t0 = performance.now();
    const handle = await b.chainDef.start();
    const result = await handle.result({ timeoutMs: 600_000 });
    const total = performance.now() - t0;
    if (!result.ok) throw new Error(`chain: ${result.error.code}`);
    // The gap between one node's task start and the next one's, as the database recorded them.
    const starts = (await handle.nodes()).map((n) => n.startedAt!.getTime());
    const gaps = starts.slice(1).map((s, i) => s - starts[i]!);
    return { stepMs: total / CHAIN, gapMs: median(gaps), latencyMs: median(latencies) };
  });
}

/** d: workflows/s of 1,000 small workflows started before the worker. */
async function smallWorkflows(b: Bench, config: WorkerConfig): Promise<{ perS: number; startPerS: number }> {
  await reset(b.app);
  const s0 = performance.now();
  const ids: string[] = [];
  const pending = Array.from({ length: SMALL_WORKFLOWS }, (_, i) => i);
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let next = pending.shift(); next !== undefined; next = pending.shift()) {
        ids.push((await b.smallDef.start()).id);
      }
    }),
  );
  const startPerS = SMALL_WORKFLOWS / ((performance.now() - s0) / 1000);
  await checkpoint(b.app);
  return withWorker(b.app, config, async (worker) => {
    timings = new Map();
    const started = performance.now();
    await worker.start();
    await waitUntil(async () => {
      const { rows } = await b.app.db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_workflows WHERE status IN ('COMPLETED', 'FAILED')`,
      );
      return rows[0]!.n >= SMALL_WORKFLOWS;
    });
    const perS = SMALL_WORKFLOWS / ((performance.now() - started) / 1000);
    const { rows } = await b.app.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_workflows WHERE status = 'COMPLETED'`,
    );
    if (rows[0]!.n !== SMALL_WORKFLOWS) throw new Error(`small workflows: ${rows[0]!.n} completed`);
    return { perS, startPerS };
  });
}

function instrument(app: App): void {
  const run = app.db.run.bind(app.db);
  app.db.run = async <P, R>(stmt: Statement<P, R>, params: P, on?: Parameters<typeof run>[2]) => {
    const started = performance.now();
    try {
      return await run(stmt, params, on);
    } finally {
      const t = timings.get(stmt.name) ?? { calls: 0, ms: 0 };
      t.calls += 1;
      t.ms += performance.now() - started;
      timings.set(stmt.name, t);
    }
  };
}

function printTimings(label: string, snapshot: Map<string, Timing>): void {
  console.log(`\n${label}: statement, calls, client ms/call, total s`);
  for (const [name, t] of [...snapshot].sort((x, y) => y[1].ms - x[1].ms).slice(0, 10)) {
    console.log(
      `  ${name.padEnd(24)} ${String(t.calls).padStart(6)}  ${(t.ms / t.calls).toFixed(2).padStart(8)}  ` +
        `${(t.ms / 1000).toFixed(2).padStart(6)}`,
    );
  }
}

async function bench(databaseUrl: string): Promise<void> {
  const b = setup(databaseUrl);
  await b.app.db.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await b.app.migrate();
  if (process.env.PATCH_SQL) await b.app.db.pool.query(readFileSync(process.env.PATCH_SQL, 'utf8'));
  instrument(b.app);
  const sizes = { chain: CHAIN, wide: WIDE, small: SMALL_WORKFLOWS };
  const anchors = await WorkflowAnchors.open(PEERS, { databaseUrl, sizes });
  const samples: Record<string, number[]> = {};
  const record = (key: string, value: number): void => {
    (samples[key] ??= []).push(value);
  };
  const profiles: Record<string, Map<string, Timing>> = {};
  for (let round = 1; round <= ROUNDS; round += 1) {
    const load = (await import('node:os')).loadavg()[0]!;
    record('load', load);
    record('a', await plainDrain(b, {}));
    record('a+p', await plainDrain(b, PREFETCH));
    const wide = await wideWorkflow(b, {});
    profiles.b = timings;
    record('b', wide.nodesPerS);
    record('e', wide.startMs);
    record('b+p', (await wideWorkflow(b, PREFETCH)).nodesPerS);
    const chain = await chainAndLatency(b);
    profiles.c = timings;
    record('c.step', chain.stepMs);
    record('c.gap', chain.gapMs);
    record('c.latency', chain.latencyMs);
    const small = await smallWorkflows(b, {});
    profiles.d = timings;
    record('d', small.perS);
    record('d.start', small.startPerS);
    record('d+p', (await smallWorkflows(b, PREFETCH)).perS);
    await anchors.runRound();
    const last = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, v.at(-1)!.toFixed(2)]));
    console.error(`round ${round}/${ROUNDS}: ${JSON.stringify(last)}`);
  }
  const fig = (key: string, digits = 0): string => {
    const v = samples[key]!;
    const f = (x: number): string => x.toLocaleString('en-US', { maximumFractionDigits: digits });
    return `${f(median(v))} (${f(Math.min(...v))}–${f(Math.max(...v))})`;
  };
  const ratio = (num: string, den: string): string => {
    const r = samples[num]!.map((x, i) => x / samples[den]![i]!);
    return `${median(r).toFixed(2)}x (${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)})`;
  };
  console.log(`\n${ROUNDS} rounds; medians with (lowest–highest); ratios taken within each round`);
  console.log(`load average (1 min) at the start of each round: ${fig('load', 1)}`);
  console.log(`a. plain drain of ${TASKS.toLocaleString('en-US')} no-op tasks: ${fig('a')} tasks/s`);
  console.log(`   with prefetch 490: ${fig('a+p')} tasks/s`);
  console.log(
    `b. 1 root + ${WIDE.toLocaleString('en-US')} parallel + 1 join: ${fig('b')} nodes/s = ${ratio('b', 'a')} ` +
      `of a (target >= 0.8x)`,
  );
  console.log(`   with prefetch 490: ${fig('b+p')} nodes/s = ${ratio('b+p', 'a+p')} of a with prefetch`);
  console.log(
    `c. chain of ${CHAIN}: ${fig('c.step', 2)} ms per step (median start-to-start gap ${fig('c.gap', 2)} ms); ` +
      `send-to-start latency ${fig('c.latency', 2)} ms; step / latency ${ratio('c.step', 'c.latency')} ` +
      `(target <= 1.5x)`,
  );
  const nodeRatio = samples.d!.map((x, i) => (x * 10) / samples.a![i]!);
  console.log(
    `d. ${SMALL_WORKFLOWS.toLocaleString('en-US')} workflows of 10 nodes: ${fig('d', 1)} workflows/s, ` +
      `their nodes at ${median(nodeRatio).toFixed(2)}x of a (target >= 0.6x); started (before the worker) at ${fig('d.start')}/s`,
  );
  console.log(`   with prefetch 490: ${fig('d+p', 1)} workflows/s`);
  console.log(
    `e. start() of the ${(WIDE + 2).toLocaleString('en-US')}-node workflow: ${fig('e')} ms (target < 1,000 ms)`,
  );
  if (profiles.b) printTimings('b (last round, no prefetch)', profiles.b);
  if (profiles.c) printTimings('c (last round)', profiles.c);
  if (profiles.d) printTimings('d (last round, no prefetch)', profiles.d);
  anchors.report({
    drain: samples.a!,
    wide: samples.b!,
    chainStepMs: samples['c.step']!,
    latencyMs: samples['c.latency']!,
    smallPerS: samples.d!,
  });
  await anchors.close();
  await b.app.db.pool.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
  await b.app.close();
}

runScript(() => withDatabase(bench));
