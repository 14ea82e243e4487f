/**
 * The schema dump: a fresh migrate gives the committed `src/db/schema.sql`, a hand change shows in it, it is the
 * same text when read twice or from another schema, and an upgrade from an earlier release ends at the schema a
 * fresh migrate creates.
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Database } from '../../src/db/Database.js';
import { migrate } from '../../src/db/Migrator.js';
import { loadMigrations } from '../../src/db/migrationFiles.js';
import { SchemaDrop, dumpSchema, schemaFileText } from '../../src/db/schemaDump.js';
import { databaseUrl, freshSchemaName, useTestSchema } from '../support/db.js';

const SCHEMA_FILE = new URL('../../src/db/schema.sql', import.meta.url);

/** The release whose schema the upgrade starts from: its numbered migrations, and no routine files. */
const EARLIER_RELEASE = { migrations: 28 };

/**
 * A schema of its own, migrated by the test: dropped after the file unless a test failed (then kept, and named, for
 * inspection, as `useTestSchema` does).
 */
function ownSchema(): Database {
  const db = new Database({ connectionString: databaseUrl(), schema: freshSchemaName(), poolSize: 2 });
  let failed = false;
  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') failed = true;
  });
  afterAll(async () => {
    if (failed) console.error(`test schema kept for inspection: ${db.schema}`);
    else await db.run(SchemaDrop, {});
    await db.end();
  });
  return db;
}

const fresh = await useTestSchema();
const edited = await useTestSchema();
const upgraded = ownSchema();

describe('dumpSchema', () => {
  it('gives the committed src/db/schema.sql for a fresh migrate (else: npm run schema:write)', async () => {
    expect(schemaFileText(await dumpSchema(fresh.app().db))).toBe(readFileSync(SCHEMA_FILE, 'utf8'));
  });

  it('is the same text read twice, and holds the schema name only as {{schema}}', async () => {
    const db = fresh.app().db;
    const first = await dumpSchema(db);
    expect(await dumpSchema(db)).toBe(first);
    expect(first).not.toContain(fresh.schema);
    expect(first).toContain('CREATE TABLE {{schema}}.horsies_tasks (');
    // What a migrate leaves beyond columns: a table's storage options, a function's settings, the applied versions.
    expect(first).toMatch(/^\) *\nWITH \(fillfactor=85\);$/m);
    expect(first).toContain(" SET enable_seqscan TO 'off'");
    expect(first).toContain('--   0028 handoff_queues');
  });

  it('shows a change made by hand', async () => {
    const db = edited.app().db;
    const before = await dumpSchema(db);
    expect(before).toBe(await dumpSchema(fresh.app().db));
    await edited.query(`ALTER TABLE {{schema}}.horsies_tasks ADD COLUMN hand_note text DEFAULT 'x'`);
    await edited.query(`CREATE INDEX horsies_tasks_hand_note_idx ON {{schema}}.horsies_tasks (hand_note)`);
    await edited.query(`ALTER TABLE {{schema}}.horsies_tasks SET (autovacuum_vacuum_scale_factor = 0.01)`);
    await edited.query(`COMMENT ON COLUMN {{schema}}.horsies_tasks.hand_note IS 'added by hand'`);
    await edited.query(
      `ALTER FUNCTION {{schema}}.horsies_cap_room(text, text, integer, integer, integer, boolean) SET work_mem = '8MB'`,
    );
    const after = new Set((await dumpSchema(db)).split('\n'));
    const had = new Set(before.split('\n'));
    for (const line of [
      "  hand_note text DEFAULT 'x'::text",
      'WITH (fillfactor=85, autovacuum_vacuum_scale_factor=0.01);',
      'CREATE INDEX horsies_tasks_hand_note_idx ON {{schema}}.horsies_tasks USING btree (hand_note);',
      "COMMENT ON COLUMN {{schema}}.horsies_tasks.hand_note IS 'added by hand';",
      " SET work_mem TO '8MB'",
    ]) {
      expect(had.has(line), line).toBe(false);
      expect(after.has(line), line).toBe(true);
    }
  });

  it('gives the same text after an upgrade from an earlier release as after a fresh migrate', async () => {
    await migrate(upgraded, loadMigrations().slice(0, EARLIER_RELEASE.migrations), []);
    await migrate(upgraded);
    expect(await dumpSchema(upgraded)).toBe(await dumpSchema(fresh.app().db));
  });
});
