/**
 * The SQL files the migrator applies, read from beside this module: the numbered migrations of `migrations/`
 * (DDL and data moves, applied once each, in order) and the routine files of `routines/` (one file per server-side
 * function with its current `CREATE OR REPLACE`, applied again whenever the file changes). Reading them needs no
 * database, so the version checks and the drift check share this module with the migrator.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** One migration file. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** One routine file: the current definition of one server-side function. */
export interface Routine {
  /** The function's name, which is also the file's name. */
  name: string;
  /** The file's text: a `--` header saying why, then the `CREATE OR REPLACE` with `{{schema}}` for the schema. */
  sql: string;
  /** SHA-256 of the file's text: the migrator applies the file again when it changes. */
  hash: string;
}

const MIGRATION_FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;
const ROUTINE_FILE = /^(horsies_[a-z0-9_]+)\.sql$/;
const here = dirname(fileURLToPath(import.meta.url));

/** Reads the bundled migrations, sorted by version. Throws if numbering has a gap or a duplicate. */
export function loadMigrations(folder = join(here, 'migrations')): Migration[] {
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

/**
 * Reads the bundled routine files, sorted by name. Throws unless each file defines, with `CREATE OR REPLACE`,
 * exactly the function (or procedure) it is named after, in `{{schema}}`.
 */
export function loadRoutines(folder = join(here, 'routines')): Routine[] {
  return readdirSync(folder)
    .filter((file) => file.endsWith('.sql'))
    .sort()
    .map((file) => {
      const name = ROUTINE_FILE.exec(file)?.[1];
      if (!name) throw new Error(`routine file ${file} must be named horsies_<name>.sql`);
      const sql = readFileSync(join(folder, file), 'utf8');
      const creates = [
        ...sql.matchAll(/CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE)\s+([^\s(]+)\s*\(/gi),
      ];
      if (
        creates.length !== 1 ||
        creates[0]?.[1] !== `{{schema}}.${name}` ||
        !/^CREATE OR REPLACE /m.test(sql)
      ) {
        throw new Error(
          `routine file ${file} must hold one CREATE OR REPLACE FUNCTION {{schema}}.${name}(...), found ${creates.map((c) => c[1]).join(', ') || 'none'}`,
        );
      }
      return { name, sql, hash: createHash('sha256').update(sql).digest('hex') };
    });
}

/**
 * The definition a routine file gives, less its header comment and final `;`. Routine files are written as
 * `pg_get_functiondef` prints a function (with `{{schema}}` for the schema), so that the drift check can compare
 * the installed function with its file.
 */
export function routineDefinition(routine: Routine): string {
  const start = routine.sql.search(/^CREATE OR REPLACE /m);
  return routine.sql.slice(start).replace(/;\s*$/, '');
}
