/**
 * A prefetching worker hands back the claimed tasks that found no free slot within `prefetchHoldMs`, so that a
 * worker whose slots are held by long runs does not keep what another worker could run; it then claims nothing
 * ahead until one of its runs ends.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import { trackStarts, useTestSchema, waitForEvent } from '../support/db.js';

const t = await useTestSchema();

function gate(): { wait: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

describe('prefetchHoldMs', () => {
  it('hands back tasks that waited for a busy slot; another worker runs them while the long run goes on', async () => {
    const app = t.app();
    const release = gate();
    const long = app.task({
      name: 'hold.long',
      input: z.object({}),
      handler: () => release.wait.then(() => 'long'),
    });
    const quick = app.task({ name: 'hold.quick', input: z.object({ i: z.number() }), handler: ({ i }) => i });
    const first = createWorker(app, { concurrency: 1, prefetch: 5, prefetchHoldMs: 300, maintenance: false });
    const claimedByFirst: string[] = [];
    first.on('task:claimed', (ids) => claimedByFirst.push(...ids));
    const firstStarts = trackStarts(first);
    await first.start();
    const longHandle = await long.send({});
    await firstStarts(longHandle.id);

    const claimedAhead = waitForEvent(first, 'task:claimed', (ids) => ids.length === 3);
    const handles = await quick.sendMany([0, 1, 2].map((i) => ({ input: { i } })));
    const [aheadIds] = await claimedAhead;
    expect([...aheadIds].sort()).toEqual(handles.map((h) => h.id).sort());

    // Handed back after 300 ms: PENDING again, and the first worker does not take them back while its slot is busy.
    const second = createWorker(app, { concurrency: 2, maintenance: false });
    await second.start();
    try {
      for (const [i, h] of handles.entries())
        expect(await h.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: i });
      const attempts = await t.query<{ task_id: string; worker_id: string }>(
        `SELECT task_id, worker_id FROM {{schema}}.horsies_task_attempts WHERE task_id = ANY ($1)`,
        [handles.map((h) => h.id)],
      );
      expect(attempts.map((a) => a.worker_id)).toEqual(handles.map(() => second.id));
      const [longRow] = await t.query<{ status: string }>(
        `SELECT status FROM {{schema}}.horsies_tasks WHERE id = $1`,
        [longHandle.id],
      );
      expect(longRow!.status).toBe('RUNNING');
      expect(claimedByFirst.filter((id) => aheadIds.includes(id))).toHaveLength(3);
    } finally {
      release.open();
      await second.stop();
    }
    expect(await longHandle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'long' });

    // A run ended here: the first worker claims ahead again (one claim takes more than its one slot).
    const claimedAgain = waitForEvent(first, 'task:claimed', (ids) => ids.length === 3);
    const more = await quick.sendMany([3, 4, 5].map((i) => ({ input: { i } })));
    expect([...(await claimedAgain)[0]].sort()).toEqual(more.map((h) => h.id).sort());
    for (const h of more) expect((await h.result({ timeoutMs: 10_000 })).ok).toBe(true);
    await first.stop();
  });

  it('with 0 never hands back', async () => {
    const app = t.app();
    const release = gate();
    const slow = app.task({
      name: 'hold.slow',
      input: z.object({ i: z.number() }),
      handler: () => release.wait,
    });
    const worker = createWorker(app, { concurrency: 1, prefetch: 5, prefetchHoldMs: 0, maintenance: false });
    const starts = trackStarts(worker);
    await worker.start();
    try {
      const [head] = await slow.sendMany([{ input: { i: 0 } }]);
      await starts(head!.id);
      const claimed = waitForEvent(worker, 'task:claimed', (ids) => ids.length === 2);
      await slow.sendMany([1, 2].map((i) => ({ input: { i } })));
      await claimed;
      // Nothing to wait for but time: past the 300 ms of the test above, they are still CLAIMED by this worker.
      await new Promise((resolve) => setTimeout(resolve, 600));
      const rows = await t.query<{ status: string; claimed_by_worker_id: string }>(
        `SELECT status, claimed_by_worker_id FROM {{schema}}.horsies_tasks WHERE task_name = 'hold.slow' AND id <> $1`,
        [head!.id],
      );
      expect(rows).toEqual([
        { status: 'CLAIMED', claimed_by_worker_id: worker.id },
        { status: 'CLAIMED', claimed_by_worker_id: worker.id },
      ]);
    } finally {
      release.open();
      await worker.stop();
    }
  });
});
