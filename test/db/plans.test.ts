/**
 * The claim, the start and the finish reach tasks through an index whatever the table looked like when a
 * connection planned them: a worker that starts on an empty table (a new deployment) must not keep reading the
 * whole table once it holds thousands of rows. The plans are read with auto_explain, which logs the plan each
 * statement inside these functions actually ran with (the one the connection cached).
 */
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();

/** The plans auto_explain reports for what `run` executes on `client`, one string per statement. */
async function plansOf(client: pg.PoolClient, run: () => Promise<unknown>): Promise<string[]> {
  const plans: string[] = [];
  const onNotice = (notice: { message?: string }): void => {
    if (notice.message?.includes('plan:')) plans.push(notice.message);
  };
  client.on('notice', onNotice);
  await client.query(
    `SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
     SET auto_explain.log_level = notice`,
  );
  try {
    await run();
  } finally {
    await client.query('SET auto_explain.log_min_duration = -1');
    client.off('notice', onNotice);
  }
  return plans;
}

/**
 * The index scans of horsies_tasks in a plan that have no index condition: they read the whole index, which is
 * what a plan made on a nearly empty table does when sequential scans are off.
 */
function wholeIndexScans(plan: string): string[] {
  const lines = plan.split('\n');
  return lines.flatMap((line, i) => {
    if (!/Index (Only )?Scan .* on horsies_tasks\b/.test(line)) return [];
    const depth = line.search(/\S/);
    const details = [];
    for (const next of lines.slice(i + 1)) {
      if (next.search(/\S/) <= depth || next.trimStart().startsWith('->')) break;
      details.push(next);
    }
    return details.some((d) => d.includes('Index Cond')) ? [] : [line.trim()];
  });
}

describe('plans of the hot path', () => {
  const clients: pg.PoolClient[] = [];
  afterAll(() => clients.forEach((c) => c.release()));

  it('keep index lookups after the table grows from empty, without an ANALYZE in between', async () => {
    const app = t.app();
    const noop = app.task({ name: 'plans.noop', input: z.object({ i: z.number() }), handler: () => null });
    const client = await t.pool.connect();
    clients.push(client);
    await client.query(`LOAD 'auto_explain'`);
    const s = `"${t.schema}"`;
    const claim = (limit: number, start: number) =>
      client.query<{ id: string; claim_generation: number; status: string }>(
        `SELECT * FROM ${s}.horsies_claim_and_start('default', ARRAY['plans.noop'], $1, 60000, 'plans-worker',
           'host', 1, 'proc', $2, true)`,
        [limit, start],
      );
    const finish = (ids: string[], generations: number[], status = 'COMPLETED') =>
      client.query(
        `SELECT * FROM ${s}.horsies_finish_tasks($1::text[], $2::text[], $3::int[], $4::text[], $5::jsonb[],
           $6::text[], $7::text[], $8::text[], $9::int[], $10::bool[], false, false)`,
        [
          ids,
          ids.map(() => 'plans-worker'),
          generations,
          ids.map(() => status),
          ids.map(() =>
            status === 'COMPLETED' ? '{"ok":null}' : '{"err":{"code":"FLAKY","message":"again"}}',
          ),
          ids.map(() => (status === 'COMPLETED' ? null : 'FLAKY')),
          ids.map(() => null),
          ids.map(() => null),
          ids.map(() => 0),
          ids.map(() => false),
        ],
      );
    const start = (ids: string[], generations: number[]) =>
      client.query(
        `SELECT * FROM ${s}.horsies_start_tasks('plans-worker', $1::text[], $2::text[], true, '{}')`,
        [ids, ids.map((id, i) => `${id}:${generations[i]}`)],
      );

    // No ANALYZE may replan them later (autovacuum would, after the rows added below); set before the plans are
    // made, since changing a table's settings makes its plans be made again.
    await t.query(`ALTER TABLE {{schema}}.horsies_tasks SET (autovacuum_enabled = false)`);
    // Planned on the empty table: each function runs a few times so that its plans are cached.
    for (let i = 0; i < 6; i++) {
      await claim(1, 1);
      await finish(['none'], [1]);
      await finish(['none'], [1], 'RETRY');
      await start(['none'], [1]);
    }

    await noop.sendMany(Array.from({ length: 20_000 }, (_, i) => ({ input: { i } })));
    const plans = await plansOf(client, async () => {
      const running = (await claim(1, 1)).rows;
      expect(running.map((r) => r.status)).toEqual(['RUNNING']);
      const claimed = (await claim(1, 0)).rows;
      expect(claimed.map((r) => r.status)).toEqual(['CLAIMED']);
      const started = await start(
        claimed.map((r) => r.id),
        claimed.map((r) => r.claim_generation),
      );
      expect(started.rows).toHaveLength(1);
      const both = [...running, ...claimed];
      const finished = await finish(
        both.map((r) => r.id),
        both.map((r) => r.claim_generation),
      );
      expect(finished.rows).toHaveLength(2);
      // A retry goes through the same statement: the task is back to PENDING, its attempt recorded.
      const retried = (await claim(1, 1)).rows;
      const requeued = await finish(
        retried.map((r) => r.id),
        retried.map((r) => r.claim_generation),
        'RETRY',
      );
      expect(requeued.rows.map((r: { status: string }) => r.status)).toEqual(['PENDING']);
    });
    expect(plans.some((p) => p.includes('horsies_tasks_claim_idx'))).toBe(true);
    expect(plans.some((p) => p.includes('horsies_tasks_pkey'))).toBe(true);
    expect(plans.filter((p) => /Seq Scan on horsies_tasks|Hash Join/.test(p))).toEqual([]);
    expect(plans.flatMap(wholeIndexScans)).toEqual([]);
    const [counts] = await t.query<{ completed: string; attempts: string }>(
      `SELECT (SELECT count(*) FROM {{schema}}.horsies_tasks WHERE status = 'COMPLETED') AS completed,
              (SELECT count(*) FROM {{schema}}.horsies_task_attempts) AS attempts`,
    );
    expect(counts).toEqual({ completed: '2', attempts: '3' });
  });

  it('keep the claim walking its index in claim order when the statistics expect few rows past its filters', async () => {
    const app = t.app();
    const task = app.task({ name: 'plans.ordered', input: z.object({ i: z.number() }), handler: () => null });
    await t.query(`ALTER TABLE {{schema}}.horsies_tasks SET (autovacuum_enabled = false)`);
    await task.sendMany(Array.from({ length: 10_000 }, (_, i) => ({ input: { i } })));
    await t.query(`ANALYZE {{schema}}.horsies_tasks`);
    // Statistics such as a run over several queues and many task names leaves: a queue holds a twelfth of the rows,
    // in no physical order, and a task name is nearly unique. The planner then expects one row past the filters and
    // prefers collecting every entry of the queue through a bitmap and sorting them, at every claim.
    await t.query(
      `SELECT pg_restore_attribute_stats('schemaname', $1::text, 'relname', 'horsies_tasks', 'attname', 'queue_name',
         'inherited', false, 'null_frac', 0::real, 'avg_width', 8, 'n_distinct', 12::real, 'correlation', 0::real),
       pg_restore_attribute_stats('schemaname', $1::text, 'relname', 'horsies_tasks', 'attname', 'task_name',
         'inherited', false, 'null_frac', 0::real, 'avg_width', 16, 'n_distinct', -1::real)`,
      [t.schema],
    );
    const client = await t.pool.connect();
    clients.push(client);
    await client.query(`LOAD 'auto_explain'`);
    const [first] = await t.query<{ ids: string[] }>(
      `SELECT array_agg(id ORDER BY priority, enqueued_at, id) AS ids FROM (
         SELECT id, priority, enqueued_at FROM {{schema}}.horsies_tasks
         WHERE task_name = 'plans.ordered' AND status = 'PENDING' ORDER BY priority, enqueued_at, id LIMIT 10) f`,
    );
    let claimed: string[] = [];
    const plans = await plansOf(client, async () => {
      const { rows } = await client.query<{ id: string }>(
        `SELECT * FROM "${t.schema}".horsies_claim_and_start('default', ARRAY['plans.ordered'], 10, 60000,
           'plans-worker', 'host', 1, 'proc', 0, false)`,
      );
      claimed = rows.map((r) => r.id);
    });
    expect(claimed).toEqual(first!.ids);
    const claim = plans.filter((p) => p.includes('horsies_tasks_claim_idx'));
    expect(claim).toHaveLength(1);
    expect(claim[0]).toMatch(/Index Scan using horsies_tasks_claim_idx on horsies_tasks n/);
    expect(claim[0]).not.toMatch(/Bitmap Heap Scan on horsies_tasks|Sort Key/);
  });
});
