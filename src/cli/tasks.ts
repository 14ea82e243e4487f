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
    .option('--json', 'print the task and its attempts as JSON instead')
    .action(async (id: string, options: ConnectionOptions & { json?: boolean }) => {
      await withApp(options, async (app) => {
        const task = await app.getTask(id, { attempts: true });
        if (!task) {
          console.error(`no task with id ${id}`);
          process.exitCode = 1;
          return;
        }
        console.log(options.json ? JSON.stringify(task, null, 2) : describeTask(task));
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

function time(date: Date | null): string {
  return date ? date.toISOString() : '';
}

function json(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}

/** One task for a reader: its fields as labelled lines, then its attempts as a table. */
export function describeTask(task: TaskInfo): string {
  const stored = task.result as { ok?: unknown; err?: { code?: string; message?: string } } | null;
  const lines: Array<[string, string]> = [
    ['task', task.id],
    ['name', task.taskName],
    ['queue', `${task.queueName} (priority ${task.priority})`],
    ['status', task.status],
  ];
  if (stored && 'ok' in stored) lines.push(['result', json(stored.ok)]);
  if (task.errorCode) {
    lines.push(['error', `${task.errorCode}: ${stored?.err?.message ?? task.failedReason ?? ''}`.trimEnd()]);
  }
  lines.push(['input', json(task.input)]);
  lines.push(['sent', time(task.sentAt)]);
  if (task.enqueuedAt.getTime() !== task.sentAt.getTime()) lines.push(['enqueued', time(task.enqueuedAt)]);
  if (task.startedAt) lines.push(['started', time(task.startedAt)]);
  if (task.finishedAt) lines.push(['finished', time(task.finishedAt)]);
  if (task.goodUntil) lines.push(['good until', time(task.goodUntil)]);
  if (task.nextRetryAt) lines.push(['next retry', time(task.nextRetryAt)]);
  lines.push([
    'attempts',
    `${task.attemptCount} (retries ${task.retryCount} of ${task.maxRetries}, resubmits ${task.resubmitCount})`,
  ]);
  if (task.waiting) lines.push(['waiting', task.waiting]);
  if (task.claimedByWorkerId) lines.push(['worker', task.claimedByWorkerId]);
  if (task.cancelRequestedAt) lines.push(['cancel asked', time(task.cancelRequestedAt)]);
  if (task.idempotencyKey) lines.push(['idem. key', task.idempotencyKey]);
  if (task.group !== null) lines.push(['group', task.group]);
  if (task.dedupe !== null) {
    const { key, scope, held } = task.dedupe;
    lines.push([
      scope === 'debounce' ? 'debounce key' : 'dedupe key',
      `${key} (${scope}, ${held ? 'held' : 'released'})`,
    ]);
  }
  if (task.workflow) lines.push(['workflow', `${task.workflow.id} node ${task.workflow.nodeId}`]);
  if (task.progress) {
    const { value, at, attempt } = task.progress;
    const stale = attempt !== task.attemptCount ? ', an earlier attempt' : '';
    lines.push(['progress', `${json(value)} (attempt ${attempt}${stale}, ${time(at)})`]);
  }
  const width = Math.max(...lines.map(([label]) => label.length));
  const head = lines.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n');
  const attempts = task.attempts ?? [];
  if (attempts.length === 0) return head;
  const table = formatTable(
    attempts.map((a) => ({
      attempt: String(a.attempt),
      outcome: a.outcome,
      retry: a.willRetry ? 'yes' : 'no',
      started: time(a.startedAt),
      finished: time(a.finishedAt),
      error: a.errorCode ? `${a.errorCode}${a.errorMessage ? `: ${a.errorMessage}` : ''}` : '',
      worker: a.workerId ?? '',
    })),
  );
  return `${head}\n\n${table}`;
}
