/**
 * A normalised text of everything a migrate creates in a schema, read back from PostgreSQL's catalog: user types,
 * sequences, tables (columns with type, collation, default, identity or generation, NOT NULL; storage options,
 * the TOAST table's included), views, constraints (`pg_get_constraintdef`), indexes (`pg_get_indexdef`), extended
 * statistics, functions and procedures (`pg_get_functiondef`, with their `SET`s), triggers (`pg_get_triggerdef`)
 * and comments, ordered by kind then name. The schema's name is replaced by `{{schema}}`, so the text is the same
 * whatever schema it was read from. Rows are data, not schema: of the migrations table only the applied versions
 * are listed. Owners and privileges are left out (they depend on the roles of the database, not on the migrations).
 *
 * `src/db/schema.sql` holds the dump of a fresh migrate; `npm run schema:check` (part of `npm run check`) and
 * `test/db/schemaDump.test.ts` compare it, so a change to the schema shows in review as a diff of that file, and an
 * upgrade path that ends anywhere else than a fresh migrate fails. graphile-worker does the same with `pg_dump`;
 * here `pg_dump` cannot be used: a `pg_dump` refuses a server newer than itself, and the Debian `pg_dump` of the
 * development machines (15) is older than the embedded server (18). The catalog queries below need no client
 * binary. The deparsed definitions may change with the server's major version; today's schema reads the same on
 * PostgreSQL 15 and 18, and the committed file is written against the embedded server.
 */
import type { Database } from './Database.js';
import { statement } from './sql.js';
import type { Statement } from './sql.js';

/** Parameters of every catalog statement of the dump: the schema's name (a value, not an identifier). */
interface DumpParams {
  schema: string;
}

/**
 * Names in the deparsed definitions are qualified by schema unless the schema is on the search path: pinned for
 * the dump's transaction, so the text does not depend on the connection's or the role's search path.
 */
export const DumpSearchPathSet = statement<Record<string, never>, { search_path: string }>(
  'DumpSearchPathSet',
  `SELECT set_config('search_path', 'pg_catalog', true) AS search_path`,
  () => [],
);

/** A row of {@link SchemaTableList}. */
export interface SchemaTableRow {
  name: string;
  /** `r` table, `p` partitioned table, `f` foreign table. */
  kind: string;
  /** `p` permanent, `u` unlogged. */
  persistence: string;
  /** Access method when not the default `heap` (null for a partitioned table). */
  access_method: string | null;
  tablespace: string | null;
  /** Storage parameters (`fillfactor=85`, `autovacuum_...`), and the TOAST table's. */
  options: string[] | null;
  toast_options: string[] | null;
  partition_key: string | null;
  partition_bound: string | null;
  /** Tables it inherits from (or is a partition of), qualified. */
  parents: string[];
  /** `d` default, `n` nothing, `f` full, `i` index. */
  replica_identity: string;
  replica_identity_index: string | null;
  row_security: boolean;
  force_row_security: boolean;
}

/** The tables of a schema, with their storage options. */
export const SchemaTableList = statement<DumpParams, SchemaTableRow>(
  'SchemaTableList',
  `SELECT c.relname AS name, c.relkind::text AS kind, c.relpersistence::text AS persistence,
     CASE WHEN am.amname <> 'heap' THEN am.amname END AS access_method,
     ts.spcname AS tablespace, c.reloptions AS options, tc.reloptions AS toast_options,
     CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END AS partition_key,
     CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END AS partition_bound,
     ARRAY(SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid ORDER BY i.inhseqno)
       AS parents,
     c.relreplident::text AS replica_identity,
     (SELECT ic.relname FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
      WHERE x.indrelid = c.oid AND x.indisreplident) AS replica_identity_index,
     c.relrowsecurity AS row_security, c.relforcerowsecurity AS force_row_security
   FROM pg_class c
   JOIN pg_namespace n ON n.oid = c.relnamespace
   LEFT JOIN pg_am am ON am.oid = c.relam
   LEFT JOIN pg_tablespace ts ON ts.oid = c.reltablespace
   LEFT JOIN pg_class tc ON tc.oid = c.reltoastrelid
   WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'f')
   ORDER BY c.relname COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaColumnList}. */
export interface SchemaColumnRow {
  /** The table or composite type. */
  relation: string;
  name: string;
  type: string;
  /** The column's collation when not its type's default. */
  collation: string | null;
  not_null: boolean;
  /** The default, or the generation expression of a generated column. */
  default_expr: string | null;
  /** `a` always, `d` by default, empty: not an identity column. */
  identity: string;
  /** `s` stored, `v` virtual, empty: not generated. */
  generated: string;
  /** `SET STATISTICS`, when set. */
  statistics: number | null;
  /** `p`, `e`, `m`, `x` when not the type's default storage. */
  storage: string | null;
  compression: string | null;
  options: string[] | null;
}

/** The columns of a schema's tables and composite types, in their order. */
export const SchemaColumnList = statement<DumpParams, SchemaColumnRow>(
  'SchemaColumnList',
  `SELECT c.relname AS relation, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
     CASE WHEN a.attcollation <> t.typcollation THEN
       CASE WHEN cn.nspname = 'pg_catalog' THEN quote_ident(co.collname)
            ELSE quote_ident(cn.nspname) || '.' || quote_ident(co.collname) END
     END AS collation,
     a.attnotnull AS not_null, pg_get_expr(ad.adbin, ad.adrelid, true) AS default_expr,
     a.attidentity::text AS identity, a.attgenerated::text AS generated,
     NULLIF(a.attstattarget::int, -1) AS statistics,
     CASE WHEN a.attstorage <> t.typstorage THEN a.attstorage::text END AS storage,
     NULLIF(a.attcompression::text, '') AS compression,
     a.attoptions AS options
   FROM pg_attribute a
   JOIN pg_class c ON c.oid = a.attrelid
   JOIN pg_namespace n ON n.oid = c.relnamespace
   JOIN pg_type t ON t.oid = a.atttypid
   LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
   LEFT JOIN pg_collation co ON co.oid = a.attcollation
   LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
   WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'f', 'c') AND a.attnum > 0 AND NOT a.attisdropped
   ORDER BY c.relname COLLATE "C", a.attnum`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaConstraintList}. */
export interface SchemaConstraintRow {
  /** The table, or the domain. */
  owner: string;
  owner_kind: 'table' | 'domain';
  name: string;
  definition: string;
}

/** The constraints of a schema's tables and domains. */
export const SchemaConstraintList = statement<DumpParams, SchemaConstraintRow>(
  'SchemaConstraintList',
  `SELECT coalesce(c.relname, t.typname) AS owner,
     CASE WHEN co.contypid <> 0 THEN 'domain' ELSE 'table' END AS owner_kind,
     co.conname AS name, pg_get_constraintdef(co.oid, true) AS definition
   FROM pg_constraint co
   JOIN pg_namespace n ON n.oid = co.connamespace
   LEFT JOIN pg_class c ON c.oid = co.conrelid AND co.conrelid <> 0
   LEFT JOIN pg_type t ON t.oid = co.contypid AND co.contypid <> 0
   WHERE n.nspname = $1
     -- PostgreSQL 18 records every NOT NULL as a constraint too, named <table>_<column>_not_null: the column's
     -- NOT NULL says it already. One with another name, not valid, or not inherited stays.
     AND NOT (co.contype = 'n' AND co.conrelid <> 0 AND co.convalidated AND NOT co.connoinherit
              AND co.conname = c.relname || '_' || (SELECT a.attname FROM pg_attribute a
                                                     WHERE a.attrelid = co.conrelid AND a.attnum = co.conkey[1])
                               || '_not_null')
   ORDER BY co.contypid <> 0, coalesce(c.relname, t.typname) COLLATE "C", co.conname COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaIndexList}. */
export interface SchemaIndexRow {
  name: string;
  definition: string;
  clustered: boolean;
  /** False for an index a failed `CREATE INDEX CONCURRENTLY` left behind. */
  valid: boolean;
}

/** The indexes of a schema, those of constraints included. */
export const SchemaIndexList = statement<DumpParams, SchemaIndexRow>(
  'SchemaIndexList',
  `SELECT i.relname AS name, pg_get_indexdef(x.indexrelid) AS definition,
     x.indisclustered AS clustered, x.indisvalid AS valid
   FROM pg_index x
   JOIN pg_class i ON i.oid = x.indexrelid
   JOIN pg_namespace n ON n.oid = i.relnamespace
   WHERE n.nspname = $1
   ORDER BY i.relname COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaSequenceList}. */
export interface SchemaSequenceRow {
  name: string;
  persistence: string;
  type: string;
  start: string;
  increment: string;
  min: string;
  max: string;
  cache: string;
  cycle: boolean;
  /** `table.column` of the column that owns it (serial or identity), qualified. */
  owned_by: string | null;
}

/** The sequences of a schema, with their parameters (not their current values: data). */
export const SchemaSequenceList = statement<DumpParams, SchemaSequenceRow>(
  'SchemaSequenceList',
  `SELECT c.relname AS name, c.relpersistence::text AS persistence, format_type(s.seqtypid, NULL) AS type,
     s.seqstart::text AS start, s.seqincrement::text AS increment, s.seqmin::text AS min,
     s.seqmax::text AS max, s.seqcache::text AS cache, s.seqcycle AS cycle,
     (SELECT d.refobjid::regclass::text || '.' || quote_ident(a.attname)
      FROM pg_depend d
      JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
      WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.refclassid = 'pg_class'::regclass
        AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i')
      LIMIT 1) AS owned_by
   FROM pg_sequence s
   JOIN pg_class c ON c.oid = s.seqrelid
   JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = $1
   ORDER BY c.relname COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaViewList}. */
export interface SchemaViewRow {
  name: string;
  /** `v` view, `m` materialized view. */
  kind: string;
  definition: string;
  options: string[] | null;
}

/** The views and materialized views of a schema. */
export const SchemaViewList = statement<DumpParams, SchemaViewRow>(
  'SchemaViewList',
  `SELECT c.relname AS name, c.relkind::text AS kind, pg_get_viewdef(c.oid, true) AS definition,
     c.reloptions AS options
   FROM pg_class c
   JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = $1 AND c.relkind IN ('v', 'm')
   ORDER BY c.relname COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaRoutineList}. */
export interface SchemaRoutineRow {
  name: string;
  arguments: string;
  /** `f` function, `p` procedure, `w` window function, `a` aggregate. */
  kind: string;
  /** `CREATE OR REPLACE ...` as `pg_get_functiondef` gives it; null for an aggregate, which it cannot show. */
  definition: string | null;
}

/** The functions and procedures of a schema, overloads ordered by their arguments. */
export const SchemaRoutineList = statement<DumpParams, SchemaRoutineRow>(
  'SchemaRoutineList',
  `SELECT p.proname AS name, pg_get_function_identity_arguments(p.oid) AS arguments, p.prokind::text AS kind,
     CASE WHEN p.prokind <> 'a' THEN pg_get_functiondef(p.oid) END AS definition
   FROM pg_proc p
   JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = $1
   ORDER BY p.proname COLLATE "C", pg_get_function_identity_arguments(p.oid) COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaTriggerList}. */
export interface SchemaTriggerRow {
  table_name: string;
  name: string;
  definition: string;
  /** `O` enabled (origin and local), `D` disabled, `R` replica, `A` always. */
  enabled: string;
}

/** The triggers of a schema's tables (not the internal ones of foreign keys). */
export const SchemaTriggerList = statement<DumpParams, SchemaTriggerRow>(
  'SchemaTriggerList',
  `SELECT c.relname AS table_name, tg.tgname AS name, pg_get_triggerdef(tg.oid, true) AS definition,
     tg.tgenabled::text AS enabled
   FROM pg_trigger tg
   JOIN pg_class c ON c.oid = tg.tgrelid
   JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = $1 AND NOT tg.tgisinternal
   ORDER BY c.relname COLLATE "C", tg.tgname COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaStatisticsList}. */
export interface SchemaStatisticsRow {
  name: string;
  definition: string;
  statistics: number | null;
}

/** The extended statistics objects of a schema (`CREATE STATISTICS`). */
export const SchemaStatisticsList = statement<DumpParams, SchemaStatisticsRow>(
  'SchemaStatisticsList',
  `SELECT s.stxname AS name, pg_get_statisticsobjdef(s.oid) AS definition,
     NULLIF(s.stxstattarget::int, -1) AS statistics
   FROM pg_statistic_ext s
   JOIN pg_namespace n ON n.oid = s.stxnamespace
   WHERE n.nspname = $1
   ORDER BY s.stxname COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaTypeList}. */
export interface SchemaTypeRow {
  name: string;
  /** `e` enum, `d` domain, `r` range, `c` composite, `b` base. */
  kind: string;
  /** The statement for an enum, domain, range or base type; null for a composite type (its columns tell). */
  definition: string | null;
}

/**
 * The types created in a schema: enums, domains, ranges, composite and base types. Not the row types of tables
 * and views, nor the array and multirange types PostgreSQL creates beside a type.
 */
export const SchemaTypeList = statement<DumpParams, SchemaTypeRow>(
  'SchemaTypeList',
  `SELECT t.typname AS name, t.typtype::text AS kind,
     CASE t.typtype
       WHEN 'e' THEN format('CREATE TYPE %I.%I AS ENUM (%s);', n.nspname, t.typname,
         (SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder)
          FROM pg_enum e WHERE e.enumtypid = t.oid))
       WHEN 'd' THEN format('CREATE DOMAIN %I.%I AS %s%s%s%s;', n.nspname, t.typname,
         format_type(t.typbasetype, t.typtypmod),
         CASE WHEN t.typcollation <> bt.typcollation THEN ' COLLATE ' || t.typcollation::regcollation::text END,
         CASE WHEN t.typdefault IS NOT NULL THEN ' DEFAULT ' || t.typdefault END,
         CASE WHEN t.typnotnull THEN ' NOT NULL' END)
       WHEN 'r' THEN format('CREATE TYPE %I.%I AS RANGE (subtype = %s);', n.nspname, t.typname,
         (SELECT format_type(r.rngsubtype, NULL) FROM pg_range r WHERE r.rngtypid = t.oid))
       WHEN 'b' THEN format('CREATE TYPE %I.%I (input = %s, output = %s);', n.nspname, t.typname,
         t.typinput::regproc::text, t.typoutput::regproc::text)
     END AS definition
   FROM pg_type t
   JOIN pg_namespace n ON n.oid = t.typnamespace
   LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
   LEFT JOIN pg_class c ON c.oid = t.typrelid
   WHERE n.nspname = $1 AND t.typtype IN ('b', 'c', 'd', 'e', 'r')
     AND (t.typrelid = 0 OR c.relkind = 'c')
     AND NOT EXISTS (SELECT 1 FROM pg_type a WHERE a.typarray = t.oid)
   ORDER BY t.typname COLLATE "C"`,
  ({ schema }) => [schema],
);

/** A row of {@link SchemaCommentList}. */
export interface SchemaCommentRow {
  /** What is commented, as `COMMENT ON` names it (`table`, `column`, `function`, ...). */
  kind: string;
  /** The object's name, for ordering (`table.column`, `name(arguments)`, `table.constraint`). */
  name: string;
  /** The whole `COMMENT ON ... IS '...';` statement. */
  statement: string;
}

/** The comments on a schema and on the objects in it. */
export const SchemaCommentList = statement<DumpParams, SchemaCommentRow>(
  'SchemaCommentList',
  `SELECT kind, name, statement FROM (
     SELECT 'schema' AS kind, n.nspname AS name,
       format('COMMENT ON SCHEMA %I IS %L;', n.nspname, d.description) AS statement
     FROM pg_description d JOIN pg_namespace n ON n.oid = d.objoid
     WHERE d.classoid = 'pg_namespace'::regclass AND n.nspname = $1
     UNION ALL
     SELECT lower(k.word), c.relname,
       format('COMMENT ON %s %I.%I IS %L;', k.word, n.nspname, c.relname, d.description)
     FROM pg_description d
     JOIN pg_class c ON c.oid = d.objoid
     JOIN pg_namespace n ON n.oid = c.relnamespace
     CROSS JOIN LATERAL (SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
       WHEN 'i' THEN 'INDEX' WHEN 'I' THEN 'INDEX' WHEN 'S' THEN 'SEQUENCE' WHEN 'c' THEN 'TYPE'
       WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END AS word) k
     WHERE d.classoid = 'pg_class'::regclass AND d.objsubid = 0 AND n.nspname = $1
     UNION ALL
     SELECT 'column', c.relname || '.' || a.attname,
       format('COMMENT ON COLUMN %I.%I.%I IS %L;', n.nspname, c.relname, a.attname, d.description)
     FROM pg_description d
     JOIN pg_class c ON c.oid = d.objoid
     JOIN pg_namespace n ON n.oid = c.relnamespace
     JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid
     WHERE d.classoid = 'pg_class'::regclass AND d.objsubid > 0 AND n.nspname = $1
     UNION ALL
     SELECT lower(k.word), p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       format('COMMENT ON %s %I.%I(%s) IS %L;', k.word, n.nspname, p.proname,
         pg_get_function_identity_arguments(p.oid), d.description)
     FROM pg_description d
     JOIN pg_proc p ON p.oid = d.objoid
     JOIN pg_namespace n ON n.oid = p.pronamespace
     CROSS JOIN LATERAL (SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' WHEN 'a' THEN 'AGGREGATE'
       ELSE 'FUNCTION' END AS word) k
     WHERE d.classoid = 'pg_proc'::regclass AND n.nspname = $1
     UNION ALL
     SELECT 'constraint', coalesce(c.relname, t.typname) || '.' || co.conname,
       CASE WHEN co.contypid <> 0
         THEN format('COMMENT ON CONSTRAINT %I ON DOMAIN %I.%I IS %L;', co.conname, n.nspname, t.typname,
           d.description)
         ELSE format('COMMENT ON CONSTRAINT %I ON %I.%I IS %L;', co.conname, n.nspname, c.relname,
           d.description)
       END
     FROM pg_description d
     JOIN pg_constraint co ON co.oid = d.objoid
     JOIN pg_namespace n ON n.oid = co.connamespace
     LEFT JOIN pg_class c ON c.oid = co.conrelid AND co.conrelid <> 0
     LEFT JOIN pg_type t ON t.oid = co.contypid AND co.contypid <> 0
     WHERE d.classoid = 'pg_constraint'::regclass AND n.nspname = $1
     UNION ALL
     SELECT 'trigger', c.relname || '.' || tg.tgname,
       format('COMMENT ON TRIGGER %I ON %I.%I IS %L;', tg.tgname, n.nspname, c.relname, d.description)
     FROM pg_description d
     JOIN pg_trigger tg ON tg.oid = d.objoid
     JOIN pg_class c ON c.oid = tg.tgrelid
     JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE d.classoid = 'pg_trigger'::regclass AND n.nspname = $1
     UNION ALL
     SELECT 'type', t.typname, format('COMMENT ON TYPE %I.%I IS %L;', n.nspname, t.typname, d.description)
     FROM pg_description d
     JOIN pg_type t ON t.oid = d.objoid
     JOIN pg_namespace n ON n.oid = t.typnamespace
     WHERE d.classoid = 'pg_type'::regclass AND n.nspname = $1
     UNION ALL
     SELECT 'statistics', s.stxname,
       format('COMMENT ON STATISTICS %I.%I IS %L;', n.nspname, s.stxname, d.description)
     FROM pg_description d
     JOIN pg_statistic_ext s ON s.oid = d.objoid
     JOIN pg_namespace n ON n.oid = s.stxnamespace
     WHERE d.classoid = 'pg_statistic_ext'::regclass AND n.nspname = $1
   ) comments
   ORDER BY comments.kind COLLATE "C", comments.name COLLATE "C"`,
  ({ schema }) => [schema],
);

/** The migrations applied to the schema (their versions and names only: the rest of the rows is data). */
export const SchemaMigrationList = statement<Record<string, never>, { version: number; name: string }>(
  'SchemaMigrationList',
  'SELECT version, name FROM {{schema}}.horsies_schema_migrations ORDER BY version',
  () => [],
);

/** Drops the schema and everything in it. */
export const SchemaDrop = statement<Record<string, never>, never>(
  'SchemaDrop',
  'DROP SCHEMA IF EXISTS {{schema}} CASCADE',
  () => [],
);

/** The table the migrator records applied migrations in. */
const MIGRATIONS_TABLE = 'horsies_schema_migrations';

/** Placeholder of the schema's name in the dump, as in the migrations' SQL. */
export const SCHEMA_PLACEHOLDER = '{{schema}}';

/**
 * The normalised text of the schema of `db` (see the module's header): the same for the same objects on the same
 * server version, whatever the schema's name and the connection's search path. Read in one transaction, which
 * changes nothing.
 */
export async function dumpSchema(db: Database): Promise<string> {
  const catalog = await db.transaction(async (client) => {
    await db.run(DumpSearchPathSet, {}, client);
    const read = <R>(stmt: Statement<DumpParams, R>): Promise<R[]> =>
      db.run(stmt, { schema: db.schema }, client);
    const tables = await read(SchemaTableList);
    return {
      migrations: tables.some((t) => t.name === MIGRATIONS_TABLE)
        ? await db.run(SchemaMigrationList, {}, client)
        : [],
      types: await read(SchemaTypeList),
      sequences: await read(SchemaSequenceList),
      tables,
      columns: await read(SchemaColumnList),
      views: await read(SchemaViewList),
      constraints: await read(SchemaConstraintList),
      indexes: await read(SchemaIndexList),
      statistics: await read(SchemaStatisticsList),
      routines: await read(SchemaRoutineList),
      triggers: await read(SchemaTriggerList),
      comments: await read(SchemaCommentList),
    };
  });
  const columnsOf = new Map<string, SchemaColumnRow[]>();
  for (const column of catalog.columns) {
    const list = columnsOf.get(column.relation) ?? [];
    list.push(column);
    columnsOf.set(column.relation, list);
  }
  const q = (name: string): string => `${SCHEMA_PLACEHOLDER}.${quoteName(name)}`;
  const blocks: string[] = [
    [
      '-- applied migrations (the versions only; the rest of the rows is data):',
      ...catalog.migrations.map((m) => `--   ${String(m.version).padStart(4, '0')} ${m.name}`),
    ].join('\n'),
    ...catalog.types.map((t) =>
      block(
        `type ${t.name}`,
        t.kind === 'c'
          ? `CREATE TYPE ${q(t.name)} AS ${columnList(columnsOf.get(t.name) ?? [])};`
          : t.definition,
      ),
    ),
    ...catalog.sequences.map((s) => block(`sequence ${s.name}`, sequenceText(s, q(s.name)))),
    ...catalog.tables.map((t) =>
      block(`table ${t.name}`, tableText(t, q(t.name), columnsOf.get(t.name) ?? [])),
    ),
    ...catalog.views.map((v) =>
      block(
        `${v.kind === 'm' ? 'materialized view' : 'view'} ${v.name}`,
        `CREATE ${v.kind === 'm' ? 'MATERIALIZED VIEW' : 'VIEW'} ${q(v.name)}${withOptions(v.options)} AS\n` +
          `${v.definition.trimEnd().replace(/;$/, '')};`,
      ),
    ),
    ...catalog.constraints.map((c) =>
      block(
        `constraint ${c.owner}.${c.name}`,
        `ALTER ${c.owner_kind === 'domain' ? 'DOMAIN' : 'TABLE'} ${q(c.owner)} ADD CONSTRAINT ` +
          `${quoteName(c.name)} ${c.definition};`,
      ),
    ),
    ...catalog.indexes.map((i) =>
      block(
        `index ${i.name}`,
        [
          `${i.definition};`,
          ...(i.valid ? [] : ['-- INVALID: left by a failed CREATE INDEX CONCURRENTLY']),
          ...(i.clustered ? [`-- CLUSTER ON ${quoteName(i.name)}`] : []),
        ].join('\n'),
      ),
    ),
    ...catalog.statistics.map((s) =>
      block(
        `statistics ${s.name}`,
        [
          `${s.definition};`,
          ...(s.statistics === null ? [] : [`ALTER STATISTICS ${q(s.name)} SET STATISTICS ${s.statistics};`]),
        ].join('\n'),
      ),
    ),
    ...catalog.routines.map((r) =>
      block(
        `${ROUTINE_KINDS[r.kind] ?? 'routine'} ${r.name}(${r.arguments})`,
        r.definition === null
          ? `-- CREATE AGGREGATE ${q(r.name)}(${r.arguments})`
          : `${r.definition.trimEnd()};`,
      ),
    ),
    ...catalog.triggers.map((t) =>
      block(
        `trigger ${t.table_name}.${t.name}`,
        [
          `${t.definition};`,
          ...(t.enabled === 'O'
            ? []
            : [
                `ALTER TABLE ${q(t.table_name)} ${TRIGGER_STATES[t.enabled] ?? t.enabled} ${quoteName(t.name)};`,
              ]),
        ].join('\n'),
      ),
    ),
    ...catalog.comments.map((c) => block(`comment on ${c.kind} ${c.name}`, c.statement)),
  ];
  return normalise(`${blocks.join('\n\n')}\n`, db.schema);
}

/** The text of `src/db/schema.sql`: a header that says how it is made, then the dump. */
export function schemaFileText(dump: string): string {
  return [
    '-- Generated: do not edit. The schema a fresh migrate creates, read back from the catalog by',
    '-- src/db/schemaDump.ts; {{schema}} stands for the schema name. Update it with `npm run schema:write`;',
    '-- `npm run schema:check` (part of `npm run check`) and test/db/schemaDump.test.ts compare it with a migrate.',
    '',
    dump,
  ].join('\n');
}

const ROUTINE_KINDS: Record<string, string> = {
  f: 'function',
  p: 'procedure',
  w: 'window function',
  a: 'aggregate',
};

const TRIGGER_STATES: Record<string, string> = {
  D: 'DISABLE TRIGGER',
  R: 'ENABLE REPLICA TRIGGER',
  A: 'ENABLE ALWAYS TRIGGER',
};

const STORAGE: Record<string, string> = { p: 'PLAIN', e: 'EXTERNAL', m: 'MAIN', x: 'EXTENDED' };

function block(title: string, text: string | null): string {
  return `-- ${title}\n${text ?? '-- (no definition)'}`;
}

function tableText(table: SchemaTableRow, name: string, columns: SchemaColumnRow[]): string {
  const create =
    table.kind === 'f'
      ? 'CREATE FOREIGN TABLE'
      : table.persistence === 'u'
        ? 'CREATE UNLOGGED TABLE'
        : 'CREATE TABLE';
  const parents = table.partition_bound === null && table.parents.length > 0 ? table.parents : [];
  const options = [...(table.options ?? []), ...(table.toast_options ?? []).map((o) => `toast.${o}`)];
  const head = [
    `${create} ${name} ${columnList(columns)}`,
    ...(parents.length > 0 ? [`INHERITS (${parents.join(', ')})`] : []),
    ...(table.partition_key === null ? [] : [`PARTITION BY ${table.partition_key}`]),
    ...(table.access_method === null ? [] : [`USING ${table.access_method}`]),
    ...(options.length > 0 ? [`WITH (${options.join(', ')})`] : []),
    ...(table.tablespace === null ? [] : [`TABLESPACE ${quoteName(table.tablespace)}`]),
  ].join('\n');
  const after: string[] = [];
  if (table.partition_bound !== null) {
    for (const parent of table.parents) {
      after.push(`ALTER TABLE ${parent} ATTACH PARTITION ${name} ${table.partition_bound};`);
    }
  }
  for (const column of columns) {
    const alter = `ALTER TABLE ONLY ${name} ALTER COLUMN ${quoteName(column.name)}`;
    if (column.statistics !== null) after.push(`${alter} SET STATISTICS ${column.statistics};`);
    if (column.options !== null) after.push(`${alter} SET (${column.options.join(', ')});`);
  }
  if (table.replica_identity !== 'd') {
    const identity =
      table.replica_identity === 'i'
        ? `USING INDEX ${quoteName(table.replica_identity_index ?? '?')}`
        : table.replica_identity === 'f'
          ? 'FULL'
          : 'NOTHING';
    after.push(`ALTER TABLE ${name} REPLICA IDENTITY ${identity};`);
  }
  if (table.row_security) after.push(`ALTER TABLE ${name} ENABLE ROW LEVEL SECURITY;`);
  if (table.force_row_security) after.push(`ALTER TABLE ${name} FORCE ROW LEVEL SECURITY;`);
  return [`${head};`, ...after].join('\n');
}

function columnList(columns: SchemaColumnRow[]): string {
  if (columns.length === 0) return '()';
  return `(\n${columns.map((c) => `  ${columnText(c)}`).join(',\n')}\n)`;
}

function columnText(column: SchemaColumnRow): string {
  const parts = [quoteName(column.name), column.type];
  if (column.collation !== null) parts.push(`COLLATE ${column.collation}`);
  if (column.storage !== null) parts.push(`STORAGE ${STORAGE[column.storage] ?? column.storage}`);
  if (column.compression !== null) parts.push(`COMPRESSION ${column.compression}`);
  if (column.identity === 'a') parts.push('GENERATED ALWAYS AS IDENTITY');
  else if (column.identity === 'd') parts.push('GENERATED BY DEFAULT AS IDENTITY');
  else if (column.generated !== '' && column.default_expr !== null) {
    parts.push(
      `GENERATED ALWAYS AS (${column.default_expr}) ${column.generated === 'v' ? 'VIRTUAL' : 'STORED'}`,
    );
  } else if (column.default_expr !== null) parts.push(`DEFAULT ${column.default_expr}`);
  if (column.not_null) parts.push('NOT NULL');
  return parts.join(' ');
}

function sequenceText(sequence: SchemaSequenceRow, name: string): string {
  const create = sequence.persistence === 'u' ? 'CREATE UNLOGGED SEQUENCE' : 'CREATE SEQUENCE';
  return (
    [
      `${create} ${name} AS ${sequence.type}`,
      `  START WITH ${sequence.start} INCREMENT BY ${sequence.increment}`,
      `  MINVALUE ${sequence.min} MAXVALUE ${sequence.max} CACHE ${sequence.cache}${sequence.cycle ? ' CYCLE' : ''}`,
      ...(sequence.owned_by === null ? [] : [`  OWNED BY ${sequence.owned_by}`]),
    ].join('\n') + ';'
  );
}

function withOptions(options: string[] | null): string {
  return options !== null && options.length > 0 ? ` WITH (${options.join(', ')})` : '';
}

/**
 * An identifier, bare when it is lower-case letters, digits and underscores. Unlike PostgreSQL's own quoting it does
 * not quote keywords: the names it prints head blocks and ALTER lines that are read, not run.
 */
function quoteName(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

/**
 * Replaces the schema's name with {@link SCHEMA_PLACEHOLDER} (quoted, as the migrations' rendered SQL has it,
 * and bare, as the catalog's deparsing prints it, as a whole word only: `horsies_tasks` stays in a schema named
 * `horsies`) and drops trailing blanks, which editors strip.
 */
function normalise(text: string, schema: string): string {
  const quoted = `"${schema.replace(/"/g, '""')}"`;
  const bare = new RegExp(`(?<![A-Za-z0-9_$"])${escapeRegExp(schema)}(?![A-Za-z0-9_$"])`, 'g');
  return text
    .replaceAll(quoted, SCHEMA_PLACEHOLDER)
    .replace(bare, SCHEMA_PLACEHOLDER)
    .replace(/[ \t]+$/gm, '');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
