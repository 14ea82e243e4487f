/**
 * Migration 26: identifiers and codes compare byte by byte (COLLATE "C"). A schema at version 25 with pending
 * tasks, a finished one with its attempt and a workflow under way keeps every row and key through the migration,
 * and the work goes on to its end on the migrated schema; the keys the migration rebuilt still refuse what they
 * refused.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Database } from '../../src/db/Database.js';
import { statement } from '../../src/db/sql.js';
import { migrate } from '../../src/db/Migrator.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema({ migratedTo: 25 });
const q = t.query;

/** What the migration must keep: every task, attempt and workflow node with its keys. */
async function stored(): Promise<unknown> {
  return {
    tasks: await q(
      `SELECT id, task_name, queue_name, status, workflow_id FROM {{schema}}.horsies_tasks ORDER BY id`,
    ),
    attempts: await q(
      `SELECT task_id, attempt, outcome FROM {{schema}}.horsies_task_attempts ORDER BY task_id`,
    ),
    nodes: await q(
      `SELECT workflow_id, node_index, node_id, node_key, task_id FROM {{schema}}.horsies_workflow_tasks
       ORDER BY workflow_id, node_index`,
    ),
  };
}

describe('migration 26 (identifiers compared byte by byte)', () => {
  it('keeps what a schema at version 25 stored, and its work goes on to the end', async () => {
    // A workflow step on a connection that prepared its statement before the migration fails once there (its
    // transaction is the caller's, see Database.run), and the recovery pass redoes it: soon, here.
    const app = t.app({ recovery: { checkIntervalMs: 200, workflowRecoveryGraceMs: 0 } });
    const upper = app.task({
      name: 'Keys.Upper',
      input: z.object({ n: z.number() }),
      handler: ({ n }) => n * 2,
    });
    const lower = app.task({
      name: 'keys.lower',
      input: z.object({ n: z.number() }),
      handler: ({ n }) => n + 1,
    });
    // Sent in calls of two, which store their tasks as version 25 did (a single send calls a function of migration
    // 27).
    type Handle = Awaited<ReturnType<typeof upper.send>>;
    const [upper1, upper3] = (await upper.sendMany([{ input: { n: 1 } }, { input: { n: 3 } }])) as [
      Handle,
      Handle,
    ];
    const [lower2, done] = (await lower.sendMany([{ input: { n: 2 } }, { input: { n: 4 } }])) as [
      Handle,
      Handle,
    ];
    const pending = [upper1, lower2, upper3];
    // One task finished at version 25, with its attempt row, as a worker of that version wrote it.
    await q(
      `WITH f AS (
         UPDATE {{schema}}.horsies_tasks SET status = 'COMPLETED', claimed_at = now(), started_at = now(),
                completed_at = now(), finished_at = now(), attempt = 1, result = '{"ok": 5}'
         WHERE id = $1 RETURNING id)
       INSERT INTO {{schema}}.horsies_task_attempts (task_id, attempt, outcome, will_retry, started_at, finished_at)
       SELECT id, 1, 'COMPLETED', false, now(), now() FROM f`,
      [done.id],
    );
    const flow = (on: typeof app, a: typeof upper, b: typeof lower) => {
      const wf = workflow(on, 'Keys.Flow');
      const first = wf.node(a, { input: { n: 10 } });
      return wf.build({ output: wf.node(b, { input: { n: first.result } }) });
    };
    // A run started as version 25 stored it. This library's start writes columns later migrations added, so the run
    // is started on a schema at this version and its rows are copied here with the columns version 25 has.
    const staging = t.app({ schema: `${t.schema}_at_latest` });
    await staging.migrate();
    const started = await flow(
      staging,
      staging.task({ name: upper.name, input: z.object({ n: z.number() }), handler: ({ n }) => n }),
      staging.task({ name: lower.name, input: z.object({ n: z.number() }), handler: ({ n }) => n }),
    ).start();
    for (const [table, key] of [
      ['horsies_workflows', 'id'],
      ['horsies_workflow_tasks', 'workflow_id'],
      ['horsies_tasks', 'workflow_id'],
    ] as const) {
      const [{ columns } = { columns: '' }] = await q<{ columns: string }>(
        `SELECT string_agg(quote_ident(column_name), ', ') AS columns FROM information_schema.columns
         WHERE table_schema = $1 AND table_name = $2 AND is_generated = 'NEVER'
           AND column_name IN (SELECT column_name FROM information_schema.columns
                               WHERE table_schema = $3 AND table_name = $2)`,
        [t.schema, table, staging.db.schema],
      );
      await q(
        `INSERT INTO {{schema}}.${table} (${columns}) OVERRIDING SYSTEM VALUE
         SELECT ${columns} FROM "${staging.db.schema}".${table} WHERE ${key} = $1`,
        [started.id],
      );
    }
    await staging.close();
    await q(`DROP SCHEMA "${t.schema}_at_latest" CASCADE`);
    const handle = flow(app, upper, lower).handle(started.id);
    const before = await stored();

    // With the migrations after it (the workers need the schema at this library's version).
    const { applied } = await migrate(app.db);
    expect(applied[0]).toBe(26);

    expect(await stored()).toEqual(before);
    const collations = await q<{ table_name: string; column_name: string; collation_name: string | null }>(
      `SELECT table_name, column_name, collation_name FROM information_schema.columns
       WHERE table_schema = $1 AND (table_name, column_name) IN (('horsies_tasks', 'id'),
         ('horsies_tasks', 'queue_name'), ('horsies_tasks', 'task_name'), ('horsies_tasks', 'claimed_by_worker_id'),
         ('horsies_task_attempts', 'task_id'), ('horsies_workflow_tasks', 'node_key'),
         ('horsies_tasks', 'error_message'), ('horsies_tasks', 'status'), ('horsies_task_attempts', 'error_message'))
       ORDER BY table_name, column_name`,
      [t.schema],
    );
    // Free text and statuses keep the database's collation (null: the column names none).
    expect(
      collations.map((c) => `${c.table_name}.${c.column_name} ${c.collation_name ?? 'default'}`),
    ).toEqual([
      'horsies_task_attempts.error_message default',
      'horsies_task_attempts.task_id C',
      'horsies_tasks.claimed_by_worker_id C',
      'horsies_tasks.id C',
      'horsies_tasks.queue_name C',
      'horsies_tasks.status default',
      'horsies_tasks.task_name C',
      'horsies_workflow_tasks.node_key C',
    ]);
    const nodes = (before as { nodes: { workflow_id: string; node_index: number; node_key: string }[] })
      .nodes;
    expect(nodes.map((n) => n.node_key)).toEqual(nodes.map((n) => `${n.workflow_id}:${n.node_index}`));

    const worker = createWorker(app, { concurrency: 4 });
    await worker.start();
    try {
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 21 });
      const results = await Promise.all(pending.map((h) => h.result({ timeoutMs: 10_000 })));
      expect(results).toEqual([
        { ok: true, value: 2 },
        { ok: true, value: 3 },
        { ok: true, value: 6 },
      ]);
      expect(await done.result({ timeoutMs: 1_000 })).toEqual({ ok: true, value: 5 });
    } finally {
      await worker.stop();
    }
  });

  it('keeps refusing what the rebuilt keys refused', async () => {
    // An attempt of no task (the foreign key), a second task with a held id (the primary key); the node key,
    // generated again by the migration, is unique again.
    await expect(
      q(
        `INSERT INTO {{schema}}.horsies_task_attempts (task_id, attempt, outcome, will_retry, started_at, finished_at)
         VALUES ('no-such-task', 1, 'COMPLETED', false, now(), now())`,
      ),
    ).rejects.toMatchObject({ code: '23503' });
    const [task] = await q<{ id: string }>(`SELECT id FROM {{schema}}.horsies_tasks LIMIT 1`);
    await expect(
      q(
        `INSERT INTO {{schema}}.horsies_tasks (id, task_name, queue_name)
         VALUES ($1, 'other', 'default')`,
        [task!.id],
      ),
    ).rejects.toMatchObject({ code: '23505' });
    const indexes = await q<{ indexdef: string }>(
      `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'horsies_workflow_tasks_node_key_idx'`,
      [t.schema],
    );
    expect(indexes.map((i) => i.indexdef)).toEqual([expect.stringContaining('UNIQUE INDEX')]);
    // Deleting a task still deletes its attempts (ON DELETE CASCADE).
    const [attempt] = await q<{ task_id: string }>(
      `SELECT task_id FROM {{schema}}.horsies_task_attempts LIMIT 1`,
    );
    await q(`DELETE FROM {{schema}}.horsies_tasks WHERE id = $1`, [attempt!.task_id]);
    expect(
      await q(`SELECT 1 FROM {{schema}}.horsies_task_attempts WHERE task_id = $1`, [attempt!.task_id]),
    ).toEqual([]);
  });

  // A statement whose result's column changes collation under it, as migration 26 changed them.
  const ids = statement<Record<string, never>, { id: string }>(
    'StaleProbe',
    `SELECT id FROM {{schema}}.horsies_tasks ORDER BY id LIMIT 1`,
    () => [],
  );
  const recollate = (collation: string) =>
    q(`ALTER TABLE {{schema}}.horsies_tasks ALTER COLUMN id TYPE varchar(36) COLLATE "${collation}"`);

  it('runs a statement prepared before a migration changed its columns again, under a new name', async () => {
    // A running worker's connections hold statements they prepared before the migration; PostgreSQL refuses those
    // whose columns changed ("cached plan must not change result type"), on that connection, every time.
    const one = new Database({ connectionString: t.url, schema: t.schema, poolSize: 1 });
    try {
      const [first] = await one.run(ids, {});
      await recollate('default');
      expect(await one.run(ids, {})).toEqual([first]);
      // In a transaction of horsies' own the statement fails and the transaction rolls back; it runs again at once,
      // on the same connection, and prepares the statement anew.
      await recollate('C');
      let runs = 0;
      const inTransaction = () =>
        one.transaction((client) => {
          runs += 1;
          return one.run(ids, {}, client);
        });
      expect(await inTransaction()).toEqual([first]);
      expect(runs).toBe(2);
      expect(await inTransaction()).toEqual([first]);
      expect(runs).toBe(3);
    } finally {
      await one.end();
    }
  });

  it("prepares such a statement anew on the caller's own connection, after failing the transaction it was in", async () => {
    // A send in the application's transaction (the `tx` option) runs horsies' statements on the application's
    // connection, which horsies does not own and cannot drop.
    const db = new Database({ connectionString: t.url, schema: t.schema, poolSize: 1 });
    const own = new pg.Client({ connectionString: t.url });
    await own.connect();
    const inTransaction = async () => {
      await own.query('BEGIN');
      try {
        const rows = await db.run(ids, {}, own);
        await own.query('COMMIT');
        return rows;
      } catch (error) {
        await own.query('ROLLBACK');
        throw error;
      }
    };
    try {
      const [first] = await inTransaction();
      await recollate('default');
      await expect(inTransaction()).rejects.toMatchObject({ code: '0A000' });
      // The same connection, not dropped: the statement goes out under a new name, and again after that.
      expect(await inTransaction()).toEqual([first]);
      expect(await inTransaction()).toEqual([first]);
    } finally {
      await own.end();
      await db.end();
      await recollate('C');
    }
  });
});
