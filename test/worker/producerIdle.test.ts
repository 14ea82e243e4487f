/**
 * When a claim pass offers the worker's free slots to single sends (`handoff`): only once its queue has nothing left
 * to claim. A claim that took all it asked for, or asked for nothing, leaves the queue with tasks, even when it took
 * fewer than the pass's free slots (a worker that starts ahead claims no more than the ledger reserved it, and the
 * ledger counts its slots apart from the pass): a registration then would hand new sends over ahead of the tasks
 * already waiting. A capped queue without room counts as run dry: its tasks cannot be claimed now, and the worker's
 * other queues may still take hand-offs. The producer runs on the real database with a real slot ledger, whose
 * reservations the test takes to leave the claims the slots it wants; the runs are the test's.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CapGuard } from '../../src/worker/CapGuard.js';
import { Producer } from '../../src/worker/Producer.js';
import { FlowGuard } from '../../src/worker/FlowGuard.js';
import { SlotLedger } from '../../src/worker/SlotLedger.js';
import { claimStrategies } from '../../src/worker/claim/strategies.js';
import type { ClaimedTaskRow } from '../../src/db/tasks.js';
import { testLogger, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

const identity = { workerId: 'producer-idle-worker', hostname: 'test-host', pid: 4242, processName: 'test' };

/**
 * A producer of `queues` with hand-offs, on the app's database: two handler slots and two more started ahead. The
 * runs it launches stay held until the test releases them.
 */
function build(app: ReturnType<typeof t.app>, queues: string[], queueCaps: Map<string, number>) {
  const ledger = new SlotLedger({
    concurrency: 2,
    maxClaimPerWorker: 4,
    maxClaimBatch: 100,
    completionBatchSize: 100,
    prefetch: 2,
    prefetchAuto: false,
    prefetchWindowMs: 20,
    startPrefetched: true,
    prefetchHoldMs: 0,
  });
  const launched: ClaimedTaskRow[] = [];
  const executor = {
    launch(tasks: ClaimedTaskRow[]) {
      launched.push(...tasks);
    },
    stop: () => false,
  };
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
      handoff: true,
      holdMs: 0,
    },
    { db: app.db, ledger, strategies, executor, tasks: app.tasks, logger: testLogger },
    {
      emit: () => true,
      fail: (_what, error) => {
        throw error;
      },
    },
  );
  const passed = producer.signals.passed;
  passed.enable();
  return { producer, ledger, launched, pass: () => passed.wait() };
}

/** The free slots of the worker's registration, if it has one. */
async function registered(): Promise<number[]> {
  const rows = await t.query<{ free: number }>(
    'SELECT free FROM {{schema}}.horsies_idle_slots WHERE worker_id = $1',
    [identity.workerId],
  );
  return rows.map((r) => r.free);
}

/** The tokens of the worker's registrations: each registration draws a new one. */
async function tokens(): Promise<number[]> {
  const rows = await t.query<{ token: string }>(
    'SELECT token FROM {{schema}}.horsies_idle_slots WHERE worker_id = $1',
    [identity.workerId],
  );
  return rows.map((r) => Number(r.token));
}

describe('a claim pass registers idle slots for hand-offs', () => {
  it('only when its queue ran dry, not when the claim took all the ledger reserved it', async () => {
    const queue = 'producer_idle';
    const app = t.app({ queues: [queue] });
    const task = app.task({
      name: `${queue}.noop`,
      queue,
      input: z.object({ n: z.number() }),
      handler: () => null,
    });
    await task.sendMany([1, 2, 3, 4, 5].map((n) => ({ input: { n } })));
    const { producer, ledger, launched, pass } = build(app, [queue], new Map());

    try {
      // Two of the four slots it may start into are taken: the claim takes two, three tasks stay PENDING.
      ledger.reserve(2);
      producer.start();
      expect(await pass()).toBe(2);
      expect(launched).toHaveLength(2);
      expect(await registered()).toEqual([]);

      // The two started ahead taken too: nothing left to reserve, no claim at all, and the queue still holds three.
      ledger.reserve(2);
      producer.wake();
      expect(await pass()).toBe(0);
      expect(launched).toHaveLength(2);
      expect(await registered()).toEqual([]);

      // The two runs end and every slot is free: the claim takes the three left, the queue ran dry, and the one slot
      // still free is offered.
      ledger.unreserve(4);
      ledger.release(launched.map((r) => r.id));
      expect(await pass()).toBe(3);
      expect(await registered()).toEqual([1]);
      expect(new Set(launched.map((r) => r.id)).size).toBe(5);
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
    void other;
    const { producer, launched, pass } = build(app, [capped, plain], new Map([[capped, 1]]));

    try {
      // The cap's one place goes to the first task; two stay PENDING with no room. The plain queue is empty: its
      // sends may be handed over.
      producer.start();
      expect(await pass()).toBe(1);
      expect(launched).toHaveLength(1);
      expect(await registered()).toHaveLength(1);

      // A send to the capped queue wakes a pass, which takes the registration back; the cap is still full (no room
      // sign since), and the plain queue still empty: it registers again.
      const [first] = await tokens();
      await task.send({ n: 4 });
      producer.wake();
      expect(await pass()).toBe(0);
      const [again] = await tokens();
      expect(again).toBeGreaterThan(first!);
      expect(launched).toHaveLength(1);
    } finally {
      await producer.stop();
    }
    expect(await registered()).toEqual([]);
  });
});
