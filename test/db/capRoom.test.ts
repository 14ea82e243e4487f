/**
 * A capped claim is one statement that takes the cap's lock, counts what is in flight and claims at most the room
 * left (`horsies_cap_room`, migration 22). A claim that waited for the lock must count what the holder committed
 * meanwhile: the count is a statement of its own, after the lock, with a snapshot of its own.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CapRoom,
  TaskClaimAndStartWithinCap,
  TaskClaimWithinCap,
  TaskStartWithinCap,
  rowsWithinCap,
} from '../../src/db/capacity.js';
import type { CapLimits } from '../../src/db/capacity.js';
import { TaskClaim, TaskStartMany, inClaimOrder } from '../../src/db/tasks.js';
import type { ClaimedTaskRow } from '../../src/db/tasks.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const worker = { workerId: 'cap-room', hostname: 'test', pid: 1, processName: 'test' };

/**
 * Is some backend waiting for the cap's advisory lock? (Its 64-bit key is split into `classid` and `objid`; other
 * test files wait for advisory locks of their own meanwhile.)
 */
async function lockAwaited(key: string): Promise<boolean> {
  const rows = await t.query(
    `SELECT 1 FROM pg_locks
     WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
       AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`,
    [key],
  );
  return rows.length > 0;
}

/** A queue capped at 2 with `count` tasks pending, and the cap's limits. */
async function cappedQueue(queue: string, count: number) {
  const app = t.app({ queues: [queue], clusterWideCap: 2 });
  const task = app.task({
    name: `${queue}.task`,
    input: z.object({ i: z.number() }),
    queue,
    handler: () => null,
  });
  await task.sendMany(Array.from({ length: count }, (_, i) => ({ input: { i } })));
  const cap: CapLimits = { key: `horsies.cap.${t.schema}.${queue}`, clusterCap: null, queueCap: 2, extra: 0 };
  const claim = { queue, taskNames: [task.name], leaseMs: 60_000, worker };
  return { app, cap, claim };
}

/**
 * Runs `waiter` while another transaction holds the cap's lock and has claimed (and, with `start`, started) the
 * cap's worth of tasks; commits that transaction once `waiter` waits for the lock, and returns what `waiter` got.
 */
async function behindHolder<R>(
  queue: string,
  start: boolean,
  waiter: (queue: Awaited<ReturnType<typeof cappedQueue>>) => Promise<R>,
): Promise<{ got: R; statuses: Record<string, number> }> {
  const capped = await cappedQueue(queue, 4);
  const { app, cap, claim } = capped;
  const holder = await t.pool.connect();
  try {
    await holder.query('BEGIN');
    expect(await app.db.run(CapRoom, { ...cap, queue, running: false }, holder)).toEqual([{ room: 2 }]);
    const claimed: ClaimedTaskRow[] = await app.db.run(TaskClaim, { ...claim, limit: 2 }, holder);
    expect(claimed).toHaveLength(2);
    if (start) {
      await app.db.run(
        TaskStartMany,
        {
          workerId: worker.workerId,
          tasks: claimed.map((c) => ({ id: c.id, token: c.claim_token })),
        },
        holder,
      );
    }
    const pending = waiter(capped);
    await eventually(() => lockAwaited(cap.key));
    await holder.query('COMMIT');
    const got = await pending;
    const rows = await t.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE queue_name = $1 GROUP BY status`,
      [queue],
    );
    return { got, statuses: Object.fromEntries(rows.map((r) => [r.status, r.n])) };
  } finally {
    holder.release();
  }
}

describe('capped claims in one statement', () => {
  it('claim nothing once the holder of the lock, whose claims they waited for, filled the cap', async () => {
    const { got, statuses } = await behindHolder('room_claim', false, ({ app, cap, claim }) =>
      app.db.run(TaskClaimWithinCap, { ...claim, limit: 4, cap }),
    );
    // The room alone: none was left.
    expect(got).toEqual([expect.objectContaining({ room: 0, id: null })]);
    expect(statuses).toEqual({ CLAIMED: 2, PENDING: 2 });
  });

  it('claim and start nothing once the holder filled the cap with running tasks', async () => {
    const { got, statuses } = await behindHolder('room_start', true, ({ app, cap, claim }) =>
      app.db.run(TaskClaimAndStartWithinCap, { ...claim, limit: 4, start: 4, cap }),
    );
    expect(got).toEqual([expect.objectContaining({ room: 0, id: null })]);
    expect(statuses).toEqual({ RUNNING: 2, PENDING: 2 });
  });

  it('start nothing once the holder filled the cap with running tasks (soft mode)', async () => {
    const { got, statuses } = await behindHolder('room_soft', true, async ({ app, cap, claim }) => {
      // The two tasks the holder did not lock, claimed without the cap (as a soft mode's buffer allows).
      const mine = await app.db.run(TaskClaim, { ...claim, limit: 4 });
      expect(mine).toHaveLength(2);
      const tasks = mine.map((c) => ({ id: c.id, token: c.claim_token }));
      return app.db.run(TaskStartWithinCap, { workerId: worker.workerId, tasks, queue: 'room_soft', cap });
    });
    expect(got).toEqual([expect.objectContaining({ room: 0, id: null })]);
    expect(statuses).toEqual({ RUNNING: 2, CLAIMED: 2 });
  });

  it('start the first tasks up to the room, and say the room when none started', async () => {
    const { app, cap, claim } = await cappedQueue('room_first', 3);
    const claimed = inClaimOrder(await app.db.run(TaskClaim, { ...claim, limit: 3 }));
    const tasks = claimed.map((c) => ({ id: c.id, token: c.claim_token }));
    const start = { workerId: worker.workerId, queue: 'room_first', cap };
    const first = await app.db.run(TaskStartWithinCap, { ...start, tasks });
    expect(first.map((r) => [r.room, r.id, r.status])).toEqual(
      expect.arrayContaining([
        [2, claimed[0]!.id, 'RUNNING'],
        [2, claimed[1]!.id, 'RUNNING'],
      ]),
    );
    expect(first).toHaveLength(2);
    expect(await app.db.run(TaskStartWithinCap, { ...start, tasks: tasks.slice(2) })).toEqual([
      expect.objectContaining({ room: 0, id: null }),
    ]);
  });

  it('count only running tasks for a start, and everything in flight for a claim', async () => {
    const { got, statuses } = await behindHolder('room_count', false, ({ app, cap }) =>
      app.db.run(CapRoom, { ...cap, queue: 'room_count', running: true }),
    );
    // The holder's two tasks are CLAIMED, not RUNNING: a soft mode's start still has room for two.
    expect(got).toEqual([{ room: 2 }]);
    expect(statuses).toEqual({ CLAIMED: 2, PENDING: 2 });
    const [claimRoom] = await t.app().db.run(CapRoom, {
      key: `horsies.cap.${t.schema}.room_count`,
      queue: 'room_count',
      clusterCap: null,
      queueCap: 2,
      extra: 1,
      running: false,
    });
    // In flight: the two claims; a claim may hold one more with a buffer of 1.
    expect(claimRoom).toEqual({ room: 1 });
  });

  it('claim up to the room left, never more than asked for', async () => {
    const { app, cap, claim } = await cappedQueue('room_left', 5);
    const claimWithin = async (limit: number, limits = cap) => {
      const rows = await app.db.run(TaskClaimWithinCap, { ...claim, limit, cap: limits });
      return { room: rows[0]?.room, claimed: rowsWithinCap(rows).length };
    };
    // Every row says the room the claim found, and a claim of none says it alone.
    expect(await claimWithin(1)).toEqual({ room: 2, claimed: 1 });
    expect(await claimWithin(5)).toEqual({ room: 1, claimed: 1 });
    expect(await claimWithin(5)).toEqual({ room: 0, claimed: 0 });
    // A cluster cap counts every queue: the two claimed here (and the earlier tests') leave a cap of 2 no room.
    const cluster = { ...cap, key: `horsies.cap.${t.schema}`, clusterCap: 2, queueCap: null };
    expect(await claimWithin(5, cluster)).toEqual({ room: 0, claimed: 0 });
  });
});
