/**
 * Every server-side routine has one current text, its file in `src/db/routines/`: a fresh migrate installs each as
 * its file defines it, a changed file is applied again, and a routine changed by hand in a live database is
 * reported by the drift check (whichever routine it is) and restored by the next migrate.
 */
import { describe, expect, it } from 'vitest';
import { SchemaNotMigratedError } from '../../src/errors.js';
import { loadMigrations, loadRoutines, routineDefinition } from '../../src/db/migrationFiles.js';
import type { Routine } from '../../src/db/migrationFiles.js';
import { migrate } from '../../src/db/Migrator.js';
import { isRetiredRoutine, routineDrift } from '../../src/db/routines.js';
import { checkSchema, latestMigrationVersion } from '../../src/db/schemaVersion.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
/** As 0.1.0 left a schema: its 28 numbered migrations, no routine files. */
const old = await useTestSchema({ migratedTo: 28 });
const routines = loadRoutines();

/** The routine with one more comment line at the top of its body: it behaves the same, yet it is not its file. */
function edited(routine: Routine): Routine {
  const sql = routine.sql.replace(/AS \$function\$\n/, 'AS $function$\n-- edited\n');
  expect(sql).not.toBe(routine.sql);
  return { ...routine, sql, hash: `${routine.hash}-edited` };
}

async function installedNames(): Promise<string[]> {
  const rows = await t.query<{ name: string }>(
    `SELECT p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = $1 ORDER BY 1`,
    [t.schema],
  );
  return rows.map((r) => r.name).filter((name) => !isRetiredRoutine(name));
}

describe('routine files', () => {
  it('are installed as their files define them after a fresh migrate, with nothing else', async () => {
    expect(routines.length).toBeGreaterThanOrEqual(18);
    expect(await installedNames()).toEqual(routines.map((r) => r.name));
    expect(await routineDrift(t.app().db)).toEqual([]);
    const applied = await t.query<{ name: string; hash: string }>(
      'SELECT name, hash FROM {{schema}}.horsies_schema_routines ORDER BY name',
    );
    expect(applied).toEqual(routines.map((r) => ({ name: r.name, hash: r.hash })));
    // The settings of a routine are part of its file: one generic plan, index lookups only.
    const [config] = await t.query<{ proconfig: string[] }>(
      `SELECT p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 AND p.proname = 'horsies_start_rows'`,
      [t.schema],
    );
    expect([...config!.proconfig].sort()).toEqual([
      'enable_hashjoin=off',
      'enable_mergejoin=off',
      'enable_seqscan=off',
      'plan_cache_mode=force_generic_plan',
    ]);
  });

  it('migrating again applies nothing; a changed file is applied again, alone', async () => {
    const db = t.app().db;
    expect(await migrate(db)).toMatchObject({ applied: [], routines: [] });
    const target = routines.find((r) => r.name === 'horsies_start_tasks')!;
    const changed = routines.map((r) => (r === target ? edited(r) : r));
    expect((await migrate(db, loadMigrations(), changed)).routines).toEqual(['horsies_start_tasks']);
    expect(await routineDrift(db, changed)).toEqual([]);
    // Against the files of this version, the routine is now another text; the next migrate restores it.
    expect(await routineDrift(db)).toEqual([
      { name: 'horsies_start_tasks', problem: 'changed', file: 'routines/horsies_start_tasks.sql' },
    ]);
    expect((await migrate(db)).routines).toEqual(['horsies_start_tasks']);
    expect(await routineDrift(db)).toEqual([]);
  });

  it('reports any routine changed by hand, and the next migrate restores it', async () => {
    const db = t.app().db;
    for (const routine of routines) {
      await t.query(routineDefinition(edited(routine)));
      expect(await routineDrift(db)).toEqual([
        { name: routine.name, problem: 'changed', file: `routines/${routine.name}.sql` },
      ]);
      expect((await migrate(db)).routines).toEqual([routine.name]);
    }
    expect(await routineDrift(db)).toEqual([]);
  });

  it('reports a dropped routine, one changed in its settings, and one no file defines', async () => {
    const db = t.app().db;
    await t.query('DROP FUNCTION {{schema}}.horsies_rate_room');
    await t.query('ALTER FUNCTION {{schema}}.horsies_cap_room SET enable_seqscan = on');
    await t.query(
      'CREATE FUNCTION {{schema}}.horsies_made_by_hand() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$',
    );
    expect(await routineDrift(db)).toEqual([
      { name: 'horsies_cap_room', problem: 'changed', file: 'routines/horsies_cap_room.sql' },
      { name: 'horsies_rate_room', problem: 'missing', file: 'routines/horsies_rate_room.sql' },
      { name: 'horsies_made_by_hand', problem: 'unknown', file: null },
    ]);
    expect((await migrate(db)).routines).toEqual(['horsies_cap_room', 'horsies_rate_room']);
    expect(await routineDrift(db)).toEqual([
      { name: 'horsies_made_by_hand', problem: 'unknown', file: null },
    ]);
    await t.query('DROP FUNCTION {{schema}}.horsies_made_by_hand');
  });
});

describe('a schema migrated by a release before routine files', () => {
  it('is refused by the start-up check until migrated, then gets every routine', async () => {
    const db = old.app().db;
    const latest = latestMigrationVersion();
    const behind = await checkSchema(db).catch((error: unknown) => error);
    expect(behind).toMatchObject({ version: 28, required: latest, routines: [] });
    // Its numbered migrations brought up to date, but no routine file applied: still refused, naming them.
    await migrate(db, loadMigrations(), []);
    const refused = await checkSchema(db).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SchemaNotMigratedError);
    expect((refused as SchemaNotMigratedError).routines).toEqual(routines.map((r) => r.name));
    expect((refused as Error).message).toMatch(/lacks \d+ routines of this library .*run `horsies migrate`/);
    const result = await migrate(db);
    expect(result).toMatchObject({ applied: [], routines: routines.map((r) => r.name) });
    expect(await checkSchema(db)).toBe(latest);
    // Migration 32 put aside the functions workers of 0.1 call: they are there, and they are no drift.
    const retired = await old.query<{ name: string }>(
      `SELECT p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 ORDER BY 1`,
      [old.schema],
    );
    expect(retired.map((r) => r.name).filter(isRetiredRoutine)).toEqual([
      'horsies_claim_and_start_retired',
      'horsies_claim_limited_retired',
      'horsies_claim_tasks_retired',
      'horsies_finish_tasks_retired',
    ]);
    expect(await routineDrift(db)).toEqual([]);
  });
});
