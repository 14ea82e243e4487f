/**
 * When a claim pass offers the worker's free slots to single sends (`handoff`): only once its queue has nothing left
 * to claim. A claim that took all it asked for, or asked for nothing, leaves the queue with tasks, even when it took
 * fewer than the pass's free slots (a worker that starts ahead claims no more than the dispatcher reserved it, and
 * the dispatcher counts its slots apart from the pass): a registration then would hand new sends over ahead of the
 * tasks already waiting. The producer runs on the real database with the dispatcher's counts given by the test.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CapGuard } from '../../src/worker/CapGuard.js';
import { Handoff } from '../../src/worker/Handoff.js';
import { Producer } from '../../src/worker/Producer.js';
import type { ClaimedTaskRow } from '../../src/db/tasks.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

const identity = { workerId: 'producer-idle-worker', hostname: 'test-host', pid: 4242, processName: 'test' };

describe('a claim pass registers idle slots for hand-offs', () => {
  it('only when its queue ran dry, not when the claim took all the dispatcher reserved it', async () => {
    const queue = 'producer_idle';
    const app = t.app({ queues: [queue] });
    const task = app.task({
      name: `${queue}.noop`,
      queue,
      input: z.object({ n: z.number() }),
      handler: () => null,
    });
    await task.sendMany([1, 2, 3, 4, 5].map((n) => ({ input: { n } })));

    // The pass sees 4 free slots; the dispatcher reserves starts as the test says. `offered` lists the slots each
    // registration asked the dispatcher for.
    let reservable = 2;
    let reserveCalls = 0;
    const offered: number[] = [];
    const claimed: ClaimedTaskRow[] = [];
    const handoff = new Handoff(
      app.db,
      { identity, leaseMs: 30_000 },
      {
        reserveStarts: (_queue, max) => {
          offered.push(max);
          return max;
        },
        cancelReservation: () => {},
        onClaimed: () => {},
        known: () => claimed.map((r) => r.id),
        refill: () => {},
      },
    );
    const producer = new Producer(
      app.db,
      {
        queues: [queue],
        maxClaimBatch: 100,
        pollIntervalMs: 60_000,
        leaseMs: 30_000,
        identity,
        synchronousStarts: false,
        refillThreshold: () => 1,
      },
      {
        capacity: () => 4,
        idle: () => false,
        claimableTaskNames: () => [task.name],
        reserveStarts: (_queue, max) => {
          reserveCalls += 1;
          return Math.min(max, reservable);
        },
        startsAhead: () => true,
        cancelReservation: () => {},
        onClaimed: (rows) => claimed.push(...rows),
        onError: (error) => {
          throw error;
        },
      },
      new CapGuard(app.db, { clusterWideCap: null, mode: 'hard', prefetchBuffer: 0, queueCaps: new Map() }),
      null,
      null,
      handoff,
    );
    const registered = async () =>
      (
        await t.query<{ free: number }>(
          'SELECT free FROM {{schema}}.horsies_idle_slots WHERE worker_id = $1',
          [identity.workerId],
        )
      ).map((r) => r.free);

    try {
      // Two of four slots reserved: the claim takes its two, three tasks stay PENDING. (The pass decides on the
      // registration right after it hands the claimed tasks over, before the next timer.)
      producer.start();
      await eventually(async () => claimed.length === 2);
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(offered).toEqual([]);

      // Nothing reserved: no claim at all, and the queue still holds three.
      reservable = 0;
      producer.wake();
      await eventually(async () => reserveCalls === 2);
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(claimed).toHaveLength(2);
      expect(offered).toEqual([]);
      expect(await registered()).toEqual([]);

      // Four reserved, three left: the queue ran dry, and the free slots are offered.
      reservable = 4;
      producer.wake();
      await eventually(async () => (await registered()).length === 1);
      expect(await registered()).toEqual([4]);
      expect(offered).toEqual([4]);
      expect(new Set(claimed.map((r) => r.id)).size).toBe(5);
    } finally {
      // The stop takes the registration back.
      await producer.stop();
    }
    expect(await registered()).toEqual([]);
  });
});
