/**
 * The server-side routines of the hot path (claim, start, claim that starts: `horsies_claim_tasks`,
 * `horsies_start_tasks`, `horsies_claim_and_start`, called by `TaskClaim`, `TaskStartMany` and
 * `TaskClaimAndStart` in `tasks.ts`; the room under a cap, `horsies_cap_room`, called by `CapRoom` and
 * `TaskClaimWithinCap` in `capacity.ts`) live in the database, created by migrations. A hand edit of one of them in
 * a live database would change how every worker claims, unseen by the code: {@link routineDrift} compares each
 * installed body with the one its newest migration defines.
 */
import { renderSql, statement } from './Database.js';
import type { Database } from './Database.js';
import { loadMigrations } from './Migrator.js';
import type { Migration } from './Migrator.js';

/** The routines `tasks.ts` calls, by name. */
export const HOT_ROUTINES = [
  'horsies_claim_tasks',
  'horsies_start_tasks',
  'horsies_claim_and_start',
  'horsies_cap_room',
] as const;

/** The installed source of routines of a schema, by name. */
export const RoutineSourceList = statement<{ schema: string; names: readonly string[] }, RoutineSourceRow>(
  'RoutineSourceList',
  `SELECT p.proname AS name, p.prosrc AS source
   FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = $1 AND p.proname = ANY ($2::text[])`,
  ({ schema, names }) => [schema, names],
);

/** A row of {@link RoutineSourceList}. */
export interface RoutineSourceRow {
  name: string;
  source: string;
}

/** A routine whose installed body is not the one its migration defines. */
export interface RoutineDrift {
  name: string;
  /** `missing`: not installed; `changed`: installed with another body; `undefined`: no migration defines it. */
  problem: 'missing' | 'changed' | 'undefined';
  /** The migration that defines it last, when one does. */
  migration: string | null;
}

/** The body (schema not yet rendered) each routine gets from the newest migration that creates or replaces it. */
export function routineBodies(
  names: readonly string[],
  migrations: Migration[] = loadMigrations(),
): Map<string, { body: string; migration: string }> {
  const bodies = new Map<string, { body: string; migration: string }>();
  for (const m of migrations) {
    for (const name of names) {
      const header = new RegExp(
        `CREATE\\s+(?:OR\\s+REPLACE\\s+)?(?:FUNCTION|PROCEDURE)\\s+\\{\\{schema\\}\\}\\.${name}\\s*\\(`,
        'g',
      );
      for (const match of m.sql.matchAll(header)) {
        const open = m.sql.indexOf('$$', match.index);
        const close = open < 0 ? -1 : m.sql.indexOf('$$', open + 2);
        if (close > open) bodies.set(name, { body: m.sql.slice(open + 2, close), migration: m.name });
      }
    }
  }
  return bodies;
}

/** Routines of `names` (default: the hot path's) whose installed body differs from their migration's. */
export async function routineDrift(
  db: Database,
  names: readonly string[] = HOT_ROUTINES,
): Promise<RoutineDrift[]> {
  const expected = routineBodies(names);
  const installed = new Map(
    (await db.run(RoutineSourceList, { schema: db.schema, names })).map((r) => [r.name, r.source]),
  );
  const drift: RoutineDrift[] = [];
  for (const name of names) {
    const want = expected.get(name);
    const have = installed.get(name);
    if (!want) drift.push({ name, problem: 'undefined', migration: null });
    else if (have === undefined) drift.push({ name, problem: 'missing', migration: want.migration });
    else if (have !== renderSql(want.body, db.schema))
      drift.push({ name, problem: 'changed', migration: want.migration });
  }
  return drift;
}
