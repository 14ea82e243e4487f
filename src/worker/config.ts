/** The worker's configuration and its validation. */
import { availableParallelism, hostname } from 'node:os';
import { basename } from 'node:path';
import { z } from 'zod';
import { QUEUE_NAME_PATTERN, parseConfig } from '../config.js';
import { ConfigError } from '../errors.js';
import { databaseClock } from '../clock.js';
import type { Clock } from '../clock.js';
import type { WorkerIdentity } from '../db/tasks.js';

/** Configuration of a worker. Every field is optional. */
export interface WorkerConfig {
  /** Queues to claim from. Default: every queue of the app. */
  queues?: string[] | undefined;
  /** Most handlers running at once (with `prefetch` 0, also the most tasks held). Default 10. */
  concurrency?: number | undefined;
  /**
   * Claimed tasks held ready beyond `concurrency`, so a freed slot starts the next task without a claim round
   * trip. They stay CLAIMED (protected by the lease and claimer heartbeats); if the worker dies they are
   * requeued after `claimedStaleThresholdMs`. Default 0 (`'auto'` with `throughput: 'high'`). `'auto'`: as many
   * as the worker expects to start within `prefetchWindowMs` at the rate its runs have been ending (none for long
   * tasks, hundreds for very short ones), at most the larger of 490 and ten times `concurrency`.
   */
  prefetch?: number | 'auto' | undefined;
  /**
   * Start prefetched tasks in the claim that takes them: one row update writes them RUNNING (attempt counted,
   * `started_at` the claim's time), and each waits here for a free handler slot, so that a run follows the one
   * before it with no start round trip. A started task that waits `prefetchHoldMs` is handed back to PENDING
   * (no attempt), as a stop hands back those still waiting; a cancel request cancels it without running it. The
   * cost is on a crash: such tasks count a crashed attempt (`WORKER_CRASHED`, retried as their policy says), as a
   * running task does, where a claimed one goes back to PENDING untouched. Not for queues under a cap or a rate
   * limit, whose tasks start only into free slots. Default false (true with `throughput: 'high'`).
   */
  startPrefetched?: boolean | undefined;
  /** With `prefetch: 'auto'`: how far ahead, in time, the worker claims. Default 20 ms. */
  prefetchWindowMs?: number | undefined;
  /**
   * `default`: the worker claims only what it has free slots for, so every task waits in the table where any
   * worker can take it, and a crash strands nothing that has not started. `high`: for many short tasks, the
   * worker starts tasks ahead of its free slots in its claims (`prefetch: 'auto'`, `startPrefetched: true`,
   * claims of up to 500): as many as it expects to run within `prefetchWindowMs`, none for long tasks. A crash
   * counts a crashed attempt for those started ahead, as for running ones. Explicit `prefetch`,
   * `startPrefetched` and `maxClaimBatch` win over either. See docs/benchmarks.md.
   */
  throughput?: 'default' | 'high' | undefined;
  /**
   * A task claimed ahead (`prefetch`) that has found no free slot within this time goes back to PENDING, where
   * any worker can take it, and this worker claims nothing ahead again until one of its runs ends: a worker whose
   * slots are all held by long runs does not keep what others could run. 0: never. Default 5,000 ms.
   */
  prefetchHoldMs?: number | undefined;
  /**
   * While idle, register free slots where a single `send()` finds them: the send then inserts its task claimed and
   * started for this worker and tells it directly, and the task starts without the claim's round trip (about a
   * third of the time from send to start). Only for a worker of one queue, without a cap, rate limit, group limit
   * or per-worker task limit on it; only for a task due now, without a group key, sent outside a transaction. A
   * worker that dies holding handed tasks leaves them as a crash does (the reaper recovers them, a crashed
   * attempt each). Default false (true with `throughput: 'high'`). See docs/state-machine.md.
   */
  handoff?: boolean | undefined;
  /** Most tasks claimed in one statement. Default: `concurrency + prefetch` (at most 500 with `throughput: 'high'`). */
  maxClaimBatch?: number | undefined;
  /**
   * Most tasks this worker holds at once, claimed or running (runs that ended, with their outcomes waiting to be
   * written, not counted: see `completionBatchSize`). Default: `concurrency + prefetch`.
   */
  maxClaimPerWorker?: number | undefined;
  /** Claim pass without a notification, at least this often. Default 2,000 ms. */
  pollIntervalMs?: number | undefined;
  /** Claim lease: how long a claim is protected before heartbeats renew it. Default 60,000 ms. */
  claimLeaseMs?: number | undefined;
  /** Claimer heartbeats stop renewing a claim older than this. Default 600,000 ms. */
  maxClaimAgeMs?: number | undefined;
  /** How often the worker writes a snapshot to `horsies_worker_states`; 0 turns it off. Default 5,000 ms. */
  snapshotIntervalMs?: number | undefined;
  /**
   * Make every start wait for its WAL flush (a synchronous commit), as outcomes always do. Default false: a
   * start commits without waiting, which saves a disk flush per batch of starts; a server crash within a fraction
   * of a second of a start can then undo it, and the task runs again later, as after a worker crash (the
   * worker's next heartbeat finds it not RUNNING and stops the handler; nothing is written on the lost claim).
   * Claims never wait for the flush: a lost claim only leaves the task PENDING.
   */
  synchronousStarts?: boolean | undefined;
  /**
   * Most finished tasks written in one statement. Default 500. Also how many runs may end while their outcomes
   * wait to be written (at least `maxClaimPerWorker`): the worker keeps claiming until that many wait, so that a
   * busy worker writes its outcomes in large batches, and a write that lags stops its claims.
   */
  completionBatchSize?: number | undefined;
  /**
   * How long a write of outcomes waits for more to join it when outcomes arrived during the write before it (a
   * busy worker; an idle one writes an outcome at once). Fewer, larger finish statements cost the database less
   * per task; the outcomes of a busy worker show up to this much later. Not waited while `completionBatchSize`
   * outcomes wait, for the outcome of a task under a cap or a group limit (it holds room until written), nor by
   * `stop()`. 0: never wait. Default 2 ms.
   */
  completionDelayMs?: number | undefined;
  /** How long `stop()` waits for running handlers before stopping them. Default 30,000 ms. */
  drainTimeoutMs?: number | undefined;
  /**
   * How long a stopped handler (timeout, cancel, shutdown) gets to return after its AbortSignal fires; after
   * that it is left behind and its outcome written without it. Default 5,000 ms.
   */
  abortGraceMs?: number | undefined;
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

const workerConfigSchema = z.strictObject({
  queues: z.array(z.string().regex(QUEUE_NAME_PATTERN, 'is not a valid queue name')).min(1).optional(),
  concurrency: z.number().int().min(1).max(10_000).default(10),
  prefetch: z.union([z.number().int().min(0).max(100_000), z.literal('auto')]).optional(),
  prefetchWindowMs: z.number().int().min(1).max(60_000).default(20),
  throughput: z.enum(['default', 'high']).default('default'),
  startPrefetched: z.boolean().optional(),
  handoff: z.boolean().optional(),
  prefetchHoldMs: z.number().int().min(0).default(5_000),
  maxClaimBatch: z.number().int().min(1).max(10_000).optional(),
  maxClaimPerWorker: z.number().int().min(1).max(100_000).optional(),
  pollIntervalMs: z.number().int().min(10).default(2000),
  claimLeaseMs: z.number().int().min(1000).default(60_000),
  maxClaimAgeMs: z.number().int().min(1000).default(600_000),
  snapshotIntervalMs: z.number().int().min(0).default(5_000),
  synchronousStarts: z.boolean().default(false),
  completionBatchSize: z.number().int().min(1).max(10_000).default(500),
  completionDelayMs: z.number().int().min(0).max(60_000).default(2),
  drainTimeoutMs: z.number().int().min(0).default(30_000),
  abortGraceMs: z.number().int().min(0).default(5_000),
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

/** A {@link WorkerConfig} with defaults applied. */
export type ResolvedWorkerConfig = Required<
  Omit<z.output<typeof workerConfigSchema>, 'workerId' | 'appModule' | 'appExport' | 'prefetch'>
> & {
  /** Claimed tasks held beyond `concurrency`; with `prefetchAuto`, the most it may hold. */
  prefetch: number;
  /** `prefetch: 'auto'`: the tasks held ahead follow the rate of ended runs (see PrefetchSizer). */
  prefetchAuto: boolean;
  identity: WorkerIdentity;
  appModule: string | null;
  appExport: string | undefined;
};

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
  const parsed = parseConfig('worker config', schema, config);
  const host = hostname();
  const processName = basename(process.argv[1] ?? process.title);
  const high = parsed.throughput === 'high';
  const auto = parsed.prefetch === 'auto' || (high && parsed.prefetch === undefined);
  const prefetch =
    typeof parsed.prefetch === 'number' ? parsed.prefetch : auto ? Math.max(490, 10 * parsed.concurrency) : 0;
  if (parsed.startPrefetched === true && prefetch === 0) {
    throw new ConfigError('worker config', [
      {
        field: 'startPrefetched',
        value: true,
        message:
          "starts prefetched tasks, and none are: set prefetch (above 0, or 'auto'), or throughput: 'high'",
      },
    ]);
  }
  return {
    ...parsed,
    prefetch,
    prefetchAuto: auto,
    // With nothing prefetched (throughput 'high' with prefetch 0), nothing is started ahead either.
    startPrefetched: parsed.startPrefetched ?? (high && prefetch > 0),
    handoff: parsed.handoff ?? high,
    // Served in the app's queue order: highest priority first.
    queues: appQueues.filter((q) => (parsed.queues ?? appQueues).includes(q)),
    maxClaimPerWorker: parsed.maxClaimPerWorker ?? parsed.concurrency + prefetch,
    maxClaimBatch:
      parsed.maxClaimBatch ??
      (high || auto ? Math.min(500, parsed.concurrency + prefetch) : parsed.concurrency + prefetch),
    blockingThreads: parsed.blockingThreads ?? Math.min(parsed.concurrency, availableParallelism()),
    appModule: parsed.appModule === undefined ? null : String(parsed.appModule),
    appExport: parsed.appExport,
    identity: {
      workerId: parsed.workerId ?? `${host}:${process.pid}:${Math.random().toString(36).slice(2, 10)}`,
      hostname: host,
      pid: process.pid,
      processName,
    },
  };
}
