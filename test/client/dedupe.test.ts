/**
 * Deduplication (the `dedupe` send option): a send whose key a task of the same name holds stores nothing and
 * returns that task. Each scope (pending, running, finished within a window), exactness under 20 concurrent senders
 * on their own connections, keyed items of sendMany (duplicates within one call, mixed with plain items, a call
 * large enough for COPY), the caller's transaction, bad options, and the idempotency key mechanism beside it.
 */
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { App } from '../../src/client/App.js';
import type { SendOptions } from '../../src/client/sendOptions.js';
import { TaskClaim } from '../../src/db/tasks.js';
import type { TaskRow } from '../../src/db/tasks.js';
import { PayloadMismatchError, SendOptionsError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { rejection } from '../support/assertions.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app();

let sequence = 0;
function uniqueName(label: string): string {
  sequence += 1;
  return `dedupe-${label}-${sequence}`;
}

const inputSchema = z.object({ n: z.number() });

/** A task that returns its input's number, on `on` (default: the shared app). */
function numberTask(name: string, on: App = app) {
  return on.task({ name, input: inputSchema, handler: ({ n }) => n });
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

/** Claims the task's PENDING tasks as a worker would (PENDING → CLAIMED). */
async function claimAll(taskName: string): Promise<string[]> {
  const rows = await app.db.run(TaskClaim, {
    queue: 'default',
    taskNames: [taskName],
    limit: 100,
    leaseMs: 60_000,
    worker: { workerId: 'w-dedupe', hostname: 'h', pid: 1, processName: 'vitest' },
  });
  return rows.map((r) => r.id);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('dedupe, scope pending (the default)', () => {
  it('returns the pending task for the same key, deduplicated, and stores nothing', async () => {
    const task = numberTask(uniqueName('pending'));
    const first = await task.send({ n: 1 }, { dedupe: { key: 'k' } });
    const second = await task.send({ n: 2 }, { dedupe: { key: 'k' } });
    const other = await task.send({ n: 3 }, { dedupe: { key: 'other' } });

    expect(first.deduplicated).toBe(false);
    expect(second.id).toBe(first.id);
    expect(second.deduplicated).toBe(true);
    expect(other.deduplicated).toBe(false);
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => [r.kwargs, r.dedupe_key, r.dedupe_scope, r.dedupe_held])).toEqual([
      [{ n: 1 }, 'k', 'pending', true],
      [{ n: 3 }, 'other', 'pending', true],
    ]);
    expect((await first.info())?.dedupe).toEqual({ key: 'k', scope: 'pending', held: true });
    // Keys are per task name: another task sends with the same key freely.
    const elsewhere = numberTask(uniqueName('pending-other'));
    expect((await elsewhere.send({ n: 1 }, { dedupe: { key: 'k' } })).deduplicated).toBe(false);
  });

  it('releases the key at the claim: a send then stores a new task', async () => {
    const task = numberTask(uniqueName('claimed'));
    const first = await task.send({ n: 1 }, { dedupe: { key: 'k' } });
    expect(await claimAll(task.name)).toEqual([first.id]);
    const after = await task.send({ n: 2 }, { dedupe: { key: 'k' } });

    expect(after.deduplicated).toBe(false);
    expect(after.id).not.toBe(first.id);
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => [r.status, r.dedupe_held])).toEqual([
      ['CLAIMED', false],
      ['PENDING', true],
    ]);
    expect((await first.info())?.dedupe).toEqual({ key: 'k', scope: 'pending', held: false });
  });

  it('releases the key when the pending task is cancelled', async () => {
    const task = numberTask(uniqueName('cancelled'));
    const first = await task.send({ n: 1 }, { dedupe: { key: 'k' } });
    await app.cancel(first.id);
    const after = await task.send({ n: 2 }, { dedupe: { key: 'k' } });
    expect(after.deduplicated).toBe(false);
    expect(after.id).not.toBe(first.id);
  });
});

describe('dedupe, scope running', () => {
  it('returns the task while it is pending, claimed and running, and a new one once it ended', async () => {
    const name = uniqueName('running');
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const task = app.task({
      name,
      input: inputSchema,
      handler: async ({ n }) => {
        await gate;
        return n;
      },
    });
    const options: SendOptions = { dedupe: { key: 'r', scope: 'running' } };
    const first = await task.send({ n: 1 }, options);
    expect((await task.send({ n: 2 }, options)).id).toBe(first.id);

    const worker = createWorker(app, { maintenance: false, pollIntervalMs: 50, queues: ['default'] });
    await worker.start();
    try {
      await eventually(async () => (await first.info())?.status === 'RUNNING');
      const whileRunning = await task.send({ n: 3 }, options);
      expect(whileRunning.id).toBe(first.id);
      expect(whileRunning.deduplicated).toBe(true);
      release();
      expect(await first.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 1 });
    } finally {
      await worker.stop();
    }
    const after = await task.send({ n: 4 }, options);
    expect(after.deduplicated).toBe(false);
    expect(after.id).not.toBe(first.id);
    expect((await rowsOf(name)).map((r) => [r.status, r.dedupe_held])).toEqual([
      ['COMPLETED', false],
      ['PENDING', true],
    ]);
  });
});

describe('dedupe, scope finished', () => {
  it('returns the finished task within its window, and a new task once the window has passed', async () => {
    const task = numberTask(uniqueName('window'));
    const windowMs = 400;
    const options: SendOptions = { dedupe: { key: 'w', scope: 'finished', windowMs } };
    const first = await task.send({ n: 1 }, options);
    await claimAll(task.name);
    // Ends it (CANCELLED is an end like any other).
    await app.cancel(first.id);
    const [done] = await t.query<{ finished_at: Date; now: Date }>(
      'SELECT finished_at, now() AS now FROM {{schema}}.horsies_tasks WHERE id = $1',
      [first.id],
    );
    expect(done?.finished_at).toBeInstanceOf(Date);

    const within = await task.send({ n: 2 }, options);
    const [check] = await t.query<{ inside: boolean }>(
      `SELECT now() < finished_at + $2 * interval '1 millisecond' AS inside
       FROM {{schema}}.horsies_tasks WHERE id = $1`,
      [first.id, windowMs],
    );
    // The send above ran inside the window (checked after it, so the window was open during it).
    expect(check?.inside).toBe(true);
    expect(within.id).toBe(first.id);
    expect(within.deduplicated).toBe(true);

    await eventually(async () => {
      const [row] = await t.query<{ passed: boolean }>(
        `SELECT now() >= finished_at + $2 * interval '1 millisecond' AS passed
         FROM {{schema}}.horsies_tasks WHERE id = $1`,
        [first.id, windowMs],
      );
      return row?.passed === true;
    });
    const after = await task.send({ n: 3 }, options);
    expect(after.deduplicated).toBe(false);
    expect(after.id).not.toBe(first.id);
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => [r.status, r.dedupe_held, r.dedupe_window_ms])).toEqual(
      [
        ['CANCELLED', false],
        ['PENDING', true],
      ].map(([s, h]) => [s, h, String(windowMs)]),
    );
  });

  it('lets exactly one of 20 concurrent senders replace an expired holder', async () => {
    const name = uniqueName('window-race');
    const task = numberTask(name);
    const options: SendOptions = { dedupe: { key: 'x', scope: 'finished', windowMs: 1 } };
    const first = await task.send({ n: 0 }, options);
    await claimAll(name);
    await app.cancel(first.id);
    await eventually(async () => {
      const [row] = await t.query<{ passed: boolean }>(
        `SELECT now() >= finished_at + interval '1 millisecond' AS passed FROM {{schema}}.horsies_tasks WHERE id = $1`,
        [first.id],
      );
      return row?.passed === true;
    });
    const senders = await concurrentSenders(name, 20);
    // A long window for the new holder, so that it does not expire during the race.
    const handles = await Promise.all(
      senders.map((s, n) => s.send({ n }, { dedupe: { key: 'x', scope: 'finished', windowMs: 600_000 } })),
    );
    const ids = new Set(handles.map((h) => h.id));
    expect(ids.size).toBe(1);
    expect(ids.has(first.id)).toBe(false);
    expect(handles.filter((h) => !h.deduplicated)).toHaveLength(1);
    expect((await rowsOf(name)).filter((r) => r.dedupe_held)).toHaveLength(1);
    expect(await rowsOf(name)).toHaveLength(2);
  });
});

/**
 * `count` senders of task `name`, each an app of its own with a pool of one connection, connected before it is
 * returned, so that their sends start together.
 */
async function concurrentSenders(name: string, count: number) {
  const senders = Array.from({ length: count }, () => {
    const own = t.app({ poolSize: 1 });
    return { own, task: numberTask(name, own) };
  });
  await Promise.all(senders.map((s) => s.own.db.pool.query('SELECT 1')));
  return senders.map((s) => s.task);
}

describe('dedupe under concurrent senders', () => {
  it('20 senders on their own connections, started together: one task, one creator', async () => {
    const name = uniqueName('race');
    const senders = await concurrentSenders(name, 20);
    const handles = await Promise.all(senders.map((s, n) => s.send({ n }, { dedupe: { key: 'same' } })));

    const rows = await rowsOf(name);
    expect(rows).toHaveLength(1);
    expect(handles.every((h) => h.id === rows[0]?.id)).toBe(true);
    expect(handles.filter((h) => !h.deduplicated)).toHaveLength(1);
    const creator = handles.findIndex((h) => !h.deduplicated);
    expect(rows[0]?.kwargs).toEqual({ n: creator });
  });

  it('20 senders each in its own transaction (tx option): one task once they all committed', async () => {
    const name = uniqueName('race-tx');
    const task = numberTask(name);
    const clients = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const client = new pg.Client({ connectionString: t.pool.options.connectionString });
        await client.connect();
        return client;
      }),
    );
    try {
      const handles = await Promise.all(
        clients.map(async (client, n) => {
          await client.query('BEGIN');
          const handle = await task.send({ n }, { dedupe: { key: 'tx' }, tx: client });
          await client.query('COMMIT');
          return handle;
        }),
      );
      expect(await rowsOf(name)).toHaveLength(1);
      expect(new Set(handles.map((h) => h.id)).size).toBe(1);
      expect(handles.filter((h) => !h.deduplicated)).toHaveLength(1);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });
});

describe('dedupe in sendMany and in transactions', () => {
  it('items sharing a key in one call stand for one task; a held key returns its holder', async () => {
    const task = numberTask(uniqueName('many'));
    const held = await task.send({ n: 0 }, { dedupe: { key: 'held' } });
    const handles = await task.sendMany([
      { input: { n: 1 }, dedupe: { key: 'a' } },
      { input: { n: 2 } },
      { input: { n: 3 }, dedupe: { key: 'a' } },
      { input: { n: 4 }, dedupe: { key: 'held' } },
      { input: { n: 5 }, dedupe: { key: 'b', scope: 'running' } },
    ]);
    expect(handles.map((h) => h.deduplicated)).toEqual([false, false, true, true, false]);
    expect(handles[2]?.id).toBe(handles[0]?.id);
    expect(handles[3]?.id).toBe(held.id);
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => [r.kwargs, r.dedupe_key])).toEqual([
      [{ n: 0 }, 'held'],
      [{ n: 1 }, 'a'],
      [{ n: 2 }, null],
      [{ n: 5 }, 'b'],
    ]);
  });

  it('a call large enough for COPY sends its keyed items through the INSERT, one task per key', async () => {
    const allKeyed = numberTask(uniqueName('large-keyed'));
    const watch = vi.spyOn(pg.Client.prototype, 'query');
    const keyedHandles = await allKeyed.sendMany(
      Array.from({ length: 100 }, (_, n) => ({ input: { n }, dedupe: { key: `k${n % 40}` } })),
    );
    expect(
      watch.mock.calls.filter((c) => String((c[0] as { text?: unknown })?.text).startsWith('COPY')),
    ).toEqual([]);
    expect(await rowsOf(allKeyed.name)).toHaveLength(40);
    expect(keyedHandles.filter((h) => !h.deduplicated)).toHaveLength(40);
    watch.mockRestore();

    const task = numberTask(uniqueName('large'));
    const spy = vi.spyOn(pg.Client.prototype, 'query');
    const handles = await task.sendMany(
      Array.from({ length: 150 }, (_, n) => ({
        input: { n },
        ...(n % 3 === 0 ? { dedupe: { key: `k${n % 10}` } } : {}),
      })),
    );
    // The 100 plain items still go through one COPY, in the same transaction as the keyed INSERT.
    const copies = spy.mock.calls.filter((c) =>
      String((c[0] as { text?: unknown })?.text).startsWith('COPY'),
    );
    expect(copies).toHaveLength(1);
    const rows = await rowsOf(task.name);
    // 100 plain items, and keyed items n = 0, 3, 6, ... whose keys k0..k9 each appear at n % 10.
    expect(rows).toHaveLength(100 + 10);
    expect(handles.filter((h) => h.deduplicated)).toHaveLength(50 - 10);
    for (const [n, handle] of handles.entries()) {
      const row = rows.find((r) => r.id === handle.id);
      expect(row).toBeDefined();
      if (n % 3 === 0) expect(row?.dedupe_key).toBe(`k${n % 10}`);
      else expect(row?.kwargs).toEqual({ n });
    }
  });

  it('works inside the caller’s transaction: a rollback stores nothing and leaves the key free', async () => {
    const task = numberTask(uniqueName('tx'));
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      const a = await task.send({ n: 1 }, { dedupe: { key: 'k' }, tx: client });
      const b = await task.send({ n: 2 }, { dedupe: { key: 'k' }, tx: client });
      expect(b.id).toBe(a.id);
      expect(b.deduplicated).toBe(true);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await rowsOf(task.name)).toEqual([]);
    expect((await task.send({ n: 3 }, { dedupe: { key: 'k' } })).deduplicated).toBe(false);
  });
});

describe('dedupe options', () => {
  const bad: [string, SendOptions, string[]][] = [
    ['an empty key', { dedupe: { key: '' } }, ['dedupe.key']],
    ['a key over 255 characters', { dedupe: { key: 'k'.repeat(256) } }, ['dedupe.key']],
    ['a key that is not a string', { dedupe: { key: 7 as unknown as string } }, ['dedupe.key']],
    ['not an object', { dedupe: 'k' as unknown as { key: string } }, ['dedupe']],
    ['an unknown scope', { dedupe: { key: 'k', scope: 'always' as 'pending' } }, ['dedupe.scope']],
    ['scope finished without a window', { dedupe: { key: 'k', scope: 'finished' } }, ['dedupe.windowMs']],
    ['a window of 0', { dedupe: { key: 'k', scope: 'finished', windowMs: 0 } }, ['dedupe.windowMs']],
    [
      'a window over 100 years',
      { dedupe: { key: 'k', scope: 'finished', windowMs: 1e13 } },
      ['dedupe.windowMs'],
    ],
    ['a window without scope finished', { dedupe: { key: 'k', windowMs: 10 } }, ['dedupe.windowMs']],
    ['with an idempotency key', { dedupe: { key: 'k' }, idempotencyKey: 'i' }, ['idempotencyKey']],
    ['with an id', { dedupe: { key: 'k' }, id: 'some-id' }, ['id']],
    ['with debounce', { dedupe: { key: 'k' }, debounce: { key: 'k', delayMs: 1 } }, ['debounce']],
  ];
  it.each(bad)('refuses %s with SendOptionsError, storing nothing', async (_label, options, expected) => {
    const task = numberTask(uniqueName('bad'));
    const before = await countAll();
    const error = await rejection(task.send({ n: 1 }, options), SendOptionsError);
    expect(error.problems.map((p) => p.field)).toEqual(expected);
    expect(error.message).toContain(`invalid send options for task "${task.name}"`);
    const many = await rejection(
      task.sendMany([{ input: { n: 1 } }, { input: { n: 2 }, ...options }]),
      SendOptionsError,
    );
    expect(many.message).toContain('sendMany item 1');
    expect(await countAll()).toBe(before);
  });
});

describe('idempotency keys beside dedupe keys', () => {
  it('behave as before: a repeat returns the task, another payload is a mismatch; the namespaces are apart', async () => {
    const task = numberTask(uniqueName('idem'));
    const idem = await task.send({ n: 1 }, { idempotencyKey: 'shared-string' });
    const repeat = await task.send({ n: 1 }, { idempotencyKey: 'shared-string' });
    expect(repeat.id).toBe(idem.id);
    expect(repeat.deduplicated).toBe(false);
    await rejection(task.send({ n: 2 }, { idempotencyKey: 'shared-string' }), PayloadMismatchError);
    // The same string as a dedupe key is another key altogether.
    const keyed = await task.send({ n: 3 }, { dedupe: { key: 'shared-string' } });
    expect(keyed.id).not.toBe(idem.id);
    expect(keyed.deduplicated).toBe(false);
    // A call mixing both kinds resolves each on its own.
    const handles = await task.sendMany([
      { input: { n: 1 }, idempotencyKey: 'shared-string' },
      { input: { n: 9 }, dedupe: { key: 'shared-string' } },
    ]);
    expect(handles.map((h) => [h.id, h.deduplicated])).toEqual([
      [idem.id, false],
      [keyed.id, true],
    ]);
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => [r.idempotency_key, r.dedupe_key])).toEqual([
      ['shared-string', null],
      [null, 'shared-string'],
    ]);
    // A mismatch in a mixed call stores nothing of it.
    const before = await countAll();
    await rejection(
      task.sendMany([
        { input: { n: 5 }, dedupe: { key: 'fresh' } },
        { input: { n: 2 }, idempotencyKey: 'shared-string' },
      ]),
      PayloadMismatchError,
    );
    expect(await countAll()).toBe(before);
  });
});
