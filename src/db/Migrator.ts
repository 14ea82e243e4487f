/**
 * Applies the numbered `.sql` files of `migrations/` in order. All of it runs in one transaction under an
 * advisory transaction lock keyed by the schema name, so any number of processes may migrate at once: the
 * first applies, the others wait and then find nothing left to do. A transaction-level lock also works behind
 * PgBouncer in transaction mode.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Database } from './Database.js';
import { quoteIdentifier, renderSql } from './Database.js';

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
    if (newest > known) {
      throw new Error(
        `schema ${db.schema} is at version ${newest}, newer than this library's ${known}; upgrade the library`,
      );
    }
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
