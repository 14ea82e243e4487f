/**
 * When outcomes pile up behind a write in flight, a second write takes them beside it: a slow write no longer
 * holds back every outcome that ends while it runs, and a stop waits for both writes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { PoolClient } from 'pg';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import { eventually, useTestSchema, waitForEvent } from '../support/db.js';
import { gate } from '../support/gate.js';

const t = await useTestSchema();

let worker: Worker | null = null;
let blocker: PoolClient | null = null;

afterEach(async () => {
  await blocker?.query('ROLLBACK').catch(() => undefined);
  blocker?.release();
  blocker = null;
  await worker?.stop();
  worker = null;
});

describe('a second write of outcomes', () => {
  it('writes the outcomes queued behind a write that waits, and a stop waits for both', async () => {
    const app = t.app({ queues: ['beside'] });
    const held = gate();
    const task = app.task({
      name: 'beside.task',
      queue: 'beside',
      input: z.object({ slow: z.boolean() }),
      handler: async ({ slow }) => {
        if (slow) await held.wait;
        return slow;
      },
    });
    const w = createWorker(app, { queues: ['beside'], concurrency: 10 });
    worker = w;
    const writes: number[] = [];
    w.on('task:finished', (rows) => writes.push(rows.length));
    const ran = new Set<string>();
    w.on('task:ran', (id) => ran.add(id));
    await w.start();

    // The slow task runs; the test locks its row, so that the write of its outcome waits on the server.
    const slow = await task.send({ slow: true });
    await waitForEvent(w, 'task:started', (id) => id === slow.id);
    blocker = await t.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query(`SELECT 1 FROM "${t.schema}".horsies_tasks WHERE id = $1 FOR UPDATE`, [slow.id]);
    held.open();
    await eventually(async () => {
      const [row] = await t.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND query LIKE $1`,
        // This schema's finish (other test files finish tasks meanwhile).
        [`%"${t.schema}".horsies_finish_tasks%`],
      );
      return row!.n > 0;
    });

    // 300 quick tasks end while that write waits: from the 150th queued outcome on, writes beside it land them
    // (all but fewer than 150, which wait for the next).
    const quick = await task.sendMany(Array.from({ length: 300 }, () => ({ input: { slow: false } })));
    const quickIds = quick.map((h) => h.id);
    await eventually(async () => ((await t.statusCounts(quickIds)).COMPLETED ?? 0) >= 150);
    expect((await t.statusCounts([slow.id])).RUNNING).toBe(1);
    expect(writes.length).toBeGreaterThan(0);
    await eventually(async () => quickIds.every((id) => ran.has(id)));

    // The stop waits for the write that waits, and for the outcomes still queued behind it.
    const stopping = w.stop();
    await blocker.query('COMMIT');
    await stopping;
    worker = null;
    expect(await t.statusCounts([slow.id, ...quickIds])).toEqual({ COMPLETED: 301 });
    expect(writes.reduce((sum, n) => sum + n, 0)).toBe(301);
  });
});
