/**
 * A prefetching worker starts its claimed tasks one statement at a time: the slots that free up while a start is in
 * flight are filled together by the next start, instead of each by a start of its own.
 */
import { expect, it } from 'vitest';
import { z } from 'zod';
import type { Statement } from '../../src/db/sql.js';
import { TaskStartMany } from '../../src/db/tasks.js';
import { createWorker } from '../../src/worker/Worker.js';
import { drainWith, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

it('has one start statement in flight at most', async () => {
  const app = t.app();
  // Runs of uneven length, so that slots free up one by one rather than all at once.
  const uneven = app.task({
    name: 'starts.uneven',
    input: z.object({ i: z.number() }),
    handler: async ({ i }) => {
      await new Promise((resolve) => setTimeout(resolve, 1 + (i % 7)));
      return i;
    },
  });
  const starts = { inFlight: 0, most: 0, tasks: 0 };
  const run = app.db.run.bind(app.db);
  app.db.run = async <P, R>(stmt: Statement<P, R>, params: P, on?: Parameters<typeof run>[2]) => {
    if (stmt.name !== TaskStartMany.name) return run(stmt, params, on);
    starts.inFlight += 1;
    starts.most = Math.max(starts.most, starts.inFlight);
    try {
      const rows = await run(stmt, params, on);
      starts.tasks += rows.length;
      return rows;
    } finally {
      starts.inFlight -= 1;
    }
  };
  await drainWith(createWorker(app, { concurrency: 8, prefetch: { size: 200 } }), uneven, 400);
  // Most tasks were claimed ahead of a slot and went through a start.
  expect(starts.tasks).toBeGreaterThan(300);
  expect(starts.most).toBe(1);
});
