/**
 * Migrations under concurrency, with real processes: several `horsies migrate` at once, and several workers started
 * with `--migrate` during a deploy, on a schema that does not exist yet. One process applies, the others wait on the
 * migration lock and go on; the schema ends exactly as a fresh migrate leaves it (the committed schema.sql), every
 * version recorded once. A migrate that fails part-way leaves nothing of itself behind.
 */
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../src/index.js';
import { Database } from '../../src/db/Database.js';
import { migrate } from '../../src/db/Migrator.js';
import { loadMigrations, loadRoutines } from '../../src/db/migrationFiles.js';
import { SchemaDrop, dumpSchema, schemaFileText } from '../../src/db/schemaDump.js';
import { latestMigrationVersion, schemaVersion } from '../../src/db/schemaVersion.js';
import { runCli } from '../support/cli.js';
import { databaseUrl, freshSchemaName, testLogger } from '../support/db.js';
import { startWorkerProcess } from '../support/processes.js';

const committed = readFileSync(new URL('../../src/db/schema.sql', import.meta.url), 'utf8');
const latest = latestMigrationVersion();
const routineCount = loadRoutines().length;

const schemas: Database[] = [];
afterAll(async () => {
  for (const db of schemas) {
    await db.run(SchemaDrop, {}).catch(() => undefined);
    await db.end();
  }
});

/** A schema name of this file's, not created yet, dropped after the file. */
function unmigrated(): Database {
  const db = new Database({ connectionString: databaseUrl(), schema: freshSchemaName(), poolSize: 2 });
  schemas.push(db);
  return db;
}

async function versionsRecorded(db: Database): Promise<number[]> {
  const { rows } = await db.pool.query<{ version: number }>(
    `SELECT version FROM "${db.schema}".horsies_schema_migrations ORDER BY version`,
  );
  return rows.map((r) => r.version);
}

describe('migrations under concurrency', () => {
  it('four horsies migrate at once: one applies, three find it done, the schema is whole', async () => {
    const db = unmigrated();
    const runs = await Promise.all(
      Array.from({ length: 4 }, () =>
        runCli(['migrate', '--schema', db.schema], { DATABASE_URL: databaseUrl() }),
      ),
    );
    expect(runs.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    const lines = runs.map((r) => r.stdout.trim()).sort();
    const applied = `schema ${db.schema}: applied ${Array.from({ length: latest }, (_, i) => i + 1).join(', ')} and ${routineCount} routines; now at version ${latest}`;
    const already = `schema ${db.schema}: already at version ${latest}`;
    expect(lines).toEqual([applied, already, already, already].sort());
    expect(await versionsRecorded(db)).toEqual(Array.from({ length: latest }, (_, i) => i + 1));
    expect(schemaFileText(await dumpSchema(db))).toBe(committed);
  });

  it('three workers started with --migrate at once all start, on one schema migrated once, and run tasks', async () => {
    const db = unmigrated();
    const workers = Array.from({ length: 3 }, () =>
      startWorkerProcess({ databaseUrl: databaseUrl(), schema: db.schema }, ['--migrate']),
    );
    await Promise.all(workers.map((w) => w.ready));
    expect(await versionsRecorded(db)).toEqual(Array.from({ length: latest }, (_, i) => i + 1));
    expect(schemaFileText(await dumpSchema(db))).toBe(committed);
    await db.pool.query(
      `CREATE TABLE "${db.schema}".test_runs (task_id text NOT NULL, worker_pid int NOT NULL)`,
    );
    const app = createApp({ databaseUrl: databaseUrl(), schema: db.schema, logger: testLogger });
    try {
      const record = app.task({ name: 'record', input: z.object({ n: z.number().int() }), handler: () => 0 });
      const handles = await record.sendMany(Array.from({ length: 30 }, (_, n) => ({ input: { n } })));
      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
      expect(results.map((r) => (r.ok ? r.value : r.error.code))).toEqual(
        Array.from({ length: 30 }, (_, n) => n * 2),
      );
    } finally {
      await app.close();
      for (const w of workers) w.child.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.exited));
    }
  });

  it('a migrate that fails part-way leaves nothing of itself: not the schema, not one version', async () => {
    const db = unmigrated();
    const broken = [
      ...loadMigrations(),
      { version: latest + 1, name: 'broken', sql: 'CREATE TABLE {{schema}}.half (id int); SELECT 1 / 0;' },
    ];
    await expect(migrate(db, broken)).rejects.toMatchObject({ code: '22012' });
    expect(await schemaVersion(db)).toBe(0);
    const { rows } = await db.pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [db.schema]);
    expect(rows).toEqual([]);
    // Migrated as it should be afterwards, from nothing.
    expect((await migrate(db)).applied).toHaveLength(latest);
    expect(schemaFileText(await dumpSchema(db))).toBe(committed);
  });
});
