/**
 * When a claim pass offers the worker's free slots to single sends (`handoff`): only once its queue has nothing left
 * to claim. A claim that took all it asked for, or asked for nothing, leaves the queue with tasks, even when it took
 * fewer than the pass's free slots (a worker that starts ahead claims no more than the dispatcher reserved it, and
 * the dispatcher counts its slots apart from the pass): a registration then would hand new sends over ahead of the
 * tasks already waiting. A capped queue without room counts as run dry: its tasks cannot be claimed now, and the
 * worker's other queues may still take hand-offs. The producer runs on the real database with the dispatcher's counts
 * given by the test.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CapGuard } from '../../src/worker/CapGuard.js';
import { Handoff } from '../../src/worker/Handoff.js';
import { Producer } from '../../src/worker/Producer.js';
import { FlowGuard } from '../../src/worker/FlowGuard.js';
import { claimStrategies } from '../../src/worker/claim/strategies.js';
import type { ClaimedTaskRow } from '../../src/db/tasks.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

const identity = { workerId: 'producer-idle-worker', hostname: 'test-host', pid: 4242, processName: 'test' };

/** A producer of `queues` with a hand-off, on the app's database; the dispatcher's counts are the test's. */
function build(
  app: ReturnType<typeof t.app>,
  queues: string[],
  taskNames: string[],
  queueCaps: Map<string, number>,
) {
  const state = {
    /** Slots the dispatcher reserves for a claim. */
    reservable: 4,
    reserveCalls: 0,
    /** The slots each registration asked the dispatcher for. */
    offered: [] as number[],
    claimed: [] as ClaimedTaskRow[],
  };
  const handoff = new Handoff(
    app.db,
    { identity, leaseMs: 30_000 },
    {
      reserveStarts: (_queue, max) => {
        state.offered.push(max);
        return max;
      },
      cancelReservation: () => {},
      onClaimed: () => {},
      known: () => state.claimed.map((r) => r.id),
      refill: () => {},
    },
  );
  const caps = new CapGuard(app.db, { clusterWideCap: null, mode: 'hard', prefetchBuffer: 0, queueCaps });
  const flow = new FlowGuard(
    app.db,
    {
      queues: app.config.queueConfigs,
      tasks: app.tasks,
      synchronousStarts: false,
      workerId: identity.workerId,
    },
    app.logger,
  );
  const strategies = claimStrategies(
    { db: app.db, queues, caps, flow, notices: null },
    { workerId: identity.workerId, synchronousStarts: false },
  );
  const producer = new Producer(
    {
      queues,
      maxClaimBatch: 100,
      pollIntervalMs: 60_000,
      leaseMs: 30_000,
      identity,
      refillThreshold: () => 1,
    },
    {
      capacity: () => 4,
      idle: () => false,
      claimableTaskNames: () => taskNames,
      reserveStarts: (_queue, max) => {
        state.reserveCalls += 1;
        return Math.min(max, state.reservable);
      },
      startsAhead: () => true,
      cancelReservation: () => {},
      onClaimed: (rows) => state.claimed.push(...rows),
      onError: (error) => {
        throw error;
      },
    },
    strategies,
    handoff,
  );
  return { producer, state };
}

/** The free slots of the worker's registration, if it has one. */
async function registered(): Promise<number[]> {
  const rows = await t.query<{ free: number }>(
    'SELECT free FROM {{schema}}.horsies_idle_slots WHERE worker_id = $1',
    [identity.workerId],
  );
  return rows.map((r) => r.free);
}

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
    const { producer, state } = build(app, [queue], [task.name], new Map());

    try {
      // Two of four slots reserved: the claim takes its two, three tasks stay PENDING. (The pass decides on the
      // registration right after it hands the claimed tasks over, before the next timer.)
      state.reservable = 2;
      producer.start();
      await eventually(async () => state.claimed.length === 2);
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(state.offered).toEqual([]);

      // Nothing reserved: no claim at all, and the queue still holds three.
      state.reservable = 0;
      producer.wake();
      await eventually(async () => state.reserveCalls === 2);
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(state.claimed).toHaveLength(2);
      expect(state.offered).toEqual([]);
      expect(await registered()).toEqual([]);

      // Four reserved, three left: the queue ran dry, and the free slots are offered.
      state.reservable = 4;
      producer.wake();
      await eventually(async () => (await registered()).length === 1);
      expect(await registered()).toEqual([4]);
      expect(state.offered).toEqual([4]);
      expect(new Set(state.claimed.map((r) => r.id)).size).toBe(5);
    } finally {
      // The stop takes the registration back.
      await producer.stop();
    }
    expect(await registered()).toEqual([]);
  });

  it('for its other queues while a capped queue has tasks and no room, at every pass', async () => {
    const capped = 'producer_idle_capped';
    const plain = 'producer_idle_plain';
    const app = t.app({ queues: [capped, plain] });
    const task = app.task({
      name: `${capped}.noop`,
      queue: capped,
      input: z.object({ n: z.number() }),
      handler: () => null,
    });
    const other = app.task({
      name: `${plain}.noop`,
      queue: plain,
      input: z.object({ n: z.number() }),
      handler: () => null,
    });
    await task.sendMany([1, 2, 3].map((n) => ({ input: { n } })));
    const { producer, state } = build(app, [capped, plain], [task.name, other.name], new Map([[capped, 1]]));

    try {
      // The cap's one place goes to the first task; two stay PENDING with no room. The plain queue is empty: its
      // sends may be handed over.
      producer.start();
      await eventually(async () => (await registered()).length === 1);
      expect(state.claimed).toHaveLength(1);
      expect(state.offered).toHaveLength(1);

      // A send to the capped queue wakes a pass, which takes the registration back; the cap is still full (no room
      // sign since), and the plain queue still empty: it registers again.
      await task.send({ n: 4 });
      producer.wake();
      await eventually(async () => state.offered.length === 2);
      await eventually(async () => (await registered()).length === 1);
      expect(state.claimed).toHaveLength(1);
    } finally {
      await producer.stop();
    }
    expect(await registered()).toEqual([]);
  });
});
