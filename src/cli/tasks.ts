/** `horsies tasks ...`: inspect, cancel and resubmit tasks. */
import { Command, InvalidArgumentError, Option } from 'commander';
import { servedTaskKeys } from '../client/operations.js';
import type { TaskFilter } from '../client/operations.js';
import { TASK_STATUSES } from '../types.js';
import type { TaskInfo, TaskStatus } from '../types.js';
import { formatTable } from './format.js';
import { withApp, withConnection } from './shared.js';
import type { ConnectionOptions } from './shared.js';

interface FilterOptions {
  status?: TaskStatus[];
  task?: string;
  queue?: string;
  errorCode?: string;
  since?: Date;
  until?: Date;
}

function statuses(value: string): TaskStatus[] {
  const list = value.split(',').map((s) => s.trim().toUpperCase());
  const bad = list.filter((s) => !(TASK_STATUSES as readonly string[]).includes(s));
  if (bad.length > 0)
    throw new InvalidArgumentError(`unknown status ${bad.join(', ')}; use ${TASK_STATUSES.join(', ')}`);
  return list as TaskStatus[];
}

function date(value: string): Date {
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) throw new InvalidArgumentError('must be a date, e.g. 2026-11-21T10:00:00Z');
  return d;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

function withFilter(command: Command): Command {
  return command
    .addOption(
      new Option('--status <list>', 'comma-separated statuses, e.g. failed,expired').argParser(statuses),
    )
    .option('--task <name>', 'task name')
    .option('--queue <name>', 'queue')
    .option('--error-code <code>', 'final error code')
    .addOption(new Option('--since <date>', 'finished at or after').argParser(date))
    .addOption(new Option('--until <date>', 'finished before').argParser(date));
}

function toFilter(o: FilterOptions): TaskFilter {
  return {
    status: o.status,
    taskName: o.task,
    queue: o.queue,
    errorCode: o.errorCode,
    finishedAfter: o.since,
    finishedBefore: o.until,
  };
}

function summary(task: TaskInfo, served: Set<string>): Record<string, string> {
  const orphan = task.status === 'PENDING' && !served.has(`${task.queueName}\u0000${task.taskName}`);
  return {
    id: task.id,
    task: task.taskName,
    queue: task.queueName,
    status: orphan ? 'PENDING (no worker)' : task.status,
    error: task.errorCode ?? '',
    attempts: String(task.attemptCount),
    resubmits: String(task.resubmitCount),
    finished: task.finishedAt?.toISOString() ?? '',
  };
}

/** Adds `tasks list|show|retry|cancel` to the program. */
export function addTaskCommands(program: Command): void {
  const tasks = program.command('tasks').description('inspect, cancel and resubmit tasks');

  withFilter(withConnection(tasks.command('list')))
    .description('list tasks by filter, newest first (e.g. the dead-letter set: --status failed)')
    .addOption(new Option('--limit <n>', 'most rows').argParser(positiveInt).default(50))
    .option('--json', 'print JSON lines instead of a table')
    .action(async (options: ConnectionOptions & FilterOptions & { limit: number; json?: boolean }) => {
      await withApp(options, async (app) => {
        const rows = await app.listTasks(toFilter(options), { limit: options.limit });
        const served = await servedTaskKeys(app.db);
        const noWorker = (t: TaskInfo): boolean =>
          t.status === 'PENDING' && !served.has(`${t.queueName}\u0000${t.taskName}`);
        if (options.json)
          for (const row of rows) console.log(JSON.stringify({ ...row, noWorker: noWorker(row) }));
        else
          console.log(
            rows.length === 0 ? 'no tasks match' : formatTable(rows.map((r) => summary(r, served))),
          );
      });
    });

  withConnection(tasks.command('show'))
    .description('show one task with its attempts')
    .argument('<id>', 'task id')
    .action(async (id: string, options: ConnectionOptions) => {
      await withApp(options, async (app) => {
        const task = await app.getTask(id, { attempts: true });
        if (!task) {
          console.error(`no task with id ${id}`);
          process.exitCode = 1;
          return;
        }
        console.log(JSON.stringify(task, null, 2));
      });
    });

  withFilter(withConnection(tasks.command('retry')))
    .description('resubmit FAILED (or CANCELLED, EXPIRED) tasks: the given ids, or all matching the filter')
    .argument('[ids...]', 'task ids')
    .option('--all', 'with no other filter, resubmit every FAILED task')
    .action(async (ids: string[], options: ConnectionOptions & FilterOptions & { all?: boolean }) => {
      const filter = toFilter(options);
      const hasFilter = Object.values(filter).some((v) => v !== undefined);
      if (ids.length > 0 && hasFilter) throw new InvalidArgumentError('give ids or filter options, not both');
      if (ids.length === 0 && !hasFilter && !options.all) {
        throw new InvalidArgumentError(
          'give task ids, filter options (e.g. --status failed --task name), or --all',
        );
      }
      await withApp(options, async (app) => {
        const result = await app.resubmit(ids.length > 0 ? { ids } : filter);
        console.log(`resubmitted ${result.ids.length} task(s)`);
        if (ids.length > 0) {
          const missed = ids.filter((id) => !result.ids.includes(id));
          if (missed.length > 0) {
            console.error(`not resubmitted (missing, or not FAILED/CANCELLED/EXPIRED): ${missed.join(', ')}`);
            process.exitCode = 1;
          }
        }
      });
    });

  withConnection(tasks.command('cancel'))
    .description('cancel a task: at once if it has not started, through its worker if it runs')
    .argument('<id>', 'task id')
    .action(async (id: string, options: ConnectionOptions) => {
      await withApp(options, async (app) => {
        const result = await app.cancel(id);
        const messages = {
          cancelled: `task ${id} cancelled (it was ${result.previousStatus})`,
          cancel_requested: `task ${id} is running: cancel requested, its worker will stop it`,
          already_finished: `task ${id} had already finished (${result.previousStatus}); nothing changed`,
          not_found: `no task with id ${id}`,
        };
        console.log(messages[result.outcome]);
        if (result.outcome === 'not_found') process.exitCode = 1;
      });
    });
}
