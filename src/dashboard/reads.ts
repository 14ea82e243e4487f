/**
 * What each dashboard page reads, as JSON-ready objects. Every read goes through the named statements of
 * `src/db/dashboard.ts` (or the library's own, for a task and its attempts); which statement a task list uses
 * depends on the tab and the filters, so that each list walks the index that leads with its most selective
 * filter.
 */
import type { Database } from '../db/Database.js';
import {
  DashboardDeadLetterGroups,
  DashboardDeadLetterPage,
  DashboardFinishedPage,
  DashboardFinishedPageByError,
  DashboardFinishedPageByName,
  DashboardFinishedPageByQueue,
  DashboardHeartbeats,
  DashboardInFlightPage,
  DashboardInFlightStats,
  DashboardLeaders,
  DashboardPendingPage,
  DashboardPendingPageByQueue,
  DashboardPendingStats,
  DashboardQueueStates,
  DashboardRecentFinished,
  DashboardRetryingPage,
  DashboardThroughput,
  DashboardWorkerStops,
  DashboardWorkers,
} from '../db/dashboard.js';
import type { PendingView, TaskListRow } from '../db/dashboard.js';
import { AttemptListByTask, TaskGet } from '../db/tasks.js';
import { ClockNow } from '../db/admin.js';
import {
  DashboardGroupLimits,
  DashboardGroupsInFlight,
  DashboardHeldKeys,
  DashboardRateLimiters,
} from '../db/flow.js';
import { LIVE_WORKER_WINDOW_MS } from '../client/operations.js';
import { TASK_STATUSES } from '../types.js';
import type {
  DeadLetterGroup,
  FlowState,
  Overview,
  QueueSummary,
  TaskDetail,
  TaskPage,
  WorkerRow,
} from './contract.js';

/** The tabs of the task list: the asynq views (scheduled, retrying, dead) over horsies' statuses. */
export const TASK_TABS = [
  'pending',
  'scheduled',
  'retrying',
  'running',
  'completed',
  'failed',
  'cancelled',
  'expired',
  'dead',
  'finished',
] as const;

/** One tab of the task list. */
export type TaskTab = (typeof TASK_TABS)[number];

/** A task list request, as parsed from the query string. */
export interface TaskListQuery {
  tab: TaskTab;
  queue: string | null;
  taskName: string | null;
  errorCode: string | null;
  from: Date | null;
  to: Date | null;
  /** Opaque position from a previous page's `nextCursor`. */
  cursor: string | null;
  limit: number;
}

/** Snapshots older than this are listed as stale; older still, not at all. */
const WORKER_HISTORY_MS = 10 * 60_000;
const HOUR_MS = 60 * 60_000;
/** Stopped workers listed at most. */
const MAX_STOPPED_WORKERS = 100;

const FINISHED_STATUSES: Partial<Record<TaskTab, string[] | null>> = {
  completed: ['COMPLETED'],
  failed: ['FAILED'],
  cancelled: ['CANCELLED'],
  expired: ['EXPIRED'],
  dead: ['FAILED', 'CANCELLED', 'EXPIRED'],
  finished: null,
};

const PENDING_VIEWS: Partial<Record<TaskTab, PendingView>> = {
  pending: 'all',
  scheduled: 'scheduled',
};

function encodeCursor(values: unknown[]): string {
  return Buffer.from(JSON.stringify(values)).toString('base64url');
}

/** The cursor's values, or an error for one not made by {@link encodeCursor} for this tab. */
function decodeCursor(cursor: string | null, shape: ('string' | 'number')[]): unknown[] | null {
  if (cursor === null) return null;
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(cursor, 'base64url').toString());
  } catch {
    throw new BadRequest('cursor is not valid');
  }
  if (!Array.isArray(values) || values.length !== shape.length) throw new BadRequest('cursor is not valid');
  return values.map((v, i) => {
    const kind = shape[i];
    if (kind === 'number' && typeof v === 'number') return v;
    if (kind === 'string' && typeof v === 'string') return v;
    throw new BadRequest('cursor is not valid');
  });
}

/** A request the API refuses with 400 and this message. */
export class BadRequest extends Error {
  override name = 'BadRequest';
}

/** A page of the task list. */
export async function readTaskPage(db: Database, q: TaskListQuery): Promise<TaskPage<Date>> {
  const limit = q.limit;
  const fetch = limit + 1;
  const view = PENDING_VIEWS[q.tab];
  if (view !== undefined) {
    const c = decodeCursor(q.cursor, ['string', 'number', 'string', 'string']);
    const stmt = q.queue === null ? DashboardPendingPage : DashboardPendingPageByQueue;
    const rows = await db.run(stmt, {
      queue: q.queue,
      taskName: q.taskName,
      from: q.from,
      to: q.to,
      view,
      limit: fetch,
      afterQueue: (c?.[0] as string) ?? null,
      afterPriority: (c?.[1] as number) ?? null,
      afterEnqueuedAt: (c?.[2] as string) ?? null,
      afterId: (c?.[3] as string) ?? null,
    });
    return page(rows, limit, (r) => [r.queue_name, r.priority, r.sort_at, r.id]);
  }
  if (q.tab === 'retrying') {
    const c = decodeCursor(q.cursor, ['string', 'string']);
    const rows = await db.run(DashboardRetryingPage, {
      queue: q.queue,
      taskName: q.taskName,
      from: q.from,
      to: q.to,
      limit: fetch,
      afterEnqueuedAt: (c?.[0] as string) ?? null,
      afterId: (c?.[1] as string) ?? null,
    });
    return page(rows, limit, (r) => [r.sort_at, r.id]);
  }
  if (q.tab === 'running') {
    const c = decodeCursor(q.cursor, ['string', 'string']);
    const rows = await db.run(DashboardInFlightPage, {
      statuses: null,
      queue: q.queue,
      taskName: q.taskName,
      from: q.from,
      to: q.to,
      limit: fetch,
      afterClaimedAt: (c?.[0] as string) ?? null,
      afterId: (c?.[1] as string) ?? null,
    });
    return page(rows, limit, (r) => [r.sort_at, r.id]);
  }
  const statuses = FINISHED_STATUSES[q.tab] ?? null;
  const c = decodeCursor(q.cursor, ['string', 'string']);
  // The most selective filter picks the index: a task name, then an error code, then a queue.
  const stmt =
    q.taskName !== null
      ? DashboardFinishedPageByName
      : q.errorCode !== null
        ? DashboardFinishedPageByError
        : q.queue !== null
          ? DashboardFinishedPageByQueue
          : statuses !== null && !statuses.includes('COMPLETED')
            ? DashboardDeadLetterPage
            : DashboardFinishedPage;
  const rows = await db.run(stmt, {
    statuses,
    queue: q.queue,
    taskName: q.taskName,
    errorCode: q.errorCode,
    from: q.from,
    to: q.to,
    limit: fetch,
    afterFinishedAt: (c?.[0] as string) ?? null,
    afterId: (c?.[1] as string) ?? null,
  });
  return page(rows, limit, (r) => [r.sort_at, r.id]);
}

function page(rows: TaskListRow[], limit: number, key: (row: TaskListRow) => unknown[]): TaskPage<Date> {
  const more = rows.length > limit;
  const shown = more ? rows.slice(0, limit) : rows;
  const last = shown[shown.length - 1];
  return { rows: shown, nextCursor: more && last ? encodeCursor(key(last)) : null };
}

/** One task with its attempts and latest heartbeats; input and result left out when `hideData`. */
export async function readTask(
  db: Database,
  id: string,
  hideData: boolean,
): Promise<TaskDetail<Date> | null> {
  const [row] = await db.run(TaskGet, { id });
  if (!row) return null;
  const [attempts, heartbeats] = await Promise.all([
    db.run(AttemptListByTask, { taskId: id }),
    db.run(DashboardHeartbeats, { taskId: id, limit: 20 }),
  ]);
  const { args: _args, kwargs, result, task_options: _options, enqueue_sha: _sha, ...rest } = row;
  return {
    ...rest,
    input: hideData ? null : kwargs,
    result: hideData ? null : result,
    hidden: hideData,
    attempts,
    heartbeats,
  };
}

/** Counts per status, zero where none. */
function zeroCounts(): Record<string, number> {
  return Object.fromEntries(TASK_STATUSES.map((s) => [s, 0]));
}

/** Every queue that has tasks waiting or in flight, finished some in the last hour, or has a stored state. */
export async function readQueues(db: Database): Promise<QueueSummary<Date>[]> {
  const [pending, inFlight, recent, states, workers] = await Promise.all([
    db.run(DashboardPendingStats, {}),
    db.run(DashboardInFlightStats, {}),
    db.run(DashboardRecentFinished, { windowMs: HOUR_MS }),
    db.run(DashboardQueueStates, {}),
    db.run(DashboardWorkers, { withinMs: LIVE_WORKER_WINDOW_MS }),
  ]);
  const queues = new Map<string, QueueSummary<Date>>();
  const get = (queue: string): QueueSummary<Date> => {
    let q = queues.get(queue);
    if (!q) {
      q = {
        queue,
        paused: false,
        pending: 0,
        scheduled: 0,
        claimed: 0,
        running: 0,
        oldestReadyAt: null,
        lastHour: zeroCounts(),
        priority: null,
        maxConcurrency: null,
        workers: 0,
      };
      queues.set(queue, q);
    }
    return q;
  };
  for (const r of pending)
    Object.assign(get(r.queue_name), {
      pending: r.pending,
      scheduled: r.scheduled,
      oldestReadyAt: r.oldest_ready_at,
    });
  for (const r of inFlight) Object.assign(get(r.queue_name), { claimed: r.claimed, running: r.running });
  for (const r of recent) get(r.queue_name).lastHour[r.status] = r.count;
  for (const r of states) get(r.queue_name).paused = r.paused;
  for (const w of workers) {
    for (const queue of w.queues ?? []) {
      const q = get(queue);
      q.workers += 1;
      q.priority ??= w.queue_priorities?.[queue] ?? null;
      q.maxConcurrency ??= w.queue_max_concurrency?.[queue] ?? null;
    }
  }
  return [...queues.values()].sort((a, b) => a.queue.localeCompare(b.queue));
}

/** The overview page: queues, totals, the last hour's throughput by minute, workers and leaders. */
export async function readOverview(db: Database): Promise<Overview<Date>> {
  const [queues, throughput, workers, stops, leaders] = await Promise.all([
    readQueues(db),
    db.run(DashboardThroughput, { windowMs: HOUR_MS, bucketMs: 60_000 }),
    db.run(DashboardWorkers, { withinMs: WORKER_HISTORY_MS }),
    db.run(DashboardWorkerStops, { withinMs: WORKER_HISTORY_MS, limit: MAX_STOPPED_WORKERS }),
    db.run(DashboardLeaders, {}),
  ]);
  const totals = { pending: 0, scheduled: 0, claimed: 0, running: 0, lastHour: zeroCounts() };
  let oldestReadyAt: Date | null = null;
  for (const q of queues) {
    totals.pending += q.pending;
    totals.scheduled += q.scheduled;
    totals.claimed += q.claimed;
    totals.running += q.running;
    for (const [status, n] of Object.entries(q.lastHour))
      totals.lastHour[status] = (totals.lastHour[status] ?? 0) + n;
    if (q.oldestReadyAt && (oldestReadyAt === null || q.oldestReadyAt < oldestReadyAt))
      oldestReadyAt = q.oldestReadyAt;
  }
  const live = workers.filter((w) => w.age_ms <= LIVE_WORKER_WINDOW_MS);
  return {
    queues,
    totals,
    oldestReadyAt,
    throughput,
    workers: { live: live.length, stale: workers.length - live.length, stopped: stops.length },
    leaders,
  };
}

/**
 * Worker snapshots of the last ten minutes, each marked stale when older than the live window, then the workers
 * that stopped cleanly in that time (the latest {@link MAX_STOPPED_WORKERS}), unless a later snapshot of the same
 * id shows it running again.
 */
export async function readWorkers(db: Database): Promise<WorkerRow<Date>[]> {
  const [rows, stops] = await Promise.all([
    db.run(DashboardWorkers, { withinMs: WORKER_HISTORY_MS }),
    db.run(DashboardWorkerStops, { withinMs: WORKER_HISTORY_MS, limit: MAX_STOPPED_WORKERS }),
  ]);
  // Of a snapshot and a stop record of one worker id, the later one tells.
  const latest = new Map<string, number>();
  for (const w of rows) latest.set(w.worker_id, w.snapshot_at.getTime());
  for (const s of stops)
    latest.set(s.worker_id, Math.max(latest.get(s.worker_id) ?? -Infinity, s.stopped_at.getTime()));
  return [
    ...rows
      .filter((w) => latest.get(w.worker_id) === w.snapshot_at.getTime())
      .map((w) => ({ ...w, stale: w.age_ms > LIVE_WORKER_WINDOW_MS, stopped_at: null })),
    ...stops
      .filter((s) => latest.get(s.worker_id) === s.stopped_at.getTime())
      .map((s) => ({
        worker_id: s.worker_id,
        snapshot_at: s.stopped_at,
        age_ms: s.age_ms,
        stale: false,
        stopped_at: s.stopped_at,
        hostname: s.hostname,
        pid: s.pid,
        processes: null,
        queues: s.queues,
        tasks_running: null,
        tasks_claimed: null,
        memory_usage_mb: null,
        cpu_percent: null,
        max_claim_per_worker: null,
        cluster_wide_cap: null,
        queue_max_concurrency: null,
        worker_started_at: s.worker_started_at,
      })),
  ];
}

/** Dead letters (FAILED, CANCELLED, EXPIRED) grouped by task, queue and error code (the dead-letter page). */
export function readDeadLetterGroups(db: Database): Promise<DeadLetterGroup<Date>[]> {
  return db.run(DashboardDeadLetterGroups, {});
}

/** Entries of each list of the flow view. */
export const FLOW_LIMIT = 100;

/**
 * The flow control in force: rate limiters, group limits with the groups in flight, and the keys held, each list
 * bounded by {@link FLOW_LIMIT} (one more is read to tell whether there are others). `queue` narrows the groups and
 * the keys to one queue.
 */
export async function readFlow(db: Database, queue: string | null): Promise<FlowState<Date>> {
  const fetch = FLOW_LIMIT + 1;
  const [[clock], limiters, groupLimits, groups, keys] = await Promise.all([
    db.run(ClockNow, {}),
    db.run(DashboardRateLimiters, { limit: fetch }),
    db.run(DashboardGroupLimits, { limit: fetch }),
    db.run(DashboardGroupsInFlight, { queue, limit: fetch }),
    db.run(DashboardHeldKeys, { queue, limit: fetch }),
  ]);
  const now = clock!.now;
  return {
    now,
    limit: FLOW_LIMIT,
    limiters: limiters.slice(0, FLOW_LIMIT).map((r) => ({
      key: r.limiter_key,
      maxStarts: r.max_starts,
      intervalMs: r.interval_ms,
      used: r.used,
      pausedUntil: r.paused_until,
      freeAt: r.free_at,
      state: r.paused_until !== null && r.paused_until > now ? 'paused' : r.free_at > now ? 'full' : 'open',
      updatedAt: r.updated_at,
    })),
    limitersMore: limiters.length > FLOW_LIMIT,
    groupLimits: groupLimits
      .filter((g) => queue === null || g.queue_name === queue)
      .slice(0, FLOW_LIMIT)
      .map((g) => ({ queue: g.queue_name, limit: g.group_limit })),
    groups: groups.slice(0, FLOW_LIMIT).map((g) => ({
      queue: g.queue_name,
      group: g.group_key,
      inFlight: g.in_flight,
      running: g.running,
      limit: g.group_limit,
    })),
    groupsMore: groups.length > FLOW_LIMIT,
    keys: keys.slice(0, FLOW_LIMIT).map((k) => ({
      taskId: k.id,
      taskName: k.task_name,
      queue: k.queue_name,
      key: k.dedupe_key,
      scope: k.dedupe_scope,
      status: k.status,
      sentAt: k.sent_at,
      dueAt: k.enqueued_at,
      heldUntil: k.held_until,
    })),
    keysMore: keys.length > FLOW_LIMIT,
  };
}
