/**
 * The group key a task carries (the `group` send option): stored on the row by every send path (one INSERT, a bulk
 * INSERT, a COPY, a caller's transaction), returned by `getTask`, refused when it is not a bounded non-empty string,
 * and served by the two partial indexes the claim side reads.
 */
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { TaskRow } from '../../src/db/tasks.js';
import { SendOptionsError } from '../../src/errors.js';
import { rejection } from '../support/assertions.js';
import { runCli } from '../support/cli.js';
import { databaseUrl, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app({ queues: ['default', 'emails'] });

let sequence = 0;
function groupTask(label: string) {
  sequence += 1;
  return app.task({
    name: `group-${label}-${sequence}`,
    input: z.object({ n: z.number() }),
    handler: () => null,
  });
}

async function rowsOf(taskName: string): Promise<TaskRow[]> {
  return t.query<TaskRow>('SELECT * FROM {{schema}}.horsies_tasks WHERE task_name = $1 ORDER BY id', [
    taskName,
  ]);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('group key', () => {
  it('is stored by a send and returned by getTask and the handle', async () => {
    const task = groupTask('one');
    const grouped = await task.send({ n: 1 }, { group: 'tenant-42' });
    const plain = await task.send({ n: 2 });

    const info = await app.getTask(grouped.id);
    expect(info?.group).toBe('tenant-42');
    expect((await plain.info())?.group).toBeNull();
    const rows = await rowsOf(task.name);
    expect(rows.map((r) => r.group_key)).toEqual(['tenant-42', null]);
  });

  it('is carried by sendMany, on the INSERT path and on the COPY path', async () => {
    const small = groupTask('small');
    await small.sendMany([
      { input: { n: 0 }, group: 'a' },
      { input: { n: 1 } },
      { input: { n: 2 }, group: 'b' },
    ]);
    expect((await rowsOf(small.name)).map((r) => r.group_key)).toEqual(['a', null, 'b']);

    const large = groupTask('copy');
    const spy = vi.spyOn(pg.Client.prototype, 'query');
    const groups = ['tab\there', 'tenant-1', 'é ☃', '\\N'];
    await large.sendMany(
      Array.from({ length: 200 }, (_, n) => ({
        input: { n },
        ...(n % 5 === 0 ? {} : { group: groups[n % groups.length] as string }),
      })),
    );
    const copies = spy.mock.calls.flatMap((c) => {
      const text = (c[0] as { text?: unknown } | undefined)?.text;
      return typeof text === 'string' && text.startsWith('COPY') ? [text] : [];
    });
    expect(copies).toHaveLength(1);
    expect(copies[0]).toContain('group_key');
    const rows = await rowsOf(large.name);
    expect(rows).toHaveLength(200);
    for (const row of rows) {
      const n = (row.kwargs as { n: number }).n;
      expect(row.group_key).toBe(n % 5 === 0 ? null : groups[n % groups.length]);
    }
  });

  it('is written inside the caller’s transaction and rolled back with it', async () => {
    const task = groupTask('tx');
    const client = await t.pool.connect();
    try {
      await client.query('BEGIN');
      const handle = await task.send({ n: 1 }, { group: 'g', tx: client });
      await client.query('ROLLBACK');
      expect(await app.getTask(handle.id)).toBeNull();
      await client.query('BEGIN');
      const kept = await task.send({ n: 2 }, { group: 'g', tx: client });
      await client.query('COMMIT');
      expect((await app.getTask(kept.id))?.group).toBe('g');
    } finally {
      client.release();
    }
  });

  it('refuses an empty, too long or non-string group with SendOptionsError, storing nothing', async () => {
    const task = groupTask('bad');
    for (const group of ['', 'x'.repeat(256), 42 as unknown as string]) {
      const error = await rejection(task.send({ n: 1 }, { group }), SendOptionsError);
      expect(error.problems.map((p) => p.field)).toEqual(['group']);
      expect(error.message).toContain('group: must be a string of 1 to 255 characters');
    }
    const error = await rejection(
      task.sendMany([
        { input: { n: 1 }, group: 'ok' },
        { input: { n: 2 }, group: '' },
      ]),
      SendOptionsError,
    );
    expect(error.message).toContain('sendMany item 1');
    expect(await rowsOf(task.name)).toEqual([]);
    expect((await task.send({ n: 3 }, { group: 'x'.repeat(255) })).id).toBeTruthy();
  });

  it('is shown by horsies tasks show, with a dedupe key beside it', async () => {
    const task = groupTask('cli');
    const handle = await task.send({ n: 1 }, { group: 'tenant-42', dedupe: { key: 'k', scope: 'running' } });
    const run = await runCli(['tasks', 'show', handle.id, '--schema', t.schema], {
      DATABASE_URL: databaseUrl(),
    });
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines).toContainEqual(expect.stringMatching(/^group\s+tenant-42$/));
    expect(lines).toContainEqual(expect.stringMatching(/^dedupe key\s+k \(running, held\)$/));
  });

  it('has the partial indexes a per-group claim reads, neither naming status', async () => {
    const rows = await t.query<{ indexname: string; indexdef: string }>(
      `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname LIKE 'horsies_tasks_group%'`,
      [t.schema],
    );
    const defs = new Map(rows.map((r) => [r.indexname, r.indexdef]));
    expect(defs.get('horsies_tasks_group_in_flight_idx')).toMatch(
      /\(queue_name, group_key\) WHERE \(claimed AND \(group_key IS NOT NULL\)\)/,
    );
    expect(defs.get('horsies_tasks_group_pending_idx')).toMatch(
      /\(queue_name, group_key, priority, enqueued_at, id\) WHERE \(\(NOT claimed\) AND \(finished_at IS NULL\) AND \(group_key IS NOT NULL\)\)/,
    );
    for (const def of defs.values()) expect(def).not.toContain('status');
  });
});
