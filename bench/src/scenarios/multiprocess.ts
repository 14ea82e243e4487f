/**
 * Multi-process: 1, 2 and 4 worker processes (src/child.ts, concurrency 10 each) drain one pre-queued store
 * together; the aggregate rate, and how often the subject's backends wait on locks meanwhile.
 */
import type { PeerSession, Subject } from '../peers/types.js';
import { CONCURRENCY } from '../peers/types.js';
import { closeQuietly, waitUntil, withTimeout } from '../time.js';
import { killGroup, spawnChild } from './children.js';
import type { ChildHandle } from './children.js';
import { CONTENTION_INTERVAL_MS, LOCK_TABLE, lockValues, startContentionSampler } from './contention.js';
import { startCostMeter, storeCostColumns } from './cost.js';
import { formatCount, prequeue, waitForDrain, withSession } from './common.js';
import type { Column, RunContext, Scenario } from './types.js';

const READY_TIMEOUT_MS = 180_000;

const SERVER_COST_TABLE =
  'Cost per task to the store during the timed part (µs of CPU of the store server; WAL bytes written, PostgreSQL ' +
  'only)';

function processesLabel(p: number): string {
  return `${p} process${p === 1 ? '' : 'es'}`;
}

export const multiprocessScenario: Scenario = {
  name: 'multiprocess',
  title: 'Multi-process drain',
  unit: 'tasks/s',
  method: (ctx) =>
    `${formatCount(ctx.sizes.multiprocessTasks)} tasks pre-queued (not timed) and a checkpoint; then ` +
    `${ctx.sizes.processes.join(', ')} worker processes (children started with node --import tsx, each ` +
    `opening its own connections and running one worker at concurrency ${CONCURRENCY} with the subject's ` +
    `settings) are started and report ready; the clock runs from the start signal sent to all of them until ` +
    `the store shows every task finished (as in the drain scenario; the children report their handler runs ` +
    `every 50 ms and the store is polled once they add up to the total). The lock-wait table: the share of the ` +
    `subject's active PostgreSQL backends, sampled every ${CONTENTION_INTERVAL_MS} ms from pg_stat_activity ` +
    `during the timed part, whose wait event type was Lock or LWLock (none for bullmq-redis). The cost ` +
    `table: over the same part, the CPU of the store server (read from /proc, only for a server on this ` +
    `machine) and, for PostgreSQL, the WAL written, each divided by the tasks finished: what the store pays ` +
    `per task as the workers are spread over more processes (the workers' own CPU is in their processes).`,
  columns: (ctx) => {
    const rates: Column[] = ctx.sizes.processes.map((p) => ({
      key: `rate${p}`,
      label: processesLabel(p),
      better: 'higher',
    }));
    const locks: Column[] = ['lock', 'lwlock'].flatMap((kind) =>
      ctx.sizes.processes.map((p) => ({
        key: `${kind}${p}`,
        label: `${kind === 'lock' ? 'Lock' : 'LWLock'}, ${processesLabel(p)}`,
        unit: '%',
        better: 'lower' as const,
        decimals: 1,
        table: LOCK_TABLE,
      })),
    );
    const costs = ctx.sizes.processes.flatMap((p) =>
      storeCostColumns(String(p), processesLabel(p), SERVER_COST_TABLE),
    );
    return [...rates, ...locks, ...costs];
  },
  cases: (ctx) => ctx.sizes.processes.map((p) => ({ key: String(p), label: processesLabel(p) })),
  rows: (subjects: Subject[]) => subjects.map((subject) => ({ id: subject.id, subject })),
  defaultRounds: (quick) => (quick ? 1 : 3),
  timeoutMs: (c, ctx) =>
    READY_TIMEOUT_MS + 120_000 + ctx.sizes.multiprocessTasks * 7 + Number(c.key) * 10_000,
  run: (row, c, ctx) =>
    withSession(row.subject, ctx, async (session) => {
      const processes = Number(c.key);
      const n = ctx.sizes.multiprocessTasks;
      const prequeueMs = await prequeue(session, row.subject, n, 60_000 + n * 2);
      const children = Array.from({ length: processes }, () =>
        spawnChild(row.subject, ctx, {
          mode: 'drain',
          concurrency: CONCURRENCY,
          lifetimeMs: READY_TIMEOUT_MS + 60_000 + n * 10,
        }),
      );
      try {
        return await drainInChildren(row.subject, ctx, session, children, n, prequeueMs);
      } finally {
        await stopChildren(row.subject, children);
      }
    }),
};

async function drainInChildren(
  subject: Subject,
  ctx: RunContext,
  session: PeerSession,
  children: ChildHandle[],
  n: number,
  prequeueMs: number,
) {
  const runs = children.map(() => 0);
  children.forEach((handle, i) =>
    handle.onLine((line) => {
      const match = /^runs (\d+)$/.exec(line);
      if (match) runs[i] = Number(match[1]);
    }),
  );
  const readyStarted = performance.now();
  await withTimeout(
    Promise.all(children.map((h) => h.ready)),
    READY_TIMEOUT_MS,
    `${subject.id}: ${children.length} worker processes ready`,
  );
  const readyMs = performance.now() - readyStarted;
  await ctx.env.postgres.checkpoint();
  const sampler = await startContentionSampler(ctx.env.postgres);
  try {
    const meter = await startCostMeter(subject, ctx);
    const started = performance.now();
    for (const handle of children) handle.send('start');
    const total = (): number => runs.reduce((a, b) => a + b, 0);
    const { elapsedMs, finished } = await waitForDrain(session, subject, total, started, n, 60_000 + n * 5);
    const p = children.length;
    const cost = await meter.stop(finished, String(p));
    const contention = await sampler.stop();
    const values: Record<string, number> = { [`rate${p}`]: (finished / elapsedMs) * 1000 };
    Object.assign(values, lockValues(contention, String(p)));
    // The harness's own CPU is not the workers' here: only the store's cost is kept.
    delete cost[`harness:${p}`];
    Object.assign(values, cost);
    return {
      values,
      raw: { elapsedMs, finished, handlerRunsPerProcess: [...runs], readyMs, prequeueMs, contention },
    };
  } finally {
    await sampler.stop();
  }
}

/** Asks every child to stop gracefully, waits (bounded) for them to exit, then kills what is left. */
async function stopChildren(subject: Subject, children: ChildHandle[]): Promise<void> {
  for (const handle of children) handle.send('stop');
  await closeQuietly(
    `${subject.id} worker processes`,
    () =>
      waitUntil(() => children.every((h) => h.child.exitCode !== null || h.child.signalCode !== null), {
        timeoutMs: 30_000,
        intervalMs: 50,
        what: `${subject.id}: worker processes exiting`,
      }),
    35_000,
  );
  for (const handle of children) killGroup(handle.child);
  await Promise.all(
    children.map((h) => closeQuietly(`${subject.id} worker process`, () => h.exited, 10_000)),
  );
}
