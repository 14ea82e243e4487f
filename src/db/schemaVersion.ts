/**
 * Is the schema what this library needs? Its migration version (the newest numbered migration applied) and its
 * routines (every routine file applied once). The pool's {@link Database} asks this when a statement fails on a
 * missing table or function, so this module knows the database only as a pool and a schema name.
 */
import type pg from 'pg';
import { SchemaNotMigratedError } from '../errors.js';
import { loadMigrations, loadRoutines } from './migrationFiles.js';
import { renderSql, statement } from './sql.js';

/** What the checks read through: a pool and the schema it serves. */
export interface SchemaHolder {
  readonly pool: pg.Pool;
  readonly schema: string;
}

/** The migration version of the schema: its newest applied migration. */
const SchemaVersionGet = statement<Record<string, never>, { version: number }>(
  'SchemaVersionGet',
  'SELECT coalesce(max(version), 0)::int AS version FROM {{schema}}.horsies_schema_migrations',
  () => [],
);

/** The routines the migrator applied to the schema, by name. */
const SchemaRoutineList = statement<Record<string, never>, { name: string; hash: string }>(
  'SchemaRoutineList',
  'SELECT name, hash FROM {{schema}}.horsies_schema_routines ORDER BY name',
  () => [],
);

let latest: number | undefined;

/** The version of the newest migration bundled with this library. */
export function latestMigrationVersion(): number {
  latest ??= Math.max(0, ...loadMigrations().map((m) => m.version));
  return latest;
}

let bundledRoutines: string[] | undefined;

/** The names of the routines bundled with this library. */
export function routineNames(): string[] {
  bundledRoutines ??= loadRoutines().map((r) => r.name);
  return bundledRoutines;
}

/** Runs one of this module's statements; `fallback` when the table (or schema) does not exist. */
async function read<R>(db: SchemaHolder, sql: string, fallback: R[]): Promise<R[]> {
  try {
    const { rows } = await db.pool.query<R & pg.QueryResultRow>({
      text: renderSql(sql, db.schema),
      values: [],
    });
    return rows;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === '42P01' || code === '3F000') return fallback;
    throw error;
  }
}

/** The schema's migration version; 0 when it has no horsies tables (or does not exist). */
export async function schemaVersion(db: SchemaHolder): Promise<number> {
  const [row] = await read<{ version: number }>(db, SchemaVersionGet.sql, []);
  return row?.version ?? 0;
}

/** The routines the migrator applied to the schema, with the hash of the file it applied. */
export async function appliedRoutines(db: SchemaHolder): Promise<Map<string, string>> {
  return new Map(
    (await read<{ name: string; hash: string }>(db, SchemaRoutineList.sql, [])).map((r) => [r.name, r.hash]),
  );
}

/** The bundled routines the schema has never had applied (a schema migrated by a release before routine files). */
async function unappliedRoutines(db: SchemaHolder): Promise<string[]> {
  const applied = await appliedRoutines(db);
  return routineNames().filter((name) => !applied.has(name));
}

/**
 * Throws a {@link SchemaNotMigratedError} unless the schema is at the version this library needs and has every
 * routine of this library applied. A routine applied from an older text of its file passes (a routine's
 * signature only changes with a numbered migration, so the older body serves the same calls); `horsies check
 * --live` reports it. Connection faults pass through unchanged.
 */
export async function checkSchema(db: SchemaHolder): Promise<number> {
  const version = await schemaVersion(db);
  const required = latestMigrationVersion();
  if (version !== required) throw new SchemaNotMigratedError(db.schema, version, required);
  const missing = await unappliedRoutines(db);
  if (missing.length > 0)
    throw new SchemaNotMigratedError(db.schema, version, required, { routines: missing });
  return version;
}

/**
 * The error to raise for a statement that failed on a missing table, schema or routine: a
 * {@link SchemaNotMigratedError} when the schema is behind (or empty), else `cause` itself.
 */
export async function schemaNotMigrated(db: SchemaHolder, cause: unknown): Promise<unknown> {
  return checkSchema(db).then(
    () => cause,
    (error: unknown) =>
      error instanceof SchemaNotMigratedError
        ? new SchemaNotMigratedError(db.schema, error.version, error.required, {
            cause,
            routines: error.routines,
          })
        : cause,
  );
}
