/**
 * `horsies scheduler <module>` (the scheduler alone, for those who do not want it on the workers' maintenance
 * leader) and `horsies schedules list|trigger|pause|resume`. The schedules are the app's (`app.schedules`), or
 * else a `schedules` export of the module beside the app.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError } from 'commander';
import type { Command } from 'commander';
import type { App } from '../client/App.js';
import { loadApp } from '../client/loadApp.js';
import { HorsiesError } from '../errors.js';
import { declareSchedules } from '../scheduler/declare.js';
import type { Schedule, ScheduleConfig } from '../scheduler/declare.js';
import { listSchedules, pauseSchedule, resumeSchedule, triggerSchedule } from '../scheduler/operations.js';
import type { ScheduleInfo } from '../scheduler/operations.js';
import { Scheduler } from '../scheduler/Scheduler.js';
import { formatTable } from './format.js';
import { withApp, withConnection } from './shared.js';
import type { ConnectionOptions } from './shared.js';

/** Options of the commands that can load the app module. */
interface AppOptions extends ConnectionOptions {
  app?: string;
  export?: string;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

/** The schedules the module declares: the app's, else an array the module exports as `schedules`; null for none. */
async function moduleSchedules(app: App, modulePath: string): Promise<unknown[] | null> {
  if (app.schedules.length > 0) return [...app.schedules];
  const mod = (await import(pathToFileURL(resolve(modulePath)).href)) as { schedules?: unknown };
  return Array.isArray(mod.schedules) ? mod.schedules : null;
}

/** The declared schedules of the app module: `app.schedules` when it has some, else the module's `schedules` export. */
async function loadSchedules(
  modulePath: string,
  exportName?: string,
): Promise<{ app: App; configs: ScheduleConfig[]; schedules: Schedule[] }> {
  const app = await loadApp(modulePath, exportName);
  const configs = await moduleSchedules(app, modulePath);
  if (configs === null) {
    await app.close();
    throw new HorsiesError(
      'CONFIG_INVALID',
      `${modulePath} declares no schedules: give the app schedules, or export an array named "schedules"`,
    );
  }
  try {
    const declared = configs as ScheduleConfig[];
    const schedules = declareSchedules(declared, { tasks: app.tasks, queues: app.config.queues });
    return { app, configs: declared, schedules };
  } catch (error) {
    await app.close();
    throw error;
  }
}

/**
 * The app of a module with every schedule the module declares, for those who read them from the app (the
 * dashboard): a `schedules` export beside an app that declares none is added to it, as the scheduler runs it.
 */
export async function loadAppWithSchedules(modulePath: string, exportName?: string): Promise<App> {
  const app = await loadApp(modulePath, exportName);
  try {
    if (app.schedules.length === 0) {
      for (const config of (await moduleSchedules(app, modulePath)) ?? [])
        app.schedule(config as ScheduleConfig);
    }
    return app;
  } catch (error) {
    await app.close();
    throw error;
  }
}

/** Runs `fn` on the app module's database and schedules when `--app` is given, else on the connection options. */
async function withSchedules<T>(
  options: AppOptions,
  fn: (app: App, schedules: Schedule[] | undefined) => Promise<T>,
): Promise<T> {
  if (!options.app) return withApp(options, (app) => fn(app, undefined));
  const { app, schedules } = await loadSchedules(options.app, options.export);
  try {
    return await fn(app, schedules);
  } finally {
    await app.close();
  }
}

function withAppModule(command: Command): Command {
  return withConnection(command)
    .option('--app <module>', 'file that exports the app (its schedules; its database unless given)')
    .option('--export <name>', 'name of the export that holds the app');
}

function when(date: Date | null): string {
  return date ? date.toISOString().replace('.000Z', 'Z') : '-';
}

function state(info: ScheduleInfo): string {
  if (info.orphaned) return 'orphaned';
  if (info.paused) return 'paused';
  if (info.enabled === false) return 'disabled';
  return info.lastError ? 'failing' : 'active';
}

/** Adds `scheduler` and `schedules list|trigger|pause|resume` to the program. */
export function addScheduleCommands(program: Command): void {
  program
    .command('scheduler')
    .description('run the scheduler alone for the schedules of the app exported by <module>')
    .argument('<module>', 'file that exports the app (default export, or a named export "app")')
    .option('--export <name>', 'name of the export that holds the app')
    .option('--check-interval <ms>', 'longest time between passes (default 1000)', positiveInt)
    .option('--migrate', 'apply pending migrations before starting')
    .action(
      async (modulePath: string, options: { export?: string; checkInterval?: number; migrate?: boolean }) => {
        const { app, configs, schedules } = await loadSchedules(modulePath, options.export);
        if (options.migrate) await app.migrate();
        const scheduler = new Scheduler(app.db, {
          schedules: configs,
          tasks: app.tasks,
          queues: app.config.queues,
          logger: app.logger,
          checkIntervalMs: options.checkInterval,
        });
        const onSignal = (signal: NodeJS.Signals): void => {
          app.logger.info({ signal }, 'signal received: stopping the scheduler');
          void scheduler
            .stop()
            .then(() => app.close())
            .then(
              () => process.exit(0),
              () => process.exit(1),
            );
        };
        process.on('SIGINT', onSignal);
        process.on('SIGTERM', onSignal);
        scheduler.start();
        app.logger.info({ schedules: schedules.map((s) => s.name) }, 'scheduler started');
      },
    );

  const schedules = program.command('schedules').description('list, trigger, pause and resume schedules');

  withAppModule(schedules.command('list'))
    .description(
      'each schedule: next and last run, the last task and its status, paused, disabled or orphaned',
    )
    .option('--json', 'print JSON lines instead of a table')
    .action(async (options: AppOptions & { json?: boolean }) => {
      await withSchedules(options, async (app, declared) => {
        const infos = await listSchedules(app.db, { schedules: declared });
        if (options.json) {
          for (const info of infos) console.log(JSON.stringify(info));
          return;
        }
        if (infos.length === 0) {
          console.log('no schedules yet');
          return;
        }
        // The pattern and zone live in the code, not in the rows: without --app they are left out, not guessed.
        const declaration = (s: ScheduleInfo): Record<string, string> =>
          declared ? { pattern: s.pattern ?? '-', zone: s.timezone ?? '-' } : {};
        console.log(
          formatTable(
            infos.map((s) => ({
              schedule: s.name,
              state: state(s),
              ...declaration(s),
              'next run': when(s.nextRunAt),
              'last run': when(s.lastRunAt),
              'last task': s.lastTaskId ?? '-',
              status: s.lastTaskStatus ?? '-',
              runs: String(s.runCount),
              error: s.lastError ?? '',
            })),
          ),
        );
        if (!declared) {
          console.log(
            '(the stored rows only: give --app <module> for their patterns and zones, and orphaned rows)',
          );
        }
      });
    });

  withAppModule(schedules.command('trigger'))
    .description('send one run of a schedule now, outside its slots (needs --app)')
    .argument('<name>', 'schedule name')
    .action(async (name: string, options: AppOptions) => {
      if (!options.app) throw new HorsiesError('CONFIG_INVALID', 'trigger needs --app <module>');
      await withSchedules(options, async (app, declared) => {
        const schedule = declared?.find((s) => s.name === name);
        if (!schedule) throw new HorsiesError('SCHEDULE_NOT_FOUND', `the app declares no schedule "${name}"`);
        const { taskId } = await triggerSchedule(app.db, schedule);
        console.log(`schedule ${name} triggered: task ${taskId}`);
      });
    });

  for (const [command, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    withAppModule(schedules.command(command))
      .description(
        paused
          ? 'stop every scheduler from sending a schedule (stored in the database)'
          : 'resume a paused schedule at its next slot (slots missed while paused are not sent)',
      )
      .argument('<name>', 'schedule name')
      .action(async (name: string, options: AppOptions) => {
        await withSchedules(options, async (app, declared) => {
          const names = declared?.map((s) => s.name);
          await (paused
            ? pauseSchedule(app.db, name, { declared: names })
            : resumeSchedule(app.db, name, { declared: names }));
          console.log(`schedule ${name} ${paused ? 'paused' : 'resumed'}`);
        });
      });
  }
}
