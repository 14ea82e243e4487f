/**
 * The server-side routines live in the database, each created from its file in `routines/` by the migrator. A hand
 * edit of one in a live database would change how every worker claims, starts, finishes or sends, unseen by the
 * code: {@link routineDrift} compares every installed routine of the schema with its file's definition.
 */
import { loadRoutines, routineDefinition } from './migrationFiles.js';
import type { Routine } from './migrationFiles.js';
import type { Database } from './Database.js';
import { quoteIdentifier, renderSql, statement } from './sql.js';

/** The definition of every function and procedure of a schema whose name starts with `horsies_`. */
export const RoutineDefinitionList = statement<{ schema: string }, RoutineDefinitionRow>(
  'RoutineDefinitionList',
  `SELECT p.proname AS name, pg_catalog.pg_get_functiondef(p.oid) AS definition
   FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = $1 AND p.prokind IN ('f', 'p') AND p.proname LIKE 'horsies\\_%'
   ORDER BY p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)`,
  ({ schema }) => [schema],
);

/** A row of {@link RoutineDefinitionList}. */
export interface RoutineDefinitionRow {
  name: string;
  definition: string;
}

/** A routine whose installed definition is not its file's. */
export interface RoutineDrift {
  name: string;
  /**
   * `missing`: not installed; `changed`: installed with another definition (body, arguments or settings);
   * `overloaded`: installed more than once, with several argument lists; `unknown`: installed, and no file defines
   * it (left over, or made by hand).
   */
  problem: 'missing' | 'changed' | 'overloaded' | 'unknown';
  /** The routine's file, relative to the package's `db/` folder, when one defines it. */
  file: string | null;
}

/**
 * A definition as compared: the schema's name taken out of the function's own name and argument types (which
 * `pg_get_functiondef` prints bare or quoted, as needed), white space runs made one space, no final `;`.
 */
function comparable(definition: string, schema: string): string {
  const split = definition.search(/\nAS \$/);
  const head = split < 0 ? definition : definition.slice(0, split);
  const rest = split < 0 ? '' : definition.slice(split);
  return (head.replaceAll(`${quoteIdentifier(schema)}.`, '').replaceAll(`${schema}.`, '') + rest)
    .replace(/;\s*$/, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * A function a migration put aside, renamed `<name>_retired`, for the calls of older workers in flight while it
 * committed (a dropped function fails them: `0032_claim_token.sql`). No file defines it; a later release drops it.
 */
export function isRetiredRoutine(name: string): boolean {
  return name.endsWith('_retired');
}

/**
 * The drift of installed routines (rows of {@link RoutineDefinitionList}) from the routine files: every routine
 * whose installed definition is not its file's, and those no file defines (retired ones aside).
 */
export function driftOf(routines: Routine[], rows: RoutineDefinitionRow[], schema: string): RoutineDrift[] {
  const installed = new Map<string, string[]>();
  for (const row of rows) installed.set(row.name, [...(installed.get(row.name) ?? []), row.definition]);
  const drift: RoutineDrift[] = [];
  for (const routine of routines) {
    const file = `routines/${routine.name}.sql`;
    const have = installed.get(routine.name) ?? [];
    installed.delete(routine.name);
    const want = comparable(renderSql(routineDefinition(routine), schema), schema);
    if (have.length === 0) drift.push({ name: routine.name, problem: 'missing', file });
    else if (have.length > 1) drift.push({ name: routine.name, problem: 'overloaded', file });
    else if (comparable(have[0] ?? '', schema) !== want)
      drift.push({ name: routine.name, problem: 'changed', file });
  }
  for (const name of installed.keys()) {
    if (!isRetiredRoutine(name)) drift.push({ name, problem: 'unknown', file: null });
  }
  return drift;
}

/** Every routine of the schema whose installed definition differs from its file's, and those no file defines. */
export async function routineDrift(
  db: Database,
  routines: Routine[] = loadRoutines(),
): Promise<RoutineDrift[]> {
  return driftOf(routines, await db.run(RoutineDefinitionList, { schema: db.schema }), db.schema);
}
