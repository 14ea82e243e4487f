/**
 * The checks behind `horsies check <module> [--live]`, also run by every worker at start. Each check reports
 * every problem it finds instead of stopping at the first, so one run lists all there is to fix.
 *
 * - Static checks need only the app: its config (a database to reach), its tasks (a worker with no task claims
 *   nothing; a task that may run longer than a worker drains at shutdown), its schedules (declared against the
 *   app's tasks and queues).
 * - Live checks need the database: it answers, the schema is at the version this library needs, the hot-path
 *   routines are the migrations', a NOTIFY sent through the pool reaches a LISTEN connection (it does not behind a
 *   transaction-mode pooler), and some live worker serves each of the app's tasks.
 */
import { randomBytes } from 'node:crypto';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type pg from 'pg';
import type { Database } from '../db/Database.js';
import { ClockNow } from '../db/admin.js';
import { NotifySend, PendingTaskNames } from '../db/checks.js';
import { ServedTaskNames } from '../db/capacity.js';
import { Listener } from '../db/Listener.js';
import { latestMigrationVersion, schemaVersion } from '../db/schemaVersion.js';
import { TaskTableVacuumState } from '../db/maintenance.js';
import { routineDrift } from '../db/routines.js';
import type { RoutineDrift } from '../db/routines.js';
import { ConfigError } from '../errors.js';
import { declareSchedules } from '../scheduler/declare.js';
import type { ScheduleConfig } from '../scheduler/declare.js';
import type { ResolvedAppConfig } from './config.js';
import { LIVE_WORKER_WINDOW_MS } from './operations.js';
import type { TaskDefinition } from './TaskDefinition.js';

/** What a check looks at. */
export type CheckArea =
  'module' | 'config' | 'tasks' | 'workflows' | 'schedules' | 'database' | 'notify' | 'workers';

/** One finding. An `error` makes `horsies check` exit 1 and a worker refuse to start; a `warning` does not. */
export interface CheckProblem {
  area: CheckArea;
  severity: 'error' | 'warning';
  message: string;
}

/** What the static checks need of an app (an `App` is one; so is a worker's host). */
export interface CheckedApp {
  readonly tasks: ReadonlyMap<string, TaskDefinition<StandardSchemaV1, unknown>>;
  readonly config: Pick<ResolvedAppConfig, 'queues'> &
    Partial<Pick<ResolvedAppConfig, 'databaseUrl' | 'pool'>>;
  readonly schedules?: readonly ScheduleConfig[];
}

/** Settings of the static checks. */
export interface StaticCheckOptions {
  /** How long a worker lets running tasks finish at shutdown (its `shutdown.drainTimeoutMs`). Default 30,000 ms. */
  drainTimeoutMs?: number;
  /** Check that a database is configured. Default true (a worker that got this far has one). */
  database?: boolean;
}

/** The checks that need no database. */
export function checkAppStatic(app: CheckedApp, options: StaticCheckOptions = {}): CheckProblem[] {
  const problems: CheckProblem[] = [];
  const needsDatabase = options.database ?? true;
  if (needsDatabase && !app.config.databaseUrl && !app.config.pool && !process.env.DATABASE_URL) {
    problems.push({
      area: 'config',
      severity: 'error',
      message: 'no database: set DATABASE_URL, or give the app databaseUrl or pool',
    });
  }
  if (app.tasks.size === 0) {
    problems.push({
      area: 'tasks',
      severity: 'warning',
      message: 'the app defines no task: a worker would claim nothing',
    });
  }
  const drainMs = options.drainTimeoutMs ?? 30_000;
  for (const task of app.tasks.values()) {
    const { timeoutMs, shutdown } = task.policies;
    if (shutdown === 'continue' && timeoutMs !== null && timeoutMs > drainMs) {
      problems.push({
        area: 'tasks',
        severity: 'warning',
        message:
          `task "${task.name}" may run ${timeoutMs} ms but a worker lets runs finish for ${drainMs} ms at ` +
          `shutdown: a longer run is handed back and starts over (shutdown: 'resubmit' says so at once)`,
      });
    }
  }
  for (const problem of scheduleProblems(app)) problems.push(problem);
  return problems;
}

function scheduleProblems(app: CheckedApp): CheckProblem[] {
  if (!app.schedules || app.schedules.length === 0) return [];
  try {
    declareSchedules(app.schedules, { tasks: app.tasks, queues: app.config.queues });
    return [];
  } catch (error) {
    return fromError('schedules', error);
  }
}

/** A thrown error as problems: one per listed problem of a ConfigError (or a workflow's), else its message. */
export function fromError(area: CheckArea, error: unknown): CheckProblem[] {
  const text = error instanceof Error ? error.message : String(error);
  const [head = '', ...rest] = text.split('\n');
  const listed = rest.filter((line) => line.startsWith('  - '));
  if (Array.isArray((error as { problems?: unknown }).problems) && listed.length > 0) {
    const subject = head.replace(/:$/, '');
    return listed.map((line) => ({
      area,
      severity: 'error' as const,
      message: `${subject}: ${line.slice(4)}`,
    }));
  }
  return [{ area, severity: 'error', message: text }];
}

/** Settings of the live checks. */
export interface LiveCheckOptions {
  /** How long a NOTIFY may take to reach the LISTEN connection. Default 3,000 ms. */
  notifyTimeoutMs?: number;
  /** Tasks to look for live workers of (queue and name); none: that check is skipped. */
  tasks?: readonly { name: string; queue: string }[];
  /** Settings of the LISTEN connection. Default: the pool's. */
  listenConfig?: pg.ClientConfig;
  /**
   * The app's maintenance leader vacuums the task table (`recovery.vacuumThreshold` is not null): warn when the
   * connecting role may not. Default false.
   */
  vacuumCheck?: boolean;
}

/** What the live checks found, and which areas they got to check. */
export interface LiveCheckResult {
  problems: CheckProblem[];
  /** The areas checked: none past `database` when the database cannot be reached. */
  checked: CheckArea[];
}

/** The checks that need the database. Connection failures are problems, not exceptions. */
export async function checkDatabase(db: Database, options: LiveCheckOptions = {}): Promise<LiveCheckResult> {
  try {
    await db.run(ClockNow, {});
  } catch (error) {
    return {
      problems: [
        { area: 'database', severity: 'error', message: `cannot query the database: ${message(error)}` },
      ],
      checked: ['database'],
    };
  }
  const checked: CheckArea[] = ['database', 'notify'];
  const problems: CheckProblem[] = [];
  const version = await schemaVersion(db);
  const required = latestMigrationVersion();
  if (version !== required) {
    problems.push({
      area: 'database',
      severity: 'error',
      message:
        version < required
          ? `schema "${db.schema}" is at migration ${version}, this library needs ${required}: run horsies migrate`
          : `schema "${db.schema}" is at migration ${version}, newer than this library knows (${required}): upgrade horsies`,
    });
  } else {
    for (const drift of await routineDrift(db)) {
      problems.push({
        area: 'database',
        severity: 'error',
        message: routineDriftMessage(drift),
      });
    }
  }
  if (options.vacuumCheck && version === required) {
    const [state] = await db.run(TaskTableVacuumState, { schema: db.schema });
    if (state && !state.permitted) {
      problems.push({
        area: 'database',
        severity: 'warning',
        message:
          `this role may not vacuum "${db.schema}".horsies_tasks (it does not own it, and has no MAINTAIN on ` +
          'PostgreSQL 17 and later): a maintenance leader running as it skips the vacuum check, and long drains ' +
          'slow down until autovacuum comes (horsies roles grants MAINTAIN to the worker role; ' +
          'recovery.vacuumThreshold: null turns the check off)',
      });
    }
  }
  problems.push(...(await notifyProblems(db, options.notifyTimeoutMs ?? 3_000, options.listenConfig)));
  if (options.tasks && options.tasks.length > 0 && version === required) {
    checked.push('workers');
    const served = new Set(
      (await db.run(ServedTaskNames, { liveWithinMs: LIVE_WORKER_WINDOW_MS })).map(
        (r) => `${r.queue_name}\u0000${r.task_name}`,
      ),
    );
    const unserved = options.tasks.filter((t) => !served.has(`${t.queue}\u0000${t.name}`));
    if (unserved.length > 0) {
      problems.push({
        area: 'workers',
        severity: 'warning',
        message: `no live worker serves ${unserved.map((t) => `${t.name} (queue ${t.queue})`).join(', ')}`,
      });
    }
    // Tasks waiting under a name that neither this app defines nor a live worker serves: written by hand, by
    // another app, or left by a task that was renamed or removed. No worker claims them.
    const defined = new Set(options.tasks.map((t) => `${t.queue}\u0000${t.name}`));
    const unknown = (await db.run(PendingTaskNames, {})).filter(
      (r) =>
        !defined.has(`${r.queue_name}\u0000${r.task_name}`) &&
        !served.has(`${r.queue_name}\u0000${r.task_name}`),
    );
    if (unknown.length > 0) {
      problems.push({
        area: 'workers',
        severity: 'warning',
        message:
          `PENDING tasks name a task that this app does not define and no live worker serves: ` +
          unknown.map((r) => `${r.task_name} (queue ${r.queue_name}, ${r.waiting} waiting)`).join(', ') +
          '. No worker claims them: they wait until a worker that defines the name starts, their good_until ' +
          'passes, or they are cancelled (horsies tasks cancel)',
      });
    }
  }
  return { problems, checked };
}

/**
 * Sends a NOTIFY through the pool and waits for it on a LISTEN connection of its own. Behind a transaction-mode
 * pooler the LISTEN does not hold (the pooler hands the server connection to others between transactions), and
 * the notification never arrives.
 */
export async function notifyProblems(
  db: Database,
  timeoutMs: number,
  listenConfig: pg.ClientConfig = db.listenConfig,
): Promise<CheckProblem[]> {
  const channel = `${db.schema}:check_${randomBytes(6).toString('hex')}`;
  const listener = new Listener(listenConfig, { maxBackoffMs: 250 });
  listener.on('error', () => undefined);
  try {
    const arrived = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
      listener.on('notification', (name) => {
        if (name !== channel) return;
        clearTimeout(timer);
        resolve(true);
      });
    });
    await listener.listen(channel);
    if (!listener.connected) {
      return [
        { area: 'notify', severity: 'error', message: 'could not open a LISTEN connection to the database' },
      ];
    }
    await db.run(NotifySend, { channel, payload: 'check' });
    if (await arrived) return [];
    return [
      {
        area: 'notify',
        severity: 'error',
        message:
          `a NOTIFY sent through the pool did not reach a LISTEN within ${timeoutMs} ms. Behind a ` +
          'transaction-mode pooler (PgBouncer pool_mode=transaction) LISTEN does not work: workers and result ' +
          'waiters then only poll. Give the LISTEN connection a direct or session-mode URL',
      },
    ];
  } catch (error) {
    return [{ area: 'notify', severity: 'error', message: `LISTEN/NOTIFY failed: ${message(error)}` }];
  } finally {
    await listener.stop();
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Where a worker reports what its start-up checks found. */
export interface CheckLogger {
  warn(fields: object, message: string): void;
}

/**
 * The static checks as a worker runs them at start: warnings are logged, errors thrown as one ConfigError
 * listing them all (nothing has been claimed yet).
 */
export function checkAtStart(app: CheckedApp, options: StaticCheckOptions, logger: CheckLogger): void {
  const problems = checkAppStatic(app, { ...options, database: false });
  for (const p of problems) if (p.severity === 'warning') logger.warn({ check: p.area }, p.message);
  const errors = problems.filter((p) => p.severity === 'error');
  if (errors.length > 0) {
    throw new ConfigError(
      'app (horsies check)',
      errors.map((p) => ({ field: p.area, value: undefined, message: p.message })),
    );
  }
}

/**
 * The NOTIFY round trip, as a worker runs it once it listens: a failure is logged (the worker still polls), not
 * thrown. `stillRunning` says whether the result still matters when it arrives.
 */
export function checkNotifyInBackground(
  db: Database,
  logger: CheckLogger,
  stillRunning: () => boolean,
): void {
  void notifyProblems(db, 3_000).then(
    (problems) => {
      if (!stillRunning()) return;
      for (const p of problems) logger.warn({ check: p.area }, p.message);
    },
    () => undefined,
  );
}

/** What `check --live` says of a routine that is not its file's. */
function routineDriftMessage(drift: RoutineDrift): string {
  switch (drift.problem) {
    case 'missing':
      return `routine ${drift.name} is missing: run horsies migrate`;
    case 'changed':
      return `routine ${drift.name} is not the one its file (${drift.file}) defines: changed by hand, or applied by another version of horsies; run horsies migrate to restore it`;
    case 'overloaded':
      return `routine ${drift.name} is installed with several argument lists: drop the ones its file (${drift.file}) does not define`;
    case 'unknown':
      return `routine ${drift.name} is installed, and no routine file of this version defines it: made by hand, or left over`;
  }
}
