/**
 * Debounce (the `debounce` send option): while a task sent with the key is PENDING and unclaimed, a send with the
 * same key replaces its input and moves its start to `delayMs` from now, so a burst runs once with the last input.
 * Exact under 20 concurrent senders on their own connections; run once by a real worker; a new task once the
 * holder was claimed; sendMany with repeated keys; the caller's transaction; bad options.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { App } from '../../src/client/App.js';
import type { SendOptions } from '../../src/client/sendOptions.js';
import { TaskClaim } from '../../src/db/tasks.js';
import type { TaskRow } from '../../src/db/tasks.js';
import { SendOptionsError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { rejection } from '../support/assertions.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app();

let sequence = 0;
function uniqueName(label: string): string {
  sequence += 1;
  return `debounce-${label}-${sequence}`;
}

const inputSchema = z.object({ n: z.number() });

/** A task that records the inputs it ran with in `runs`, on `on` (default: the shared app). */
function recordingTask(name: string, runs: number[] = [], on: App = app) {
  return on.task({
    name,
    input: inputSchema,
    handler: ({ n }) => {
      runs.push(n);
      return n;
    },
  });
}

async function rowsOf(taskName: string): Promise<TaskRow[]> {
  return t.query<TaskRow>('SELECT * FROM {{schema}}.horsies_tasks WHERE task_name = $1 ORDER BY id', [
    taskName,
  ]);
}

async function countAll(): Promise<number> {
  const [row] = await t.query<{ n: number }>('SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks');
  return row?.n ?? -1;
}

describe('debounce', () => {
  it('a burst of sends keeps one task, with the last input, its start pushed later by each send', async () => {
    const task = recordingTask(uniqueName('burst'));
    const options: SendOptions = { debounce: { key: 'user-7', delayMs: 60_000 } };
    const handles = [];
    const starts: number[] = [];
    for (let n = 1; n <= 5; n += 1) {
      handles.push(await task.send({ n }, options));
      const [row] = await rowsOf(task.name);
      starts.push((row?.enqueued_at as Date).getTime());
    }
    expect(new Set(handles.map((h) => h.id)).size).toBe(1);
    expect(handles.map((h) => h.deduplicated)).toEqual([false, true, true, true, true]);
    const rows = await rowsOf(task.name);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      kwargs: { n: 5 },
      status: 'PENDING',
      dedupe_scope: 'debounce',
      dedupe_held: true,
    });
    for (let i = 1; i < starts.length; i += 1) expect(starts[i]).toBeGreaterThan(starts[i - 1] as number);
    const [check] = await t.query<{ ahead: boolean }>(
      `SELECT enqueued_at > now() + interval '59 seconds' AS ahead FROM {{schema}}.horsies_tasks WHERE id = $1`,
      [handles[0]?.id],
    );
    expect(check?.ahead).toBe(true);
    expect((await handles[0]?.info())?.dedupe).toEqual({ key: 'user-7', scope: 'debounce', held: true });
  });

  it('20 concurrent senders on their own connections leave one task; it runs once, with the last input', async () => {
    const name = uniqueName('race');
    const runs: number[] = [];
    const task = recordingTask(name, runs);
    const senders = Array.from({ length: 20 }, () => {
      const own = t.app({ poolSize: 1 });
      return { own, task: recordingTask(name, [], own) };
    });
    await Promise.all(senders.map((s) => s.own.db.pool.query('SELECT 1')));
    const options: SendOptions = { debounce: { key: 'k', delayMs: 300 } };

    const handles = await Promise.all(senders.map((s, n) => s.task.send({ n }, options)));
    const rows = await rowsOf(name);
    expect(rows).toHaveLength(1);
    expect(handles.every((h) => h.id === rows[0]?.id)).toBe(true);
    expect(handles.filter((h) => !h.deduplicated)).toHaveLength(1);
    expect((rows[0]?.kwargs as { n: number }).n).toBeGreaterThanOrEqual(0);
    expect((rows[0]?.kwargs as { n: number }).n).toBeLessThan(20);

    // The last send of the burst, after all the others returned: its input is the one that runs.
    const last = await task.send({ n: 999 }, options);
    expect(last.id).toBe(rows[0]?.id);
    const worker = createWorker(app, { maintenance: false, pollIntervalMs: 50, queues: ['default'] });
    await worker.start();
    try {
      expect(await last.result({ timeoutMs: 15_000 })).toEqual({ ok: true, value: 999 });
    } finally {
      await worker.stop();
    }
    expect(runs).toEqual([999]);
    const [row] = await rowsOf(name);
    expect(row).toMatchObject({ status: 'COMPLETED', attempt: 1, dedupe_held: false });
    expect(await rowsOf(name)).toHaveLength(1);
  });

  it('makes a new pending task once the holder was claimed, and leaves the claimed one as it was', async () => {
    const task = recordingTask(uniqueName('claimed'));
    const options: SendOptions = { debounce: { key: 'k', delayMs: 0 } };
    const first = await task.send({ n: 1 }, options);
    const claimed = await app.db.run(TaskClaim, {
      queue: 'default',
      taskNames: [task.name],
      limit: 10,
      leaseMs: 60_000,
      worker: { workerId: 'w-debounce', hostname: 'h', pid: 1, processName: 'vitest' },
    });
    expect(claimed.map((c) => c.id)).toEqual([first.id]);
    const second = await task.send({ n: 2 }, options);
    const third = await task.send({ n: 3 }, options);

    expect(second.deduplicated).toBe(false);
    expect(second.id).not.toBe(first.id);
    expect(third.id).toBe(second.id);
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => [r.status, r.kwargs, r.dedupe_held])).toEqual([
      ['CLAIMED', { n: 1 }, false],
      ['PENDING', { n: 3 }, true],
    ]);
  });

  it('meeting a task that holds the key for dedupe, returns it unchanged', async () => {
    const task = recordingTask(uniqueName('mixed'));
    const held = await task.send({ n: 1 }, { dedupe: { key: 'k', scope: 'running' } });
    const [before] = await rowsOf(task.name);
    const debounced = await task.send({ n: 2 }, { debounce: { key: 'k', delayMs: 60_000 } });
    expect(debounced.id).toBe(held.id);
    expect(debounced.deduplicated).toBe(true);
    const [after] = await rowsOf(task.name);
    expect(after?.kwargs).toEqual({ n: 1 });
    expect(after?.enqueued_at).toEqual(before?.enqueued_at);
  });

  it('in one sendMany, items sharing a key become one task with the last of their inputs', async () => {
    const task = recordingTask(uniqueName('many'));
    const handles = await task.sendMany([
      { input: { n: 1 }, debounce: { key: 'a', delayMs: 60_000 } },
      { input: { n: 2 }, debounce: { key: 'b', delayMs: 60_000 } },
      { input: { n: 3 }, debounce: { key: 'a', delayMs: 60_000 } },
      { input: { n: 4 } },
      { input: { n: 5 }, debounce: { key: 'a', delayMs: 60_000 } },
    ]);
    expect(handles.map((h) => h.deduplicated)).toEqual([false, false, true, false, true]);
    expect(handles[2]?.id).toBe(handles[0]?.id);
    expect(handles[4]?.id).toBe(handles[0]?.id);
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => [r.kwargs, r.dedupe_key])).toEqual([
      [{ n: 5 }, 'a'],
      [{ n: 2 }, 'b'],
      [{ n: 4 }, null],
    ]);
    // A later call with the key updates the same task.
    const again = await task.sendMany([{ input: { n: 6 }, debounce: { key: 'a', delayMs: 60_000 } }]);
    expect(again[0]?.id).toBe(handles[0]?.id);
    expect((await rowsOf(task.name))[0]?.kwargs).toEqual({ n: 6 });
  });

  it('works inside the caller’s transaction: the update commits or rolls back with it', async () => {
    const task = recordingTask(uniqueName('tx'));
    const options: SendOptions = { debounce: { key: 'k', delayMs: 60_000 } };
    const first = await task.send({ n: 1 }, options);
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      const inside = await task.send({ n: 2 }, { ...options, tx: client });
      expect(inside.id).toBe(first.id);
      await client.query('ROLLBACK');
      expect((await rowsOf(task.name))[0]?.kwargs).toEqual({ n: 1 });
      await client.query('BEGIN');
      await task.send({ n: 3 }, { ...options, tx: client });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => r.kwargs)).toEqual([{ n: 3 }]);
  });

  const bad: [string, SendOptions, string[]][] = [
    ['a negative delay', { debounce: { key: 'k', delayMs: -1 } }, ['debounce.delayMs']],
    ['a delay over 2^31-1 ms', { debounce: { key: 'k', delayMs: 2 ** 31 } }, ['debounce.delayMs']],
    [
      'no delay',
      { debounce: { key: 'k' } as unknown as { key: string; delayMs: number } },
      ['debounce.delayMs'],
    ],
    ['an empty key', { debounce: { key: '', delayMs: 10 } }, ['debounce.key']],
    ['delayMs beside it', { debounce: { key: 'k', delayMs: 10 }, delayMs: 5 }, ['delayMs']],
    ['runAt beside it', { debounce: { key: 'k', delayMs: 10 }, runAt: new Date() }, ['runAt']],
    [
      'an idempotency key beside it',
      { debounce: { key: 'k', delayMs: 10 }, idempotencyKey: 'i' },
      ['idempotencyKey'],
    ],
    ['not an object', { debounce: 5 as unknown as { key: string; delayMs: number } }, ['debounce']],
  ];
  it.each(bad)('refuses %s with SendOptionsError, storing nothing', async (_label, options, expected) => {
    const task = recordingTask(uniqueName('bad'));
    const before = await countAll();
    const error = await rejection(task.send({ n: 1 }, options), SendOptionsError);
    expect(error.problems.map((p) => p.field)).toEqual(expected);
    expect(await countAll()).toBe(before);
  });
});
