/**
 * A lone send of a task that cannot repeat (a generated id, no idempotency key) is one INSERT of its values; it
 * must store every column as the batch insert of `sendMany` does. A lone send with an id or a key still goes
 * through the insert that resolves repeats.
 */
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { SendOptions } from '../../src/client/sendOptions.js';
import type { TaskRow } from '../../src/db/tasks.js';
import { PayloadMismatchError } from '../../src/errors.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app({ queues: ['default', { name: 'emails', retentionMs: 60_000 }] });
const task = app.task({
  name: 'one.columns',
  input: z.object({ n: z.number(), note: z.string().optional() }),
  priority: 7,
  retry: { maxRetries: 2, retryOn: ['BOOM'] },
  handler: () => null,
});

/** Names of the horsies statements every node-postgres client runs from now on. */
function watchStatements(): () => string[] {
  const spy = vi.spyOn(pg.Client.prototype, 'query');
  return () =>
    spy.mock.calls.flatMap((call) => {
      const name = (call[0] as { name?: unknown } | null)?.name;
      return typeof name === 'string' && name.includes('TaskInsert')
        ? [(/TaskInsert[A-Za-z]+/.exec(name) as RegExpExecArray)[0]]
        : [];
    });
}

afterEach(() => {
  vi.restoreAllMocks();
});

/** A task's row as two sends of the same input and options must agree on: times relative to the insert. */
async function stored(id: string, runAt: boolean): Promise<Record<string, unknown>> {
  const [row] = await t.query<TaskRow & { created_at: Date }>(
    'SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  const { id: _id, created_at, updated_at: _updated, sent_at, enqueued_at, ...rest } = row!;
  return {
    ...rest,
    sent: sent_at.getTime() === created_at.getTime() ? 'at the insert' : sent_at.toISOString(),
    enqueued: runAt
      ? enqueued_at.toISOString()
      : `${enqueued_at.getTime() - created_at.getTime()} ms after the insert`,
  };
}

const SENDS: { name: string; options: SendOptions }[] = [
  { name: 'no options', options: {} },
  { name: 'a delay', options: { delayMs: 60_000 } },
  { name: 'a start time', options: { runAt: new Date(Date.now() + 3_600_000) } },
  {
    name: 'a deadline, a priority, a queue with its retention, a group',
    options: { goodUntil: new Date(Date.now() + 7_200_000), priority: 3, queue: 'emails', group: 'tenant-1' },
  },
  { name: 'a sent time', options: { sentAt: new Date(Date.now() - 60_000) } },
];

describe('a lone send', () => {
  it('is one INSERT of its values and stores every column as a batch insert does', async () => {
    for (const { name, options } of SENDS) {
      const statements = watchStatements();
      const input = { n: 1, note: 'é ☃ "quoted" \\ back' };
      const one = await task.send(input, options);
      const [many] = await task.sendMany([{ input, ...options }, { input: { n: 2 } }]);
      expect(statements(), name).toEqual(['TaskInsertOne', 'TaskInsertMany']);
      vi.restoreAllMocks();
      const runAt = options.runAt !== undefined;
      const alone = await stored(one.id, runAt);
      expect(alone, name).toEqual(await stored(many!.id, runAt));
      expect(alone, name).toMatchObject({ status: 'PENDING', kwargs: input, max_retries: 2 });
    }
    const withOptions = await stored((await task.send({ n: 3 }, SENDS[3]!.options)).id, false);
    expect(withOptions).toMatchObject({
      priority: 3,
      queue_name: 'emails',
      group_key: 'tenant-1',
      retention_ms: '60000',
    });
  });

  it('with an id or an idempotency key still resolves repeats: the same payload is the same task', async () => {
    const statements = watchStatements();
    const first = await task.send({ n: 4 }, { idempotencyKey: 'one-key' });
    const again = await task.send({ n: 4 }, { idempotencyKey: 'one-key' });
    const named = await task.send({ n: 5 }, { id: 'one-named-task' });
    expect(statements()).toEqual(['TaskInsertMany', 'TaskInsertMany', 'TaskInsertMany']);
    expect(again.id).toBe(first.id);
    expect(named.id).toBe('one-named-task');
    await expect(task.send({ n: 6 }, { id: 'one-named-task' })).rejects.toBeInstanceOf(PayloadMismatchError);
  });

  it("joins the caller's transaction: nothing is stored if it rolls back", async () => {
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      const handle = await task.send({ n: 7 }, { tx: client });
      await client.query('ROLLBACK');
      expect(await t.query('SELECT id FROM {{schema}}.horsies_tasks WHERE id = $1', [handle.id])).toEqual([]);
    } finally {
      client.release();
    }
  });
});
