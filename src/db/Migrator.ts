/**
 * Applies the numbered `.sql` files of `migrations/` in order, then every routine file of `routines/` that is new
 * or changed since it was last applied (the repeatable migrations of Flyway): a server-side function has one
 * current text, its file, and a numbered migration only drops a function whose signature changes. All of it runs
 * in one transaction under an advisory transaction lock keyed by the schema name, so any number of processes may
 * migrate at once: the first applies, the others wait and then find nothing left to do. A transaction-level lock
 * also works behind PgBouncer in transaction mode.
 */
import type pg from 'pg';
import { DatabaseUnavailableError, SchemaNotMigratedError } from '../errors.js';
import type { Database } from './Database.js';
import { connectionFault, isRetryableConnectionFault } from './Database.js';
import { loadMigrations, loadRoutines } from './migrationFiles.js';
import type { Migration, Routine } from './migrationFiles.js';
import { RoutineDefinitionList, driftOf } from './routines.js';
import type { RoutineDefinitionRow } from './routines.js';
import { checkSchema } from './schemaVersion.js';
import { quoteIdentifier, renderSql } from './sql.js';

/** What a migrate run did. */
export interface MigrateResult {
  /** Versions applied by this run, in order (empty when the schema was already current). */
  applied: number[];
  /** The schema's version after the run. */
  version: number;
  /** Routines (re)applied by this run because their file changed or they were missing, by name. */
  routines: string[];
}

/**
 * Applies pending migrations to the database's schema, then the routines whose file is new or changed (or whose
 * function is missing). `migrations` and `routines` default to the bundled files.
 */
export async function migrate(
  db: Database,
  migrations: Migration[] = loadMigrations(),
  routines: Routine[] = loadRoutines(),
): Promise<MigrateResult> {
  const schema = quoteIdentifier(db.schema);
  return db.transaction(async (client) => {
    // A migration may wait for other migrators and rebuild indexes of a large table: no timeout of the pool's.
    await client.query('SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0');
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      `horsies.migrate.${db.schema}`,
    ]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.horsies_schema_migrations (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await client.query<{ version: number }>(
      `SELECT version FROM ${schema}.horsies_schema_migrations ORDER BY version`,
    );
    const done = new Set(rows.map((r) => r.version));
    const known = Math.max(0, ...migrations.map((m) => m.version));
    const newest = Math.max(0, ...done);
    if (newest > known) throw new SchemaNotMigratedError(db.schema, newest, known);
    const applied: number[] = [];
    // The task table in its strongest mode before any migration touches it: a migration that alters it would
    // otherwise upgrade a weaker lock an earlier migration of the same run holds, while a running worker's statement
    // that has locked the table for its rows waits on that lock (a deadlock). Claims and finishes wait instead.
    const pending = migrations.some((m) => !done.has(m.version));
    const table = `${schema}.horsies_tasks`;
    if (pending && (await client.query('SELECT to_regclass($1) AS t', [table])).rows[0]?.t) {
      await client.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    }
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await client.query(renderSql(m.sql, db.schema));
      await client.query(`INSERT INTO ${schema}.horsies_schema_migrations (version, name) VALUES ($1, $2)`, [
        m.version,
        m.name,
      ]);
      applied.push(m.version);
    }
    return {
      applied,
      version: Math.max(newest, ...applied),
      routines: await applyRoutines(client, db.schema, routines),
    };
  });
}

/**
 * Applies, inside the migration's transaction, each routine whose file changed since it was applied, or whose
 * installed definition is not its file's (missing, or changed by hand). Returns their names.
 */
async function applyRoutines(
  client: pg.PoolClient,
  schemaName: string,
  routines: Routine[],
): Promise<string[]> {
  const schema = quoteIdentifier(schemaName);
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${schema}.horsies_schema_routines (
       name text PRIMARY KEY,
       hash text NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now()
     )`,
  );
  const { rows } = await client.query<{ name: string; hash: string }>(
    `SELECT name, hash FROM ${schema}.horsies_schema_routines`,
  );
  const hashes = new Map(rows.map((r) => [r.name, r.hash]));
  const installed = await client.query<RoutineDefinitionRow>({
    text: renderSql(RoutineDefinitionList.sql, schemaName),
    values: RoutineDefinitionList.values({ schema: schemaName }),
  });
  // Missing, changed by hand, or applied from another text of the file: the file is the one current text.
  const drifted = new Set(driftOf(routines, installed.rows, schemaName).map((d) => d.name));
  const changed: string[] = [];
  for (const routine of routines) {
    if (hashes.get(routine.name) === routine.hash && !drifted.has(routine.name)) continue;
    await createRoutine(client, schemaName, routine);
    await client.query(
      `INSERT INTO ${schema}.horsies_schema_routines (name, hash) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET hash = EXCLUDED.hash, applied_at = now()`,
      [routine.name, routine.hash],
    );
    changed.push(routine.name);
  }
  return changed;
}

/**
 * Creates or replaces one routine from its file. A function whose result type changed cannot be replaced (the
 * migration that changes it drops it first, but an older migration may have made it again, as in a schema migrated
 * only part of the way): then every function of that name is dropped and the file's is created.
 */
async function createRoutine(client: pg.PoolClient, schemaName: string, routine: Routine): Promise<void> {
  await client.query('SAVEPOINT horsies_routine');
  try {
    await client.query(renderSql(routine.sql, schemaName));
  } catch (error) {
    // 42P13 invalid_function_definition: "cannot change return type of existing function".
    if ((error as { code?: string }).code !== '42P13') throw error;
    await client.query('ROLLBACK TO SAVEPOINT horsies_routine');
    const { rows } = await client.query<{ fn: string }>(
      `SELECT p.oid::regprocedure::text AS fn FROM pg_catalog.pg_proc p
       JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2`,
      [schemaName, routine.name],
    );
    for (const { fn } of rows) await client.query(`DROP FUNCTION ${fn}`);
    await client.query(renderSql(routine.sql, schemaName));
  }
  await client.query('RELEASE SAVEPOINT horsies_routine');
}

/** Settings of {@link prepareSchema}. */
export interface PrepareSchemaOptions {
  /** How long to keep retrying a database that cannot be reached (refused, starting up). Default 30,000 ms. */
  timeoutMs?: number;
  /** Apply pending migrations instead of requiring them applied. Default false. */
  migrate?: boolean;
  /** Ends the waiting early (the caller is stopping); the last fault is thrown. */
  signal?: AbortSignal;
  /** Called before each wait, with the fault and the delay. */
  onRetry?: (fault: DatabaseUnavailableError, delayMs: number) => void;
}

/**
 * Start-up check of a process that serves the schema (a worker): waits, with backoff, up to `timeoutMs` for a
 * database that refuses connections or is starting, then requires the schema at this library's version (or
 * migrates it). Throws a {@link DatabaseUnavailableError} once the time is up or at once for a fault waiting will
 * not cure (a wrong password, an unknown host or database), a {@link SchemaNotMigratedError} when the schema is
 * behind, or `DatabaseNotConfiguredError`. Resolves with the schema's version.
 */
export async function prepareSchema(db: Database, options: PrepareSchemaOptions = {}): Promise<number> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const started = Date.now();
  for (let attempt = 0; ; attempt += 1) {
    try {
      if (options.migrate) return (await migrate(db)).version;
      return await checkSchema(db);
    } catch (error) {
      const fault = connectionFault(error, db.target);
      if (!fault) throw error;
      const elapsed = Date.now() - started;
      if (!isRetryableConnectionFault(fault)) throw fault;
      if (elapsed >= timeoutMs || options.signal?.aborted) {
        throw new DatabaseUnavailableError(
          db.target,
          `${fault.message.replace(/^cannot connect to the database at \S+: /, '')}; ` +
            `gave up after ${Math.round(elapsed / 100) / 10} s of retries (startupTimeoutMs ${timeoutMs})`,
          fault.reason,
          { cause: error },
        );
      }
      const delayMs = Math.min(2_000, 100 * 2 ** Math.min(attempt, 10), Math.max(0, timeoutMs - elapsed));
      options.onRetry?.(fault, delayMs);
      await sleep(delayMs, options.signal);
    }
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
