/** Latency: one task at a time to an idle, running worker, from the send call to the handler's first line. */
import type { Subject } from '../peers/types.js';
import { percentile } from '../stats.js';
import { sleep, withTimeout } from '../time.js';
import { withSession, withWorker } from './common.js';
import type { Scenario } from './types.js';

/** Pause after each handler start, so the worker has written the finish and is idle again. */
const GAP_MS = 50;
const PER_TASK_TIMEOUT_MS = 15_000;

export const latencyScenario: Scenario = {
  name: 'latency',
  title: 'Latency, send to handler start',
  unit: 'ms',
  method: (ctx) =>
    `With the worker running and idle, one task is sent with the single-send API (horsies send, ` +
    `graphile-worker addJob, pg-boss send, BullMQ add); the latency runs from just before the send call to the ` +
    `first line of the handler (both performance.now() in the same process). The next task is sent ${GAP_MS} ms ` +
    `after the handler started. ${ctx.sizes.latencyWarmup} warm-up tasks, then ${ctx.sizes.latencyTasks} measured; ` +
    "the table shows the median over rounds of each round's percentile.",
  columns: () => [
    { key: 'p50', label: 'p50', better: 'lower', decimals: 1 },
    { key: 'p90', label: 'p90', better: 'lower', decimals: 1 },
    { key: 'p99', label: 'p99', better: 'lower', decimals: 1 },
  ],
  cases: () => [{ key: 'single', label: 'one at a time' }],
  rows: (subjects: Subject[]) => subjects.map((subject) => ({ id: subject.id, subject })),
  baselines: true,
  defaultRounds: (quick) => (quick ? 1 : 3),
  timeoutMs: (_c, ctx) =>
    60_000 + (ctx.sizes.latencyTasks + ctx.sizes.latencyWarmup) * (GAP_MS + PER_TASK_TIMEOUT_MS / 10),
  run: (row, _c, ctx) =>
    withSession(row.subject, ctx, async (session) => {
      const { latencyTasks, latencyWarmup } = ctx.sizes;
      let waiting: { seq: number; resolve: (at: number) => void } | null = null;
      const hooks = {
        onStart(seq: number) {
          const at = performance.now();
          if (waiting?.seq === seq) waiting.resolve(at);
        },
      };
      return withWorker(session, row.subject, hooks, async () => {
        await sleep(1000); // let the worker settle into its idle wait
        const latencies: number[] = [];
        for (let seq = 0; seq < latencyWarmup + latencyTasks; seq++) {
          const started = new Promise<number>((resolve) => (waiting = { seq, resolve }));
          const sentAt = performance.now();
          await session.sendOne(seq);
          const startedAt = await withTimeout(started, PER_TASK_TIMEOUT_MS, `${row.id}: task ${seq} start`);
          if (seq >= latencyWarmup) latencies.push(startedAt - sentAt);
          await sleep(GAP_MS);
        }
        return {
          values: {
            p50: percentile(latencies, 50),
            p90: percentile(latencies, 90),
            p99: percentile(latencies, 99),
          },
          raw: { latenciesMs: latencies.map((l) => Math.round(l * 1000) / 1000) },
        };
      });
    }),
};
