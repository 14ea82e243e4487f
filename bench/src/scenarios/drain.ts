/** Drain throughput: one worker at concurrency 10 on a pre-queued store, until every task is finished. */
import type { Subject } from '../peers/types.js';
import { formatCount, measureDrain, prequeue, withSession } from './common.js';
import { costColumns } from './cost.js';
import type { Scenario } from './types.js';

export const drainScenario: Scenario = {
  name: 'drain',
  title: 'Drain throughput',
  unit: 'tasks/s',
  method: () =>
    'The tasks are pre-queued with the batch API (not timed) and a checkpoint is taken; then one worker ' +
    'starts in the harness process at concurrency 10, and the clock runs from its start until the store ' +
    '(not the handler count) shows every task finished, as defined per peer below. The cost table: over ' +
    'the same timed part, the CPU of the store server (the processes named postgres or redis-server, read ' +
    'from /proc; only for a server on this machine) and of the harness process, and the WAL written (the ' +
    "server's insert position before and after), each divided by the tasks finished.",
  columns: (ctx) => [
    ...ctx.sizes.drain.map((n) => ({
      key: String(n),
      label: `${formatCount(n)} tasks`,
      better: 'higher' as const,
    })),
    ...ctx.sizes.drain.flatMap((n) => costColumns(String(n), formatCount(n))),
  ],
  cases: (ctx) => ctx.sizes.drain.map((n) => ({ key: String(n), label: formatCount(n) })),
  rows: (subjects: Subject[]) => subjects.map((subject) => ({ id: subject.id, subject })),
  defaultRounds: (quick) => (quick ? 1 : 3),
  timeoutMs: (c) => 120_000 + Number(c.key) * 7,
  run: (row, c, ctx) =>
    withSession(row.subject, ctx, async (session) => {
      const n = Number(c.key);
      const prequeueMs = await prequeue(session, row.subject, n, 60_000 + n * 2);
      const result = await measureDrain(session, row.subject, ctx, n, 60_000 + n * 5, { costKey: c.key });
      return { values: { [c.key]: result.rate, ...result.cost }, raw: { ...result, prequeueMs } };
    }),
};
