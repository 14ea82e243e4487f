/**
 * Backlog: how the drain rate holds up when the queue is deep. The first `backlogMeasured` tasks of a
 * `backlogTotal` backlog are drained and compared with draining the same number from an otherwise empty store.
 */
import type { Subject } from '../peers/types.js';
import { formatCount, measureDrain, prequeue, withSession } from './common.js';
import type { RunContext, Scenario } from './types.js';

async function drainAfter(
  subject: Subject,
  ctx: RunContext,
  queued: number,
  measured: number,
): Promise<{ rate: number; prequeueMs: number; elapsedMs: number; finished: number }> {
  return withSession(subject, ctx, async (session) => {
    const prequeueMs = await prequeue(session, subject, queued, 120_000 + queued * 2);
    // Fresh statistics, as autovacuum would have gathered them on a queue that grew over time.
    if (subject.store === 'postgres') await ctx.env.postgres.admin.query('ANALYZE');
    // Both drains stop the clock by counting finished tasks: with a backlog the store never runs out of unfinished
    // ones, and the ratio of the two compares drains measured alike.
    const result = await measureDrain(session, subject, ctx, measured, 60_000 + measured * 10, {
      countFinished: true,
    });
    return { rate: result.rate, prequeueMs, elapsedMs: result.elapsedMs, finished: result.finished };
  });
}

export const backlogScenario: Scenario = {
  name: 'backlog',
  title: 'Drain rate under a backlog',
  unit: 'tasks/s',
  method: (ctx) =>
    `Two drains per sample, each on a fresh store: ${formatCount(ctx.sizes.backlogMeasured)} tasks alone, ` +
    `then the first ${formatCount(ctx.sizes.backlogMeasured)} of ${formatCount(ctx.sizes.backlogTotal)} ` +
    `pre-queued tasks (pre-queued with the batch API in chunks of 10,000, not timed, then ANALYZE and a ` +
    `checkpoint). Both are timed as in the drain scenario, the clock stopping when the store counts every ` +
    `drained task finished; "backlog / empty" is the second rate over the first.`,
  columns: (ctx) => [
    { key: 'empty', label: `${formatCount(ctx.sizes.backlogMeasured)} alone`, better: 'higher' },
    {
      key: 'backlog',
      label: `first ${formatCount(ctx.sizes.backlogMeasured)} of ${formatCount(ctx.sizes.backlogTotal)}`,
      better: 'higher',
    },
    { key: 'ratio', label: 'backlog / empty', unit: 'x', better: 'higher', decimals: 2 },
  ],
  cases: () => [{ key: 'backlog', label: 'backlog' }],
  rows: (subjects: Subject[]) => subjects.map((subject) => ({ id: subject.id, subject })),
  defaultRounds: () => 1,
  timeoutMs: (_c, ctx) => 300_000 + ctx.sizes.backlogTotal * 3 + ctx.sizes.backlogMeasured * 20,
  async run(row, _c, ctx) {
    const { backlogMeasured, backlogTotal } = ctx.sizes;
    const empty = await drainAfter(row.subject, ctx, backlogMeasured, backlogMeasured);
    const deep = await drainAfter(row.subject, ctx, backlogTotal, backlogMeasured);
    return {
      values: { empty: empty.rate, backlog: deep.rate, ratio: deep.rate / empty.rate },
      raw: { empty, backlog: deep },
    };
  },
};
