#!/usr/bin/env node
/** The `horsies` command line. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command, InvalidArgumentError, Option } from 'commander';
import { Database } from '../db/Database.js';
import { migrate } from '../db/Migrator.js';
import { defaultRoleNames, rolesSql } from '../db/roles.js';
import { loadApp } from '../client/loadApp.js';
import { addCheckCommand } from './check.js';
import { addDashboardCommand } from './dashboard.js';
import { addDevCommand } from './dev.js';
import { reportError, resolveDatabaseUrl } from './shared.js';
import { port as metricsPort, serveAppMetrics } from './metrics.js';
import { addQueueCommands } from './queues.js';
import { addScheduleCommands } from './schedules.js';
import { addTaskCommands } from './tasks.js';
import { addWorkflowCommands } from './workflows.js';
import { createWorker } from '../worker/Worker.js';

/** How soon a second signal counts as the same one (npm forwards the terminal's Ctrl-C to the command it runs). */
const SAME_SIGNAL_MS = 1000;

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be an integer >= 0');
  return n;
}

function prefetchCount(value: string): number | 'auto' {
  return value === 'auto' ? 'auto' : nonNegativeInt(value);
}

function list(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

// dist/cli/main.js and src/cli/main.ts both sit two folders below package.json.
const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

const program = new Command()
  .name('horsies')
  .description('PostgreSQL-backed background task queue')
  .version(version, '-V, --version', 'print the version of horsies')
  .option('--verbose', 'on an error, print its stack (and its causes)')
  .showHelpAfterError();

program
  .command('migrate')
  .description('apply pending schema migrations (safe to run from many processes at once)')
  .option('--database-url <url>', 'connection string (default: $DATABASE_URL)')
  .option('--schema <name>', 'PostgreSQL schema (default: $HORSIES_SCHEMA or "horsies")')
  .action(async (options: { databaseUrl?: string; schema?: string }) => {
    const db = new Database({
      connectionString: resolveDatabaseUrl(options.databaseUrl),
      schema: options.schema ?? (process.env.HORSIES_SCHEMA || 'horsies'),
      poolSize: 1,
    });
    try {
      const result = await migrate(db);
      const routines = result.routines.length;
      console.log(
        result.applied.length > 0
          ? `schema ${db.schema}: applied ${result.applied.join(', ')}` +
              `${routines > 0 ? ` and ${routines} routine${routines === 1 ? '' : 's'}` : ''}; now at version ${result.version}`
          : routines > 0
            ? `schema ${db.schema}: at version ${result.version}; applied routine${routines === 1 ? '' : 's'} ${result.routines.join(', ')}`
            : `schema ${db.schema}: already at version ${result.version}`,
      );
    } finally {
      await db.end();
    }
  });

program
  .command('roles')
  .description(
    'print the SQL of least-privilege roles for a schema (migrator, worker, producer); it runs nothing itself',
  )
  .option('--schema <name>', 'PostgreSQL schema (default: $HORSIES_SCHEMA or "horsies")')
  .option('--migrator <role>', 'the role that owns the schema and migrates (default: <schema>_migrator)')
  .option('--worker <role>', 'the role of workers (default: <schema>_worker)')
  .option('--producer <role>', 'the role of apps that only send (default: <schema>_producer)')
  .action((options: { schema?: string; migrator?: string; worker?: string; producer?: string }) => {
    const schema = options.schema ?? (process.env.HORSIES_SCHEMA || 'horsies');
    const defaults = defaultRoleNames(schema);
    const { setup, grants } = rolesSql(schema, {
      migrator: options.migrator ?? defaults.migrator,
      worker: options.worker ?? defaults.worker,
      producer: options.producer ?? defaults.producer,
    });
    console.log(`${setup}\n${grants}`);
  });

program
  .command('worker')
  .description('run a worker for the tasks of the app exported by <module>')
  .argument('<module>', 'file that exports the app (default export, or a named export "app")')
  .option('--export <name>', 'name of the export that holds the app')
  .option('--queues <list>', 'comma-separated queues to serve (default: all of the app)', list)
  .option('--concurrency <n>', 'handlers running at once', positiveInt)
  .option('--max-claim-batch <n>', 'most tasks claimed in one statement', positiveInt)
  .option('--poll-interval <ms>', 'claim pass at least this often', positiveInt)
  .option(
    '--prefetch <n>',
    'claimed tasks held ready beyond the concurrency, or auto: what the worker starts within --prefetch-window',
    prefetchCount,
  )
  .option(
    '--prefetch-window <ms>',
    'with --prefetch auto: how far ahead, in time, to claim (default 20)',
    positiveInt,
  )
  .option(
    '--prefetch-hold <ms>',
    'hand back a task claimed ahead that found no free slot this long (0: never; default 5000)',
    nonNegativeInt,
  )
  .option(
    '--start-prefetched',
    'start prefetched tasks in their claim (RUNNING at once; a crash counts their attempt)',
  )
  .addOption(
    new Option(
      '--throughput <mode>',
      'default, or high: start tasks ahead of free slots for many short tasks (see the docs)',
    ).choices(['default', 'high']),
  )
  .option(
    '--handoff',
    'while idle, let single sends hand their tasks straight to this worker (default with high)',
  )
  .option('--no-handoff', 'never take hand-offs, also with --throughput high')
  .option('--no-maintenance', 'do not campaign to run maintenance (reaper, expiry, retention)')
  .option('--migrate', 'apply pending migrations before starting')
  .option(
    '--startup-timeout <ms>',
    'keep retrying an unreachable database this long at start, then exit 1 (default: 30000)',
    nonNegativeInt,
  )
  .option('--metrics-port <n>', 'serve Prometheus metrics at http://<host>:<n>/metrics', metricsPort)
  .option('--metrics-host <host>', 'interface for --metrics-port (default: 0.0.0.0)')
  .action(
    async (
      modulePath: string,
      options: {
        export?: string;
        queues?: string[];
        concurrency?: number;
        maxClaimBatch?: number;
        pollInterval?: number;
        prefetch?: number | 'auto';
        prefetchWindow?: number;
        prefetchHold?: number;
        startPrefetched?: boolean;
        throughput?: 'default' | 'high';
        handoff?: boolean;
        maintenance: boolean;
        migrate?: boolean;
        startupTimeout?: number;
        metricsPort?: number;
        metricsHost?: string;
      },
    ) => {
      const app = await loadApp(modulePath, options.export);
      const worker = createWorker(app, {
        migrate: options.migrate,
        startupTimeoutMs: options.startupTimeout,
        queues: options.queues,
        concurrency: options.concurrency,
        pollIntervalMs: options.pollInterval,
        prefetch: {
          size: options.prefetch,
          windowMs: options.prefetchWindow,
          holdMs: options.prefetchHold,
          startAhead: options.startPrefetched,
        },
        claims: { batchSize: options.maxClaimBatch },
        throughput: options.throughput,
        handoff: options.handoff,
        maintenance: options.maintenance,
        appModule: pathToFileURL(resolve(modulePath)).href,
        appExport: options.export,
      });
      const metricsEndpoint = await serveAppMetrics(app, options);
      let signals = 0;
      let firstSignalAt = 0;
      const onSignal = (signal: NodeJS.Signals): void => {
        // Under npx, npm passes the terminal's Ctrl-C on as a second SIGINT: one that soon is the same request.
        if (signals > 0 && Date.now() - firstSignalAt < SAME_SIGNAL_MS) return;
        signals += 1;
        if (signals > 1) {
          app.logger.warn({ signal }, 'second signal: exiting at once');
          process.exit(1);
        }
        firstSignalAt = Date.now();
        app.logger.info({ signal }, 'signal received: shutting down');
        void worker
          .stop()
          .then(() => metricsEndpoint?.close())
          .then(() => app.close())
          .then(
            () => process.exit(0),
            (error: unknown) => {
              app.logger.error({ err: error }, 'shutdown failed');
              process.exit(1);
            },
          );
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      try {
        await worker.start();
      } catch (error) {
        await metricsEndpoint?.close();
        await app.close();
        throw error;
      }
      // Readiness in a plain line on stderr, whatever the log level (stdout holds the JSON logs).
      if (signals === 0) {
        const tasks = [...app.tasks.keys()];
        console.error(
          `horsies worker: running ${tasks.length} task(s) (${tasks.join(', ') || 'none'}) on queue(s) ` +
            `${worker.config.queues.join(', ')}; schema ${app.db.schema} (SIGINT or SIGTERM stops it)`,
        );
      }
    },
  );

addTaskCommands(program);
addQueueCommands(program);
addWorkflowCommands(program);
addScheduleCommands(program);
addDashboardCommand(program);
addCheckCommand(program);
addDevCommand(program);

// A reader that goes away early (`horsies tasks list | head`) is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

program.parseAsync(process.argv).catch((error: unknown) => {
  process.exit(reportError(error));
});
