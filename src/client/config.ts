/** The app's configuration and its validation. */
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import { QUEUE_NAME_PATTERN, parseConfig } from '../config.js';
import { schemaNameProblems } from '../db/Database.js';
import { recoveryConfigSchema } from '../recovery/config.js';
import type { RecoveryConfig } from '../recovery/config.js';
import { policyFields } from './policy.js';
import type { ErrorCodeMap } from './policy.js';
import type { RetryPolicy } from '../retry.js';
import type { ScheduleConfig } from '../scheduler/declare.js';

/** A queue with settings. `Q` is its name's type (the literal written in `createApp`). */
export interface QueueConfig<Q extends string = string> {
  /** Lowercase letter first, then a-z, 0-9, `_`, `-`; at most 26 characters (it becomes a NOTIFY channel name). */
  name: Q;
  /** How long COMPLETED tasks of this queue are kept, unless their task says otherwise. Default: the app's. */
  retentionMs?: number | undefined;
  /** 1–100; workers serve queues with a lower number first. Default 100 (then the order declared). */
  priority?: number | undefined;
  /** Cluster-wide limit on this queue's tasks in flight (see `capMode`). Default: none. */
  maxConcurrency?: number | undefined;
  /**
   * Cluster-wide limit on how often this queue's tasks start: at most `max` starts in any `intervalMs` window,
   * counted from the tasks' `started_at` (see docs/capacity.md, "Rate limits"). Default: none.
   */
  rateLimit?: RateLimit | undefined;
  /**
   * Cluster-wide limit on the tasks of one group (the `group` send option) in flight in this queue at once; claims
   * then take the groups with work in turn (see docs/capacity.md, "Fair sharing"). Default: none.
   */
  maxConcurrencyPerGroup?: number | undefined;
}

/** At most `max` starts in any window of `intervalMs`, over all workers. */
export interface RateLimit {
  /** Starts allowed per window: 1–1,000,000. */
  max: number;
  /** The window, in ms: 1 ms to 24 hours. */
  intervalMs: number;
}

const rateLimitObject = z.strictObject({
  max: z.number().int().min(1).max(1_000_000),
  intervalMs: z
    .number()
    .int()
    .min(1)
    .max(24 * 3600 * 1000),
});

/**
 * Validation of an optional {@link RateLimit}, shared by queue configs and task definitions. Its problems are
 * re-raised as custom issues so that, inside the union a queue entry is, they are reported with their own path
 * (`queues.0.rateLimit.intervalMs`) rather than as the whole entry's "Invalid input".
 */
export const rateLimitSchema = z.unknown().transform((value, ctx): RateLimit | undefined => {
  if (value === undefined) return undefined;
  const parsed = rateLimitObject.safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) {
    ctx.addIssue({
      code: 'custom',
      path: issue.path as PropertyKey[],
      message: issue.message,
      input: value,
      continue: true,
    });
  }
  return z.NEVER;
});

/**
 * Configuration of an {@link App}. Every field is optional. `Q` is the union of the queue names declared in
 * `queues` (inferred by `createApp`), so that a task or a send naming another queue does not compile.
 */
export interface AppConfig<Q extends string = string> {
  /** Connection string. Default: `process.env.DATABASE_URL`. Ignored when `pool` is given. */
  databaseUrl?: string | undefined;
  /**
   * An existing `pg` Pool to use; the app never ends it. The app's own statements read their columns with `pg`'s
   * default parsers, so an application that changes the global ones (`pg.types.setTypeParser`, to read JSON or
   * timestamps as strings, say) keeps them for its queries without changing the app's.
   */
  pool?: Pool | undefined;
  /** Size of the pool the app creates when `pool` is not given. Default 10. */
  poolSize?: number | undefined;
  /** PostgreSQL schema holding the tables. Default `process.env.HORSIES_SCHEMA`, else `horsies`. */
  schema?: string | undefined;
  /**
   * The queues this app uses, as names or {@link QueueConfig}s. Default `['default']`. Names: lowercase letter
   * first, then a-z, 0-9, `_`, `-`, at most 26 characters (they become NOTIFY channel names).
   */
  queues?: ReadonlyArray<Q | QueueConfig<Q>> | undefined;
  /** Queue of tasks that name none. Default: the first of `queues`. */
  defaultQueue?: NoInfer<Q> | undefined;
  /** Largest task input, in bytes of JSON. Default 1 MiB. */
  maxPayloadBytes?: number | undefined;
  /** How often `handle.result()` re-reads awaited tasks without a notification. Default 2,000 ms. */
  resultPollIntervalMs?: number | undefined;
  /**
   * Send statements as named prepared statements. Default true. Set false behind a pooler that does not carry
   * protocol-level prepared statements (PgBouncer in transaction mode before 1.21, see `docs/pgbouncer.md`).
   */
  preparedStatements?: boolean | undefined;
  /**
   * Connection string of the LISTEN connections (workers' wake-ups and cancels, result waiters, the dashboard's
   * live feed). LISTEN is session state: when `databaseUrl` goes through a transaction-mode pooler, give a direct
   * or session-mode URL here. Default: `process.env.HORSIES_LISTEN_URL`, else the pool's connection. Without one
   * behind such a pooler, notifications never arrive and workers and waiters only poll.
   */
  listenUrl?: string | undefined;
  /**
   * `statement_timeout` of the app's connections (its workers' too), in ms; 0 leaves the server's or the role's.
   * Default 300,000 (5 minutes). Sent when a connection opens; not applied to a given `pool`, nor to the
   * connections of `ctx.transaction` (see docs/security.md, also for PgBouncer).
   */
  statementTimeoutMs?: number | undefined;
  /**
   * `lock_timeout` of the app's connections, in ms: a statement waiting longer for a lock fails (SQLSTATE 55P03)
   * and is retried, instead of freezing the worker. 0 leaves the server's or the role's. Default 10,000.
   */
  lockTimeoutMs?: number | undefined;
  /** Logger. Default: pino at `process.env.HORSIES_LOG_LEVEL` or `info`. */
  logger?: Logger | undefined;
  /** Default retry policy of every task (a task's own fields win). Default: no retries. */
  retry?: RetryPolicy | undefined;
  /**
   * Recurring tasks, run by the workers' maintenance leader (or `horsies scheduler`). Each is checked when the
   * first worker or scheduler starts; `app.schedule()` adds one and checks it at once. Default: none.
   */
  schedules?: ScheduleConfig<NoInfer<Q>>[] | undefined;
  /** Default execution timeout of every task. Default: none. */
  timeoutMs?: number | undefined;
  /** Error classes to codes, consulted after the task's own map. */
  errorCodes?: ErrorCodeMap | undefined;
  /** Recovery and retention settings. */
  recovery?: RecoveryConfig | undefined;
  /** Limit on tasks in flight over all queues and workers. Default: none (claimers never lock). */
  clusterWideCap?: number | undefined;
  /**
   * How caps count. `hard` (default): CLAIMED and RUNNING tasks count. `soft`: claims may go `prefetchBuffer`
   * over a cap so workers hold tasks ready, and starts are gated instead, so RUNNING tasks never pass it.
   * Claims whose lease expired never count.
   */
  capMode?: 'hard' | 'soft' | undefined;
  /** In `soft` mode, how far claims may go over each cap. Default 0. */
  prefetchBuffer?: number | undefined;
  /**
   * Prometheus metrics (`app.metrics.registry`, see `docs/observability.md`): `true`, `false`, or settings.
   * Default true.
   */
  metrics?: boolean | MetricsConfig | undefined;
  /**
   * OpenTelemetry spans for sends and runs, with the sender's trace context stored with each task so its run
   * continues the trace. Takes effect only when `@opentelemetry/api` is installed. Default true.
   */
  tracing?: boolean | undefined;
}

/** Settings of the app's metrics. */
export interface MetricsConfig {
  /** Registry to register the metrics in (for example prom-client's default `register`). Default: the app's own. */
  registry?: Registry | undefined;
  /** Error codes besides the built-in ones that get a label of their own; later ones count as `OTHER`. Default 50. */
  maxErrorCodes?: number | undefined;
}

const queueName = z
  .string()
  .regex(
    QUEUE_NAME_PATTERN,
    'must start with a lowercase letter, hold only a-z, 0-9, _ and -, at most 26 characters',
  );

const appConfigSchema = z
  .strictObject({
    databaseUrl: z.string().min(1).optional(),
    pool: z
      .custom<Pool>((v) => typeof v === 'object' && v !== null && 'query' in v, 'must be a pg Pool')
      .optional(),
    poolSize: z.number().int().min(1).max(1000).default(10),
    schema: z
      .string()
      .superRefine((value, ctx) => {
        for (const message of schemaNameProblems(value)) ctx.addIssue({ code: 'custom', message });
      })
      .default(() => process.env.HORSIES_SCHEMA || 'horsies'),
    queues: z
      .array(
        z.union([
          queueName.transform((name): QueueConfig => ({ name })),
          z.strictObject({
            name: queueName,
            retentionMs: z.number().int().min(0).optional(),
            priority: z.number().int().min(1).max(100).optional(),
            maxConcurrency: z.number().int().min(1).optional(),
            rateLimit: rateLimitSchema.optional(),
            maxConcurrencyPerGroup: z.number().int().min(1).optional(),
          }),
        ]),
      )
      .min(1)
      .refine((qs) => new Set(qs.map((q) => q.name)).size === qs.length, 'must not repeat a queue')
      .default([{ name: 'default' }]),
    defaultQueue: queueName.optional(),
    maxPayloadBytes: z
      .number()
      .int()
      .min(64)
      .default(1024 * 1024),
    resultPollIntervalMs: z.number().int().min(10).default(2000),
    preparedStatements: z.boolean().default(true),
    listenUrl: z.string().min(1).optional(),
    statementTimeoutMs: z.number().int().min(0).default(300_000),
    lockTimeoutMs: z.number().int().min(0).default(10_000),
    logger: z
      .custom<Logger>((v) => typeof v === 'object' && v !== null && 'child' in v, 'must be a pino logger')
      .optional(),
    retry: policyFields.retry,
    schedules: z
      .array(
        z.custom<ScheduleConfig>((v) => typeof v === 'object' && v !== null, 'must be a schedule object'),
      )
      .default([]),
    timeoutMs: policyFields.timeoutMs,
    errorCodes: policyFields.errorCodes,
    recovery: recoveryConfigSchema.default(() => recoveryConfigSchema.parse({})),
    clusterWideCap: z.number().int().min(1).optional(),
    capMode: z.enum(['hard', 'soft']).default('hard'),
    prefetchBuffer: z.number().int().min(0).default(0),
    metrics: z
      .union([
        z.boolean(),
        z.strictObject({
          registry: z
            .custom<Registry>(
              (v) => typeof (v as Registry | null)?.registerMetric === 'function',
              'must be a prom-client Registry',
            )
            .optional(),
          maxErrorCodes: z.number().int().min(0).max(1000).optional(),
        }),
      ])
      .default(true),
    tracing: z.boolean().default(true),
  })
  .superRefine((config, ctx) => {
    if (config.prefetchBuffer > 0 && config.capMode !== 'soft') {
      ctx.addIssue({
        code: 'custom',
        path: ['prefetchBuffer'],
        message: 'needs capMode "soft" (a hard cap counts every claim)',
      });
    }
    if (config.defaultQueue !== undefined && !config.queues.some((q) => q.name === config.defaultQueue)) {
      ctx.addIssue({ code: 'custom', path: ['defaultQueue'], message: 'must be one of queues' });
    }
  });

type ParsedAppConfig = z.output<typeof appConfigSchema>;

/**
 * An {@link AppConfig} with defaults applied. `queues` holds the names, highest priority first (ties keep the
 * declared order); `queueConfigs` the settings by name.
 */
export type ResolvedAppConfig = Omit<ParsedAppConfig, 'queues'> & {
  queues: string[];
  queueConfigs: ReadonlyMap<string, QueueConfig>;
  defaultQueue: string;
};

/** Validates an app config, applying defaults; throws a ConfigError listing every problem. */
export function resolveAppConfig(config: AppConfig): ResolvedAppConfig {
  const parsed = parseConfig('app config', appConfigSchema, config);
  const queues = parsed.queues
    .map((q, index) => ({ name: q.name, priority: q.priority ?? 100, index }))
    .sort((a, b) => a.priority - b.priority || a.index - b.index)
    .map((q) => q.name);
  return {
    ...parsed,
    queues,
    queueConfigs: new Map(parsed.queues.map((q) => [q.name, q])),
    defaultQueue: parsed.defaultQueue ?? (parsed.queues[0]?.name as string),
  };
}
