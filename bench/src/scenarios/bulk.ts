/** Bulk enqueue: tasks per second through each peer's batch API, into an empty store. */
import type { Subject } from '../peers/types.js';
import { withTimeout } from '../time.js';
import { SETUP_CHUNK, formatCount, withSession } from './common.js';
import type { Row, Scenario } from './types.js';

export const bulkScenario: Scenario = {
  name: 'bulk',
  title: 'Bulk enqueue',
  unit: 'tasks/s',
  method: () =>
    `Each batch API (horsies sendMany, graphile-worker addJobs, pg-boss insert, BullMQ addBulk) is called ` +
    `in chunks of ${formatCount(SETUP_CHUNK)} tasks, one call after another, into an empty store; the time ` +
    `runs from the first call to the last call's return, and the store is then checked to hold every task. ` +
    `"horsies (one call)" sends all the tasks in a single sendMany.`,
  columns: (ctx) =>
    ctx.sizes.bulk.map((n) => ({ key: String(n), label: `${formatCount(n)} tasks`, better: 'higher' })),
  cases: (ctx) => ctx.sizes.bulk.map((n) => ({ key: String(n), label: formatCount(n) })),
  rows: (subjects: Subject[]) =>
    subjects.flatMap((subject): Row[] => {
      const row: Row = { id: subject.id, subject, chunk: SETUP_CHUNK };
      return subject.isHorsies
        ? [row, { id: `${subject.id} (one call)`, subject, chunk: Number.POSITIVE_INFINITY }]
        : [row];
    }),
  defaultRounds: (quick) => (quick ? 1 : 3),
  timeoutMs: (c) => 60_000 + Number(c.key) * 2,
  run: (row, c, ctx) =>
    withSession(row.subject, ctx, async (session) => {
      const n = Number(c.key);
      await ctx.env.postgres.checkpoint();
      const started = performance.now();
      await withTimeout(
        session.enqueueBatch(0, n, row.chunk ?? SETUP_CHUNK),
        60_000 + n * 2,
        `${row.id}: enqueue ${n}`,
      );
      const elapsedMs = performance.now() - started;
      const queued = await session.countQueued();
      if (queued !== n) throw new Error(`${row.id}: sent ${n} tasks but the store has ${queued}`);
      return { values: { [c.key]: (n / elapsedMs) * 1000 }, raw: { elapsedMs } };
    }),
};
