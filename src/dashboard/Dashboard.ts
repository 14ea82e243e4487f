/**
 * The dashboard as a `node:http` request handler: a JSON API under `api/`, server-sent events at `api/events`,
 * and the built UI (`dist/dashboard/ui`) for everything else. It serves a `horsies dashboard` process on its own,
 * or mounts under a path of the user's server:
 *
 *     const dashboard = createDashboard(app, { basePath: '/horsies' });
 *     http.createServer((req, res) => req.url?.startsWith('/horsies') ? dashboard.handle(req, res) : other(req, res));
 *     expressApp.use('/horsies', dashboard.handle);         // Express strips the mount path itself
 *
 * Read-only unless `token` is set; see actionGuard.ts for what an action request must carry.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import type { App } from '../client/App.js';
import { isApp } from '../client/App.js';
import { cancelTask, resubmitTasks, setQueuePaused } from '../client/operations.js';
import { pauseSchedule, resumeSchedule } from '../scheduler/operations.js';
import type { TaskFilter } from '../client/operations.js';
import { Database } from '../db/Database.js';
import { HorsiesError } from '../errors.js';
import { TASK_STATUSES } from '../types.js';
import type { TaskStatus } from '../types.js';
import { refuseAction, refuseRead } from './actionGuard.js';
import type { ScheduleList, ServerConfig, TaskSteps } from './contract.js';
import { LiveFeed } from './LiveFeed.js';
import type { LiveFeedOptions } from './LiveFeed.js';
import {
  BadRequest,
  TASK_TABS,
  readDeadLetterGroups,
  readFlow,
  readOverview,
  readQueues,
  readTask,
  readTaskPage,
  readWorkers,
} from './reads.js';
import type { TaskTab } from './reads.js';
import { SECURITY_HEADERS, serveStatic } from './staticFiles.js';
import {
  WORKFLOW_ACTIONS,
  readSchedules,
  readWorkflow,
  readWorkflowNode,
  readWorkflowPage,
  readWorkflowTimeline,
  runWorkflowAction,
} from './workflowReads.js';
import type { WorkflowAction, WorkflowListQuery } from './workflowReads.js';
import { runSignalAction } from './signalAction.js';
import { TaskStepList } from '../db/progress.js';

/** Settings of a dashboard. */
export interface DashboardOptions {
  /**
   * Enables actions (cancel, resubmit, pause, resume; a workflow's pause, resume, cancel and retry-failed, and a
   * signal to a wait node).
   * Requests must carry it in the `x-horsies-token` header. Default: `HORSIES_DASHBOARD_TOKEN` from the
   * environment; none means read-only.
   */
  token?: string | undefined;
  /**
   * Makes reads need a token as well: every API request (pages' data, the event stream) must carry it, or the
   * action token, in `x-horsies-token`. `true` uses the action `token` for both. The UI's own files stay public
   * (they hold no data); the page asks for the token. Default: `HORSIES_DASHBOARD_READ_TOKEN`; none means anyone
   * who reaches the dashboard can read.
   */
  readToken?: string | true | undefined;
  /** Leave task inputs and results out of every answer. Default false. */
  hideData?: boolean | undefined;
  /**
   * The path the dashboard is mounted under when the host passes full URLs (plain `http`, Fastify's raw
   * request). A request URL that starts with it has it stripped. Default '' (mounted at the root, or the host
   * strips the mount path itself, as Express does).
   */
  basePath?: string | undefined;
  /** Live updates: debounce and poll intervals. */
  live?: LiveFeedOptions | undefined;
  /** Where the built UI lives. Default: `dist/dashboard/ui` of this package. */
  uiDir?: string | undefined;
}

/** A mounted dashboard. */
export interface Dashboard {
  /** The request handler. `next` (Express) is never called: every request under the mount is answered. */
  handle: (req: IncomingMessage, res: ServerResponse, next?: unknown) => void;
  /** The live feed (one LISTEN connection, opened while pages are connected). */
  readonly live: LiveFeed;
  /** Whether actions are enabled. */
  readonly actionsEnabled: boolean;
  /** Whether reads need a token. */
  readonly readsNeedToken: boolean;
  /** Closes event streams and the LISTEN connection; the app's or database's pool stays open. Idempotent. */
  close(): Promise<void>;
}

/** The database of an app, or one given directly (read by the dashboard, never ended by it). */
export type DashboardSource = App | Database;

const MAX_BODY_BYTES = 64 * 1024;
const DEFAULT_PAGE = 50;

/** Creates a dashboard over an app's (or a database's) tables. */
export function createDashboard(source: DashboardSource, options: DashboardOptions = {}): Dashboard {
  const app = isApp(source) ? source : null;
  const base = app ? app.db : (source as Database);
  // The dashboard's statements go unprepared, so each is planned for its parameters: which index serves a list
  // best depends on the filter's value (a rare task name walks that name's index, a common one the time index),
  // and the generic plan a prepared statement switches to after five runs cannot know it. Planning costs well
  // under a millisecond; the pool is the app's.
  const db = new Database({ pool: base.pool, schema: base.schema, preparedStatements: false });
  const token = options.token ?? (process.env.HORSIES_DASHBOARD_TOKEN || undefined);
  const readToken =
    options.readToken === true
      ? true
      : options.readToken || process.env.HORSIES_DASHBOARD_READ_TOKEN || undefined;
  if (readToken === true && !token)
    throw new HorsiesError('CONFIG_INVALID', 'readToken: true uses the action token, and none is set');
  // Who may read: the read token and the action token, or anyone when no read token is set.
  const readTokens =
    readToken === undefined
      ? []
      : [readToken === true ? token! : readToken, token].filter((t): t is string => Boolean(t));
  const hideData = options.hideData ?? false;
  const basePath = (options.basePath ?? '').replace(/\/+$/, '');
  const live = new LiveFeed(db, options.live);

  const api = async (req: IncomingMessage, res: ServerResponse, path: string, url: URL): Promise<void> => {
    const method = req.method ?? 'GET';
    const parts = path.split('/').filter(Boolean).map(decodePart);
    if (method === 'GET' || method === 'HEAD') {
      const [first, second] = parts;
      // The settings hold no data: the page reads them first, to know whether to ask for a token.
      if (parts.length === 1 && first === 'config')
        return json(res, 200, {
          actions: Boolean(token),
          hideData,
          readToken: readTokens.length > 0,
        } satisfies ServerConfig);
      const readRefusal = refuseRead(req, readTokens);
      if (readRefusal) return json(res, readRefusal.status, { error: readRefusal.message });
      if (parts.length === 1 && first === 'events') return live.attach(res);
      if (parts.length === 1 && first === 'overview') return json(res, 200, await readOverview(db));
      if (parts.length === 1 && first === 'queues') return json(res, 200, await readQueues(db));
      if (parts.length === 1 && first === 'workers') return json(res, 200, await readWorkers(db));
      if (parts.length === 1 && first === 'flow')
        return json(res, 200, await readFlow(db, optionalString(url, 'queue')));
      if (parts.length === 1 && first === 'dead-letters')
        return json(res, 200, await readDeadLetterGroups(db));
      if (parts.length === 1 && first === 'tasks')
        return json(res, 200, await readTaskPage(db, taskQuery(url)));
      if (parts.length === 2 && first === 'tasks' && second !== undefined) {
        const task = await readTask(db, second, hideData);
        return task ? json(res, 200, task) : json(res, 404, { error: `no task with id ${second}` });
      }
      if (parts.length === 3 && first === 'tasks' && second !== undefined && parts[2] === 'steps') {
        const steps = await db.run(TaskStepList, { taskId: second });
        return json(res, 200, {
          hidden: hideData,
          steps: steps.map((r) => ({
            name: r.name,
            result: hideData ? null : r.result,
            attempt: r.attempt,
            storedAt: r.created_at,
          })),
        } satisfies TaskSteps<Date>);
      }
      if (parts.length === 1 && first === 'workflows')
        return json(res, 200, await readWorkflowPage(db, workflowQuery(url)));
      if (parts.length === 2 && first === 'workflows' && second !== undefined) {
        const workflow = await readWorkflow(db, second, hideData);
        return workflow
          ? json(res, 200, workflow)
          : json(res, 404, { error: `no workflow with id ${second}` });
      }
      if (parts.length === 3 && first === 'workflows' && second !== undefined && parts[2] === 'timeline') {
        const timeline = await readWorkflowTimeline(db, second);
        return timeline
          ? json(res, 200, timeline)
          : json(res, 404, { error: `no workflow with id ${second}` });
      }
      if (parts.length === 4 && first === 'workflows' && second !== undefined && parts[2] === 'nodes') {
        const index = Number(parts[3]);
        if (!Number.isInteger(index) || index < 0 || index > 2 ** 31 - 1)
          throw new BadRequest('a node index is a whole number');
        const node = await readWorkflowNode(db, second, index, hideData);
        return node
          ? json(res, 200, node)
          : json(res, 404, { error: `no node ${index} in workflow ${second}` });
      }
      if (parts.length === 1 && first === 'schedules')
        return json(res, 200, {
          fromApp: app !== null,
          schedules: await readSchedules(db, app),
        } satisfies ScheduleList<Date>);
      return json(res, 404, { error: 'no such endpoint' });
    }
    if (method !== 'POST') return json(res, 405, { error: 'method not allowed' });
    const refusal = refuseAction(req, token);
    if (refusal) return json(res, refusal.status, { error: refusal.message });
    const body = await readJsonBody(req);
    const [first, second, third] = parts;
    if (first === 'tasks' && second !== undefined && third === 'cancel' && parts.length === 3) {
      return json(res, 200, await cancelTask(db, second));
    }
    if (first === 'tasks' && second !== undefined && third === 'resubmit' && parts.length === 3) {
      const result = await resubmitTasks(db, { ids: [second] });
      return json(
        res,
        result.ids.length > 0 ? 200 : 409,
        result.ids.length > 0
          ? result
          : {
              error: 'not resubmitted: missing, or not FAILED, CANCELLED or EXPIRED',
            },
      );
    }
    if (first === 'dead-letters' && second === 'resubmit' && parts.length === 2) {
      return json(res, 200, await resubmitTasks(db, resubmitFilter(body)));
    }
    if (first === 'queues' && second !== undefined && (third === 'pause' || third === 'resume')) {
      await setQueuePaused(db, second, third === 'pause');
      return json(res, 200, { queue: second, paused: third === 'pause' });
    }
    if (first === 'workflows' && second !== undefined && third === 'signal' && parts.length === 3) {
      const answer = await runSignalAction(app, second, body);
      return json(res, answer.status, answer.body);
    }
    if (
      first === 'workflows' &&
      second !== undefined &&
      parts.length === 3 &&
      (WORKFLOW_ACTIONS as readonly string[]).includes(third ?? '')
    ) {
      const answer = await runWorkflowAction(db, app, second, third as WorkflowAction);
      return json(res, answer.status, answer.body);
    }
    if (first === 'schedules' && second !== undefined && parts.length === 3) {
      if (third === 'trigger') {
        // A run needs the schedule's task, input and queue: only the app's declaration has them.
        if (!app)
          return json(res, 409, {
            error: 'trigger needs the app: serve the dashboard from the app module to trigger schedules',
          });
        return scheduleAction(res, async () => app.triggerSchedule(second));
      }
      if (third === 'pause' || third === 'resume') {
        const paused = third === 'pause';
        return scheduleAction(res, async () => {
          if (app) await (paused ? app.pauseSchedule(second) : app.resumeSchedule(second));
          else await (paused ? pauseSchedule(db, second) : resumeSchedule(db, second));
          return { schedule: second, paused };
        });
      }
    }
    return json(res, 404, { error: 'no such action' });
  };

  /** Runs a schedule action; an unknown schedule is a 404. */
  const scheduleAction = async (res: ServerResponse, action: () => Promise<object>): Promise<void> => {
    try {
      json(res, 200, await action());
    } catch (error) {
      if (error instanceof HorsiesError && error.code === 'SCHEDULE_NOT_FOUND')
        return json(res, 404, { error: error.message });
      throw error;
    }
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    const url = requestUrl(req.url);
    if (url === null) return json(res, 400, { error: 'the request target is not a valid path' });
    let path = url.pathname;
    if (basePath && (path === basePath || path.startsWith(`${basePath}/`)))
      path = path.slice(basePath.length);
    // The UI loads its files relative to the page, so the page must be served from a URL that ends with '/'.
    const original = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/';
    const originalPath = original.split('?')[0] ?? '/';
    if ((path === '' || path === '/') && !originalPath.endsWith('/')) {
      res.writeHead(308, { location: `${originalPath}/${url.search}` }).end();
      return;
    }
    const done = (error: unknown): void => {
      if (res.headersSent) {
        res.end();
        return;
      }
      if (error instanceof BodyTooLarge) {
        // The rest of the body is never read: the connection closes after the answer.
        res.setHeader('connection', 'close');
        json(res, 413, { error: error.message });
      } else if (error instanceof BadRequest || error instanceof HorsiesError)
        json(res, 400, { error: error.message });
      // A data exception from PostgreSQL (class 22): a cursor or parameter it could not read.
      else if (/^22/.test(String((error as { code?: unknown }).code)))
        json(res, 400, { error: 'bad parameter' });
      else json(res, 500, { error: 'internal error' });
    };
    try {
      if (path.startsWith('/api/')) api(req, res, path.slice('/api/'.length), url).catch(done);
      else serveStatic(req, res, path, options.uiDir);
    } catch (error) {
      done(error);
    }
  };

  let closed = false;
  return {
    handle,
    live,
    actionsEnabled: Boolean(token),
    readsNeedToken: readTokens.length > 0,
    async close() {
      if (closed) return;
      closed = true;
      await live.stop();
    },
  };
}

/** Answers of at least this many bytes go gzipped to a client that accepts it. */
const GZIP_FROM_BYTES = 32 * 1024;

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    vary: 'accept-encoding',
  };
  // A large graph or timeline: gzip at its fastest level took about 4 ms for a 5,000-node graph's 116 kB on a
  // loaded 2-core machine and sent a third of the bytes, which a page served over a network waits for.
  const accepts = String(res.req?.headers['accept-encoding'] ?? '');
  if (text.length >= GZIP_FROM_BYTES && /\bgzip\b/.test(accepts)) {
    const zipped = gzipSync(text, { level: 1 });
    res.writeHead(status, { ...headers, 'content-encoding': 'gzip' });
    res.end(zipped);
    return;
  }
  res.writeHead(status, headers);
  res.end(text);
}

function readJsonBody(req: IncomingMessage): Promise<unknown> {
  // Mounted behind a body parser (express.json(), Fastify's own), the body was read already: use what it parsed.
  const parsed = (req as { body?: unknown }).body;
  if (parsed !== undefined) return Promise.resolve(parsed ?? {});
  if (req.readableEnded) return Promise.resolve({});
  if (Number(req.headers['content-length']) > MAX_BODY_BYTES) return Promise.reject(new BodyTooLarge());
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        // Stop reading, but keep the socket: the 413 goes out on it (see done()).
        req.removeAllListeners('data');
        req.pause();
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      if (text.trim() === '') return resolve({});
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new BadRequest('request body is not JSON'));
      }
    });
  });
}

/** A request body over {@link MAX_BODY_BYTES}: answered 413, without reading the rest. */
class BodyTooLarge extends Error {
  constructor() {
    super(`request body too large (at most ${MAX_BODY_BYTES} bytes)`);
  }
}

/**
 * The request's URL, or null when its target is not one. A target that starts with '/' is read as a path: as a
 * reference, `//x/...` would name a host, and `//` alone is no URL at all (new URL would throw).
 */
function requestUrl(target: string | undefined): URL | null {
  const raw = target ?? '/';
  try {
    return new URL(raw.startsWith('/') ? `http://dashboard.invalid${raw}` : raw, 'http://dashboard.invalid');
  } catch {
    return null;
  }
}

/** One segment of an API path, percent-decoded; bad escapes (`%zz`, invalid UTF-8) are the client's error. */
function decodePart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new BadRequest('the path has a bad percent-escape');
  }
}

function optionalString(url: URL, name: string): string | null {
  const value = url.searchParams.get(name)?.trim();
  return value ? value : null;
}

function optionalDate(url: URL, name: string): Date | null {
  const value = optionalString(url, name);
  if (value === null) return null;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw new BadRequest(`${name} must be a date`);
  return date;
}

function taskQuery(url: URL): Parameters<typeof readTaskPage>[1] {
  const tab = (optionalString(url, 'tab') ?? 'pending') as TaskTab;
  if (!TASK_TABS.includes(tab)) throw new BadRequest(`tab must be one of ${TASK_TABS.join(', ')}`);
  const limit = Number(optionalString(url, 'limit') ?? DEFAULT_PAGE);
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new BadRequest('limit must be 1 to 500');
  return {
    tab,
    queue: optionalString(url, 'queue'),
    taskName: optionalString(url, 'task'),
    errorCode: optionalString(url, 'error'),
    from: optionalDate(url, 'from'),
    to: optionalDate(url, 'to'),
    cursor: optionalString(url, 'cursor'),
    limit,
  };
}

function workflowQuery(url: URL): WorkflowListQuery {
  const limit = Number(optionalString(url, 'limit') ?? DEFAULT_PAGE);
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new BadRequest('limit must be 1 to 500');
  return {
    status: optionalString(url, 'status'),
    name: optionalString(url, 'name'),
    parent: optionalString(url, 'parent'),
    cursor: optionalString(url, 'cursor'),
    limit,
  };
}

/**
 * The filter of a bulk resubmit: which dead letters to put back. `status` is one status or a list (default
 * FAILED); the operation itself refuses any but FAILED, CANCELLED and EXPIRED.
 */
function resubmitFilter(body: unknown): TaskFilter {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const text = (name: string): string | undefined => {
    const v = b[name];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new BadRequest(`${name} must be a string`);
    return v;
  };
  const raw = b.status;
  const statuses = raw === undefined || raw === null || raw === '' ? [] : Array.isArray(raw) ? raw : [raw];
  for (const s of statuses) {
    if (typeof s !== 'string' || !(TASK_STATUSES as readonly string[]).includes(s)) {
      throw new BadRequest(`status must be one of ${TASK_STATUSES.join(', ')}, or a list of them`);
    }
  }
  return {
    status: statuses.length === 0 ? undefined : (statuses as TaskStatus[]),
    taskName: text('taskName'),
    queue: text('queue'),
    errorCode: text('errorCode'),
  };
}
