/**
 * In soft cap mode a claimed task whose start found no room under the cap waits for room to open: an outcome
 * written by its own worker, or a run of another one that ended or was handed back (its `task_done`) starts it at
 * once, and while nothing happens
 * the worker tries again less and less often, up to its poll interval, instead of one cap-lock transaction after
 * another for as long as a long run holds the cap.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { App } from '../../src/client/App.js';
import { TaskStartWithinCap } from '../../src/db/capacity.js';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import { countStatements, trackStarts, useTestSchema, waitForEvent } from '../support/db.js';
import { gate } from '../support/gate.js';

const t = await useTestSchema();

/** Counts the starts under the cap's lock that `app`'s workers run from now on. */
function countCapLocks(app: App): () => number {
  const sent = countStatements(app.db);
  return () => sent.get(TaskStartWithinCap.name) ?? 0;
}

// The retries back off to 2 s: after 1, 2, 4, ... 1,024 ms, the next comes 2,048 ms later. Within the time a test
// then gives the deferred tasks to finish (1.5 s), only a sign that room opened can start them.
const BACKED_OFF_MS = 2_048;
const PROMPTLY_MS = 1_500;

/** Turns on the signal of `worker`'s deferred starts under a soft cap; the result awaits a retry BACKED_OFF_MS away. */
function backingOff(worker: Worker): () => Promise<void> {
  const retries = worker.testSignals.dispatcher.capRetry;
  retries.enable();
  return async () => {
    // Doubling from 1 ms, it gets there at the twelfth try; retried at once, it never would.
    for (let n = 0; n < 16; n += 1) if ((await retries.wait(10_000)) >= BACKED_OFF_MS) return;
    throw new Error(`no retry backed off to ${BACKED_OFF_MS} ms`);
  };
}

/**
 * A capped app (cluster cap 1, soft, buffer 2) with a long task that holds the cap until `release` opens. With
 * `retried`, its run then ends in a retry a minute later: the task goes back to PENDING, it does not finish.
 */
function cappedApp(prefix: string, release: Promise<void>, retried = false) {
  const queue = `${prefix}_q`;
  const app = t.app({ queues: [queue], clusterWideCap: 1, capMode: 'soft', prefetchBuffer: 2 });
  const long = app.task({
    name: `${prefix}.long`,
    input: z.object({}),
    queue,
    retry: { maxRetries: 1, retryOn: ['FLAKY'], backoff: 'constant', baseDelayMs: 60_000 },
    handler: async () => {
      await release;
      return retried ? new TaskError('FLAKY', 'tried again later') : null;
    },
  });
  const quick = app.task({
    name: `${prefix}.quick`,
    input: z.object({ i: z.number() }),
    queue,
    handler: ({ i }) => i,
  });
  return { app, long, quick };
}

describe('soft cap: deferred starts', () => {
  it('back off while a long run holds the cap, and start as soon as its outcome is written', async () => {
    const release = gate();
    const { app, long, quick } = cappedApp('own', release.wait);
    // A poll interval longer than the test's timeouts: only the written outcome can start the deferred tasks.
    const worker = createWorker(app, {
      concurrency: 2,
      prefetch: { size: 2 },
      pollIntervalMs: 60_000,
      maintenance: false,
    });
    const starts = trackStarts(worker);
    const backedOff = backingOff(worker);
    await worker.start();
    try {
      await starts((await long.send({})).id);
      const claimed = waitForEvent(worker, 'task:claimed', (ids) => ids.length === 2);
      const locks = countCapLocks(app);
      const handles = await quick.sendMany([0, 1].map((i) => ({ input: { i } })));
      await claimed;
      await backedOff();
      // The first try and retries after 1, 2, 4, ... 1,024 ms: 12. Tried again at once after each deferral, 3,489
      // on the machine of docs/benchmarks.md.
      expect(locks()).toBeLessThanOrEqual(14);
      const rows = await t.query<{ status: string }>(
        `SELECT status FROM {{schema}}.horsies_tasks WHERE id = ANY ($1)`,
        [handles.map((h) => h.id)],
      );
      expect(rows).toEqual([{ status: 'CLAIMED' }, { status: 'CLAIMED' }]);
      release.open();
      for (const [i, h] of handles.entries())
        expect(await h.result({ timeoutMs: PROMPTLY_MS })).toEqual({ ok: true, value: i });
    } finally {
      release.open();
      await worker.stop();
    }
  });

  it.each([
    ['ends', false],
    ['ends in a retry', true],
  ] as const)("start when another worker's run under the cap %s", async (_, retried) => {
    const release = gate();
    const { app, long, quick } = cappedApp(retried ? 'retried' : 'remote', release.wait, retried);
    // Worker A runs the long task; worker B then claims the quick ones within the buffer and waits for the cap.
    const a = createWorker(app, { concurrency: 1, pollIntervalMs: 60_000, maintenance: false });
    const startsA = trackStarts(a);
    await a.start();
    const b = createWorker(app, {
      concurrency: 2,
      prefetch: { size: 2 },
      pollIntervalMs: 60_000,
      maintenance: false,
    });
    const backedOff = backingOff(b);
    try {
      const held = await long.send({});
      await startsA(held.id);
      const claimed = waitForEvent(b, 'task:claimed', (ids) => ids.length === 2);
      await b.start();
      const handles = await quick.sendMany([0, 1].map((i) => ({ input: { i } })));
      await claimed;
      await backedOff();
      release.open();
      // A writes the outcome, or the retry: B learns of the room from the task_done it sends.
      for (const [i, h] of handles.entries())
        expect(await h.result({ timeoutMs: PROMPTLY_MS })).toEqual({ ok: true, value: i });
      const ran = await t.query<{ claimed_by_worker_id: string }>(
        `SELECT claimed_by_worker_id FROM {{schema}}.horsies_tasks WHERE id = ANY ($1)`,
        [handles.map((h) => h.id)],
      );
      expect(ran).toEqual([{ claimed_by_worker_id: b.id }, { claimed_by_worker_id: b.id }]);
      expect((await app.getTask(held.id))?.status).toBe(retried ? 'PENDING' : 'COMPLETED');
    } finally {
      release.open();
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('wait only in the queue whose cap is full: a start in another capped queue goes on', async () => {
    const release = gate();
    const queues = ['full_q', 'free_q'];
    const app = t.app({
      queues: queues.map((name) => ({ name, maxConcurrency: 1 })),
      capMode: 'soft',
      prefetchBuffer: 2,
    });
    const long = app.task({
      name: 'full.long',
      input: z.object({}),
      queue: 'full_q',
      handler: () => release.wait,
    });
    const quick = app.task({ name: 'any.quick', input: z.object({ i: z.number() }), handler: ({ i }) => i });
    const worker = createWorker(app, {
      concurrency: 3,
      prefetch: { size: 2 },
      pollIntervalMs: 60_000,
      maintenance: false,
    });
    const starts = trackStarts(worker);
    const backedOff = backingOff(worker);
    await worker.start();
    try {
      await starts((await long.send({})).id);
      // Claimed within full_q's buffer; its start waits for the cap, which the long run holds.
      const claimed = waitForEvent(worker, 'task:claimed', (ids) => ids.length === 1);
      const waiting = await quick.send({ i: 0 }, { queue: 'full_q' });
      await claimed;
      await backedOff();
      // full_q's next try is about 2 s away; free_q has room, and its task starts without waiting for that try.
      const other = await quick.send({ i: 1 }, { queue: 'free_q' });
      expect(await other.result({ timeoutMs: PROMPTLY_MS })).toEqual({ ok: true, value: 1 });
      expect((await app.getTask(waiting.id))?.status).toBe('CLAIMED');
      release.open();
      expect(await waiting.result({ timeoutMs: PROMPTLY_MS })).toEqual({ ok: true, value: 0 });
    } finally {
      release.open();
      await worker.stop();
    }
  });
});
