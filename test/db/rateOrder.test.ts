/**
 * Starts under a rate limiter are recorded in the order their statements take the limiter's row lock. A statement
 * whose now() is older than a start another statement recorded first (it began earlier but took the lock later)
 * counts that start and records its own no earlier than it (migration 23): it neither fails nor passes the limit.
 */
import { describe, expect, it } from 'vitest';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const INTERVAL_MS = 60_000;

/** horsies_rate_acquire then horsies_rate_record of what it granted (up to `want`), on `client`'s transaction. */
async function startUnder(
  client: { query: (sql: string, values?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }> },
  key: string,
  max: number,
  want: number,
): Promise<number> {
  const schema = `"${t.schema}"`;
  const { rows } = await client.query(
    `SELECT room FROM ${schema}.horsies_rate_acquire($1::text[], $2::int[], $3::int[], now(), $4)`,
    [[key], [max], [INTERVAL_MS], want],
  );
  const room = Number(rows[0]!.room);
  await client.query(`SELECT ${schema}.horsies_rate_record($1::text[], $2::int[], now(), $3)`, [
    [key],
    [INTERVAL_MS],
    room,
  ]);
  return room;
}

async function window(key: string): Promise<{ at: Date[]; count: number[] }> {
  const [row] = await t.query<{ at: Date[]; count: number[] }>(
    `SELECT window_at AS at, window_count AS count FROM {{schema}}.horsies_rate_limiters WHERE limiter_key = $1`,
    [key],
  );
  return row!;
}

describe('rate limiter: starts recorded out of their statements order', () => {
  it('count a start recorded by a later statement, and record theirs no earlier than it', async () => {
    const key = 'order:overtaken';
    const early = await t.pool.connect();
    const late = await t.pool.connect();
    try {
      // `early` begins first (its now() is fixed), `late` begins after it but records a start first.
      await early.query('BEGIN');
      const earlyNow = (await early.query<{ now: Date }>('SELECT now()')).rows[0]!.now;
      await new Promise((resolve) => setTimeout(resolve, 20));
      await late.query('BEGIN');
      expect(await startUnder(late, key, 2, 1)).toBe(1);
      await late.query('COMMIT');
      const recorded = await window(key);
      expect(recorded.at[0]!.getTime()).toBeGreaterThan(earlyNow.getTime());

      // Room for one more of the two, though `early` asks for five; before migration 23 this raised 40001.
      expect(await startUnder(early, key, 2, 5)).toBe(1);
      await early.query('COMMIT');
      // One pair, at the later statement's time (never moved back to the earlier one), counting both starts.
      expect(await window(key)).toEqual({ at: recorded.at, count: [2] });

      // The limit holds for whoever comes next.
      await late.query('BEGIN');
      expect(await startUnder(late, key, 2, 1)).toBe(0);
      await late.query('COMMIT');
    } finally {
      // Whatever failed, the connections go back to the pool outside a transaction.
      for (const client of [early, late]) {
        await client.query('ROLLBACK');
        client.release();
      }
    }
  });

  it('still record starts in their own time when they come in order', async () => {
    const key = 'order:in_order';
    const client = await t.pool.connect();
    try {
      const times: Date[] = [];
      for (let i = 0; i < 2; i += 1) {
        await client.query('BEGIN');
        times.push((await client.query<{ now: Date }>('SELECT now()')).rows[0]!.now);
        expect(await startUnder(client, key, 5, 1)).toBe(1);
        await client.query('COMMIT');
      }
      // The second start joined the first pair (within 1/32 of the interval), which took its time.
      expect(await window(key)).toEqual({ at: [times[1]], count: [2] });
    } finally {
      client.release();
    }
  });
});
