/**
 * A send that repeats an idempotency key finds the stored task through an index whatever the table looked like when
 * the connection planned the statement: a connection that sent keyed tasks while the table was nearly empty (a new
 * deployment) must not read the whole table for each repeated key once it holds thousands of rows. The plans are
 * read with auto_explain, which logs the plan each statement actually ran with (the one the connection cached).
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { databaseUrl, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

describe('plans of keyed sends', () => {
  it('find a repeated key through its index after the table grows from empty, without an ANALYZE in between', async () => {
    // One connection, so that the sends' prepared statement and its cached plan are that connection's.
    const pool = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
    const notices: string[] = [];
    pool.on('connect', (client) => client.on('notice', (n) => notices.push(n.message ?? '')));
    try {
      const app = t.app({ pool });
      const keyed = app.task({
        name: 'plans.keyed',
        input: z.object({ i: z.number() }),
        handler: () => null,
      });
      await t.query(`ALTER TABLE {{schema}}.horsies_tasks SET (autovacuum_enabled = false)`);
      // Planned on a nearly empty table: the repeat of a key runs the lookup of the stored task, often enough for
      // the connection to keep one plan for it.
      const first = await keyed.send({ i: 0 }, { idempotencyKey: 'plans-key' });
      for (let i = 0; i < 8; i++) {
        expect((await keyed.send({ i: 0 }, { idempotencyKey: 'plans-key' })).id).toBe(first.id);
      }
      await keyed.sendMany(Array.from({ length: 20_000 }, (_, i) => ({ input: { i } })));
      await pool.query(`LOAD 'auto_explain'`);
      await pool.query(
        `SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
         SET auto_explain.log_level = notice`,
      );
      notices.length = 0;
      expect((await keyed.send({ i: 0 }, { idempotencyKey: 'plans-key' })).id).toBe(first.id);
      await pool.query('SET auto_explain.log_min_duration = -1');
      const plans = notices.filter((n) => n.includes('plan:'));
      expect(plans.length).toBeGreaterThan(0);
      expect(plans.filter((p) => /Seq Scan on horsies_tasks/.test(p))).toEqual([]);
    } finally {
      await pool.end();
    }
  });
});
