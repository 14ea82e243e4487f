/** The worker's configuration and its validation. */
import { availableParallelism, hostname } from 'node:os';
import { basename } from 'node:path';
import { z } from 'zod';
import { QUEUE_NAME_PATTERN, toProblems } from '../config.js';
import { ConfigError } from '../errors.js';
import type { ConfigProblem } from '../errors.js';
import { databaseClock } from '../clock.js';
import type { Clock } from '../clock.js';
import type { WorkerIdentity } from '../db/tasks.js';

/**
 * Tasks claimed ahead of free handler slots (`WorkerConfig.prefetch`), so that a freed slot starts the next task
 * without a claim round trip. Every field is optional.
 */
export interface WorkerPrefetchConfig {
  /**
   * Claimed tasks held ready beyond `concurrency`. They stay CLAIMED (protected by the lease and claimer
   * heartbeats); if the worker dies they are requeued after `claimedStaleThresholdMs`. `'auto'`: as many as the
   * worker expects to start within `windowMs` at the rate its runs have been ending (none for long tasks, hundreds
   * for very short ones), at most the larger of 490 and ten times `concurrency`. Default 0 (`'auto'` with
   * `throughput: 'high'`).
   */
  size?: number | 'auto' | undefined;
  /** With `size: 'auto'`: how far ahead, in time, the worker claims. Default 20 ms. */
  windowMs?: number | undefined;
  /**
   * A task claimed ahead that has found no free slot within this time goes back to PENDING, where any worker can
   * take it, and this worker claims nothing ahead again until one of its runs ends: a worker whose slots are all
   * held by long runs does not keep what others could run. 0: never. Default 5,000 ms.
   */
  holdMs?: number | undefined;
  /**
   * Start the tasks claimed ahead in the claim that takes them: one row update writes them RUNNING (attempt
   * counted, `started_at` the claim's time), and each waits here for a free handler slot, so that a run follows
   * the one before it with no start round trip. A started task that waits `holdMs` is handed back to PENDING (no
   * attempt), as a stop hands back those still waiting; a cancel request cancels it without running it. The cost
   * is on a crash: such tasks count a crashed attempt (`WORKER_CRASHED`, retried as their policy says), as a
   * running task does, where a claimed one goes back to PENDING untouched. Not for queues under a cap or a rate
   * limit, whose tasks start only into free slots. Requires a `size` above 0 (or `'auto'`). Default false (true
   * with `throughput: 'high'`).
   */
  startAhead?: boolean | undefined;
}

/** How the worker takes tasks from the table and starts them (`WorkerConfig.claims`). Every field is optional. */
export interface WorkerClaimsConfig {
  /**
   * Most tasks claimed in one statement. Default: `concurrency + prefetch.size` (at most 500 with
   * `prefetch.size: 'auto'` or `throughput: 'high'`).
   */
  batchSize?: number | undefined;
  /**
   * Most tasks this worker holds at once, claimed or running (runs that ended, with their outcomes waiting to be
   * written, not counted: see `outcomes.batchSize`). Default: `concurrency + prefetch.size`.
   */
  maxHeld?: number | undefined;
  /** Claim lease: how long a claim is protected before claimer heartbeats renew it. Default 60,000 ms. */
  leaseMs?: number | undefined;
  /** Claimer heartbeats stop renewing a claim older than this. Default 600,000 ms. */
  maxAgeMs?: number | undefined;
  /**
   * Make every start (CLAIMED to RUNNING, in a claim that starts its tasks or after it) wait for its WAL flush (a
   * synchronous commit), as outcomes always do. Default false: a start commits without waiting, which saves a
   * disk flush per batch of starts; a server crash within a fraction of a second of a start can then undo it, and
   * the task runs again later, as after a worker crash (the worker's next heartbeat finds it not RUNNING and stops
   * the handler; nothing is written on the lost claim). Claims never wait for the flush: a lost claim only leaves
   * the task PENDING.
   */
  synchronousStarts?: boolean | undefined;
}

/** How the worker writes the outcomes of ended runs (`WorkerConfig.outcomes`). Every field is optional. */
export interface WorkerOutcomesConfig {
  /**
   * Most outcomes written in one statement. Default 500. Also how many runs may end while their outcomes wait to
   * be written (at least `claims.maxHeld`): the worker keeps claiming until that many wait, so that a busy worker
   * writes its outcomes in large batches, and a write that lags stops its claims.
   */
  batchSize?: number | undefined;
  /**
   * How long a write of outcomes waits for more to join it when outcomes arrived during the write before it (a
   * busy worker; an idle one writes an outcome at once). Fewer, larger finish statements cost the database less
   * per task; the outcomes of a busy worker show up to this much later. Not waited while `batchSize` outcomes
   * wait, for the outcome of a task under a cap or a group limit (it holds room until written), nor by `stop()`.
   * 0: never wait. Default 2 ms.
   */
  delayMs?: number | undefined;
}

/** How handlers are stopped (`WorkerConfig.shutdown`). Every field is optional. */
export interface WorkerShutdownConfig {
  /** How long `stop()` waits for running handlers before it stops them. Default 30,000 ms. */
  drainTimeoutMs?: number | undefined;
  /**
   * How long a stopped handler gets to return after its AbortSignal fires, at shutdown and also after a timeout
   * or a cancel; after that it is left behind and its outcome written without it. Default 5,000 ms.
   */
  abortGraceMs?: number | undefined;
}

/**
 * Configuration of a worker. Every field is optional. The fields most workers set are at the top level; the
 * tuning of prefetch, claims, outcomes and shutdown is grouped under those names.
 */
export interface WorkerConfig {
  /** Queues to claim from. Default: every queue of the app. */
  queues?: string[] | undefined;
  /** Most handlers running at once (with no prefetch, also the most tasks held). Default 10. */
  concurrency?: number | undefined;
  /**
   * `default`: the worker claims only what it has free slots for, so every task waits in the table where any
   * worker can take it, and a crash strands nothing that has not started. `high`: for many short tasks, the
   * worker starts tasks ahead of its free slots in its claims (`prefetch: { size: 'auto', startAhead: true }`,
   * claims of up to 500) and takes hand-offs: as many as it expects to run within `prefetch.windowMs`, none for
   * long tasks. A crash counts a crashed attempt for those started ahead, as for running ones. Explicit
   * `prefetch.size`, `prefetch.startAhead`, `claims.batchSize` and `handoff` win over either. See
   * docs/benchmarks.md.
   */
  throughput?: 'default' | 'high' | undefined;
  /** Tasks claimed ahead of free slots: their number, how long they wait, whether their claim starts them. */
  prefetch?: WorkerPrefetchConfig | undefined;
  /** Claim batches, the most tasks held, the claim lease, and the durability of starts. */
  claims?: WorkerClaimsConfig | undefined;
  /** Batching of outcome writes. */
  outcomes?: WorkerOutcomesConfig | undefined;
  /** How long `stop()` drains, and how long a stopped handler gets to return. */
  shutdown?: WorkerShutdownConfig | undefined;
  /**
   * While idle, register free slots where a single `send()` finds them: the send then inserts its task claimed and
   * started for this worker and tells it directly, and the task starts without the claim's round trip (about a
   * third of the time from send to start). Only for a worker of one queue, without a cap, rate limit, group limit
   * or per-worker task limit on it; only for a task due now, without a group key, sent outside a transaction. A
   * worker that dies holding handed tasks leaves them as a crash does (the reaper recovers them, a crashed
   * attempt each). Default false (true with `throughput: 'high'`). See docs/state-machine.md.
   */
  handoff?: boolean | undefined;
  /**
   * Claim pass without a notification, and poll for cancel requests of running tasks, at least this often.
   * Default 2,000 ms.
   */
  pollIntervalMs?: number | undefined;
  /** How often the worker writes a snapshot to `horsies_worker_states`; 0 turns it off. Default 5,000 ms. */
  snapshotIntervalMs?: number | undefined;
  /** Campaign for the maintenance leadership (reaper, expiry, retention) in this worker. Default true. */
  maintenance?: boolean | undefined;
  /** Worker id recorded on claims and attempts. Default: `<host>:<pid>:<random>`. */
  workerId?: string | undefined;
  /**
   * The module that exports the app (a path or file URL; `import.meta.url` of the module that creates it), for
   * the threads of blocking tasks. `horsies worker <module>` sets it. Required when the app has blocking tasks.
   */
  appModule?: string | URL | undefined;
  /** The export of `appModule` holding the app, if not `default` or `app`. */
  appExport?: string | undefined;
  /** Threads for blocking tasks. Default: min(concurrency, available cores). */
  blockingThreads?: number | undefined;
  /**
   * How long `start()` keeps retrying, with backoff, a database that refuses connections or is starting up,
   * before it fails with `DatabaseUnavailableError`. Only the start waits: once running, a worker reconnects for
   * as long as it takes. Default 30,000 ms.
   */
  startupTimeoutMs?: number | undefined;
  /**
   * Apply pending migrations at start instead of failing with `SchemaNotMigratedError` when the schema is
   * behind. Default false.
   */
  migrate?: boolean | undefined;
  /**
   * The time maintenance compares with (staleness, expiry, retention). Default: the database clock. Tests
   * inject a `ManualClock` to move time without waiting.
   */
  clock?: Clock | undefined;
}

/**
 * Where each option of the earlier flat config went: a config that still names one is told where it moved
 * (at run time, for JavaScript callers; TypeScript rejects the old name at compile time).
 */
const MOVED_FIELDS: Readonly<Record<string, string>> = {
  prefetchWindowMs: 'prefetch.windowMs',
  prefetchHoldMs: 'prefetch.holdMs',
  startPrefetched: 'prefetch.startAhead',
  maxClaimBatch: 'claims.batchSize',
  maxClaimPerWorker: 'claims.maxHeld',
  claimLeaseMs: 'claims.leaseMs',
  maxClaimAgeMs: 'claims.maxAgeMs',
  synchronousStarts: 'claims.synchronousStarts',
  completionBatchSize: 'outcomes.batchSize',
  completionDelayMs: 'outcomes.delayMs',
  drainTimeoutMs: 'shutdown.drainTimeoutMs',
  abortGraceMs: 'shutdown.abortGraceMs',
};

const prefetchSize = z.union([z.number().int().min(0).max(100_000), z.literal('auto')]);

const prefetchSchema = z.strictObject(
  {
    size: prefetchSize.optional(),
    windowMs: z.number().int().min(1).max(60_000).default(20),
    holdMs: z.number().int().min(0).default(5_000),
    startAhead: z.boolean().optional(),
  },
  {
    // `prefetch` was the count itself before it became a group: say where the count goes now.
    error: (issue) =>
      issue.code === 'invalid_type' && prefetchSize.safeParse(issue.input).success
        ? `is a group now: write prefetch: { size: ${JSON.stringify(issue.input)} }`
        : undefined,
  },
);

const claimsSchema = z.strictObject({
  batchSize: z.number().int().min(1).max(10_000).optional(),
  maxHeld: z.number().int().min(1).max(100_000).optional(),
  leaseMs: z.number().int().min(1000).default(60_000),
  maxAgeMs: z.number().int().min(1000).default(600_000),
  synchronousStarts: z.boolean().default(false),
});

const outcomesSchema = z.strictObject({
  batchSize: z.number().int().min(1).max(10_000).default(500),
  delayMs: z.number().int().min(0).max(60_000).default(2),
});

const shutdownSchema = z.strictObject({
  drainTimeoutMs: z.number().int().min(0).default(30_000),
  abortGraceMs: z.number().int().min(0).default(5_000),
});

const workerConfigSchema = z.strictObject({
  queues: z.array(z.string().regex(QUEUE_NAME_PATTERN, 'is not a valid queue name')).min(1).optional(),
  concurrency: z.number().int().min(1).max(10_000).default(10),
  throughput: z.enum(['default', 'high']).default('default'),
  // prefault: an absent group parses as `{}`, so that its fields' defaults apply.
  prefetch: prefetchSchema.prefault({}),
  claims: claimsSchema.prefault({}),
  outcomes: outcomesSchema.prefault({}),
  shutdown: shutdownSchema.prefault({}),
  handoff: z.boolean().optional(),
  pollIntervalMs: z.number().int().min(10).default(2000),
  snapshotIntervalMs: z.number().int().min(0).default(5_000),
  maintenance: z.boolean().default(true),
  workerId: z.string().min(1).max(255).optional(),
  appModule: z.union([z.string().min(1), z.instanceof(URL)]).optional(),
  appExport: z.string().min(1).optional(),
  blockingThreads: z.number().int().min(1).max(1024).optional(),
  startupTimeoutMs: z.number().int().min(0).default(30_000),
  migrate: z.boolean().default(false),
  clock: z
    .custom<Clock>(
      (v) => typeof (v as Clock | null)?.now === 'function',
      'must be a Clock (an object with now())',
    )
    .default(databaseClock),
});

/**
 * A {@link WorkerConfig} with defaults applied, flat: the worker's parts read these fields, and only
 * {@link resolveWorkerConfig} knows the groups the user writes.
 */
export interface ResolvedWorkerConfig {
  queues: string[];
  concurrency: number;
  throughput: 'default' | 'high';
  /** Claimed tasks held beyond `concurrency`; with `prefetchAuto`, the most it may hold (`prefetch.size`). */
  prefetch: number;
  /** `prefetch.size: 'auto'`: the tasks held ahead follow the rate of ended runs (see PrefetchSizer). */
  prefetchAuto: boolean;
  /** `prefetch.windowMs`. */
  prefetchWindowMs: number;
  /** `prefetch.holdMs`. */
  prefetchHoldMs: number;
  /** `prefetch.startAhead`. */
  startPrefetched: boolean;
  /** `claims.batchSize`. */
  maxClaimBatch: number;
  /** `claims.maxHeld`. */
  maxClaimPerWorker: number;
  /** `claims.leaseMs`. */
  claimLeaseMs: number;
  /** `claims.maxAgeMs`. */
  maxClaimAgeMs: number;
  /** `claims.synchronousStarts`. */
  synchronousStarts: boolean;
  /** `outcomes.batchSize`. */
  completionBatchSize: number;
  /** `outcomes.delayMs`. */
  completionDelayMs: number;
  /** `shutdown.drainTimeoutMs`. */
  drainTimeoutMs: number;
  /** `shutdown.abortGraceMs`. */
  abortGraceMs: number;
  handoff: boolean;
  pollIntervalMs: number;
  snapshotIntervalMs: number;
  maintenance: boolean;
  blockingThreads: number;
  startupTimeoutMs: number;
  migrate: boolean;
  clock: Clock;
  identity: WorkerIdentity;
  appModule: string | null;
  appExport: string | undefined;
}

/**
 * Validates a worker config against the app's queues (and, when the app has blocking tasks, requires
 * `appModule`); throws a ConfigError listing every problem.
 */
export function resolveWorkerConfig(
  config: WorkerConfig,
  appQueues: readonly string[],
  hasBlockingTasks = false,
): ResolvedWorkerConfig {
  // Checked field by field (not in a refinement of the whole object, which zod skips once any field fails), so
  // that these problems are reported together with the others.
  const schema = workerConfigSchema.extend({
    queues: z
      .array(
        z
          .string()
          .regex(QUEUE_NAME_PATTERN, 'is not a valid queue name')
          .refine((q) => appQueues.includes(q), `is not one of the app's queues (${appQueues.join(', ')})`),
      )
      .min(1)
      .optional(),
    appModule: hasBlockingTasks
      ? z.union([z.string().min(1), z.instanceof(URL)], {
          error: (issue) =>
            issue.input === undefined
              ? 'is required: the app has blocking tasks, and their threads load the app from this module'
              : undefined,
        })
      : workerConfigSchema.shape.appModule,
  });
  const parsed = schema.safeParse(config ?? {});
  if (!parsed.success) {
    throw new ConfigError('worker config', toProblems(parsed.error.issues, config).map(withMovedHint));
  }
  const { prefetch: ahead, claims, outcomes, shutdown, ...top } = parsed.data;
  const host = hostname();
  const processName = basename(process.argv[1] ?? process.title);
  const high = top.throughput === 'high';
  const auto = ahead.size === 'auto' || (high && ahead.size === undefined);
  const prefetch =
    typeof ahead.size === 'number' ? ahead.size : auto ? Math.max(490, 10 * top.concurrency) : 0;
  if (ahead.startAhead === true && prefetch === 0) {
    throw new ConfigError('worker config', [
      {
        field: 'prefetch.startAhead',
        value: true,
        message:
          "starts prefetched tasks, and none are: set prefetch.size (above 0, or 'auto'), or throughput: 'high'",
      },
    ]);
  }
  return {
    concurrency: top.concurrency,
    throughput: top.throughput,
    // Served in the app's queue order: highest priority first.
    queues: appQueues.filter((q) => (top.queues ?? appQueues).includes(q)),
    prefetch,
    prefetchAuto: auto,
    prefetchWindowMs: ahead.windowMs,
    prefetchHoldMs: ahead.holdMs,
    // With nothing prefetched (throughput 'high' with prefetch 0), nothing is started ahead either.
    startPrefetched: ahead.startAhead ?? (high && prefetch > 0),
    maxClaimBatch:
      claims.batchSize ??
      (high || auto ? Math.min(500, top.concurrency + prefetch) : top.concurrency + prefetch),
    maxClaimPerWorker: claims.maxHeld ?? top.concurrency + prefetch,
    claimLeaseMs: claims.leaseMs,
    maxClaimAgeMs: claims.maxAgeMs,
    synchronousStarts: claims.synchronousStarts,
    completionBatchSize: outcomes.batchSize,
    completionDelayMs: outcomes.delayMs,
    drainTimeoutMs: shutdown.drainTimeoutMs,
    abortGraceMs: shutdown.abortGraceMs,
    handoff: top.handoff ?? high,
    pollIntervalMs: top.pollIntervalMs,
    snapshotIntervalMs: top.snapshotIntervalMs,
    maintenance: top.maintenance,
    blockingThreads: top.blockingThreads ?? Math.min(top.concurrency, availableParallelism()),
    startupTimeoutMs: top.startupTimeoutMs,
    migrate: top.migrate,
    clock: top.clock,
    appModule: top.appModule === undefined ? null : String(top.appModule),
    appExport: top.appExport,
    identity: {
      workerId: top.workerId ?? `${host}:${process.pid}:${Math.random().toString(36).slice(2, 10)}`,
      hostname: host,
      pid: process.pid,
      processName,
    },
  };
}

/** An option of the earlier flat config, unknown now, is told where it moved. */
function withMovedHint(problem: ConfigProblem): ConfigProblem {
  const moved = MOVED_FIELDS[problem.field];
  return moved === undefined || problem.message !== 'is not a known option'
    ? problem
    : { ...problem, message: `has moved to ${moved}` };
}
