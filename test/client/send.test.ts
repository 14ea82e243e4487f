import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AppConfig } from '../../src/client/config.js';
import { payloadDigest, toCanonicalJson } from '../../src/json.js';
import type { TaskRow } from '../../src/db/tasks.js';
import {
  ConfigError,
  InputValidationError,
  NotSerializableError,
  PayloadMismatchError,
  PayloadTooLargeError,
  SendOptionsError,
  UnknownQueueError,
} from '../../src/errors.js';
import type { ConfigProblem } from '../../src/errors.js';
import { rejection, thrown } from '../support/assertions.js';
import { listenTo } from '../support/notifications.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app();
const twoQueues = t.app({ queues: ['default', 'emails'] });
const smallPayloads = t.app({ maxPayloadBytes: 1024 });

let sequence = 0;
/** A task name no other test uses. */
function uniqueName(label: string): string {
  sequence += 1;
  return `${label}-${sequence}`;
}

/** A task whose schema accepts anything, so that the JSON check is what decides. */
function anyTask(label: string) {
  return app.task({ name: uniqueName(label), input: z.any(), handler: () => null });
}

const pointSchema = z.object({ x: z.number(), y: z.number(), tags: z.array(z.string()).optional() });

/** A task taking a point. */
function pointTask(label: string, extra: { priority?: number; queue?: string } = {}) {
  return app.task({ name: uniqueName(label), input: pointSchema, handler: ({ x, y }) => x + y, ...extra });
}

async function rowOf(id: string): Promise<TaskRow | undefined> {
  const [row] = await t.query<TaskRow>('SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1', [id]);
  return row;
}

async function countRows(where = 'true', values: unknown[] = []): Promise<number> {
  const [row] = await t.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE ${where}`,
    values,
  );
  return row?.n ?? -1;
}

/** Runs a send that must fail with `type` and checks that the table holds the same number of rows after. */
async function rejectsWithoutStoring<E>(
  send: () => Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  const before = await countRows();
  const error = await rejection(send(), type);
  expect(await countRows()).toBe(before);
  return error;
}

function fields(problems: ConfigProblem[]): string[] {
  return problems.map((p) => p.field);
}

describe('send', () => {
  it('stores a PENDING row with the input, the defaults, and a payload digest when a repeat is possible', async () => {
    const task = pointTask('store');
    const input = { y: 2, x: 1, tags: ['a', 'b'] };
    const handle = await task.send(input);

    expect(handle.taskName).toBe(task.name);
    const row = await rowOf(handle.id);
    expect(row).toBeDefined();
    expect(row).toMatchObject({
      id: handle.id,
      task_name: task.name,
      queue_name: 'default',
      priority: 100,
      status: 'PENDING',
      kwargs: input,
      args: [],
      idempotency_key: null,
      good_until: null,
      claimed: false,
      attempt: 0,
      result: null,
    });
    expect(row?.sent_at).toBeInstanceOf(Date);
    expect(row?.enqueued_at).toBeInstanceOf(Date);
    // No delay: runnable from the moment it was sent (both are the insert's now()).
    expect(row?.enqueued_at.getTime()).toBe(row?.sent_at.getTime());
    // No id or idempotency key was given, so no repeat is possible and no digest is stored.
    expect(row?.enqueue_sha).toBeNull();
    const keyed = await task.send(input, { idempotencyKey: `digest-${handle.id}` });
    const [keyedRow] = await t.query<{ enqueue_sha: string }>(
      'SELECT enqueue_sha FROM {{schema}}.horsies_tasks WHERE id = $1',
      [keyed.id],
    );
    expect(keyedRow?.enqueue_sha).toMatch(/^[0-9a-f]{64}$/);
    expect(keyedRow?.enqueue_sha).toBe(payloadDigest(task.name, toCanonicalJson(input, 'input')));
  });

  it('exposes the stored task through app.getTask and handle.info', async () => {
    const task = pointTask('get-task');
    const input = { x: 3, y: 4 };
    const handle = await task.send(input);

    const info = await app.getTask(handle.id);
    expect(info).toMatchObject({
      id: handle.id,
      taskName: task.name,
      queueName: 'default',
      priority: 100,
      status: 'PENDING',
      input,
      result: null,
      errorCode: null,
      idempotencyKey: null,
      goodUntil: null,
      claimedByWorkerId: null,
      retryCount: 0,
      maxRetries: 0,
    });
    const row = await rowOf(handle.id);
    expect(info?.enqueuedAt.getTime()).toBe(row?.enqueued_at.getTime());
    expect(info?.sentAt.getTime()).toBe(row?.sent_at.getTime());
    expect(info?.attempts).toBeUndefined();

    expect(await handle.info()).toEqual(info);
  });

  it('returns null from app.getTask for an unknown id', async () => {
    expect(await app.getTask('no-such-id')).toBeNull();
  });

  it('uses the priority of the task definition', async () => {
    const task = pointTask('task-priority', { priority: 7 });
    expect(task.priority).toBe(7);
    const handle = await task.send({ x: 1, y: 1 });
    expect((await rowOf(handle.id))?.priority).toBe(7);
    expect((await app.getTask(handle.id))?.priority).toBe(7);
  });

  it('lets one send override the priority, without changing the next send', async () => {
    const task = pointTask('send-priority', { priority: 7 });
    const overridden = await task.send({ x: 1, y: 1 }, { priority: 3 });
    const plain = await task.send({ x: 1, y: 2 });
    expect((await rowOf(overridden.id))?.priority).toBe(3);
    expect((await rowOf(plain.id))?.priority).toBe(7);
  });

  it.each([1, 100])('accepts the boundary priority %d', async (priority) => {
    const task = pointTask('boundary-priority');
    const handle = await task.send({ x: 0, y: 0 }, { priority });
    expect((await rowOf(handle.id))?.priority).toBe(priority);
  });

  it("stores the task's queue, or the queue given at send", async () => {
    const task = twoQueues.task({
      name: uniqueName('queued'),
      input: pointSchema,
      queue: 'emails',
      handler: () => null,
    });
    const onTaskQueue = await task.send({ x: 1, y: 1 });
    const onOtherQueue = await task.send({ x: 1, y: 2 }, { queue: 'default' });
    expect((await rowOf(onTaskQueue.id))?.queue_name).toBe('emails');
    expect((await rowOf(onOtherQueue.id))?.queue_name).toBe('default');
  });
});

describe('scheduling options', () => {
  it('delayMs: enqueued_at is the database now() plus the delay', async () => {
    const task = pointTask('delay');
    const delayMs = 60_000;
    const [before] = await t.query<{ now: Date }>('SELECT now() AS now');
    const handle = await task.send({ x: 1, y: 1 }, { delayMs });
    const [after] = await t.query<{ now: Date }>('SELECT now() AS now');

    // sent_at is the same statement's now(): the difference is exactly the delay.
    const [diff] = await t.query<{ ms: number }>(
      `SELECT (extract(epoch FROM enqueued_at - sent_at) * 1000)::float8 AS ms
       FROM {{schema}}.horsies_tasks WHERE id = $1`,
      [handle.id],
    );
    expect(diff?.ms).toBe(delayMs);

    const enqueuedAt = (await rowOf(handle.id))?.enqueued_at.getTime() ?? Number.NaN;
    const slack = 5;
    expect(enqueuedAt).toBeGreaterThanOrEqual((before?.now.getTime() ?? Infinity) + delayMs - slack);
    expect(enqueuedAt).toBeLessThanOrEqual((after?.now.getTime() ?? -Infinity) + delayMs + slack);
  });

  it('runAt: enqueued_at is exactly runAt', async () => {
    const task = pointTask('run-at');
    const runAt = new Date(Date.now() + 3_600_000);
    const handle = await task.send({ x: 1, y: 1 }, { runAt });
    expect((await rowOf(handle.id))?.enqueued_at.getTime()).toBe(runAt.getTime());
    expect((await app.getTask(handle.id))?.enqueuedAt.getTime()).toBe(runAt.getTime());
  });

  it('refuses delayMs and runAt together', async () => {
    const task = pointTask('delay-and-run-at');
    const error = await rejectsWithoutStoring(
      () => task.send({ x: 1, y: 1 }, { delayMs: 1000, runAt: new Date(Date.now() + 5000) }),
      SendOptionsError,
    );
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    expect(fields(error.problems)).toContain('runAt');
  });

  it('stores goodUntil', async () => {
    const task = pointTask('good-until');
    const goodUntil = new Date(Date.now() + 10 * 60_000);
    const handle = await task.send({ x: 1, y: 1 }, { goodUntil });
    expect((await rowOf(handle.id))?.good_until?.getTime()).toBe(goodUntil.getTime());
    expect((await app.getTask(handle.id))?.goodUntil?.getTime()).toBe(goodUntil.getTime());
  });
});

describe('idempotent sends', () => {
  it('an explicit id sent twice with the same input gives one task', async () => {
    const task = pointTask('same-id');
    const id = randomUUID();
    const first = await task.send({ x: 1, y: 2 }, { id });
    const second = await task.send({ x: 1, y: 2 }, { id });
    expect(first.id).toBe(id);
    expect(second.id).toBe(id);
    expect(await countRows('id = $1', [id])).toBe(1);
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
  });

  it('an explicit id sent again with a different input is a PayloadMismatchError and changes nothing', async () => {
    const task = pointTask('id-mismatch');
    const id = randomUUID();
    await task.send({ x: 1, y: 2 }, { id });
    const stored = await rowOf(id);

    const error = await rejectsWithoutStoring(() => task.send({ x: 1, y: 3 }, { id }), PayloadMismatchError);
    expect(error.code).toBe('PAYLOAD_MISMATCH');
    expect(error.taskId).toBe(id);
    expect(await rowOf(id)).toEqual(stored);
    expect((await rowOf(id))?.kwargs).toEqual({ x: 1, y: 2 });
  });

  it('an explicit id reused by another task with the same input is a PayloadMismatchError', async () => {
    const one = pointTask('id-owner');
    const other = pointTask('id-thief');
    const id = randomUUID();
    await one.send({ x: 1, y: 1 }, { id });
    const error = await rejectsWithoutStoring(() => other.send({ x: 1, y: 1 }, { id }), PayloadMismatchError);
    expect(error.taskId).toBe(id);
    expect((await rowOf(id))?.task_name).toBe(one.name);
  });

  it("an idempotency key sent twice with the same input returns the first task's id", async () => {
    const task = pointTask('same-key');
    const idempotencyKey = `key-${randomUUID()}`;
    const first = await task.send({ x: 5, y: 6 }, { idempotencyKey });
    const second = await task.send({ x: 5, y: 6 }, { idempotencyKey });
    expect(second.id).toBe(first.id);
    expect(await countRows('idempotency_key = $1', [idempotencyKey])).toBe(1);
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
    expect((await rowOf(first.id))?.idempotency_key).toBe(idempotencyKey);
    expect((await app.getTask(first.id))?.idempotencyKey).toBe(idempotencyKey);
  });

  it('an idempotency key sent again with a different input is a PayloadMismatchError and changes nothing', async () => {
    const task = pointTask('key-mismatch');
    const idempotencyKey = `key-${randomUUID()}`;
    const first = await task.send({ x: 5, y: 6 }, { idempotencyKey });
    const stored = await rowOf(first.id);

    const error = await rejectsWithoutStoring(
      () => task.send({ x: 5, y: 7 }, { idempotencyKey }),
      PayloadMismatchError,
    );
    expect(error.code).toBe('PAYLOAD_MISMATCH');
    expect(error.taskId).toBe(first.id);
    expect(await rowOf(first.id)).toEqual(stored);
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
  });

  it('the key order of the input does not matter (explicit id)', async () => {
    const task = anyTask('key-order-id');
    const id = randomUUID();
    await task.send({ a: 1, b: { c: 2, d: [3, { e: 4, f: 5 }] } }, { id });
    const again = await task.send({ b: { d: [3, { f: 5, e: 4 }], c: 2 }, a: 1 }, { id });
    expect(again.id).toBe(id);
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
  });

  it('the key order of the input does not matter (idempotency key)', async () => {
    const task = anyTask('key-order-key');
    const idempotencyKey = `key-${randomUUID()}`;
    const first = await task.send({ a: 1, b: { c: 2, d: 3 } }, { idempotencyKey });
    const again = await task.send({ b: { d: 3, c: 2 }, a: 1 }, { idempotencyKey });
    expect(again.id).toBe(first.id);
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
  });

  it('sendMany: two items with the same id and input give one task and two handles on it', async () => {
    const task = pointTask('many-same-id');
    const id = randomUUID();
    const handles = await task.sendMany([
      { input: { x: 1, y: 1 }, id },
      { input: { y: 1, x: 1 }, id },
      { input: { x: 2, y: 2 } },
    ]);
    expect(handles).toHaveLength(3);
    expect(handles[0]?.id).toBe(id);
    expect(handles[1]?.id).toBe(id);
    expect(handles[2]?.id).not.toBe(id);
    expect(await countRows('id = $1', [id])).toBe(1);
    expect(await countRows('task_name = $1', [task.name])).toBe(2);
  });

  it('sendMany: two items with the same id and different inputs store nothing', async () => {
    const task = pointTask('many-id-mismatch');
    const id = randomUUID();
    const error = await rejectsWithoutStoring(
      () =>
        task.sendMany([
          { input: { x: 0, y: 0 } },
          { input: { x: 1, y: 1 }, id },
          { input: { x: 1, y: 2 }, id },
        ]),
      PayloadMismatchError,
    );
    expect(error.code).toBe('PAYLOAD_MISMATCH');
    expect(error.taskId).toBe(id);
    expect(await countRows('task_name = $1', [task.name])).toBe(0);
  });

  it('sendMany: an item clashing with a stored task of another input stores none of the others', async () => {
    const task = pointTask('many-stored-mismatch');
    const idempotencyKey = `key-${randomUUID()}`;
    const stored = await task.send({ x: 1, y: 1 }, { idempotencyKey });
    const error = await rejectsWithoutStoring(
      () =>
        task.sendMany([
          { input: { x: 5, y: 5 } },
          { input: { x: 1, y: 2 }, idempotencyKey },
          { input: { x: 6, y: 6 }, id: randomUUID() },
        ]),
      PayloadMismatchError,
    );
    expect(error.taskId).toBe(stored.id);
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
  });

  it('sendMany: two items with the same idempotency key and input both get the first task', async () => {
    const task = pointTask('many-same-key');
    const idempotencyKey = `key-${randomUUID()}`;
    const handles = await task.sendMany([
      { input: { x: 1, y: 1 }, idempotencyKey },
      { input: { x: 1, y: 1 }, idempotencyKey },
    ]);
    expect(handles[1]?.id).toBe(handles[0]?.id);
    expect(await countRows('idempotency_key = $1', [idempotencyKey])).toBe(1);
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
  });

  it('sendMany: two items with the same idempotency key and different inputs store nothing', async () => {
    const task = pointTask('many-key-mismatch');
    const idempotencyKey = `key-${randomUUID()}`;
    const error = await rejectsWithoutStoring(
      () =>
        task.sendMany([
          { input: { x: 1, y: 1 }, idempotencyKey },
          { input: { x: 9, y: 9 } },
          { input: { x: 1, y: 2 }, idempotencyKey },
        ]),
      PayloadMismatchError,
    );
    expect(error.code).toBe('PAYLOAD_MISMATCH');
    expect(await countRows('task_name = $1', [task.name])).toBe(0);
  });

  it('sendMany: an item repeating an earlier send gets the existing task, the others are new', async () => {
    const task = pointTask('many-repeat');
    const idempotencyKey = `key-${randomUUID()}`;
    const earlier = await task.send({ x: 1, y: 1 }, { idempotencyKey });
    const handles = await task.sendMany([
      { input: { x: 2, y: 2 } },
      { input: { x: 1, y: 1 }, idempotencyKey },
      { input: { x: 3, y: 3 } },
    ]);
    expect(handles[1]?.id).toBe(earlier.id);
    expect(new Set(handles.map((h) => h.id)).size).toBe(3);
    expect(await countRows('task_name = $1', [task.name])).toBe(3);
  });

  it('20 concurrent sends with the same idempotency key and input resolve to one task', async () => {
    const task = pointTask('race-key');
    const idempotencyKey = `key-${randomUUID()}`;
    const handles = await Promise.all(
      Array.from({ length: 20 }, () => task.send({ x: 4, y: 2 }, { idempotencyKey })),
    );
    const ids = new Set(handles.map((h) => h.id));
    expect(ids.size).toBe(1);
    expect(await countRows('idempotency_key = $1', [idempotencyKey])).toBe(1);
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
    const [row] = await t.query<{ id: string }>(
      'SELECT id FROM {{schema}}.horsies_tasks WHERE idempotency_key = $1',
      [idempotencyKey],
    );
    expect(ids.has(row?.id ?? '')).toBe(true);
  });

  it('20 concurrent sends with the same explicit id and input resolve to one task', async () => {
    const task = pointTask('race-id');
    const id = randomUUID();
    const handles = await Promise.all(Array.from({ length: 20 }, () => task.send({ x: 4, y: 2 }, { id })));
    expect(new Set(handles.map((h) => h.id))).toEqual(new Set([id]));
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
  });

  it('concurrent sends with the same key and different inputs: one wins, the others get PayloadMismatchError', async () => {
    const task = pointTask('race-mismatch');
    const idempotencyKey = `key-${randomUUID()}`;
    const outcomes = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => task.send({ x: i, y: 0 }, { idempotencyKey })),
    );
    const won = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value.id] : []));
    const lost = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as unknown] : []));
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(9);
    for (const reason of lost) {
      expect(reason).toBeInstanceOf(PayloadMismatchError);
      expect((reason as PayloadMismatchError).taskId).toBe(won[0]);
    }
    expect(await countRows('task_name = $1', [task.name])).toBe(1);
  });
});

describe('a null input', () => {
  /** How each task's input is stored: the jsonb type of its `kwargs` (SQL NULL would be `null` here, not 'null'). */
  async function storedTypes(ids: string[]): Promise<(string | null)[]> {
    const rows = await t.query<{ id: string; type: string | null }>(
      'SELECT id, jsonb_typeof(kwargs) AS type FROM {{schema}}.horsies_tasks WHERE id = ANY($1::text[])',
      [ids],
    );
    const byId = new Map(rows.map((r) => [r.id, r.type]));
    return ids.map((id) => byId.get(id) ?? 'missing');
  }

  function nullTask(label: string) {
    return app.task({ name: uniqueName(label), input: z.null(), handler: () => 'ran' });
  }

  it('send stores JSON null, alone, with an explicit id and with an idempotency key', async () => {
    const task = nullTask('null-send');
    const handles = [
      await task.send(null),
      await task.send(null, { id: randomUUID() }),
      await task.send(null, { idempotencyKey: randomUUID() }),
      await task.send(null, { delayMs: 60_000 }),
    ];
    expect(await storedTypes(handles.map((h) => h.id))).toEqual(['null', 'null', 'null', 'null']);
    expect((await app.getTask(handles[0]!.id))?.input).toBeNull();
  });

  it('sendMany stores JSON null through INSERT (a few), COPY (many) and with keys', async () => {
    const task = nullTask('null-many');
    const few = await task.sendMany([{ input: null }, { input: null }, { input: null, id: randomUUID() }]);
    const many = await task.sendMany(Array.from({ length: 100 }, () => ({ input: null })));
    const keyed = await task.sendMany([
      { input: null, idempotencyKey: randomUUID() },
      { input: null, dedupe: { key: randomUUID() } },
      { input: null },
    ]);
    for (const handles of [few, many, keyed]) {
      const ids = handles.map((h) => h.id);
      expect(await storedTypes(ids)).toEqual(ids.map(() => 'null'));
    }
  });

  it('send and sendMany inside a transaction store JSON null', async () => {
    const task = nullTask('null-tx');
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      const one = await task.send(null, { tx: client });
      const many = await task.sendMany([{ input: null }, { input: null }], { tx: client });
      await client.query('COMMIT');
      expect(await storedTypes([one.id, ...many.map((h) => h.id)])).toEqual(['null', 'null', 'null']);
    } finally {
      client.release();
    }
  });
});

describe('sending inside a transaction', () => {
  const selectById = (): string => `SELECT id FROM "${t.schema}".horsies_tasks WHERE id = ANY($1::text[])`;

  const cases = [
    { api: 'send', end: 'ROLLBACK' },
    { api: 'send', end: 'COMMIT' },
    { api: 'sendMany', end: 'ROLLBACK' },
    { api: 'sendMany', end: 'COMMIT' },
  ] as const;
  it.each(cases)('$api: the tasks exist only inside the transaction until $end', async ({ api, end }) => {
    const task = pointTask(`tx-${api}-${end}`);
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      const handles =
        api === 'send'
          ? [await task.send({ x: 1, y: 1 }, { tx: client })]
          : await task.sendMany(
              [{ input: { x: 1, y: 1 } }, { input: { x: 2, y: 2 } }, { input: { x: 3, y: 3 } }],
              { tx: client },
            );
      const ids = handles.map((h) => h.id);
      expect((await client.query(selectById(), [ids])).rows).toHaveLength(ids.length);
      expect(await countRows('id = ANY($1::text[])', [ids])).toBe(0);
      await client.query(end);
      expect(await countRows('id = ANY($1::text[]) AND status = $2', [ids, 'PENDING'])).toBe(
        end === 'COMMIT' ? ids.length : 0,
      );
    } finally {
      client.release();
    }
  });
});

describe('bad input is refused before anything is stored', () => {
  it('an input that fails the schema is an InputValidationError with the paths of the issues', async () => {
    const task = app.task({
      name: uniqueName('validated'),
      input: z.object({ user: z.object({ email: z.email() }), count: z.number().int() }),
      handler: () => null,
    });
    const error = await rejectsWithoutStoring(
      () => task.send({ user: { email: 'not-an-email' }, count: 1.5 }),
      InputValidationError,
    );
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.taskName).toBe(task.name);
    expect(error.issues.map((i) => i.path)).toEqual(expect.arrayContaining([['user', 'email'], ['count']]));
    expect(error.issues).toHaveLength(2);
    expect(error.message).toContain('user.email');
  });

  it('a BigInt is a NotSerializableError', async () => {
    const task = anyTask('bigint');
    const error = await rejectsWithoutStoring(() => task.send({ amount: 10n }), NotSerializableError);
    expect(error.code).toBe('PAYLOAD_NOT_SERIALIZABLE');
    expect(error.path).toBe('input.amount');
  });

  it('a function is a NotSerializableError', async () => {
    const task = anyTask('function');
    const error = await rejectsWithoutStoring(
      () => task.send({ callbacks: { onDone: () => 1 } }),
      NotSerializableError,
    );
    expect(error.code).toBe('PAYLOAD_NOT_SERIALIZABLE');
    expect(error.path).toBe('input.callbacks.onDone');
  });

  it('a cycle is a NotSerializableError', async () => {
    const task = anyTask('cycle');
    const input: Record<string, unknown> = { name: 'loop' };
    input.self = input;
    const error = await rejectsWithoutStoring(() => task.send(input), NotSerializableError);
    expect(error.code).toBe('PAYLOAD_NOT_SERIALIZABLE');
    expect(error.path).toBe('input.self');
  });

  it('undefined inside an array is a NotSerializableError', async () => {
    const task = anyTask('undefined-in-array');
    const error = await rejectsWithoutStoring(
      () => task.send({ items: ['a', undefined, 'c'] }),
      NotSerializableError,
    );
    expect(error.code).toBe('PAYLOAD_NOT_SERIALIZABLE');
    expect(error.path).toBe('input.items[1]');
  });

  it('a Date accepted by the schema is still a NotSerializableError', async () => {
    const task = app.task({
      name: uniqueName('date'),
      input: z.object({ when: z.date() }),
      handler: () => null,
    });
    const error = await rejectsWithoutStoring(() => task.send({ when: new Date() }), NotSerializableError);
    expect(error.path).toBe('input.when');
    expect(error.message).toMatch(/ISO string/);
  });

  it('a payload over maxPayloadBytes is a PayloadTooLargeError', async () => {
    const task = smallPayloads.task({ name: uniqueName('too-large'), input: z.any(), handler: () => null });
    const input = { s: 'x'.repeat(2000) };
    const error = await rejectsWithoutStoring(() => task.send(input), PayloadTooLargeError);
    expect(error.code).toBe('PAYLOAD_TOO_LARGE');
    expect(error.sizeBytes).toBe(Buffer.byteLength(JSON.stringify(input)));
    expect(error.limitBytes).toBe(1024);
  });

  it('maxPayloadBytes counts bytes, not characters, and admits a payload of exactly the limit', async () => {
    const task = smallPayloads.task({
      name: uniqueName('payload-limit'),
      input: z.any(),
      handler: () => null,
    });
    // '{"s":"' + n characters + '"}' is n + 8 bytes of ASCII.
    const atLimit = await task.send({ s: 'x'.repeat(1016) });
    expect(await rowOf(atLimit.id)).toBeDefined();
    await rejectsWithoutStoring(() => task.send({ s: 'x'.repeat(1017) }), PayloadTooLargeError);
    // 600 characters, but 1,200 bytes of UTF-8.
    const error = await rejectsWithoutStoring(() => task.send({ s: 'é'.repeat(600) }), PayloadTooLargeError);
    expect(error.sizeBytes).toBe(1208);
  });

  it('an unknown queue at send is an UnknownQueueError', async () => {
    const task = pointTask('unknown-queue-send');
    const error = await rejectsWithoutStoring(
      () => task.send({ x: 1, y: 1 }, { queue: 'nowhere' }),
      UnknownQueueError,
    );
    expect(error.code).toBe('UNKNOWN_QUEUE');
    expect(error.queue).toBe('nowhere');
  });

  it('an unknown queue in the task definition is an UnknownQueueError at app.task()', () => {
    const name = uniqueName('unknown-queue-def');
    const error = thrown(
      () => app.task({ name, input: pointSchema, queue: 'nowhere', handler: () => null }),
      UnknownQueueError,
    );
    expect(error.code).toBe('UNKNOWN_QUEUE');
    expect(error.queue).toBe('nowhere');
    expect(app.tasks.has(name)).toBe(false);
  });

  it.each([0, 101, 1.5, -1])('priority %d is a SendOptionsError', async (priority) => {
    const task = pointTask('bad-priority');
    const error = await rejectsWithoutStoring(
      () => task.send({ x: 1, y: 1 }, { priority }),
      SendOptionsError,
    );
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    expect(fields(error.problems)).toEqual(['priority']);
    expect(error.problems[0]?.value).toBe(priority);
  });

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY])('delayMs %d is a SendOptionsError', async (delayMs) => {
    const task = pointTask('bad-delay');
    const error = await rejectsWithoutStoring(() => task.send({ x: 1, y: 1 }, { delayMs }), SendOptionsError);
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    expect(fields(error.problems)).toEqual(['delayMs']);
  });

  it('an invalid Date for runAt is a SendOptionsError', async () => {
    const task = pointTask('bad-run-at');
    const error = await rejectsWithoutStoring(
      () => task.send({ x: 1, y: 1 }, { runAt: new Date('not a date') }),
      SendOptionsError,
    );
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    expect(fields(error.problems)).toEqual(['runAt']);
  });

  it('an invalid Date for goodUntil is a SendOptionsError', async () => {
    const task = pointTask('bad-good-until');
    const error = await rejectsWithoutStoring(
      () => task.send({ x: 1, y: 1 }, { goodUntil: new Date(Number.NaN) }),
      SendOptionsError,
    );
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    expect(fields(error.problems)).toEqual(['goodUntil']);
  });

  it('an id longer than 36 characters is a SendOptionsError', async () => {
    const task = pointTask('long-id');
    const error = await rejectsWithoutStoring(
      () => task.send({ x: 1, y: 1 }, { id: 'x'.repeat(37) }),
      SendOptionsError,
    );
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    expect(fields(error.problems)).toEqual(['id']);
  });

  it('an id of exactly 36 characters is accepted', async () => {
    const task = pointTask('id-36');
    const id = 'y'.repeat(36);
    const handle = await task.send({ x: 1, y: 1 }, { id });
    expect(handle.id).toBe(id);
    expect(await rowOf(id)).toBeDefined();
  });

  it('an idempotency key longer than 255 characters is a SendOptionsError', async () => {
    const task = pointTask('long-key');
    const error = await rejectsWithoutStoring(
      () => task.send({ x: 1, y: 1 }, { idempotencyKey: 'k'.repeat(256) }),
      SendOptionsError,
    );
    expect(fields(error.problems)).toEqual(['idempotencyKey']);
  });

  it('several bad options are all reported at once', async () => {
    const task = pointTask('many-bad-options');
    const error = await rejectsWithoutStoring(
      () =>
        task.send(
          { x: 1, y: 1 },
          {
            priority: 0,
            delayMs: -5,
            runAt: new Date(Date.now() + 60_000),
            id: 'z'.repeat(40),
            idempotencyKey: '',
          },
        ),
      SendOptionsError,
    );
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    const expected = ['delayMs', 'id', 'idempotencyKey', 'priority', 'runAt'];
    expect(fields(error.problems).sort()).toEqual(expected);
    for (const field of expected) expect(error.message).toContain(`${field}:`);
  });

  it('sendMany: one item with bad options stores nothing and names the item', async () => {
    const task = pointTask('many-bad-option');
    const items = Array.from({ length: 5 }, (_, i) => ({ input: { x: i, y: i } }));
    const error = await rejectsWithoutStoring(
      () => task.sendMany(items.map((item, i) => (i === 3 ? { ...item, priority: 0 } : item))),
      SendOptionsError,
    );
    expect(error.code).toBe('INVALID_SEND_OPTIONS');
    expect(error.message).toContain('item 3');
    expect(fields(error.problems)).toEqual(['priority']);
    expect(await countRows('task_name = $1', [task.name])).toBe(0);
  });

  it('sendMany: one item failing the schema stores nothing and names the item', async () => {
    const task = pointTask('many-bad-input');
    const items = Array.from({ length: 5 }, (_, i) => ({ input: { x: i, y: i } }));
    items[2] = { input: { x: 2, y: Number.NaN } };
    const error = await rejectsWithoutStoring(() => task.sendMany(items), InputValidationError);
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.message).toContain('item 2');
    expect(await countRows('task_name = $1', [task.name])).toBe(0);
  });

  it('sendMany: one item that is not serializable stores nothing and names the item', async () => {
    const task = anyTask('many-not-serializable');
    const items: { input: unknown }[] = Array.from({ length: 5 }, (_, i) => ({ input: { n: i } }));
    items[4] = { input: { n: 4n } };
    const error = await rejectsWithoutStoring(() => task.sendMany(items), NotSerializableError);
    expect(error.code).toBe('PAYLOAD_NOT_SERIALIZABLE');
    expect(error.path).toBe('input.n');
    expect(error.message).toContain('item 4');
    expect(await countRows('task_name = $1', [task.name])).toBe(0);
  });
});

describe('config validation', () => {
  it('a bad queue name is a ConfigError', () => {
    const error = thrown(() => t.app({ queues: ['Bad Queue'] }), ConfigError);
    expect(error.code).toBe('CONFIG_INVALID');
    expect(fields(error.problems)).toEqual(['queues.0']);
    expect(error.problems[0]?.value).toBe('Bad Queue');
  });

  it('poolSize 0 is a ConfigError', () => {
    const error = thrown(() => t.app({ poolSize: 0 }), ConfigError);
    expect(error.code).toBe('CONFIG_INVALID');
    expect(fields(error.problems)).toEqual(['poolSize']);
  });

  it('a bad schema name is a ConfigError', () => {
    const error = thrown(() => t.app({ schema: 'Bad-Schema' }), ConfigError);
    expect(error.code).toBe('CONFIG_INVALID');
    expect(fields(error.problems)).toContain('schema');
    expect(new Set(fields(error.problems))).toEqual(new Set(['schema']));
  });

  it('an unknown option is a ConfigError', () => {
    const config = { colour: 'blue' } as unknown as AppConfig;
    const error = thrown(() => t.app(config), ConfigError);
    expect(error.code).toBe('CONFIG_INVALID');
    expect(fields(error.problems)).toEqual(['colour']);
    expect(error.problems[0]?.message).toMatch(/not a known option/);
  });

  it('several bad fields are all reported at once', () => {
    const config = {
      queues: ['Bad Queue'],
      poolSize: 0,
      schema: 'Bad-Schema',
      maxPayloadBytes: 1,
      colour: 'blue',
    } as unknown as AppConfig;
    const error = thrown(() => t.app(config), ConfigError);
    expect(error.code).toBe('CONFIG_INVALID');
    expect([...new Set(fields(error.problems))].sort()).toEqual([
      'colour',
      'maxPayloadBytes',
      'poolSize',
      'queues.0',
      'schema',
    ]);
    for (const field of ['colour', 'maxPayloadBytes', 'poolSize', 'queues.0', 'schema']) {
      expect(error.message).toContain(field);
    }
  });

  it('a defaultQueue that is not one of the queues is a ConfigError', () => {
    const error = thrown(() => t.app({ queues: ['a'], defaultQueue: 'b' }), ConfigError);
    expect(fields(error.problems)).toEqual(['defaultQueue']);
  });

  it('a duplicate task name is a ConfigError', () => {
    const name = uniqueName('duplicate');
    const first = app.task({ name, input: pointSchema, handler: () => 1 });
    const error = thrown(() => app.task({ name, input: pointSchema, handler: () => 2 }), ConfigError);
    expect(error.code).toBe('CONFIG_INVALID');
    expect(fields(error.problems)).toEqual(['name']);
    expect(app.tasks.get(name)).toBe(first);
  });

  it.each([0, 101, 2.5])('priority %d in the task definition is a ConfigError', (priority) => {
    const name = uniqueName('bad-def-priority');
    const error = thrown(
      () => app.task({ name, input: pointSchema, priority, handler: () => 1 }),
      ConfigError,
    );
    expect(error.code).toBe('CONFIG_INVALID');
    expect(fields(error.problems)).toEqual(['priority']);
    expect(app.tasks.has(name)).toBe(false);
  });
});

describe('handle.result', () => {
  /** Inserts a terminal row by hand, as an older version or an operator might have written it. */
  async function insertTerminal(
    status: 'COMPLETED' | 'FAILED',
    result: string | null,
    errorCode: string | null,
  ) {
    const id = randomUUID();
    await t.query(
      `INSERT INTO {{schema}}.horsies_tasks
         (id, task_name, queue_name, status, completed_at, failed_at, finished_at, result, error_code)
       VALUES ($1, 'hand-written', 'default', $2::text,
               CASE WHEN $2::text = 'COMPLETED' THEN now() END,
               CASE WHEN $2::text = 'FAILED' THEN now() END,
               now(), $3::jsonb, $4)`,
      [id, status, result, errorCode],
    );
    return id;
  }

  it.each([
    ['COMPLETED with a bare string result', 'COMPLETED', '"garbage"', null],
    ['COMPLETED with no result', 'COMPLETED', null, null],
    ['COMPLETED with an error envelope', 'COMPLETED', '{"err":{"code":"BOOM","message":"x"}}', null],
    ['FAILED with no result and no error code', 'FAILED', null, null],
    ['FAILED with a malformed error envelope', 'FAILED', '{"err":{"code":"not a code","message":5}}', null],
    ['FAILED with an array result', 'FAILED', '[1,2]', null],
  ] as const)(
    'a row %s resolves RESULT_NOT_AVAILABLE instead of throwing',
    async (_label, status, result, code) => {
      const id = await insertTerminal(status, result, code);
      const outcome = await app.handle(id).result({ timeoutMs: 2000 });
      expect(outcome.ok).toBe(false);
      if (outcome.ok) return;
      expect(outcome.error.code).toBe('RESULT_NOT_AVAILABLE');
    },
  );

  it('a PENDING task with no worker resolves WAIT_TIMEOUT', async () => {
    const task = pointTask('no-worker');
    const handle = await task.send({ x: 1, y: 1 });
    const outcome = await handle.result({ timeoutMs: 200 });
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.error.code).toBe('WAIT_TIMEOUT');
    expect((await rowOf(handle.id))?.status).toBe('PENDING');
  });

  it('a missing task resolves TASK_NOT_FOUND', async () => {
    const outcome = await app.handle('missing-id').result({ timeoutMs: 2000 });
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.error.code).toBe('TASK_NOT_FOUND');
  });
});

describe('sendMany at scale', () => {
  it('sends 10,000 tasks in one call, in order, with one notification per channel', async () => {
    const task = app.task({
      name: uniqueName('bulk'),
      input: z.object({ n: z.number() }),
      handler: () => null,
    });
    const taskNew = `${t.schema}:task_new`;
    const taskQueue = `${t.schema}:task_queue_default`;
    const listening = await listenTo([taskNew, taskQueue]);
    const { received } = listening;
    try {
      const items = Array.from({ length: 10_000 }, (_, n) => ({ input: { n } }));
      const started = performance.now();
      const handles = await task.sendMany(items);
      const elapsedMs = Math.round(performance.now() - started);

      expect(handles).toHaveLength(10_000);
      expect(new Set(handles.map((h) => h.id)).size).toBe(10_000);
      const rows = await t.query<{ id: string; n: number }>(
        `SELECT id, (kwargs->>'n')::int AS n FROM {{schema}}.horsies_tasks WHERE task_name = $1`,
        [task.name],
      );
      expect(rows).toHaveLength(10_000);
      const nById = new Map(rows.map((r) => [r.id, r.n]));
      const outOfOrder = handles.filter((h, i) => nById.get(h.id) !== i);
      expect(outOfOrder).toHaveLength(0);

      // Statement-level trigger: one notification per channel and queue, not one per row.
      await listening.settled();
      console.log(`sendMany of 10,000 tasks: ${elapsedMs} ms; notifications received: ${received.length}`);
      expect(received.length).toBeLessThanOrEqual(2);
      expect(received).toEqual(
        expect.arrayContaining([
          { channel: taskNew, payload: 'default' },
          { channel: taskQueue, payload: '' },
        ]),
      );
    } finally {
      await listening.end();
    }
  });
});
