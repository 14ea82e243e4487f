/**
 * `horsies check <module> [--live]`: loads the app and reports every problem at once (config, tasks, workflows,
 * schedules); with `--live` it also connects and checks the schema's migrations, the hot-path routines, that a
 * NOTIFY reaches a LISTEN, and that live workers serve the app's tasks. Exit code 0 when nothing is an error, else 1.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Command } from 'commander';
import type { App } from '../client/App.js';
import { checkAppStatic, checkDatabase, fromError } from '../client/checks.js';
import type { CheckArea, CheckProblem } from '../client/checks.js';
import { loadApp } from '../client/loadApp.js';
import { latestMigrationVersion } from '../db/schemaVersion.js';
import { WorkflowDefinition } from '../workflow/WorkflowDefinition.js';

/** What `horsies check` found. */
export interface CheckReport {
  /** Every problem, in the order of the areas checked. */
  problems: CheckProblem[];
  /** What was looked at, per area, when it holds no problem (`6 tasks`, `migration 11`). */
  passed: Partial<Record<CheckArea, string>>;
}

const AREAS: CheckArea[] = [
  'module',
  'config',
  'tasks',
  'workflows',
  'schedules',
  'database',
  'notify',
  'workers',
];

/** The package's version, as `horsies --version` prints it (package.json is two folders up from src/cli and dist/cli). */
const version = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** Runs the checks on the app of `modulePath`. */
export async function runCheck(
  modulePath: string,
  options: { export?: string; live?: boolean },
): Promise<CheckReport> {
  const passed: CheckReport['passed'] = {};
  let app: App;
  try {
    app = await loadApp(modulePath, options.export);
  } catch (error) {
    // The module threw while it built the app: an app config, a task or a workflow definition it rejected.
    const name = (error as Error).name;
    const area: CheckArea =
      name === 'WorkflowDefinitionError' ? 'workflows' : name === 'ConfigError' ? 'config' : 'module';
    return { problems: fromError(area, error), passed };
  }
  try {
    const problems = checkAppStatic(app);
    passed.module = modulePath;
    passed.config = `schema ${app.db.schema}, queues ${app.config.queues.join(', ')}`;
    passed.tasks = `${app.tasks.size} task${app.tasks.size === 1 ? '' : 's'}`;
    const workflows = await exportedWorkflows(modulePath, app);
    passed.workflows = workflows.length === 0 ? 'none' : workflows.join(', ');
    passed.schedules = app.schedules.length === 0 ? 'none' : `${app.schedules.length} declared`;
    if (options.live) {
      const live = await checkDatabase(app.db, {
        tasks: [...app.tasks.values()].map((t) => ({ name: t.name, queue: t.queue })),
        vacuumCheck: app.config.recovery.vacuumThreshold !== null,
      });
      problems.push(...live.problems);
      const said: Partial<Record<CheckArea, string>> = {
        database: `horsies ${version}, schema ${app.db.schema} at migration ${latestMigrationVersion()}, routines as defined`,
        notify: 'a NOTIFY reached a LISTEN',
        workers: 'every task has a live worker',
      };
      for (const area of live.checked) passed[area] = said[area];
    }
    return { problems, passed };
  } finally {
    await app.close();
  }
}

// Workflow definitions among the module's exports, and those the app registered for subworkflow nodes.
async function exportedWorkflows(modulePath: string, app: App): Promise<string[]> {
  const file = resolve(modulePath);
  const names = new Set(app.workflows.keys());
  if (existsSync(file)) {
    const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    for (const value of Object.values(mod)) if (value instanceof WorkflowDefinition) names.add(value.name);
  }
  return [...names].sort();
}

/** The report as text: one line per area, then the count. */
export function formatReport(report: CheckReport): string {
  const width = Math.max(...AREAS.map((a) => a.length));
  const lines: string[] = [];
  for (const area of AREAS) {
    const found = report.problems.filter((p) => p.area === area);
    if (found.length === 0) {
      const what = report.passed[area];
      if (what !== undefined) lines.push(`${area.padEnd(width)}  ok       ${what}`);
      continue;
    }
    for (const p of found) lines.push(`${area.padEnd(width)}  ${p.severity.padEnd(7)}  ${p.message}`);
  }
  const errors = report.problems.filter((p) => p.severity === 'error').length;
  const warnings = report.problems.length - errors;
  lines.push(
    '',
    `${errors} error${errors === 1 ? '' : 's'}, ${warnings} warning${warnings === 1 ? '' : 's'}`,
  );
  return lines.join('\n');
}

/** Adds `check` to the program. */
export function addCheckCommand(program: Command): void {
  program
    .command('check')
    .description('load the app of <module> and report every problem: config, tasks, workflows, schedules')
    .argument('<module>', 'file that exports the app (default export, or a named export "app")')
    .option('--export <name>', 'name of the export that holds the app')
    .option('--live', 'also connect: migrations current, NOTIFY reaches LISTEN, live workers serve the tasks')
    .option('--json', 'print the report as JSON')
    .action(async (modulePath: string, options: { export?: string; live?: boolean; json?: boolean }) => {
      const report = await runCheck(modulePath, options);
      console.log(options.json ? JSON.stringify(report, null, 2) : formatReport(report));
      process.exitCode = report.problems.some((p) => p.severity === 'error') ? 1 : 0;
    });
}
