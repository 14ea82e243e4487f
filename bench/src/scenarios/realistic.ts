/**
 * Realistic handler: one worker at concurrency 50 whose handler awaits a 5 ms timer before returning (a stand-in
 * for a short I/O call), draining a pre-queued store; with the claim-contention sampler running meanwhile.
 */
import type { Subject } from '../peers/types.js';
import { sleep } from '../time.js';
import { CONTENTION_INTERVAL_MS, LOCK_TABLE, lockValues } from './contention.js';
import { formatCount, measureDrain, prequeue, withSession } from './common.js';
import type { Scenario } from './types.js';

export const REALISTIC_CONCURRENCY = 50;
export const REALISTIC_HOLD_MS = 5;

export const realisticScenario: Scenario = {
  name: 'realistic',
  title: 'Realistic handler, 5 ms await at concurrency 50',
  unit: 'tasks/s',
  method: (ctx) =>
    `${formatCount(ctx.sizes.realisticTasks)} tasks pre-queued (not timed), a checkpoint; then one worker starts ` +
    `in the harness process at concurrency ${REALISTIC_CONCURRENCY}, each handler awaiting a ` +
    `${REALISTIC_HOLD_MS} ms timer before it returns, and the clock runs from its start until the store shows ` +
    `every task finished (as in the drain scenario). The ceiling is ${REALISTIC_CONCURRENCY} / ` +
    `${REALISTIC_HOLD_MS} ms = ${formatCount((REALISTIC_CONCURRENCY * 1000) / REALISTIC_HOLD_MS)} tasks/s. ` +
    `Concurrency 50 per peer: horsies concurrency 50 (the 'high' variant starts ahead as many as it runs within 20 ms), ` +
    `graphile-worker concurrency 50 with maxPoolSize 50, pg-boss one batch of up to 50 jobs at a time ` +
    `(batchSize 50, burstWhenBatchFull), BullMQ concurrency 50. The lock-wait table: the share of the ` +
    `subject's active PostgreSQL backends, sampled every ${CONTENTION_INTERVAL_MS} ms from pg_stat_activity ` +
    `during the timed part, whose wait event type was Lock or LWLock (none for bullmq-redis).`,
  columns: () => [
    { key: 'rate', label: 'drain', better: 'higher' },
    { key: 'lock', label: 'Lock', unit: '%', better: 'lower', decimals: 1, table: LOCK_TABLE },
    { key: 'lwlock', label: 'LWLock', unit: '%', better: 'lower', decimals: 1, table: LOCK_TABLE },
  ],
  cases: () => [{ key: 'realistic', label: 'realistic' }],
  rows: (subjects: Subject[]) => subjects.map((subject) => ({ id: subject.id, subject })),
  defaultRounds: (quick) => (quick ? 1 : 3),
  timeoutMs: (_c, ctx) => 180_000 + ctx.sizes.realisticTasks * 10,
  run: (row, _c, ctx) =>
    withSession(row.subject, ctx, async (session) => {
      const n = ctx.sizes.realisticTasks;
      const prequeueMs = await prequeue(session, row.subject, n, 60_000 + n * 2);
      const result = await measureDrain(session, row.subject, ctx, n, 60_000 + n * 5, {
        concurrency: REALISTIC_CONCURRENCY,
        hold: () => sleep(REALISTIC_HOLD_MS),
        sampleContention: true,
      });
      const values = { rate: result.rate, ...(result.contention ? lockValues(result.contention) : {}) };
      return { values, raw: { ...result, prequeueMs } };
    }),
};
