/**
 * The seam to PostgreSQL. Every statement the library runs is a named {@link Statement}: static SQL with
 * `{{schema}}` as the one templated identifier, rendered once per schema and sent as a named prepared statement.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import {
  ConfigError,
  DatabaseNotConfiguredError,
  DatabaseUnavailableError,
  DatabaseUrlError,
} from '../errors.js';
import { schemaNotMigrated } from './schemaVersion.js';
import { renderSql } from './sql.js';
import type { Statement } from './sql.js';
import { statementTypes } from './typeParsers.js';

/** Anything that can run a query: a `pg` Pool, PoolClient or Client (for example the caller's transaction). */
export interface Queryable {
  query(config: pg.QueryConfig): Promise<pg.QueryResult>;
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
  /**
   * Connection string of the LISTEN connections, when they must reach the server another way than the pool (a
   * direct or session-mode URL while the pool goes through a transaction-mode pooler). Default: the pool's.
   */
  listenConnectionString?: string;
  /**
   * `statement_timeout` and `lock_timeout` of the pool's connections, in ms, sent in the `options` startup
   * parameter when the pool is created here (not for a given `pool`; an `options` in the URL wins). 0 or absent:
   * the server's (or the role's) setting.
   */
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
}

/**
 * The timeouts as the `options` startup parameter (`-c statement_timeout=...`). One parameter rather than pg's
 * `statement_timeout` and `lock_timeout` fields: a pooler that is told to ignore `options` (PgBouncer's
 * `ignore_startup_parameters`) drops both and lets the connection through.
 */
function timeoutOptions(options: DatabaseOptions): { options?: string } {
  const settings: string[] = [];
  if (options.statementTimeoutMs) settings.push(`-c statement_timeout=${options.statementTimeoutMs}`);
  if (options.lockTimeoutMs) settings.push(`-c lock_timeout=${options.lockTimeoutMs}`);
  return settings.length > 0 ? { options: settings.join(' ') } : {};
}

/** Owns (or borrows) a pool and runs named statements against one schema. */
export class Database {
  readonly pool: pg.Pool;
  readonly schema: string;
  private readonly ownsPool: boolean;
  private readonly prepared: boolean;
  private readonly listenConnectionString: string | undefined;
  private readonly rendered = new Map<Statement<never, unknown>, pg.QueryConfig>();
  private readonly schemaTag: string;
  /**
   * Part of every prepared statement's name from the first stale plan on (see {@link isStalePlanError}): renamed,
   * the statements are prepared anew on every connection, the caller's and held transactions' included.
   */
  private generation = 0;
  private ended = false;
  /** False when neither a pool nor a connection string was given. */
  readonly configured: boolean = true;

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
    if (options.listenConnectionString !== undefined) checkDatabaseUrl(options.listenConnectionString);
    this.listenConnectionString = options.listenConnectionString;
    if (options.pool) {
      this.pool = options.pool;
      this.ownsPool = false;
    } else if (!options.connectionString) {
      // No silent default to a server on localhost: every checkout fails with the typed error. Defining tasks
      // needs no database, so the app may be created without one.
      this.pool = new pg.Pool({ max: options.poolSize ?? 10, Client: UnconfiguredClient });
      this.pool.on('error', () => undefined);
      this.ownsPool = true;
      this.configured = false;
    } else {
      checkDatabaseUrl(options.connectionString);
      this.pool = new pg.Pool({
        connectionString: options.connectionString,
        max: options.poolSize ?? 10,
        ...timeoutOptions(options),
      });
      // An idle client losing its connection must not crash the process; the next checkout reconnects.
      this.pool.on('error', () => undefined);
      this.ownsPool = true;
    }
  }

  /** Connection settings of the pool, for a dedicated connection outside it (a held transaction). */
  get connectionConfig(): pg.ClientConfig {
    if (!this.configured) throw new DatabaseNotConfiguredError();
    return (this.pool as unknown as { options: pg.ClientConfig }).options;
  }

  /** The pool's connection settings without its statement and lock timeouts (the server's or the role's apply). */
  get untimedConnectionConfig(): pg.ClientConfig {
    const { options: _timeouts, ...config } = this.connectionConfig;
    return config;
  }

  /**
   * Runs `fn` on a connection of its own, outside the pool and without the pool's statement and lock timeouts (the
   * server's or the role's apply), closed after: for maintenance that may take minutes (a vacuum of a large table),
   * which should neither hold one of the pool's connections nor be cut short by the app's timeout.
   */
  async withOwnConnection<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({
      ...this.untimedConnectionConfig,
      application_name: `horsies maintenance ${this.schema}`,
    });
    // A connection lost mid-statement rejects that statement; the error event must not crash the process.
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /**
   * Connection settings of a LISTEN connection: the listen connection string when one was given, else the pool's.
   * LISTEN is session state, which a transaction-mode pooler does not keep.
   */
  get listenConfig(): pg.ClientConfig {
    if (this.listenConnectionString !== undefined) return { connectionString: this.listenConnectionString };
    return this.connectionConfig;
  }

  /** Where the pool connects, as `host:port/database` (no credentials), for messages. */
  get target(): string {
    if (!this.configured) return '(none configured)';
    const options = (this.pool as unknown as { options: pg.ClientConfig }).options;
    const params = options.connectionString ? parseTarget(options.connectionString) : options;
    return `${params.host ?? process.env.PGHOST ?? 'localhost'}:${params.port ?? process.env.PGPORT ?? 5432}/${params.database ?? process.env.PGDATABASE ?? ''}`;
  }

  /**
   * Runs a statement on the pool, or on `on` (a caller's transaction). A statement that a connection prepared
   * before a migration changed the columns it returns fails there (see {@link isStalePlanError}): every statement
   * is then renamed, so that each connection prepares it anew, and on the pool this one runs again, once (no
   * connection has prepared the new name). On `on` it fails (the caller's transaction is aborted), and the next one
   * succeeds; {@link transaction} runs its function again for that reason.
   */
  async run<P, R>(stmt: Statement<P, R>, params: P, on?: Queryable): Promise<R[]> {
    const values = stmt.values(params);
    for (let retried = false; ; retried = true) {
      try {
        const result = await (on ?? this.pool).query({
          ...this.queryConfig(stmt),
          values,
          types: statementTypes,
        });
        return result.rows as R[];
      } catch (error) {
        if (isStalePlanError(error)) {
          this.renamePrepared();
          if (!on && !retried) continue;
        }
        throw await this.explain(error);
      }
    }
  }

  /**
   * Replaces PostgreSQL's words with ours where the cause is the schema or the connection: a missing horsies
   * table, schema or routine becomes a `SchemaNotMigratedError` that says to run `horsies migrate`; a connection
   * that could not be made, a `DatabaseUnavailableError` saying where and why (its `reason` keeps the code, which
   * {@link isTransientDatabaseError} reads). Other errors pass unchanged.
   */
  async explain(error: unknown): Promise<unknown> {
    // A connection that could not be made (refused, unknown host, wrong password, missing database) is said in
    // our words, as the CLI says it: a DatabaseUnavailableError, whose `reason` keeps the code.
    if (isConnectingFault(error)) return connectionFault(error, this.target) ?? error;
    if (!isMissingSchemaObject(error)) return error;
    return schemaNotMigrated(this, error);
  }

  /**
   * Runs `fn` inside a transaction on one pooled connection; rolls back if it throws. A connection lost while
   * `fn` is between queries rejects the next query instead of crashing the process (a checked-out client has no
   * error listener of the pool's), and the broken connection is discarded, not returned to the pool. A statement
   * gone stale under a migration (see {@link run}) rolls the transaction back and runs `fn` once more, with every
   * statement renamed: `fn` must be safe to run again after a rollback, as each of horsies' own is.
   */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    try {
      return await this.transactionOnce(fn);
    } catch (error) {
      if (!isStalePlanError(error)) throw error;
      return this.transactionOnce(fn);
    }
  }

  private async transactionOnce<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect().catch(async (error: unknown) => {
      throw await this.explain(error);
    });
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

  /**
   * A connection refused a prepared statement whose plan went stale (see {@link isStalePlanError}): every statement
   * is renamed, so that each connection prepares it anew.
   * @internal
   */
  renamePrepared(): void {
    this.generation += 1;
    this.rendered.clear();
  }

  /**
   * The statement as sent: its text for this schema, under its prepared name (unless prepared statements are off).
   * @internal
   */
  queryConfig<P, R>(stmt: Statement<P, R>): pg.QueryConfig {
    let config = this.rendered.get(stmt as Statement<never, unknown>);
    if (!config) {
      const text = renderSql(stmt.sql, this.schema);
      const suffix = this.generation > 0 ? `_${this.generation}` : '';
      config = this.prepared ? { name: `horsies_${stmt.name}_${this.schemaTag}${suffix}`, text } : { text };
      this.rendered.set(stmt as Statement<never, unknown>, config);
    }
    return config;
  }
}

/**
 * A named statement the connection prepared before a migration changed what it returns (a column's type or
 * collation; migration 26 changed the collation of the identifier columns): PostgreSQL refuses to run it again on
 * that connection, and would on every later call. Under another name it is prepared anew.
 */
export function isStalePlanError(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return (
    e?.code === '0A000' && typeof e.message === 'string' && e.message.includes('cached plan must not change')
  );
}

/**
 * PostgreSQL error classes worth a retry: connection loss, serialization failure, deadlock, shutdown. A
 * {@link DatabaseUnavailableError} is judged by its `reason`, the code of the fault it explains.
 */
export function isTransientDatabaseError(error: unknown): boolean {
  const code =
    error instanceof DatabaseUnavailableError ? error.reason : (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    return (
      code.startsWith('08') || // connection exception
      code === '40001' || // serialization_failure
      code === '40P01' || // deadlock_detected
      code === '55P03' || // lock_not_available: lock_timeout passed while another session held the lock
      (code === '57014' && /statement timeout/.test((error as Error).message)) || // query_canceled by statement_timeout
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

/**
 * A client for a pool without a connection string: it never connects, it fails with
 * {@link DatabaseNotConfiguredError} (pg would otherwise try a server on localhost).
 */
class UnconfiguredClient extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error) => void): void;
  override connect(callback?: (err: Error) => void): Promise<pg.Client> | void {
    const error = new DatabaseNotConfiguredError();
    if (callback) {
      process.nextTick(() => callback(error));
      return;
    }
    return Promise.reject(error);
  }
}

/**
 * Throws a {@link DatabaseUrlError} for a connection string pg would misread: pg resolves anything that is not a
 * `postgres://` URL or a socket path against `postgres://base`, so a plain word becomes the host "base".
 */
export function checkDatabaseUrl(url: string): void {
  if (url.startsWith('/') || url.startsWith('socket:')) return;
  if (!/^postgres(?:ql)?:\/\//i.test(url)) {
    throw new DatabaseUrlError(url, 'it does not start with postgres:// or postgresql://');
  }
  // Several hosts (host1,host2) are pg's extension, not a WHATWG URL; the rest must parse as one.
  const hosts = /^[^:]+:\/\/(?:[^@/]*@)?([^/?#]*)/.exec(url)?.[1] ?? '';
  if (hosts.includes(',')) return;
  const parsable = withStandInHost(url);
  for (const candidate of [parsable, encodeURI(parsable).replace(/%25(\d\d)/g, '%$1')]) {
    try {
      new URL(candidate); // an empty host is libpq's default socket: fine
      return;
    } catch {
      // try the next form
    }
  }
  throw new DatabaseUrlError(
    url,
    'it is not a valid URL (check the host, the port, and %-encode special characters)',
  );
}

const STAND_IN_HOST = 'stand-in.invalid';

/**
 * libpq's form for a user on the default socket, or on the socket given as `?host=`, has a user and no host
 * (`postgres://app@/app?host=/run/postgresql`), which pg reads but a WHATWG URL refuses: parsed with a stand-in
 * host, which the caller then ignores.
 */
function withStandInHost(url: string): string {
  return url.replace(/^([^:]+:\/\/[^@/?#]*@)(?=[/?#]|$)/, `$1${STAND_IN_HOST}`);
}

function parseTarget(url: string): { host?: string; port?: string | number; database?: string } {
  try {
    const parsed = new URL(withStandInHost(url));
    const hostname = parsed.hostname === STAND_IN_HOST ? '' : decodeURIComponent(parsed.hostname);
    return {
      host: parsed.searchParams.get('host') || hostname || undefined,
      port: parsed.port || undefined,
      database: decodeURIComponent(parsed.pathname.slice(1)) || undefined,
    };
  } catch {
    return {};
  }
}

// undefined_table, invalid_schema_name, undefined_function: naming one of ours.
function isMissingSchemaObject(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return (
    (code === '42P01' || code === '3F000' || code === '42883') &&
    typeof message === 'string' &&
    /horsies_|schema/.test(message)
  );
}

const CONNECTION_EXPLANATIONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused (ECONNREFUSED; is PostgreSQL running on this host and port?)',
  ENOTFOUND: 'unknown host (ENOTFOUND)',
  EAI_AGAIN: 'the host name could not be resolved (EAI_AGAIN)',
  ETIMEDOUT: 'the connection timed out (ETIMEDOUT)',
  EHOSTUNREACH: 'the host is unreachable (EHOSTUNREACH)',
  ENETUNREACH: 'the network is unreachable (ENETUNREACH)',
  ECONNRESET: 'the connection was reset (ECONNRESET)',
  '28P01': 'password authentication failed',
  '28000': 'the server refused the login (check the user and pg_hba.conf)',
  '3D000': 'the database does not exist',
  '57P03': 'the server is starting up',
};

/** Faults of making a connection (not of losing one mid-statement), by their codes. */
const CONNECTING_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  '28P01',
  '28000',
  '3D000',
  '57P03',
]);

function isConnectingFault(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONNECTING_CODES.has(code);
}

/**
 * A {@link DatabaseUnavailableError} for an error of connecting (refused, unknown host, timeout, bad login,
 * missing database), or null when `error` is something else. `target` names the server (`host:port/database`);
 * without it, what the error itself says.
 */
export function connectionFault(error: unknown, target?: string): DatabaseUnavailableError | null {
  if (error instanceof DatabaseUnavailableError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  let explanation = typeof code === 'string' ? CONNECTION_EXPLANATIONS[code] : undefined;
  if (!explanation && typeof code === 'string' && code.startsWith('08')) explanation = message;
  if (!explanation && /Connection terminated|connection timeout/i.test(message)) explanation = message;
  if (!explanation) return null;
  const detail =
    typeof code === 'string' && code.startsWith('E') ? explanation : `${explanation} (${message})`;
  return new DatabaseUnavailableError(
    target ?? targetOf(error),
    detail,
    typeof code === 'string' ? code : undefined,
    { cause: error },
  );
}

/** True for connection faults worth waiting out at start-up (a server starting or restarting), not a bad login. */
export function isRetryableConnectionFault(fault: DatabaseUnavailableError): boolean {
  return !['28P01', '28000', '3D000', 'ENOTFOUND'].includes(fault.reason ?? '');
}

// What a network error of node says about where it tried: `address`/`port` (refused) or `hostname` (DNS).
function targetOf(error: unknown): string {
  const e = (error ?? {}) as { address?: unknown; port?: unknown; hostname?: unknown };
  if (typeof e.address === 'string') return typeof e.port === 'number' ? `${e.address}:${e.port}` : e.address;
  if (typeof e.hostname === 'string') return e.hostname;
  return 'the configured server';
}
