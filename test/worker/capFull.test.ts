/**
 * A worker whose capped claim took the last of the room does not claim from that queue again on every send: only
 * a sign that room may have opened (a task_done, an outcome of its own written, a poll) makes it try again.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { App } from '../../src/client/App.js';
import type { AppConfig } from '../../src/client/config.js';
import { createWorker } from '../../src/worker/Worker.js';
import { countStatements, trackStarts, useTestSchema } from '../support/db.js';
import { gate } from '../support/gate.js';

const t = await useTestSchema();

/** Counts the claims under a cap that `app`'s workers run from now on. */
function countCappedClaims(app: App): () => number {
  const sent = countStatements(app.db);
  // One statement, or a transaction that counts the room first (under a rate limiter too).
  const capped = (name: string) =>
    (name.endsWith('WithinCap') && name.startsWith('TaskClaim')) || name === 'CapRoom';
  return () => [...sent].reduce((sum, [name, n]) => sum + (capped(name) ? n : 0), 0);
}

describe('a full cap', () => {
  it.each([
    ['a hard cluster-wide cap', { clusterWideCap: 1 }],
    ['a soft queue cap', { queues: [{ name: 'full', maxConcurrency: 1 }], capMode: 'soft' }],
    [
      'a cap and a rate limiter',
      { clusterWideCap: 1, queues: [{ name: 'full', rateLimit: { max: 1000, intervalMs: 1000 } }] },
    ],
  ] as const)('is not claimed again on every send under %s', async (_, config: Partial<AppConfig>) => {
    const release = gate();
    const app = t.app({ queues: ['full'], ...config });
    const long = app.task({
      name: 'full.long',
      input: z.object({}),
      queue: 'full',
      handler: () => release.wait,
    });
    const quick = app.task({
      name: 'full.quick',
      input: z.object({ i: z.number() }),
      queue: 'full',
      handler: ({ i }) => i,
    });
    // Polls a minute apart: within the test, only notifications and the worker's own outcomes wake its claims.
    const worker = createWorker(app, { concurrency: 4, pollIntervalMs: 60_000, maintenance: false });
    const starts = trackStarts(worker);
    await worker.start();
    try {
      await starts((await long.send({})).id);
      const claims = countCappedClaims(app);
      // Each send announces work on the queue; the cap has no room for any of it. The claim pass its notification
      // wakes ends (with or without a claim) before the next send.
      const passed = worker.testSignals.producer.passed;
      passed.enable();
      passed.clear();
      const handles = [];
      for (let i = 0; i < 20; i += 1) {
        handles.push(await quick.send({ i }));
        await passed.wait();
      }
      // One claim may find the cap full; every send after it would be another.
      expect(claims()).toBeLessThanOrEqual(2);
      const rows = await t.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE task_name = 'full.quick' AND status = 'PENDING'`,
      );
      expect(rows[0]!.n).toBe(20);
      // The long run's outcome opens the room: the others run one at a time, each outcome opening it again.
      release.open();
      for (const [i, h] of handles.entries())
        expect(await h.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: i });
    } finally {
      release.open();
      await worker.stop();
    }
  });

  it('is claimed again when room opened while the claim that found it full was on its way', async () => {
    const release = gate();
    const config = { queues: ['raced'], clusterWideCap: 1 };
    // Worker A runs only the long task, worker B only the quick one: the quick task waits for B.
    const appA = t.app(config);
    const long = appA.task({
      name: 'raced.long',
      input: z.object({}),
      queue: 'raced',
      handler: () => release.wait,
    });
    const appB = t.app(config);
    const quick = appB.task({
      name: 'raced.quick',
      input: z.object({}),
      queue: 'raced',
      handler: () => 'ran',
    });
    const a = createWorker(appA, { concurrency: 1, pollIntervalMs: 60_000, maintenance: false });
    const startsA = trackStarts(a);
    await a.start();
    const held = await long.send({});
    await startsA(held.id);
    // B's first claim finds the cap full, and returns only once the long task has finished and B has heard its
    // task_done: the room it found (none) is out of date when B reads it.
    let armed = true;
    const returned = gate();
    const run = appB.db.run.bind(appB.db);
    appB.db.run = (async (stmt, params, on) => {
      const rows = await run(stmt, params, on);
      if (armed && stmt.name === 'TaskClaimAndStartWithinCap') {
        armed = false;
        expect(rows).toEqual([expect.objectContaining({ room: 0, id: null })]);
        release.open();
        expect((await held.result({ timeoutMs: 5_000 })).ok).toBe(true);
        // B hears the task_done: the first sign since it started that room may have opened.
        await b.testSignals.producer.roomMayHaveOpened.wait();
        returned.open();
      }
      return rows;
    }) as typeof appB.db.run;
    const b = createWorker(appB, { concurrency: 2, pollIntervalMs: 60_000, maintenance: false });
    b.testSignals.producer.roomMayHaveOpened.enable();
    try {
      await b.start();
      await returned.wait;
      // The claim's caller reads the room in the promise callbacks that follow: let them run.
      await new Promise((resolve) => setImmediate(resolve));
      // Sent once the room has opened: B claims it at the send's notification, unless it still takes the cap for
      // full (then it would wait for the poll, a minute away).
      const handle = await quick.send({});
      expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 'ran' });
    } finally {
      release.open();
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});
