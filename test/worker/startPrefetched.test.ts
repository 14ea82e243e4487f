/**
 * `prefetch.startAhead`: a claim writes the tasks it takes ahead of the free slots RUNNING at once, with every claim
 * field, and the worker runs them as its slots free, never more at once than its concurrency. A started task that
 * has not run yet is cancelled without running, handed back to PENDING (no attempt) by a stop or after
 * `prefetch.holdMs`. (A crash with such tasks: test/recovery/crash.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Statement } from '../../src/db/sql.js';
import { TaskStartMany } from '../../src/db/tasks.js';
import { createWorker } from '../../src/worker/Worker.js';
import { eventually, trackStarts, useTestSchema, waitForEvent } from '../support/db.js';
import { longAndQuick } from '../support/busySlot.js';

const t = await useTestSchema();

interface Row {
  id: string;
  status: string;
  attempt: number;
  claimed_at: Date | null;
  started_at: Date | null;
  claimed_by_worker_id: string | null;
  claim_generation: number;
}

async function rows(ids: string[]): Promise<Row[]> {
  return t.query<Row>(
    `SELECT id, status, attempt, claimed_at, started_at, claimed_by_worker_id, claim_generation
     FROM {{schema}}.horsies_tasks WHERE id = ANY ($1) ORDER BY id`,
    [ids],
  );
}

async function attempts(ids: string[]) {
  return t.query<{ task_id: string; attempt: number; outcome: string; error_code: string | null }>(
    `SELECT task_id, attempt, outcome, error_code FROM {{schema}}.horsies_task_attempts
     WHERE task_id = ANY ($1) ORDER BY task_id, attempt`,
    [ids],
  );
}

/**
 * A worker with one slot, held by a run until `release()`, and `count` quick tasks its claim started ahead of that
 * slot (RUNNING, waiting for it). Task names carry `prefix`, so that workers of other tests leave them alone.
 */
async function busyWithStarted(prefix: string, count: number, holdMs?: number) {
  const app = t.app();
  const { long, quick, ran, release } = longAndQuick(app, prefix);
  const worker = createWorker(app, {
    concurrency: 1,
    prefetch: { size: count, startAhead: true, holdMs },
    maintenance: false,
  });
  const starts = trackStarts(worker);
  await worker.start();
  const longHandle = await long.send({});
  await starts(longHandle.id);
  const handles = await quick.sendMany(Array.from({ length: count }, (_, i) => ({ input: { i } })));
  const ids = handles.map((h) => h.id);
  for (const id of ids) await starts(id);
  return { app, worker, handles, ids, ran, longHandle, release };
}

describe('prefetch.startAhead', () => {
  it('starts tasks ahead in their claim, with every claim field, and never runs more at once than its concurrency', async () => {
    const app = t.app();
    let active = 0;
    let most = 0;
    const uneven = app.task({
      name: 'ahead.uneven',
      input: z.object({ i: z.number() }),
      handler: async ({ i }) => {
        active += 1;
        most = Math.max(most, active);
        await new Promise((resolve) => setTimeout(resolve, i % 3));
        active -= 1;
        return i;
      },
    });
    let startStatements = 0;
    const run = app.db.run.bind(app.db);
    app.db.run = async <P, R>(stmt: Statement<P, R>, params: P, on?: Parameters<typeof run>[2]) => {
      if (stmt.name === TaskStartMany.name) startStatements += 1;
      return run(stmt, params, on);
    };
    const worker = createWorker(app, {
      concurrency: 3,
      prefetch: { size: 30, startAhead: true },
      maintenance: false,
    });
    const claims: number[] = [];
    worker.on('task:claimed', (ids) => claims.push(ids.length));
    const handles = await uneven.sendMany(Array.from({ length: 200 }, (_, i) => ({ input: { i } })));
    await worker.start();
    try {
      for (const [i, h] of handles.entries())
        expect(await h.result({ timeoutMs: 20_000 })).toEqual({ ok: true, value: i });
    } finally {
      await worker.stop();
    }
    // Claims took more than the free slots, and every task was started by its claim: none by a start of its own.
    expect(Math.max(...claims)).toBeGreaterThan(3);
    expect(startStatements).toBe(0);
    expect(most).toBe(3);
    const written = await rows(handles.map((h) => h.id));
    for (const row of written) {
      expect(row).toMatchObject({
        status: 'COMPLETED',
        attempt: 1,
        claimed_by_worker_id: worker.id,
        claim_generation: 1,
      });
      expect(row.started_at).toEqual(row.claimed_at);
    }
    const tries = await attempts(handles.map((h) => h.id));
    expect(tries).toHaveLength(200);
    expect(new Set(tries.map((a) => a.outcome))).toEqual(new Set(['COMPLETED']));
  });

  it('beats for started tasks that wait for a slot, and cancels one without running it', async () => {
    const busy = await busyWithStarted('ahead.cancel', 3);
    try {
      const waiting = await rows(busy.ids);
      expect(waiting.map((r) => r.status)).toEqual(['RUNNING', 'RUNNING', 'RUNNING']);
      // Runner heartbeats cover them, as any RUNNING task.
      expect(await busy.worker.beat('runner')).toEqual(expect.arrayContaining(busy.ids));
      const beats = await t.query<{ task_id: string }>(
        `SELECT DISTINCT task_id FROM {{schema}}.horsies_heartbeats WHERE role = 'runner' AND task_id = ANY ($1)`,
        [busy.ids],
      );
      expect(beats).toHaveLength(3);

      const [target] = busy.handles;
      const cancelled = waitForEvent(busy.worker, 'task:finished', (written: { id: string }[]) =>
        written.some((r) => r.id === target!.id),
      );
      expect(await busy.app.cancel(target!.id)).toMatchObject({ outcome: 'cancel_requested' });
      await cancelled;
      const result = await target!.result({ timeoutMs: 5_000 });
      expect(result.ok ? null : result.error.code).toBe('TASK_CANCELLED');
      expect(busy.ran).not.toContain(target!.id);
      expect(await attempts([target!.id])).toEqual([
        { task_id: target!.id, attempt: 1, outcome: 'FAILED', error_code: 'TASK_CANCELLED' },
      ]);
      // The other two run once the slot is free.
      busy.release();
      for (const [i, h] of busy.handles.slice(1).entries()) {
        expect(await h.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: i + 1 });
      }
      expect(busy.ran.sort()).toEqual(busy.ids.slice(1).sort());
    } finally {
      busy.release();
      await busy.worker.stop();
    }
  });

  it('hands started tasks that have not run back to PENDING when it stops, with no attempt', async () => {
    // No hold limit: only the stop hands them back.
    const busy = await busyWithStarted('ahead.stop', 3, 0);
    const stopped = busy.worker.stop();
    // The running task finishes under its shutdown policy (continue); the waiting ones go back at once.
    await eventually(async () => (await rows(busy.ids)).every((r) => r.status === 'PENDING'));
    busy.release();
    await stopped;
    expect(busy.ran).toEqual([]);
    for (const row of await rows(busy.ids)) {
      expect(row).toMatchObject({
        status: 'PENDING',
        attempt: 0,
        claimed_by_worker_id: null,
        started_at: null,
      });
    }
    expect(await attempts(busy.ids)).toEqual([]);
    expect(await busy.longHandle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 'long' });
    // Another worker runs them, as their first attempt.
    const other = createWorker(busy.app, { concurrency: 3, maintenance: false });
    await other.start();
    try {
      for (const [i, h] of busy.handles.entries())
        expect(await h.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: i });
    } finally {
      await other.stop();
    }
    expect((await attempts(busy.ids)).map((a) => a.attempt)).toEqual([1, 1, 1]);
  });

  it('hands back started tasks that waited prefetch.holdMs for a slot, and another worker runs them', async () => {
    const busy = await busyWithStarted('ahead.hold', 3, 300);
    await eventually(async () => (await rows(busy.ids)).every((r) => r.status === 'PENDING'), 5_000);
    const other = createWorker(busy.app, { concurrency: 3, maintenance: false });
    await other.start();
    try {
      for (const [i, h] of busy.handles.entries())
        expect(await h.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: i });
      const tries = await t.query<{ worker_id: string; attempt: number }>(
        `SELECT worker_id, attempt FROM {{schema}}.horsies_task_attempts WHERE task_id = ANY ($1)`,
        [busy.ids],
      );
      // Each ran once, in the other worker, as its first attempt: the hand-back counted none.
      expect(tries).toEqual(busy.ids.map(() => ({ worker_id: other.id, attempt: 1 })));
      expect(busy.ran.filter((id) => busy.ids.includes(id))).toHaveLength(3);
    } finally {
      busy.release();
      await other.stop();
      await busy.worker.stop();
    }
  });
});
