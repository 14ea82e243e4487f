/**
 * `horsies dev <module>`: the development loop for the app exported by `<module>`, with nothing to set up. It
 * starts an embedded PostgreSQL in `.horsies-dev/` beside the project's package.json (or reuses the one already
 * running there, or takes `--database-url`), and runs a worker in a child process that migrates the app's schema,
 * serves every queue and serves the dashboard on the app it loaded. A change to a file the app imports restarts the
 * child (a module cannot be imported again in one process); the dashboard keeps its address across restarts.
 *
 *     horsies dev ──┬── embedded PostgreSQL (.horsies-dev/pg, a session of its own)
 *                   ├── dashboard address (http://127.0.0.1:7777/) ──> the child's dashboard
 *                   └── child: horsies dev-worker <module>   ← restarted on change
 *
 * Ctrl-C reaches this process and the child (the server is out of the terminal's process group): the child's
 * worker drains and writes its outcomes, then this process stops the server and says what happened in one line.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError } from 'commander';
import type { Command } from 'commander';
import { loadApp } from '../client/loadApp.js';
import { createDashboard } from '../dashboard/Dashboard.js';
import type { Dashboard } from '../dashboard/Dashboard.js';
import { DashboardProxy } from '../dev/DashboardProxy.js';
import { startEmbeddedServer } from '../dev/EmbeddedServer.js';
import type { EmbeddedServer } from '../dev/EmbeddedServer.js';
import { ImportWatcher } from '../dev/ImportWatcher.js';
import { reportImports } from '../dev/importHooks.js';
import { Supervisor } from '../dev/Supervisor.js';
import type { ChildMessage, ReadyMessage } from '../dev/Supervisor.js';
import { schemaVersion } from '../db/schemaVersion.js';
import { HorsiesError, maskDatabaseUrl } from '../errors.js';
import { createWorker } from '../worker/Worker.js';
import { isVerbose, reportError } from './shared.js';

interface DevOptions {
  export?: string;
  databaseUrl?: string;
  dataDir?: string;
  port: number;
  dashboard: boolean;
  watch: boolean;
  concurrency?: number;
}

interface DevWorkerOptions {
  export?: string;
  concurrency?: number;
  dashboard?: boolean;
}

/** Name of the development folder, created beside the project's package.json. */
export const DEV_FOLDER = '.horsies-dev';

/**
 * The actions of the dashboard under `horsies dev` (cancel, resubmit, pause, trigger...) need this token: a page of
 * another site cannot send it. `HORSIES_DASHBOARD_TOKEN` when set, else a fresh one per session, handed to the
 * browser in the fragment of the printed link (fragments never reach the server).
 */
const TOKEN_ENV = 'HORSIES_DASHBOARD_TOKEN';

/** How soon a second SIGINT counts as the same Ctrl-C: npm (`npx`) passes the terminal's Ctrl-C on as another one. */
const SAME_SIGNAL_MS = 1000;

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

function shown(file: string): string {
  return relative(process.cwd(), file) || file;
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
    .option('--no-watch', 'do not restart the worker when a file the app imports changes')
    .option('--concurrency <n>', 'handlers running at once', positiveInt)
    .action(async (modulePath: string, options: DevOptions) => {
      await runDev(modulePath, options);
    });

  program
    .command('dev-worker', { hidden: true })
    .argument('<module>')
    .option('--export <name>')
    .option('--concurrency <n>', '', positiveInt)
    .option('--dashboard')
    .action(async (modulePath: string, options: DevWorkerOptions) => {
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
      `PostgreSQL ${server.reused ? 'already running' : 'started'} in ${relative(process.cwd(), folder) || '.'}/ ` +
        `(send from another shell with DATABASE_URL=${url})`,
    );
  }

  const token = process.env[TOKEN_ENV] || randomBytes(18).toString('base64url');
  const proxy = options.dashboard ? new DashboardProxy() : null;
  const dashboardPort = proxy ? await proxy.listen(options.port) : null;
  const args = ['dev-worker', file];
  if (options.export) args.push('--export', options.export);
  if (options.concurrency) args.push('--concurrency', String(options.concurrency));
  if (proxy) args.push('--dashboard');
  const supervisor = new Supervisor({ args, env: { ...process.env, DATABASE_URL: url, [TOKEN_ENV]: token } });

  const verbose = isVerbose();
  const watcher = options.watch
    ? new ImportWatcher(file, {
        onChange: (changed) => {
          say(`${shown(changed)} changed: restarting the worker`);
          supervisor.restart();
        },
        onIgnored: verbose
          ? (other) => say(`${shown(other)} changed; the app does not import it: the worker keeps running`)
          : undefined,
      })
    : null;

  let stopping: number | null = null;
  let written: number | null = null;
  let announced = false;
  supervisor.onStart = () => {
    written = null;
    proxy?.serve(null);
    watcher?.childStarted();
  };
  supervisor.onMessage = (message: ChildMessage) => {
    if (message.type === 'imports') watcher?.add(message.files);
    else if (message.type === 'stopped') written = message.written;
    else if (message.type === 'ready') onReady(message);
  };
  const onReady = (ready: ReadyMessage): void => {
    watcher?.childReady();
    proxy?.serve(ready.dashboardPort);
    if (stopping !== null) return;
    say(
      `worker running ${ready.tasks.length} task(s) (${ready.tasks.join(', ') || 'none'}) on queue(s) ` +
        `${ready.queues.join(', ')}; schema ${ready.schema} at version ${ready.version}`,
    );
    if (dashboardPort !== null && !announced) {
      announced = true;
      // The fragment hands the token to the page without sending it to the server (see the dashboard's UI).
      say(`dashboard on http://127.0.0.1:${dashboardPort}/#token=${encodeURIComponent(token)}`);
    }
  };
  supervisor.onExit = (how) => {
    proxy?.serve(null);
    if (stopping !== null) return;
    if (watcher) {
      watcher.childFailed();
      say(`the worker exited (${how}); waiting for a change to start it again`);
    } else {
      say(`the worker exited (${how}); stopping`);
      void stopAll().then(() => process.exit(1));
    }
  };

  const stopAll = async (): Promise<string> => {
    watcher?.stop();
    const wasRunning = supervisor.running;
    await supervisor.stop();
    await proxy?.close();
    const parts: string[] = [];
    if (written) parts.push(`the worker wrote the outcomes of ${written} task(s)`);
    else if (written === 0) parts.push('the worker stopped, no task running');
    else parts.push(wasRunning ? 'the worker stopped' : 'no worker was running');
    if (server?.reused) parts.push('PostgreSQL left running (another process started it)');
    else if (server) {
      await server.stop();
      parts.push('then PostgreSQL stopped');
    }
    return parts.join(', ');
  };

  supervisor.start();
  if (watcher) say(`watching the files ${shown(file)} imports (Ctrl-C to stop)`);

  const shutdown = (): void => {
    if (stopping !== null) {
      if (Date.now() - stopping < SAME_SIGNAL_MS) return;
      say('second Ctrl-C: exiting at once (unwritten outcomes are recovered at the next start)');
      supervisor.kill();
      process.exit(1);
    }
    stopping = Date.now();
    say('stopping: the worker finishes its running tasks first (Ctrl-C again to exit at once)');
    stopAll().then(
      (what) => {
        say(`stopped: ${what}`);
        process.exit(0);
      },
      (error: unknown) => process.exit(reportError(error)),
    );
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
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

function send(message: ChildMessage): Promise<void> {
  return new Promise((resolvePromise) => {
    if (!process.send || !process.connected) return resolvePromise();
    process.send(message, undefined, {}, () => resolvePromise());
  });
}

/**
 * The child: reports what it imports, loads the app, migrates its schema, runs a worker (and, with `--dashboard`,
 * the dashboard on the app, with actions, on a free loopback port) until SIGTERM or SIGINT.
 */
async function runDevWorker(modulePath: string, options: DevWorkerOptions): Promise<void> {
  reportImports((file) => void send({ type: 'imports', files: [file] }));
  const app = await loadApp(modulePath, options.export);
  const worker = createWorker(app, {
    migrate: true,
    startupTimeoutMs: 10_000,
    concurrency: options.concurrency,
    appModule: pathToFileURL(resolve(modulePath)).href,
    appExport: options.export,
  });
  let dashboard: { dashboard: Dashboard; server: Server } | null = null;
  let written = 0;
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    worker.on('task:finished', (finished) => {
      written += finished.length;
    });
    void (async () => {
      await worker.stop();
      if (dashboard) {
        dashboard.server.closeAllConnections();
        dashboard.server.close();
        await dashboard.dashboard.close();
      }
      await app.close();
      await send({ type: 'stopped', written });
    })().then(
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
  if (options.dashboard)
    dashboard = await serveDashboard(createDashboard(app, { token: process.env[TOKEN_ENV] }));
  await send({
    type: 'ready',
    schema: app.db.schema,
    version: await schemaVersion(app.db),
    tasks: [...app.tasks.keys()],
    queues: worker.config.queues,
    dashboardPort: dashboard ? portOf(dashboard.server) : null,
  });
}

async function serveDashboard(dashboard: Dashboard): Promise<{ dashboard: Dashboard; server: Server }> {
  const server = createServer(dashboard.handle);
  await new Promise<void>((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolvePromise());
  });
  return { dashboard, server };
}

function portOf(server: Server): number | null {
  const address = server.address();
  return typeof address === 'object' && address ? address.port : null;
}
