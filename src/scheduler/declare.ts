/**
 * Declaring schedules: the config a user writes, validated all at once (every problem of every schedule in one
 * {@link ConfigError}), resolved into {@link Schedule}s the scheduler and the operations run on.
 */
import { createHash } from 'node:crypto';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { z } from 'zod';
import { toProblems } from '../config.js';
import type { Queryable } from '../db/Database.js';
import { ConfigError } from '../errors.js';
import type { ConfigProblem } from '../errors.js';
import { cronProblem, intervalMs, slotRule, TIME_OF_DAY, WEEKDAYS } from './patterns.js';
import type { SchedulePattern, SlotRule } from './patterns.js';
import { isStorableText } from '../types.js';
import { isValidTimeZone } from './zonedTime.js';

/** The options the scheduler passes to a task's send. `Q` is the app's queue names. */
export interface ScheduledSendOptions<Q extends string = string> {
  /** The slot's derived task id (absent for a run triggered by hand: a generated id). */
  id?: string | undefined;
  queue?: Q | undefined;
  priority?: number | undefined;
  /** The slot the task stands for (absent for a run triggered by hand: the insert's time). */
  sentAt?: Date | undefined;
  /** The scheduler's transaction, which also updates the schedule's state. */
  tx: Queryable;
}

/**
 * What the scheduler needs of a task: its name, its input schema (checked when a schedule is declared) and a send
 * that takes an id, a queue, a priority, a `sentAt` and the caller's transaction. A task definition
 * (`app.task(...)`) is one. `Q` is the app's queue names: a definition of an app with typed queues sends to those.
 */
export interface SchedulableTask<Q extends string = string> {
  readonly name: string;
  readonly input: StandardSchemaV1;
  send(input: never, options: ScheduledSendOptions<Q>): Promise<{ readonly id: string }>;
}

/** The tasks schedules can name by string: a map by name (`app.tasks`) or a list. */
export type TaskLookup = ReadonlyMap<string, SchedulableTask> | readonly SchedulableTask[];

/**
 * One schedule, as declared in code (`app.schedule(config)`, or `createApp({ schedules })`). `Q` is the app's queue
 * names: `queue` must be one of them, and `task` may be a definition of that app.
 */
export interface ScheduleConfig<Q extends string = string> {
  /** Unique among the app's schedules; the key of its state row. 1-255 characters. */
  name: string;
  /** The task to send: a task definition, or the name of one in the tasks given to the scheduler. */
  task: string | SchedulableTask<Q>;
  /**
   * The input every run sends. Checked against the task's schema when the schedule is declared (when the schema
   * validates synchronously) and again at each send. Default `undefined`.
   */
  input?: unknown;
  /** Queue of the runs. Default: the task's queue. */
  queue?: Q | undefined;
  /** Priority of the runs, 1-100. Default: the task's priority. */
  priority?: number | undefined;
  /** A disabled schedule sends nothing; enabling it again starts at its next slot. Default true. */
  enabled?: boolean | undefined;
  /** IANA time zone of the pattern's local times (`Europe/Berlin`). Default `UTC`. */
  timezone?: string | undefined;
  /** When it fires. */
  pattern: SchedulePattern;
  /**
   * After downtime, send every missed slot (oldest first, at most `maxCatchUpRuns`, the latest ones) instead of
   * only the latest. Default false.
   */
  catchUp?: boolean | undefined;
  /** Most missed slots one catch-up sends. Default 100. */
  maxCatchUpRuns?: number | undefined;
}

/** A validated schedule with its task resolved and its slots computable. */
export interface Schedule {
  readonly name: string;
  readonly task: SchedulableTask;
  readonly input: unknown;
  readonly queue: string | undefined;
  readonly priority: number | undefined;
  readonly enabled: boolean;
  readonly timezone: string;
  readonly pattern: SchedulePattern;
  readonly catchUp: boolean;
  readonly maxCatchUpRuns: number;
  /** SHA-256 of the pattern and time zone: when it changes, the next run is computed afresh from now. */
  readonly configHash: string;
  /** The slots of the pattern in the time zone. */
  readonly slots: SlotRule;
}

const count = z.number().int().min(0);
/** Longest interval: 100 years of 365.25 days. */
const MAX_INTERVAL_MS = 100 * 365.25 * 86_400_000;
const at = z.string().regex(TIME_OF_DAY, 'must be a time of day, HH:MM or HH:MM:SS (24-hour)');

const patternSchema = z.discriminatedUnion('kind', [
  z
    .strictObject({
      kind: z.literal('interval'),
      seconds: count.optional(),
      minutes: count.optional(),
      hours: count.optional(),
      days: count.optional(),
    })
    .refine((p) => intervalMs(p) >= 1000, 'must add up to at least one second')
    // Past this, slots fall beyond the dates JavaScript and PostgreSQL hold (2^53 days reach Invalid Date).
    .refine((p) => intervalMs(p) <= MAX_INTERVAL_MS, 'must add up to at most 100 years'),
  z.strictObject({
    kind: z.literal('hourly'),
    minute: z.number().int().min(0).max(59),
    second: z.number().int().min(0).max(59).optional(),
  }),
  z.strictObject({ kind: z.literal('daily'), at }),
  z.strictObject({ kind: z.literal('weekly'), days: z.array(z.enum(WEEKDAYS)).min(1), at }),
  z.strictObject({ kind: z.literal('monthly'), day: z.number().int().min(1).max(31), at }),
  z.strictObject({
    kind: z.literal('cron'),
    expression: z.string().superRefine((expression, ctx) => {
      // The zone does not change what croner accepts.
      const problem = cronProblem(expression, 'UTC');
      if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
    }),
  }),
]);

const taskSchema = z.custom<SchedulableTask>(
  (v) =>
    typeof (v as SchedulableTask | null)?.name === 'string' &&
    typeof (v as SchedulableTask).send === 'function' &&
    typeof (v as SchedulableTask).input?.['~standard']?.validate === 'function',
  'must be a task definition (or the name of one)',
);

const scheduleSchema = z.strictObject({
  name: z
    .string()
    .min(1)
    .max(255)
    .refine(isStorableText, 'must not hold a NUL character or a lone surrogate (it is stored as text)'),
  task: z.union([z.string().min(1), taskSchema]),
  input: z.unknown().optional(),
  queue: z.string().min(1).optional(),
  priority: z.number().int().min(1).max(100).optional(),
  enabled: z.boolean().default(true),
  timezone: z.string().refine(isValidTimeZone, 'must be an IANA time zone (Europe/Berlin)').default('UTC'),
  pattern: patternSchema,
  catchUp: z.boolean().default(false),
  maxCatchUpRuns: z.number().int().min(1).max(10_000).default(100),
});

/** Extra checks a caller can ask of {@link declareSchedules}. */
export interface DeclareOptions {
  /** Tasks that schedules name by string. */
  tasks?: TaskLookup | undefined;
  /** The app's queues: a schedule's queue must be one of them. Default: not checked until a send. */
  queues?: readonly string[] | undefined;
}

/**
 * Validates and resolves schedules. Throws one {@link ConfigError} that lists every problem of every schedule
 * (fields named `schedules.<index>.<field>`): bad fields, repeated names, unknown tasks and queues, unknown time
 * zones, cron expressions croner rejects, and inputs the task's schema rejects.
 */
export function declareSchedules(
  configs: readonly ScheduleConfig[],
  options: DeclareOptions = {},
): Schedule[] {
  if (!Array.isArray(configs)) {
    throw new ConfigError('schedules', [{ field: 'schedules', value: configs, message: 'must be an array' }]);
  }
  const problems: ConfigProblem[] = [];
  const schedules: Schedule[] = [];
  const seen = new Map<string, number>();
  const tasks = taskMap(options.tasks);
  configs.forEach((config, index) => {
    const problem = (field: string, value: unknown, message: string): void => {
      problems.push({ field: `schedules.${index}${field ? `.${field}` : ''}`, value, message });
    };
    const parsed = scheduleSchema.safeParse(config);
    if (!parsed.success) {
      for (const p of toProblems(parsed.error.issues, config)) {
        problem(p.field === '(root)' ? '' : p.field, p.value, p.message);
      }
    }
    // The checks across fields and against the app run on what was given even when a field failed above, so one
    // error lists every problem.
    const raw = (typeof config === 'object' && config !== null ? config : {}) as Partial<ScheduleConfig>;
    if (typeof raw.name === 'string') {
      const earlier = seen.get(raw.name);
      if (earlier !== undefined) problem('name', raw.name, `repeats the name of schedules.${earlier}`);
      else seen.set(raw.name, index);
    }
    const task = typeof raw.task === 'string' ? tasks.get(raw.task) : raw.task;
    if (typeof raw.task === 'string' && !task) {
      problem(
        'task',
        raw.task,
        `is not a task of the app (known: ${[...tasks.keys()].join(', ') || 'none'})`,
      );
    }
    if (typeof raw.queue === 'string' && options.queues && !options.queues.includes(raw.queue)) {
      problem('queue', raw.queue, `is not a queue of the app (known: ${options.queues.join(', ')})`);
    }
    if (task && typeof task.input?.['~standard']?.validate === 'function') {
      for (const [path, message] of inputIssues(task, raw.input)) problem(path, raw.input, message);
    }
    if (!parsed.success || !task) return;
    const s = parsed.data;
    schedules.push({
      name: s.name,
      task,
      input: s.input,
      queue: s.queue,
      priority: s.priority,
      enabled: s.enabled,
      timezone: s.timezone,
      pattern: s.pattern,
      catchUp: s.catchUp,
      maxCatchUpRuns: s.maxCatchUpRuns,
      configHash: configHash(s.pattern, s.timezone),
      slots: slotRule(s.pattern, s.timezone),
    });
  });
  if (problems.length > 0) throw new ConfigError('schedules', problems);
  return schedules;
}

/** The input's problems with the task's schema, as [field, message]. An asynchronous schema is checked at send. */
function inputIssues(task: SchedulableTask, input: unknown): Array<[string, string]> {
  const checked = task.input['~standard'].validate(input);
  if (checked instanceof Promise || !checked.issues) return [];
  return checked.issues.map((issue) => {
    const path = (issue.path ?? []).map((seg) => String(typeof seg === 'object' ? seg.key : seg));
    return [['input', ...path].join('.'), `does not pass task "${task.name}": ${issue.message}`];
  });
}

function taskMap(tasks: TaskLookup | undefined): ReadonlyMap<string, SchedulableTask> {
  if (tasks === undefined) return new Map();
  if (Array.isArray(tasks)) return new Map(tasks.map((t: SchedulableTask) => [t.name, t]));
  return tasks as ReadonlyMap<string, SchedulableTask>;
}

/**
 * The hash of what decides a schedule's slots: the pattern (normalized, so `{ minutes: 1 }` and
 * `{ seconds: 60 }` are one interval) and the time zone. The task, input, queue and catch-up settings are not in
 * it: changing them keeps the schedule's place.
 */
export function configHash(pattern: SchedulePattern, timezone: string): string {
  return createHash('sha256')
    .update(JSON.stringify([normalized(pattern), timezone]))
    .digest('hex');
}

function normalized(pattern: SchedulePattern): unknown[] {
  switch (pattern.kind) {
    case 'interval':
      return [pattern.kind, intervalMs(pattern)];
    case 'hourly':
      return [pattern.kind, pattern.minute, pattern.second ?? 0];
    case 'daily':
      return [pattern.kind, pattern.at.length === 5 ? `${pattern.at}:00` : pattern.at];
    case 'weekly':
      return [
        pattern.kind,
        [...new Set(pattern.days)].sort(),
        pattern.at.length === 5 ? `${pattern.at}:00` : pattern.at,
      ];
    case 'monthly':
      return [pattern.kind, pattern.day, pattern.at.length === 5 ? `${pattern.at}:00` : pattern.at];
    case 'cron':
      return [pattern.kind, pattern.expression.trim().split(/\s+/).join(' ')];
  }
}
