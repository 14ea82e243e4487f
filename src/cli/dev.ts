/**
 * `horsies dev <module>`: the development loop for the app exported by `<module>`, with nothing to set up. It
 * starts an embedded PostgreSQL in `.horsies-dev/` beside the project's package.json (or reuses the one already
 * running there, or takes `--database-url`), and runs a worker in a child process that migrates the app's schema
 * and serves every queue. A change to a file under the module's folder restarts the child (a module cannot be
 * imported again in one process). The dashboard is served by this process and outlives the restarts.
 *
 *     horsies dev ──┬── embedded PostgreSQL (.horsies-dev/pg)
 *                   ├── dashboard (http://127.0.0.1:7777/)
 *                   └── child: horsies dev-worker <module>   ← restarted on change
 *
 * The child tells the parent over IPC when its worker runs (and on which schema); the parent prints it.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync, watch } from 'node:fs';
import type { FSWatcher } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { dirname, extname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError } from 'commander';
import type { Command } from 'commander';
import { loadApp } from '../client/loadApp.js';
import { createDashboard } from '../dashboard/Dashboard.js';
import type { Dashboard } from '../dashboard/Dashboard.js';
import { Database } from '../db/Database.js';
import { startEmbeddedServer } from '../dev/EmbeddedServer.js';
import { schemaVersion } from '../db/schemaVersion.js';
import type { EmbeddedServer } from '../dev/EmbeddedServer.js';
import { HorsiesError, maskDatabaseUrl } from '../errors.js';
import { createWorker } from '../worker/Worker.js';
import { reportError } from './shared.js';

interface DevOptions {
  export?: string;
  databaseUrl?: string;
  dataDir?: string;
  port: number;
  dashboard: boolean;
  watch: boolean;
  concurrency?: number;
}

/** What the child reports once its worker runs. */
interface ReadyMessage {
  type: 'ready';
  schema: string;
  version: number;
  tasks: string[];
  queues: string[];
}

const WATCHED_EXTENSIONS = new Set(['.js', '.mjs', '.cjs', '.ts', '.mts', '.cts', '.tsx', '.jsx', '.json']);
/** Name of the development folder, created beside the project's package.json. */
export const DEV_FOLDER = '.horsies-dev';

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new InvalidArgumentError('must be a port number');
  return n;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

/** The nearest folder at or above `from` with a package.json; `from` itself when there is none. */
export function projectRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) return from;
  }
}

function say(message: string): void {
  console.log(`horsies dev: ${message}`);
}

/** Adds `dev` (and the hidden `dev-worker` it runs as its child) to the program. */
export function addDevCommand(program: Command): void {
  program
    .command('dev')
    .description(
      'development loop: embedded PostgreSQL, migrations, a worker reloaded on change, and the dashboard',
    )
    .argument('<module>', 'file that exports the app (default export, or a named export "app")')
    .option('--export <name>', 'name of the export that holds the app')
    .option('--database-url <url>', 'use this database instead of the embedded server')
    .option('--data-dir <dir>', `folder of the embedded server (default: ${DEV_FOLDER}/ beside package.json)`)
    .option('--port <port>', 'dashboard port (0: any free port)', port, 7777)
    .option('--no-dashboard', 'do not serve the dashboard')
    .option('--no-watch', 'do not restart the worker when a file changes')
    .option('--concurrency <n>', 'handlers running at once', positiveInt)
    .action(async (modulePath: string, options: DevOptions) => {
      await runDev(modulePath, options);
    });

  program
    .command('dev-worker', { hidden: true })
    .argument('<module>')
    .option('--export <name>')
    .option('--concurrency <n>', '', positiveInt)
    .action(async (modulePath: string, options: { export?: string; concurrency?: number }) => {
      await runDevWorker(modulePath, options);
    });
}

async function runDev(modulePath: string, options: DevOptions): Promise<void> {
  const file = resolve(modulePath);
  if (!existsSync(file)) throw new HorsiesError('MODULE_NOT_FOUND', `module not found: ${file}`);
  const root = projectRoot(dirname(file));

  let server: EmbeddedServer | null = null;
  let url = options.databaseUrl;
  if (url) {
    say(`database ${maskDatabaseUrl(url)}`);
  } else {
    if (process.env.DATABASE_URL) {
      say(
        'DATABASE_URL is set but not used: the loop runs on its own server (pass --database-url to use yours)',
      );
    }
    const folder = options.dataDir ? resolve(options.dataDir) : join(root, DEV_FOLDER);
    mkdirSync(folder, { recursive: true });
    // The folder ignores itself, so nothing of it is ever committed.
    if (!existsSync(join(folder, '.gitignore'))) writeFileSync(join(folder, '.gitignore'), '*\n');
    const shown = relative(process.cwd(), folder) || '.';
    server = await startEmbeddedServer({
      dataDir: join(folder, 'pg'),
      database: 'horsies_dev',
      port: savedPort(folder),
      reuse: true,
      // Stopped below, once the worker has stopped and its last outcomes are written.
      stopOnSignal: false,
    });
    url = server.url;
    savePort(folder, url);
    say(
      `PostgreSQL ${server.reused ? 'already running' : 'started'} in ${shown}/ ` +
        `(send from another shell with DATABASE_URL=${url})`,
    );
  }

  const supervisor = new Supervisor(file, url, options);
  let dashboard: { server: Server; dashboard: Dashboard; db: Database } | null = null;
  let stopping = false;
  supervisor.onReady = (ready) => {
    say(
      `worker running ${ready.tasks.length} task(s) (${ready.tasks.join(', ') || 'none'}) on queue(s) ` +
        `${ready.queues.join(', ')}; schema ${ready.schema} at version ${ready.version}`,
    );
    if (options.dashboard && !dashboard && !stopping) {
      void serveDashboard(url as string, ready.schema, options.port).then(
        (served) => {
          dashboard = served;
          const address = served.server.address();
          const shownPort = typeof address === 'object' && address ? address.port : options.port;
          say(`dashboard on http://127.0.0.1:${shownPort}/`);
        },
        (error: unknown) => reportError(error),
      );
    }
  };
  supervisor.start();
  if (options.watch) {
    const watcher = new TreeWatcher(dirname(file), (changed) => {
      say(`${relative(process.cwd(), changed) || changed} changed: restarting the worker`);
      supervisor.restart();
    });
    watcher.start();
    say(`watching ${relative(process.cwd(), dirname(file)) || '.'}/ for changes (Ctrl-C to stop)`);
    supervisor.onStop.push(() => watcher.stop());
  }

  let signals = 0;
  const shutdown = (): void => {
    signals += 1;
    if (signals > 1) {
      supervisor.kill();
      process.exit(1);
    }
    stopping = true;
    say('stopping');
    void (async () => {
      await supervisor.stop();
      if (dashboard) {
        dashboard.server.closeAllConnections();
        dashboard.server.close();
        await dashboard.dashboard.close();
        await dashboard.db.end();
      }
      if (server && !server.reused) await server.stop();
      process.exit(0);
    })().catch((error: unknown) => process.exit(reportError(error)));
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

async function serveDashboard(
  url: string,
  schema: string,
  wanted: number,
): Promise<{ server: Server; dashboard: Dashboard; db: Database }> {
  const db = new Database({ connectionString: url, schema, poolSize: 4 });
  const dashboard = createDashboard(db, {});
  const server = createServer(dashboard.handle);
  const listen = (p: number): Promise<void> =>
    new Promise<void>((resolvePromise, reject) => {
      server.once('error', reject);
      server.listen(p, '127.0.0.1', () => {
        server.off('error', reject);
        resolvePromise();
      });
    });
  try {
    await listen(wanted);
  } catch (error) {
    // The usual port is taken (another dev loop, a dashboard): any free port will do.
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || wanted === 0) throw error;
    await listen(0);
  }
  return { server, dashboard, db };
}

// The embedded server keeps its port from run to run when it is free, so a DATABASE_URL written down stays good.
function savedPort(folder: string): number | undefined {
  try {
    const saved = JSON.parse(readFileSync(join(folder, 'dev.json'), 'utf8')) as { port?: unknown };
    return typeof saved.port === 'number' ? saved.port : undefined;
  } catch {
    return undefined;
  }
}

function savePort(folder: string, url: string): void {
  const port = Number(new URL(url).port);
  writeFileSync(join(folder, 'dev.json'), `${JSON.stringify({ port })}\n`);
}

/** Runs the worker child, restarts it on request, and stops it. */
class Supervisor {
  onReady: (ready: ReadyMessage) => void = () => undefined;
  readonly onStop: Array<() => void> = [];
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private stopped = false;
  private restarting: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly file: string,
    private readonly url: string,
    private readonly options: DevOptions,
  ) {}

  start(): void {
    const args = ['dev-worker', this.file];
    if (this.options.export) args.push('--export', this.options.export);
    if (this.options.concurrency) args.push('--concurrency', String(this.options.concurrency));
    // The same entry point and loader flags as this process (tsx when run from source).
    const child = fork(process.argv[1] as string, args, {
      env: { ...process.env, DATABASE_URL: this.url },
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child = child;
    child.on('message', (message: ReadyMessage) => {
      if (message?.type === 'ready') this.onReady(message);
    });
    this.exited = new Promise((resolvePromise) => {
      child.once('exit', (code, signal) => {
        if (this.child === child) this.child = null;
        if (!this.stopped && !this.restarting) {
          say(
            `the worker exited (${signal ?? `code ${code}`}); ` +
              (this.options.watch ? 'waiting for a change to start it again' : 'stopping'),
          );
          if (!this.options.watch) process.exit(code || 1);
        }
        resolvePromise();
      });
    });
  }

  /** Stops the child (gracefully) and starts a new one; changes during a restart cause one more. */
  restart(): void {
    if (this.stopped) return;
    if (this.restarting) {
      this.again = true;
      return;
    }
    this.restarting = (async () => {
      do {
        this.again = false;
        await this.stopChild();
        if (this.stopped) return;
        this.start();
      } while (this.again);
    })().finally(() => {
      this.restarting = null;
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const fn of this.onStop) fn();
    await this.restarting;
    await this.stopChild();
  }

  kill(): void {
    this.child?.kill('SIGKILL');
  }

  private async stopChild(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 35_000);
      await this.exited;
      clearTimeout(timer);
    }
  }
}

/**
 * Watches a folder and its subfolders (not `node_modules` nor dot-folders) for changes to source files, calling
 * `onChange` once per burst of changes. Folders created later are picked up at the next burst.
 */
class TreeWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private timer: NodeJS.Timeout | null = null;
  private last = '';

  constructor(
    private readonly root: string,
    private readonly onChange: (file: string) => void,
  ) {}

  start(): void {
    this.scan(this.root);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private scan(dir: string): void {
    if (!this.watchers.has(dir)) {
      try {
        const watcher = watch(dir, (_event, name) => {
          if (name && WATCHED_EXTENSIONS.has(extname(name))) this.changed(join(dir, name));
          else if (name && !name.startsWith('.') && name !== 'node_modules') this.rescanSoon();
        });
        watcher.on('error', () => this.watchers.delete(dir));
        this.watchers.set(dir, watcher);
      } catch {
        return;
      }
    }
    let entries: string[];
    try {
      entries = readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory() && !e.name.startsWith('.') && e.name !== 'node_modules')
        .map((e) => e.name);
    } catch {
      return;
    }
    for (const name of entries) this.scan(join(dir, name));
  }

  private rescanSoon(): void {
    setTimeout(() => this.scan(this.root), 100).unref();
  }

  private changed(file: string): void {
    this.last = file;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.scan(this.root);
      this.onChange(this.last);
    }, 150);
  }
}

/** The child: loads the app, migrates its schema, runs a worker until SIGTERM or SIGINT. */
async function runDevWorker(
  modulePath: string,
  options: { export?: string; concurrency?: number },
): Promise<void> {
  const app = await loadApp(modulePath, options.export);
  const worker = createWorker(app, {
    migrate: true,
    startupTimeoutMs: 10_000,
    concurrency: options.concurrency,
    appModule: pathToFileURL(resolve(modulePath)).href,
    appExport: options.export,
  });
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void worker
      .stop()
      .then(() => app.close())
      .then(
        () => process.exit(0),
        (error: unknown) => process.exit(reportError(error)),
      );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  // The parent going away (killed) must not leave a worker behind.
  process.on('disconnect', stop);
  try {
    await worker.start();
  } catch (error) {
    await app.close();
    throw error;
  }
  if (stopping) return;
  const version = await schemaVersion(app.db);
  const ready: ReadyMessage = {
    type: 'ready',
    schema: app.db.schema,
    version,
    tasks: [...app.tasks.keys()],
    queues: worker.config.queues,
  };
  process.send?.(ready);
}
