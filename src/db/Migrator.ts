/**
 * Applies the numbered `.sql` files of `migrations/` in order. All of it runs in one transaction under an
 * advisory transaction lock keyed by the schema name, so any number of processes may migrate at once: the
 * first applies, the others wait and then find nothing left to do. A transaction-level lock also works behind
 * PgBouncer in transaction mode.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DatabaseUnavailableError, SchemaNotMigratedError } from '../errors.js';
import type { Database } from './Database.js';
import {
  connectionFault,
  isRetryableConnectionFault,
  quoteIdentifier,
  renderSql,
  statement,
} from './Database.js';

/** One migration file. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** What a migrate run did. */
export interface MigrateResult {
  /** Versions applied by this run, in order (empty when the schema was already current). */
  applied: number[];
  /** The schema's version after the run. */
  version: number;
}

const MIGRATION_FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** Reads the bundled migrations, sorted by version. Throws if numbering has a gap or a duplicate. */
export function loadMigrations(
  folder = join(dirname(fileURLToPath(import.meta.url)), 'migrations'),
): Migration[] {
  const migrations = readdirSync(folder)
    .map((file) => ({ file, match: MIGRATION_FILE.exec(file) }))
    .filter((entry): entry is { file: string; match: RegExpExecArray } => entry.match !== null)
    .map(({ file, match }) => ({
      version: Number(match[1]),
      name: match[2] ?? file,
      sql: readFileSync(join(folder, file), 'utf8'),
    }))
    .sort((a, b) => a.version - b.version);
  migrations.forEach((m, index) => {
    if (m.version !== index + 1) {
      throw new Error(
        `migration numbering must be 1..n without gaps; found ${m.version} at position ${index + 1}`,
      );
    }
  });
  return migrations;
}

/** Applies pending migrations to the database's schema. */
export async function migrate(
  db: Database,
  migrations: Migration[] = loadMigrations(),
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
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await client.query(renderSql(m.sql, db.schema));
      await client.query(`INSERT INTO ${schema}.horsies_schema_migrations (version, name) VALUES ($1, $2)`, [
        m.version,
        m.name,
      ]);
      applied.push(m.version);
    }
    return { applied, version: Math.max(newest, ...applied) };
  });
}

/** The migration version of the schema: its newest applied migration. */
const SchemaVersionGet = statement<Record<string, never>, { version: number }>(
  'SchemaVersionGet',
  'SELECT coalesce(max(version), 0)::int AS version FROM {{schema}}.horsies_schema_migrations',
  () => [],
);

let latest: number | undefined;

/** The version of the newest migration bundled with this library. */
export function latestMigrationVersion(): number {
  latest ??= Math.max(0, ...loadMigrations().map((m) => m.version));
  return latest;
}

/** The schema's migration version; 0 when it has no horsies tables (or does not exist). */
export async function schemaVersion(db: Database): Promise<number> {
  try {
    const { rows } = await db.pool.query<{ version: number }>({
      text: renderSql(SchemaVersionGet.sql, db.schema),
      values: [],
    });
    return rows[0]?.version ?? 0;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === '42P01' || code === '3F000') return 0;
    throw error;
  }
}

/**
 * Throws a {@link SchemaNotMigratedError} unless the schema is at the version this library needs. Connection
 * faults pass through unchanged.
 */
export async function checkSchema(db: Database): Promise<number> {
  const version = await schemaVersion(db);
  const required = latestMigrationVersion();
  if (version !== required) throw new SchemaNotMigratedError(db.schema, version, required);
  return version;
}

/**
 * The error to raise for a statement that failed on a missing table, schema or routine: a
 * {@link SchemaNotMigratedError} when the schema is behind (or empty), else `cause` itself.
 */
export async function schemaNotMigrated(db: Database, cause: unknown): Promise<unknown> {
  const version = await schemaVersion(db).catch(() => null);
  const required = latestMigrationVersion();
  if (version === null || version === required) return cause;
  return new SchemaNotMigratedError(db.schema, version, required, { cause });
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
