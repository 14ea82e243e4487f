/**
 * HeldTransaction on a pool in pipeline mode: BEGIN written at checkout without waiting, the statement and the
 * COMMIT written back to back. Covered: the first statements, with parameters or without, inside the transaction
 * (rolled back with it); a finish committing with or without statements before; a statement that raises turning
 * the COMMIT into a rollback; a failed statement of the caller; the connection reused after each; the same on a
 * pool not in pipeline mode; a connection left inside a transaction refused; a value pg would have to convert
 * refused before anything is written.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { HeldTransaction, createTransactionPool } from '../../src/db/HeldTransaction.js';
import { statement } from '../../src/db/sql.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
await t.query('CREATE TABLE {{schema}}.held (note text NOT NULL)');
const app = t.app();
const pool = createTransactionPool(app.db, 1);
const plainPool = new pg.Pool({ ...app.db.untimedConnectionConfig, max: 1 });
afterAll(() => Promise.all([pool.end(), plainPool.end()]));

const insert = `INSERT INTO "${t.schema}".held (note) VALUES ($1)`;
const notes = async (): Promise<string[]> =>
  (await t.query<{ note: string }>('SELECT note FROM {{schema}}.held ORDER BY note')).map((r) => r.note);
/** Returns 1/divisor: raises (22012) when the divisor is 0. */
const Divide = statement<{ divisor: number }, { q: number }>(
  'HeldDivide',
  'SELECT 1 / $1::int AS q, txid_current_if_assigned() IS NOT NULL AS wrote',
  ({ divisor }) => [divisor],
);

describe('HeldTransaction', () => {
  it('takes pipeline connections and runs the first statements inside the transaction', async () => {
    await t.query('TRUNCATE {{schema}}.held');
    const held = await HeldTransaction.begin(pool);
    expect(held.client.pipeline).toBe(true);
    await held.client.query(insert, ['with parameters']);
    await held.client.query(`INSERT INTO "${t.schema}".held (note) VALUES ('second')`);
    await held.rollback();
    const plain = await HeldTransaction.begin(pool);
    await plain.client.query(`INSERT INTO "${t.schema}".held (note) VALUES ('without parameters')`);
    await plain.client.query(insert, ['then with']);
    await plain.rollback();
    expect(await notes()).toEqual([]);
  });

  for (const [name, which] of [
    ['in pipeline mode', pool],
    ['not in pipeline mode', plainPool],
  ] as const) {
    it(`commits a statement with its COMMIT, with or without statements before (${name})`, async () => {
      await t.query('TRUNCATE {{schema}}.held');
      const held = await HeldTransaction.begin(which);
      await held.client.query(insert, ['committed']);
      expect(await held.commitAfter(app.db, Divide, { divisor: 1 })).toEqual({
        committed: true,
        rows: [{ q: 1, wrote: true }],
      });
      const empty = await HeldTransaction.begin(which);
      expect(await empty.commitAfter(app.db, Divide, { divisor: 1 })).toEqual({
        committed: true,
        rows: [{ q: 1, wrote: false }],
      });
      expect(await notes()).toEqual(['committed']);
    });

    it(`rolls back when the statement raises, and the connection goes on (${name})`, async () => {
      await t.query('TRUNCATE {{schema}}.held');
      const held = await HeldTransaction.begin(which);
      await held.client.query(insert, ['vetoed']);
      const outcome = await held.commitAfter(app.db, Divide, { divisor: 0 });
      expect(outcome.committed).toBe(false);
      expect((outcome as { error: { code?: string } }).error.code).toBe('22012');
      expect(await notes()).toEqual([]);
      // The same connection (a pool of one) starts the next transaction cleanly.
      const next = await HeldTransaction.begin(which);
      await next.client.query(insert, ['next']);
      expect((await next.commitAfter(app.db, Divide, { divisor: 1 })).committed).toBe(true);
      expect(await notes()).toEqual(['next']);
    });
  }

  it('rolls back a statement of the caller that failed, and the connection goes on', async () => {
    await t.query('TRUNCATE {{schema}}.held');
    const held = await HeldTransaction.begin(pool);
    await held.client.query(insert, ['before the failure']);
    await expect(
      held.client.query(`INSERT INTO "${t.schema}".nowhere (note) VALUES ($1)`, ['x']),
    ).rejects.toThrow(/nowhere/);
    // Committing after the failure commits nothing: the transaction is aborted.
    const outcome = await held.commitAfter(app.db, Divide, { divisor: 1 });
    expect(outcome.committed).toBe(false);
    expect((outcome as { error: { code?: string } }).error.code).toBe('25P02');
    const next = await HeldTransaction.begin(pool);
    await next.client.query(insert, ['after a failure']);
    expect((await next.commitAfter(app.db, Divide, { divisor: 1 })).committed).toBe(true);
    expect(await notes()).toEqual(['after a failure']);
  });

  it('refuses a connection left inside a transaction, and closes it', async () => {
    const left = await plainPool.connect();
    await left.query('BEGIN');
    left.release();
    await expect(HeldTransaction.begin(plainPool)).rejects.toThrow(/not idle \(transaction status T\)/);
    expect(plainPool.totalCount).toBe(0);
    const next = await HeldTransaction.begin(plainPool);
    expect((await next.commitAfter(app.db, Divide, { divisor: 1 })).committed).toBe(true);
  });

  it('refuses a value that is not plain before writing the statement or the COMMIT', async () => {
    await t.query('TRUNCATE {{schema}}.held');
    const Odd = statement<{ note: object }, never>('HeldOdd', `SELECT $1::text AS note`, ({ note }) => [
      note,
    ]);
    const held = await HeldTransaction.begin(pool);
    await held.client.query(insert, ['kept out']);
    await expect(held.commitAfter(app.db, Odd, { note: { toPostgres: () => 'x' } })).rejects.toThrow(
      /HeldOdd: a value is not a string/,
    );
    expect(held.open).toBe(true);
    await held.rollback();
    expect(await notes()).toEqual([]);
  });
});
