/**
 * Prometheus metrics of one process (`prom-client`). Per-process figures are counted from the events the
 * process sees itself: its sends, its worker's starts and written outcomes, its maintenance passes. No statement
 * runs for them. Cluster figures (tasks pending, claimed and running per queue, the oldest ready task's age, live
 * workers) come from one query per maintenance pass on the leader ({@link ClusterCollector}); other processes
 * report none of them, so a dashboard sums or takes the max over instances without counting twice.
 *
 * Label cardinality is bounded: a task name the app does not define and a queue it does not declare are counted
 * as `other`; error codes are the built-in ones plus the first {@link MetricsOptions.maxErrorCodes} others seen,
 * after which a new code is counted as `OTHER`.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import { BUILTIN_ERROR_CODES } from '../errors.js';
import { BucketHistogram, BufferedCounter } from './buffered.js';
import type { CountSeries, ObserveSeries } from './buffered.js';

/** Settings of {@link HorsiesMetrics}. */
export interface MetricsOptions {
  /** Registry to register the metrics in. Default: a registry of their own. */
  registry?: Registry;
  /** The queues the app declares. */
  queues: readonly string[];
  /** True for a task name the app defines (others are labelled `other`). */
  isTaskName: (name: string) => boolean;
  /** How many distinct error codes besides the built-in ones get a label of their own. Default 50. */
  maxErrorCodes?: number;
}

/** A queue's figures, as the maintenance leader reads them. */
export interface QueueFigures {
  queue: string;
  pending: number;
  claimed: number;
  running: number;
  /** Seconds since the oldest PENDING task that is due became claimable; null when none is due. */
  oldestPendingAgeSeconds: number | null;
}

/** How a written outcome is counted. */
export type CountedOutcome = 'completed' | 'failed' | 'cancelled' | 'retried';

/** The label value of a task name, queue or error code outside the declared set. */
export const OTHER_LABEL = 'other';
const OTHER_CODE = 'OTHER';

const RUN_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600];

interface TaskSeries {
  sent: CountSeries;
  started: CountSeries;
  completed: CountSeries;
  cancelled: CountSeries;
  expired: CountSeries;
  requeued: CountSeries;
  duration: ObserveSeries;
  wait: ObserveSeries;
}

type ByTask = 'queue' | 'task';
type ByCode = 'queue' | 'task' | 'error_code';

/**
 * The library's metrics in one registry (`app.metrics.registry`). Every method is cheap: the series of a
 * (queue, task) pair are made once and kept, and counting them is an addition (see `buffered.ts`).
 */
export class HorsiesMetrics {
  /** The registry holding every horsies metric; serve it with `registry.metrics()`. */
  readonly registry: Registry;
  private readonly queues: Set<string>;
  private readonly isTaskName: (name: string) => boolean;
  private readonly maxErrorCodes: number;
  private readonly codes = new Set<string>(BUILTIN_ERROR_CODES);
  private readonly series = new Map<string, TaskSeries>();
  private readonly coded = new Map<string, CountSeries>();

  private readonly sentTotal: BufferedCounter<ByTask>;
  private readonly startedTotal: BufferedCounter<ByTask>;
  private readonly completedTotal: BufferedCounter<ByTask>;
  private readonly failedTotal: BufferedCounter<ByCode>;
  private readonly retriedTotal: BufferedCounter<ByCode>;
  private readonly expiredTotal: BufferedCounter<ByTask>;
  private readonly cancelledTotal: BufferedCounter<ByTask>;
  private readonly requeuedTotal: BufferedCounter<ByTask>;
  private readonly runDuration: BucketHistogram;
  private readonly queueWait: BucketHistogram;
  private readonly pending: Gauge<'queue'>;
  private readonly claimed: Gauge<'queue'>;
  private readonly running: Gauge<'queue'>;
  private readonly oldestPending: Gauge<'queue'>;
  private readonly workersLive: Gauge;
  private readonly leader: Gauge;
  private readonly vacuums: Counter;
  private readonly vacuumSeconds: Counter;

  /** @internal Made by the app, from its `metrics` option. */
  constructor(options: MetricsOptions) {
    this.registry = options.registry ?? new Registry();
    this.queues = new Set(options.queues);
    this.isTaskName = options.isTaskName;
    this.maxErrorCodes = options.maxErrorCodes ?? 50;
    const registers = [this.registry];
    const counter = <L extends string>(name: string, help: string, labelNames: L[]): BufferedCounter<L> =>
      new BufferedCounter(name, help, labelNames, this.registry);
    const gauge = <L extends string>(name: string, help: string, labelNames: L[]): Gauge<L> =>
      new Gauge({ name, help, labelNames, registers });
    const byTask: ByTask[] = ['queue', 'task'];
    const byCode: ByCode[] = ['queue', 'task', 'error_code'];
    this.sentTotal = counter('horsies_tasks_sent_total', 'Tasks sent by this process.', byTask);
    this.startedTotal = counter('horsies_tasks_started_total', 'Runs started by this process.', byTask);
    this.completedTotal = counter('horsies_tasks_completed_total', 'Tasks this process completed.', byTask);
    this.failedTotal = counter(
      'horsies_tasks_failed_total',
      'Tasks this process failed for good (no retry left or not retryable), by error code.',
      byCode,
    );
    this.retriedTotal = counter(
      'horsies_tasks_retried_total',
      'Attempts that ended in a retry (back to PENDING), by the error code that caused it.',
      byCode,
    );
    this.expiredTotal = counter(
      'horsies_tasks_expired_total',
      'Tasks this process expired (good_until passed before they started).',
      byTask,
    );
    this.cancelledTotal = counter('horsies_tasks_cancelled_total', 'Tasks this process cancelled.', byTask);
    this.requeuedTotal = counter(
      'horsies_tasks_requeued_total',
      'Claimed tasks the reaper of this process handed back to PENDING (their claimer went silent).',
      byTask,
    );
    this.runDuration = new BucketHistogram(
      'horsies_task_run_duration_seconds',
      'Time from the start of a run to its outcome, in this process.',
      RUN_BUCKETS,
      this.registry,
    );
    this.queueWait = new BucketHistogram(
      'horsies_task_queue_wait_seconds',
      'Time from a task becoming claimable (enqueued_at, moved by a retry delay) to its start.',
      WAIT_BUCKETS,
      this.registry,
    );
    this.pending = gauge(
      'horsies_queue_pending_tasks',
      'PENDING tasks per queue (maintenance leader only).',
      ['queue'],
    );
    this.claimed = gauge(
      'horsies_queue_claimed_tasks',
      'CLAIMED tasks per queue (maintenance leader only).',
      ['queue'],
    );
    this.running = gauge(
      'horsies_queue_running_tasks',
      'RUNNING tasks per queue (maintenance leader only).',
      ['queue'],
    );
    this.oldestPending = gauge(
      'horsies_queue_oldest_pending_age_seconds',
      'Age of the oldest due PENDING task per queue, 0 when none is due (maintenance leader only).',
      ['queue'],
    );
    this.workersLive = gauge(
      'horsies_workers_live',
      'Workers that wrote a snapshot in the last 30 s (maintenance leader only).',
      [],
    );
    this.leader = gauge(
      'horsies_maintenance_leader',
      '1 while this process holds the maintenance leadership, else 0.',
      [],
    );
    this.leader.set(0);
    this.vacuums = new Counter({
      name: 'horsies_task_table_vacuums_total',
      help: 'Vacuums of the task table this process ran as maintenance leader (the vacuum check).',
      registers,
    });
    this.vacuumSeconds = new Counter({
      name: 'horsies_task_table_vacuum_seconds_total',
      help: 'Time the vacuums of horsies_task_table_vacuums_total took.',
      registers,
    });
  }

  /** `count` tasks of `task` were sent to `queue`. */
  sent(queue: string, task: string, count = 1): void {
    this.of(queue, task).sent.inc(count);
  }

  /** A run started, `waitSeconds` after its task became claimable. */
  started(queue: string, task: string, waitSeconds: number): void {
    const s = this.of(queue, task);
    s.started.inc();
    s.wait.observe(Math.max(0, waitSeconds));
  }

  /** A run ended after `seconds` (its outcome may not be written yet). */
  ran(queue: string, task: string, seconds: number): void {
    this.of(queue, task).duration.observe(Math.max(0, seconds));
  }

  /** An outcome was written. `errorCode` labels failures and retries. */
  outcome(queue: string, task: string, outcome: CountedOutcome, errorCode: string | null = null): void {
    if (outcome === 'completed') this.of(queue, task).completed.inc();
    else if (outcome === 'cancelled') this.of(queue, task).cancelled.inc();
    else
      this.withCode(
        outcome === 'failed' ? this.failedTotal : this.retriedTotal,
        queue,
        task,
        errorCode,
      ).inc();
  }

  /** Tasks expired (before their start or while they waited). */
  expired(queue: string, task: string, count = 1): void {
    this.of(queue, task).expired.inc(count);
  }

  /** The reaper handed a stale claim back to PENDING. */
  requeued(queue: string, task: string, count = 1): void {
    this.of(queue, task).requeued.inc(count);
  }

  /** The leader vacuumed the task table, in `seconds`. */
  vacuumed(seconds: number): void {
    this.vacuums.inc();
    this.vacuumSeconds.inc(seconds);
  }

  /** Whether this process holds the maintenance leadership; losing it clears the cluster gauges. */
  setLeader(leading: boolean): void {
    this.leader.set(leading ? 1 : 0);
    if (!leading) this.clearCluster();
  }

  /** The cluster's figures as the leader read them: declared queues not listed read 0. */
  setCluster(queues: readonly QueueFigures[], liveWorkers: number): void {
    // Undeclared queues share the `other` label: their counts add up, their ages take the oldest.
    const byLabel = new Map<string, QueueFigures>();
    for (const queue of this.queues) {
      byLabel.set(queue, { queue, pending: 0, claimed: 0, running: 0, oldestPendingAgeSeconds: null });
    }
    for (const f of queues) {
      const label = this.queueLabel(f.queue);
      const prior = byLabel.get(label);
      byLabel.set(
        label,
        prior === undefined
          ? { ...f, queue: label }
          : {
              queue: label,
              pending: prior.pending + f.pending,
              claimed: prior.claimed + f.claimed,
              running: prior.running + f.running,
              oldestPendingAgeSeconds: Math.max(
                prior.oldestPendingAgeSeconds ?? 0,
                f.oldestPendingAgeSeconds ?? 0,
              ),
            },
      );
    }
    this.clearCluster();
    for (const f of byLabel.values()) {
      const labels = { queue: f.queue };
      this.pending.set(labels, f.pending);
      this.claimed.set(labels, f.claimed);
      this.running.set(labels, f.running);
      this.oldestPending.set(labels, f.oldestPendingAgeSeconds ?? 0);
    }
    this.workersLive.set(liveWorkers);
  }

  /** Drops every cluster gauge (this process no longer reads them). */
  clearCluster(): void {
    for (const g of [this.pending, this.claimed, this.running, this.oldestPending, this.workersLive])
      g.reset();
  }

  private of(queue: string, task: string): TaskSeries {
    // Keyed by label values: names outside the declared set share the `other` series, so the map stays bounded.
    const labels = { queue: this.queueLabel(queue), task: this.taskLabel(task) };
    const key = `${labels.queue}\u0000${labels.task}`;
    let s = this.series.get(key);
    if (s === undefined) {
      s = {
        sent: this.sentTotal.child(labels),
        started: this.startedTotal.child(labels),
        completed: this.completedTotal.child(labels),
        cancelled: this.cancelledTotal.child(labels),
        expired: this.expiredTotal.child(labels),
        requeued: this.requeuedTotal.child(labels),
        duration: this.runDuration.child(labels),
        wait: this.queueWait.child(labels),
      };
      this.series.set(key, s);
    }
    return s;
  }

  private withCode(
    counter: BufferedCounter<ByCode>,
    queue: string,
    task: string,
    errorCode: string | null,
  ): CountSeries {
    const labels = {
      queue: this.queueLabel(queue),
      task: this.taskLabel(task),
      error_code: this.codeLabel(errorCode ?? 'UNHANDLED_ERROR'),
    };
    const key = `${counter === this.failedTotal ? 'f' : 'r'}\u0000${labels.queue}\u0000${labels.task}\u0000${labels.error_code}`;
    let child = this.coded.get(key);
    if (child === undefined) {
      child = counter.child(labels);
      this.coded.set(key, child);
    }
    return child;
  }

  private queueLabel(queue: string): string {
    return this.queues.has(queue) ? queue : OTHER_LABEL;
  }

  private taskLabel(task: string): string {
    return this.isTaskName(task) ? task : OTHER_LABEL;
  }

  private codeLabel(code: string): string {
    if (this.codes.has(code)) return code;
    if (this.codes.size - BUILTIN_ERROR_CODES.length >= this.maxErrorCodes) return OTHER_CODE;
    this.codes.add(code);
    return code;
  }
}
