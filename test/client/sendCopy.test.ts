/**
 * Bulk sends through COPY: which sends take it, that every column arrives as the INSERT path would write it, and
 * that the send guarantees (nothing stored on bad input, idempotency, the caller's transaction, one notification
 * per queue) hold on it.
 */
import { randomUUID } from 'node:crypto';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { copyTasks } from '../../src/db/taskCopy.js';
import type { TaskInsert, TaskRow } from '../../src/db/tasks.js';
import {
  InputValidationError,
  NotSerializableError,
  PayloadMismatchError,
  SendOptionsError,
} from '../../src/errors.js';
import { listenTo } from '../support/notifications.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { FaultProxy } from '../../scripts/faults/proxy.js';

const t = await useTestSchema();
const app = t.app({
  queues: ['default', { name: 'emails', retentionMs: 60_000 }],
});

let sequence = 0;
/** A task name no other test uses. */
function uniqueName(label: string): string {
  sequence += 1;
  return `copy-${label}-${sequence}`;
}

const itemSchema = z.object({ n: z.number().int(), note: z.string().optional() });

function itemTask(
  label: string,
  extra: { priority?: number; retentionMs?: number; maxRetries?: number } = {},
) {
  const { maxRetries, ...rest } = extra;
  return app.task({
    name: uniqueName(label),
    input: itemSchema,
    handler: () => null,
    ...(maxRetries === undefined ? {} : { retry: { maxRetries, retryOn: ['BOOM'] } }),
    ...rest,
  });
}

function items(count: number): { input: { n: number } }[] {
  return Array.from({ length: count }, (_, n) => ({ input: { n } }));
}

async function rowsOf(taskName: string): Promise<TaskRow[]> {
  return t.query<TaskRow>('SELECT * FROM {{schema}}.horsies_tasks WHERE task_name = $1', [taskName]);
}

async function countOf(taskName: string): Promise<number> {
  const [row] = await t.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE task_name = $1',
    [taskName],
  );
  return row?.n ?? -1;
}

/** Records the statements every node-postgres client runs from now on: COPY texts and prepared statement names. */
function watchStatements(): { copies: () => string[]; inserts: () => number } {
  const spy = vi.spyOn(pg.Client.prototype, 'query');
  const configs = (): { text?: unknown; name?: unknown }[] =>
    spy.mock.calls.map((call) => (typeof call[0] === 'object' && call[0] !== null ? call[0] : {}));
  return {
    copies: () =>
      configs().flatMap((c) => (typeof c.text === 'string' && c.text.startsWith('COPY') ? [c.text] : [])),
    inserts: () =>
      configs().filter((c) => typeof c.name === 'string' && c.name.includes('TaskInsertMany')).length,
  };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('sendMany through COPY', () => {
  it('stores every column of a large send in one COPY, in the order of the items', async () => {
    const task = itemTask('columns', { priority: 7, maxRetries: 2 });
    const goodUntil = new Date(Date.now() + 3_600_000);
    const notes = ['tab\there', 'line\nbreak', 'back\\slash', 'cr\rhere', '"quoted"', 'é ☃ 🐎', '\\N', ''];
    const sent = Array.from({ length: 300 }, (_, n) => ({
      input: n % 3 === 0 ? { n, note: notes[n % notes.length] } : { n },
      ...(n % 5 === 0 ? { goodUntil } : {}),
      ...(n % 7 === 0 ? { priority: 1 + (n % 100) } : {}),
      ...(n % 2 === 0 ? { queue: 'emails' } : {}),
    }));
    const statements = watchStatements();
    const handles = await task.sendMany(sent);

    expect(statements.copies()).toHaveLength(1);
    expect(statements.inserts()).toBe(0);
    expect(handles.map((h) => h.id)).toEqual(handles.map((h) => h.id).sort());
    const rows = new Map((await rowsOf(task.name)).map((r) => [r.id, r]));
    expect(rows.size).toBe(300);
    handles.forEach((handle, n) => {
      const item = sent[n] as (typeof sent)[number];
      const row = rows.get(handle.id);
      expect(row).toMatchObject({
        task_name: task.name,
        queue_name: item.queue ?? 'default',
        priority: item.priority ?? 7,
        status: 'PENDING',
        kwargs: item.input,
        args: [],
        max_retries: 2,
        task_options: { retry: expect.objectContaining({ maxRetries: 2, retryOn: ['BOOM'] }) },
        // The task sets no retention: the emails queue's, else none.
        retention_ms: item.queue === 'emails' ? '60000' : null,
        enqueue_sha: null,
        idempotency_key: null,
        claimed: false,
        attempt: 0,
      });
      expect(row?.good_until?.getTime() ?? null).toBe(item.goodUntil?.getTime() ?? null);
      expect(row?.enqueued_at.getTime()).toBe(row?.sent_at.getTime());
    });
  });

  it("stores the task's own retention and a task without a retry policy stores no task_options", async () => {
    const task = itemTask('retention', { retentionMs: 5_000 });
    await task.sendMany(items(100).map((item, n) => (n % 2 ? { ...item, queue: 'emails' } : item)));
    const rows = await rowsOf(task.name);
    expect(rows).toHaveLength(100);
    for (const row of rows) {
      expect(row.retention_ms).toBe('5000');
      expect(row.task_options).toBeNull();
      expect(row.max_retries).toBe(0);
    }
  });

  it('stores runAt as the enqueue time when every item names one', async () => {
    const task = itemTask('run-at');
    const base = Date.now() + 60_000;
    const statements = watchStatements();
    const handles = await task.sendMany(
      items(100).map((item, n) => ({ ...item, runAt: new Date(base + n) })),
    );
    expect(statements.copies()).toHaveLength(1);
    expect(statements.copies()[0]).toContain('enqueued_at');
    const rows = new Map((await rowsOf(task.name)).map((r) => [r.id, r]));
    handles.forEach((handle, n) => expect(rows.get(handle.id)?.enqueued_at.getTime()).toBe(base + n));
  });

  it('sends delays, and a mix of runAt and none, through INSERT with the same enqueue times', async () => {
    const task = itemTask('delays');
    const runAt = new Date(Date.now() + 120_000);
    const statements = watchStatements();
    const delayed = await task.sendMany(items(100).map((item, n) => ({ ...item, delayMs: n * 1000 })));
    const mixed = await task.sendMany(items(100).map((item, n) => (n === 50 ? { ...item, runAt } : item)));
    expect(statements.copies()).toHaveLength(0);
    expect(statements.inserts()).toBe(2);

    const diffs = await t.query<{ id: string; ms: number }>(
      `SELECT id, (extract(epoch FROM enqueued_at - sent_at) * 1000)::float8 AS ms
       FROM {{schema}}.horsies_tasks WHERE task_name = $1`,
      [task.name],
    );
    const msById = new Map(diffs.map((d) => [d.id, d.ms]));
    delayed.forEach((handle, n) => expect(msById.get(handle.id)).toBe(n * 1000));
    const rows = new Map((await rowsOf(task.name)).map((r) => [r.id, r]));
    expect(rows.get(mixed[50]?.id ?? '')?.enqueued_at.getTime()).toBe(runAt.getTime());
    expect(msById.get(mixed[49]?.id ?? '')).toBe(0);
  });

  it('stores nothing when an item in the middle fails the schema, and sends no statement', async () => {
    const task = itemTask('bad-middle');
    const sent: { input: unknown }[] = items(1000);
    sent[500] = { input: { n: 'five hundred' } };
    const statements = watchStatements();
    const error = await task.sendMany(sent as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as Error).message).toContain('item 500');
    expect(statements.copies()).toHaveLength(0);
    expect(statements.inserts()).toBe(0);
    expect(await countOf(task.name)).toBe(0);
  });

  it('stores nothing when an item in the middle cannot be serialized or has a bad option', async () => {
    const task = app.task({ name: uniqueName('bad-json'), input: z.any(), handler: () => null });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const withCycle = [...items(400), { input: cyclic }, ...items(400)];
    const serialization = await task.sendMany(withCycle).catch((e: unknown) => e);
    expect(serialization).toBeInstanceOf(NotSerializableError);
    expect((serialization as Error).message).toContain('item 400');

    const badOption = items(400).map((item, n) => (n === 399 ? { ...item, priority: 0 } : item));
    const option = await task.sendMany(badOption).catch((e: unknown) => e);
    expect(option).toBeInstanceOf(SendOptionsError);
    expect(await countOf(task.name)).toBe(0);
  });

  it('keeps a large send with an explicit id or key on INSERT: repeats return the task, mismatches are refused', async () => {
    const task = itemTask('explicit');
    const id = randomUUID();
    const idempotencyKey = `key-${randomUUID()}`;
    const first = await task.send({ n: 1 }, { id });
    const keyed = await task.send({ n: 2 }, { idempotencyKey });

    const statements = watchStatements();
    const sent = [...items(200), { input: { n: 1 }, id }, { input: { n: 2 }, idempotencyKey }];
    const handles = await task.sendMany(sent);
    expect(statements.copies()).toHaveLength(0);
    expect(handles[200]?.id).toBe(first.id);
    expect(handles[201]?.id).toBe(keyed.id);
    expect(await countOf(task.name)).toBe(202);

    const mismatch = await task.sendMany([...items(200), { input: { n: 3 }, id }]).catch((e: unknown) => e);
    expect(mismatch).toBeInstanceOf(PayloadMismatchError);
    expect((mismatch as PayloadMismatchError).taskId).toBe(id);
    const [stored] = await t.query<TaskRow>('SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1', [id]);
    expect(stored?.kwargs).toEqual({ n: 1 });
  });

  it('copies on the caller transaction: a rollback leaves nothing, a commit leaves every task', async () => {
    const task = itemTask('tx');
    const client = await t.pool.connect();
    try {
      const statements = watchStatements();
      await client.query('BEGIN');
      const rolledBack = await task.sendMany(items(200), { tx: client });
      expect(statements.copies()).toHaveLength(1);
      const inside = await client.query(
        `SELECT count(*)::int AS n FROM "${t.schema}".horsies_tasks WHERE task_name = $1`,
        [task.name],
      );
      expect(inside.rows[0]?.n).toBe(200);
      expect(await countOf(task.name)).toBe(0);
      await client.query('ROLLBACK');
      expect(rolledBack).toHaveLength(200);
      expect(await countOf(task.name)).toBe(0);

      await client.query('BEGIN');
      await task.sendMany(items(150), { tx: client });
      expect(await countOf(task.name)).toBe(0);
      await client.query('COMMIT');
      expect(await countOf(task.name)).toBe(150);
    } finally {
      client.release();
    }
  });

  it('leaves the caller transaction usable when an item is refused', async () => {
    const task = itemTask('tx-refused');
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      const sent: { input: unknown }[] = items(200);
      sent[100] = { input: {} };
      await expect(task.sendMany(sent as never, { tx: client })).rejects.toBeInstanceOf(InputValidationError);
      await task.sendMany(items(100), { tx: client });
      await client.query('COMMIT');
      expect(await countOf(task.name)).toBe(100);
    } finally {
      client.release();
    }
  });

  it('falls back to INSERT when the transaction is something COPY cannot stream on', async () => {
    const task = itemTask('pool-tx');
    const statements = watchStatements();
    const handles = await task.sendMany(items(100), { tx: t.pool });
    expect(statements.copies()).toHaveLength(0);
    expect(statements.inserts()).toBe(1);
    expect(handles).toHaveLength(100);
    expect(await countOf(task.name)).toBe(100);
  });

  it('sends one notification per queue for a copied send', async () => {
    const task = itemTask('notify');
    const channels = ['task_new', 'task_queue_default', 'task_queue_emails'].map((c) => `${t.schema}:${c}`);
    const listening = await listenTo(channels);
    const { received } = listening;
    try {
      const statements = watchStatements();
      await task.sendMany(items(1000).map((item, n) => (n % 2 ? { ...item, queue: 'emails' } : item)));
      expect(statements.copies()).toHaveLength(1);
      await listening.settled();
      const [taskNew, queueDefault, queueEmails] = channels as [string, string, string];
      expect(received).toHaveLength(4);
      expect(received).toEqual(
        expect.arrayContaining([
          { channel: taskNew, payload: 'default' },
          { channel: taskNew, payload: 'emails' },
          { channel: queueDefault, payload: '' },
          { channel: queueEmails, payload: '' },
        ]),
      );
    } finally {
      await listening.end();
    }
  });

  it('awaits a schema that validates asynchronously', async () => {
    const asyncSchema: StandardSchemaV1<{ n: number }> = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: async (value) =>
          typeof (value as { n?: unknown }).n === 'number'
            ? { value: value as { n: number } }
            : { issues: [{ message: 'n must be a number', path: ['n'] }] },
      },
    };
    const task = app.task({ name: uniqueName('async'), input: asyncSchema, handler: () => null });
    expect(await task.sendMany(items(100))).toHaveLength(100);
    const sent: { input: unknown }[] = items(100);
    sent[70] = { input: { n: 'x' } };
    const error = await task.sendMany(sent as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as Error).message).toContain('item 70');
    expect(await countOf(task.name)).toBe(100);
  });

  it('fails a send whose connection is cut during the copy, stores none of it, and the process goes on', async () => {
    // The app reaches the server through a proxy that can cut its connections the way a network does: the socket
    // closes with no error message from the server.
    const server = new URL(databaseUrl());
    const proxy = await FaultProxy.start({ host: server.hostname, port: Number(server.port) });
    const proxied = new URL(server);
    proxied.port = String(proxy.port);
    const cutApp = t.app({ databaseUrl: proxied.toString() });
    const task = cutApp.task({ name: uniqueName('cut'), input: itemSchema, handler: () => null });
    try {
      const sending = task.sendMany(items(200_000)).then(
        () => null,
        (error: unknown) => error,
      );
      // Cut while the copy streams.
      for (;;) {
        const rows = await t.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND state = 'active'
             AND query LIKE 'COPY "${t.schema}".horsies_tasks%'`,
        );
        if ((rows[0]?.n ?? 0) > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      expect(proxy.closeAll()).toBeGreaterThan(0);
      expect(await sending).toBeInstanceOf(Error);
      // The server rolls the copy back once it sees the connection gone.
      await eventually(async () => (await countOf(task.name)) === 0);
      expect(await task.sendMany(items(100))).toHaveLength(100);
      expect(await countOf(task.name)).toBe(100);
    } finally {
      await proxy.stop();
    }
  });

  it('stores nothing from a copy the server refuses, and the pool stays usable', async () => {
    const task = itemTask('refused');
    const [one] = await task.sendMany(items(1));
    const row: TaskInsert = {
      id: one?.id ?? '',
      taskName: task.name,
      queueName: 'default',
      priority: 100,
      kwargs: '{"n":0}',
      delayMs: 0,
      runAt: null,
      goodUntil: null,
      enqueueSha: null,
      idempotencyKey: null,
      maxRetries: 0,
      retentionMs: null,
      taskOptions: null,
    };
    const fresh = Array.from({ length: 99 }, () => ({ ...row, id: randomUUID() }));
    // The taken id comes last, after rows the server has already stored in the statement.
    const error = await copyTasks(app.db, [...fresh, row], 'now').catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe('23505');
    expect(await countOf(task.name)).toBe(1);
    expect(await task.sendMany(items(100))).toHaveLength(100);
    expect(await countOf(task.name)).toBe(101);
  });
});
