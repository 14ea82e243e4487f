/** Database.transaction survives a connection lost between its queries. */
import { describe, expect, it } from 'vitest';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();

describe('Database.transaction', () => {
  it('rejects, without an uncaught error, when its connection dies between two queries; the pool goes on', async () => {
    const app = t.app({ poolSize: 1 });
    let release: () => void = () => undefined;
    const paused = new Promise<void>((resolve) => (release = resolve));
    let pid = 0;
    const inside = app.db.transaction(async (client) => {
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      pid = rows[0]!.pid;
      await paused;
      await client.query('SELECT 1');
    });
    await expect.poll(() => pid).not.toBe(0);
    await t.query('SELECT pg_terminate_backend($1)', [pid]);
    // The client's 'error' event fires now, while the callback waits: without a listener it would be thrown
    // as an uncaught exception and take the process down.
    await expect
      .poll(async () => (await t.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).length)
      .toBe(0);
    release();
    await expect(inside).rejects.toThrow();
    // The broken connection was discarded: the single-connection pool still answers.
    const { rows } = await app.db.pool.query<{ one: number }>('SELECT 1 AS one');
    expect(rows).toEqual([{ one: 1 }]);
  });
});
