/**
 * SQL text and its one templated identifier. A {@link Statement} is static SQL with `{{schema}}` standing for the
 * quoted schema name; {@link renderSql} renders it (also the migrations and routine files) for one schema. This
 * module imports nothing, so every part of `db/` (the migrator too) can use it without importing the pool.
 */

/** A named SQL statement with a typed parameter object and a typed result row. */
export interface Statement<P, R> {
  /** Noun then verb, e.g. `TaskClaim`. Also the prepared statement's name. */
  readonly name: string;
  /** SQL text; `{{schema}}` stands for the quoted schema name. */
  readonly sql: string;
  /** Maps the parameter object to positional values ($1, $2, ...). */
  readonly values: (params: P) => unknown[];
  /** Phantom field carrying the row type; never set. */
  readonly row?: R;
}

/** Defines a {@link Statement}. */
export function statement<P, R>(
  name: string,
  sql: string,
  values: (params: P) => unknown[],
): Statement<P, R> {
  return { name, sql, values };
}

/** Quotes an identifier for SQL. The only place an identifier enters SQL text. */
export function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Replaces `{{schema}}` in SQL text with the quoted schema name. */
export function renderSql(sql: string, schema: string): string {
  return sql.replaceAll('{{schema}}', quoteIdentifier(schema));
}
