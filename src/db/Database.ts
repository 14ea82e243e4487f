/**
 * The seam to PostgreSQL. Every statement the library runs is a named {@link Statement}: static SQL with
 * `{{schema}}` as the one templated identifier, rendered once per schema and sent as a named prepared statement.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { ConfigError } from '../errors.js';

/** Anything that can run a query: a `pg` Pool, PoolClient or Client (for example the caller's transaction). */
export interface Queryable {
  query(config: pg.QueryConfig): Promise<pg.QueryResult>;
}

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

const SCHEMA_NAME_PATTERN = /^[a-z_][a-z0-9_]*$/;
/** Longest schema name: it prefixes NOTIFY channel names, which PostgreSQL caps at 63 bytes. */
export const MAX_SCHEMA_NAME_LENGTH = 24;

/** Problems with a schema name, or an empty list when it is valid. */
export function schemaNameProblems(schema: unknown): string[] {
  if (typeof schema !== 'string') return ['must be a string'];
  const problems: string[] = [];
  if (!SCHEMA_NAME_PATTERN.test(schema)) {
    problems.push('must start with a lowercase letter or underscore and hold only a-z, 0-9 and _');
  }
  if (schema.length > MAX_SCHEMA_NAME_LENGTH)
    problems.push(`must be at most ${MAX_SCHEMA_NAME_LENGTH} characters`);
  if (schema.startsWith('pg_')) problems.push('must not start with pg_ (reserved by PostgreSQL)');
  return problems;
}

/** Quotes an identifier for SQL. The only place an identifier enters SQL text. */
export function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Replaces `{{schema}}` in SQL text with the quoted schema name. */
export function renderSql(sql: string, schema: string): string {
  return sql.replaceAll('{{schema}}', quoteIdentifier(schema));
}

/** How to reach the database. */
export interface DatabaseOptions {
  /** An existing pool. The library uses it and never ends it. */
  pool?: pg.Pool;
  /** Used to create a pool when `pool` is not given. */
  connectionString?: string;
  /** Size of a pool the library creates. Default 10. */
  poolSize?: number;
  /** The PostgreSQL schema that holds every table. */
  schema: string;
  /** Send statements as named prepared statements. Default true. */
  preparedStatements?: boolean;
}

/** Owns (or borrows) a pool and runs named statements against one schema. */
export class Database {
  readonly pool: pg.Pool;
  readonly schema: string;
  private readonly ownsPool: boolean;
  private readonly prepared: boolean;
  private readonly rendered = new Map<Statement<never, unknown>, pg.QueryConfig>();
  private readonly schemaTag: string;
  private ended = false;

  constructor(options: DatabaseOptions) {
    const problems = schemaNameProblems(options.schema);
    if (problems.length > 0) {
      throw new ConfigError(
        'database options',
        problems.map((message) => ({ field: 'schema', value: options.schema, message })),
      );
    }
    this.schema = options.schema;
    this.schemaTag = createHash('sha1').update(options.schema).digest('hex').slice(0, 8);
    this.prepared = options.preparedStatements ?? true;
    if (options.pool) {
      this.pool = options.pool;
      this.ownsPool = false;
    } else {
      this.pool = new pg.Pool({ connectionString: options.connectionString, max: options.poolSize ?? 10 });
      // An idle client losing its connection must not crash the process; the next checkout reconnects.
      this.pool.on('error', () => undefined);
      this.ownsPool = true;
    }
  }

  /** Connection settings for a dedicated connection outside the pool (LISTEN). */
  get connectionConfig(): pg.ClientConfig {
    return (this.pool as unknown as { options: pg.ClientConfig }).options;
  }

  /** Runs a statement on the pool, or on `on` (a caller's transaction). */
  async run<P, R>(stmt: Statement<P, R>, params: P, on?: Queryable): Promise<R[]> {
    const result = await (on ?? this.pool).query({ ...this.config(stmt), values: stmt.values(params) });
    return result.rows as R[];
  }

  /**
   * Runs `fn` inside a transaction on one pooled connection; rolls back if it throws. A connection lost while
   * `fn` is between queries rejects the next query instead of crashing the process (a checked-out client has no
   * error listener of the pool's), and the broken connection is discarded, not returned to the pool.
   */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    const onError = (error: Error): void => {
      broken = error;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const value = await fn(client);
      await client.query('COMMIT');
      return value;
    } catch (error) {
      if (!broken) await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  /** Ends the pool if this object created it. Idempotent. */
  async end(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    if (this.ownsPool) await this.pool.end();
  }

  private config<P, R>(stmt: Statement<P, R>): pg.QueryConfig {
    let config = this.rendered.get(stmt as Statement<never, unknown>);
    if (!config) {
      const text = renderSql(stmt.sql, this.schema);
      config = this.prepared ? { name: `horsies_${stmt.name}_${this.schemaTag}`, text } : { text };
      this.rendered.set(stmt as Statement<never, unknown>, config);
    }
    return config;
  }
}

/** PostgreSQL error classes worth a retry: connection loss, serialization failure, deadlock, shutdown. */
export function isTransientDatabaseError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    return (
      code.startsWith('08') || // connection exception
      code === '40001' || // serialization_failure
      code === '40P01' || // deadlock_detected
      code === '57P01' || // admin_shutdown
      code === '57P02' || // crash_shutdown
      code === '57P03' || // cannot_connect_now
      code === 'ECONNREFUSED' ||
      code === 'ECONNRESET' ||
      code === 'EPIPE' ||
      code === 'ETIMEDOUT'
    );
  }
  const message = error instanceof Error ? error.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(message);
}
