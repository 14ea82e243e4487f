/**
 * A prefetching worker hands back the claimed tasks that found no free slot within `prefetch.holdMs`, so that a
 * worker whose slots are held by long runs does not keep what another worker could run; it then claims nothing
 * ahead until one of its runs ends.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import { trackStarts, useTestSchema, waitForEvent } from '../support/db.js';
import { gate } from '../support/gate.js';
import { longAndQuick } from '../support/busySlot.js';

const t = await useTestSchema();

/**
 * A worker with one slot, held by a long run until `release()`, and `count` quick tasks it claimed ahead of that
 * slot. Tasks are named after `prefix`, so that workers of other apps on the schema leave them alone.
 */
async function busyWithClaims(prefix: string, prefetchHoldMs: number, count: number) {
  const app = t.app();
  const { long, quick, release } = longAndQuick(app, prefix);
  const worker = createWorker(app, {
    concurrency: 1,
    prefetch: { size: 5, holdMs: prefetchHoldMs },
    maintenance: false,
  });
  const claimed: string[] = [];
  worker.on('task:claimed', (ids) => claimed.push(...ids));
  const starts = trackStarts(worker);
  await worker.start();
  const longHandle = await long.send({});
  await starts(longHandle.id);
  const claimedAhead = waitForEvent(worker, 'task:claimed', (ids) => ids.length === count);
  const handles = await quick.sendMany(Array.from({ length: count }, (_, i) => ({ input: { i } })));
  const [aheadIds] = await claimedAhead;
  expect([...aheadIds].sort()).toEqual(handles.map((h) => h.id).sort());
  return { app, worker, quick, longHandle, handles, claimed, release };
}

describe('prefetch.holdMs', () => {
  it('hands back tasks that waited for a busy slot, and another worker runs them while the long run goes on; with 0, never', async () => {
    // Claimed first, with no hold: still held when the other worker's tasks, claimed later, have been handed back.
    const keeper = await busyWithClaims('keep', 0, 2);
    const first = await busyWithClaims('hold', 300, 3);
    // Handed back after 300 ms: PENDING again, and the first worker does not take them back while its slot is busy.
    const second = createWorker(first.app, { concurrency: 2, maintenance: false });
    await second.start();
    try {
      for (const [i, h] of first.handles.entries())
        expect(await h.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: i });
      const attempts = await t.query<{ task_id: string; worker_id: string }>(
        `SELECT task_id, worker_id FROM {{schema}}.horsies_task_attempts WHERE task_id = ANY ($1)`,
        [first.handles.map((h) => h.id)],
      );
      expect(attempts.map((a) => a.worker_id)).toEqual(first.handles.map(() => second.id));
      const ids = first.handles.map((h) => h.id);
      expect(first.claimed.filter((id) => ids.includes(id))).toHaveLength(3);
      const [longRow] = await t.query<{ status: string }>(
        `SELECT status FROM {{schema}}.horsies_tasks WHERE id = $1`,
        [first.longHandle.id],
      );
      expect(longRow!.status).toBe('RUNNING');
      const kept = await t.query<{ status: string; claimed_by_worker_id: string }>(
        `SELECT status, claimed_by_worker_id FROM {{schema}}.horsies_tasks WHERE id = ANY ($1)`,
        [keeper.handles.map((h) => h.id)],
      );
      expect(kept).toEqual(
        keeper.handles.map(() => ({ status: 'CLAIMED', claimed_by_worker_id: keeper.worker.id })),
      );
    } finally {
      first.release();
      keeper.release();
      await second.stop();
      await keeper.worker.stop();
    }
    expect(await first.longHandle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'long' });

    // A run ended here: the first worker claims ahead again (one claim takes more than its one slot).
    const claimedAgain = waitForEvent(first.worker, 'task:claimed', (ids) => ids.length === 3);
    const more = await first.quick.sendMany([3, 4, 5].map((i) => ({ input: { i } })));
    expect([...(await claimedAgain)[0]].sort()).toEqual(more.map((h) => h.id).sort());
    for (const h of more) expect((await h.result({ timeoutMs: 10_000 })).ok).toBe(true);
    await first.worker.stop();
  });

  it('keeps tasks a soft cap holds past the hold, without checking them for it again and again', async () => {
    const queue = 'hold_capped';
    const app = t.app({ queues: [queue], clusterWideCap: 1, capMode: 'soft', prefetchBuffer: 2 });
    const release = gate();
    const long = app.task({ name: 'capped.long', input: z.object({}), queue, handler: () => release.wait });
    const quick = app.task({
      name: 'capped.quick',
      input: z.object({ i: z.number() }),
      queue,
      handler: ({ i }) => i,
    });
    const worker = createWorker(app, {
      concurrency: 2,
      prefetch: { size: 2, holdMs: 100 },
      pollIntervalMs: 1_000,
      maintenance: false,
    });
    const starts = trackStarts(worker);
    const holdNotArmed = worker.testSignals.dispatcher.holdNotArmed;
    holdNotArmed.enable();
    await worker.start();
    try {
      await starts((await long.send({})).id);
      // Claimed within the cap's buffer; their starts wait for the cap, which the long run holds.
      const claimed = waitForEvent(worker, 'task:claimed', (ids) => ids.length === 2);
      const handles = await quick.sendMany([0, 1].map((i) => ({ input: { i } })));
      await claimed;
      // No hold is timed on them: none may go back. (Timed on the tasks the cap holds, the check for tasks past
      // the hold came every millisecond once they were.) With no timer, nothing hands them back.
      await holdNotArmed.wait();
      const rows = await t.query<{ status: string; claimed_by_worker_id: string }>(
        `SELECT status, claimed_by_worker_id FROM {{schema}}.horsies_tasks WHERE id = ANY ($1)`,
        [handles.map((h) => h.id)],
      );
      expect(rows).toEqual(handles.map(() => ({ status: 'CLAIMED', claimed_by_worker_id: worker.id })));
      release.open();
      for (const [i, h] of handles.entries())
        expect(await h.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: i });
    } finally {
      release.open();
      await worker.stop();
    }
  });
});
