/** Talks to the dashboard's JSON API (relative URLs: the dashboard may be mounted under any path). */

const TOKEN_KEY = 'horsies-dashboard-token';

/** The token for actions, kept for this browser tab only. */
export function storedToken(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

/** Keeps (or, given '', forgets) the token for actions. */
export function storeToken(token: string): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** An answer other than 2xx, with the server's message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function answer<T>(response: Response): Promise<T> {
  const body = (await response.json().catch(() => ({}))) as { error?: string };
  if (!response.ok) throw new ApiError(response.status, body.error ?? `HTTP ${response.status}`);
  return body as T;
}

/** GET `api/<path>`. */
export async function get<T>(path: string): Promise<T> {
  return answer<T>(await fetch(`api/${path}`, { headers: { accept: 'application/json' } }));
}

/** POST `api/<path>` as an action: with the stored token in its header. */
export async function act<T>(path: string, body: unknown = {}): Promise<T> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const token = storedToken();
  if (token) headers['x-horsies-token'] = token;
  return answer<T>(
    await fetch(`api/${path}`, { method: 'POST', headers, body: JSON.stringify(body), credentials: 'omit' }),
  );
}

/** Server settings the UI follows. */
export interface ServerConfig {
  actions: boolean;
  hideData: boolean;
}

/** A row of a task list. */
export interface TaskRow {
  id: string;
  task_name: string;
  queue_name: string;
  priority: number;
  status: string;
  sent_at: string;
  enqueued_at: string;
  claimed_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  error_code: string | null;
  attempt: number;
  retry_count: number;
  max_retries: number;
  next_retry_at: string | null;
  claimed_by_worker_id: string | null;
  resubmit_count: number;
}

/** One queue's figures. */
export interface QueueSummary {
  queue: string;
  paused: boolean;
  pending: number;
  scheduled: number;
  claimed: number;
  running: number;
  oldestReadyAt: string | null;
  lastHour: Record<string, number>;
  priority: number | null;
  maxConcurrency: number | null;
  workers: number;
}

/** The overview page's data. */
export interface Overview {
  queues: QueueSummary[];
  totals: {
    pending: number;
    scheduled: number;
    claimed: number;
    running: number;
    lastHour: Record<string, number>;
  };
  oldestReadyAt: string | null;
  throughput: { bucket: string; completed: number; failed: number; other: number }[];
  workers: { live: number; stale: number };
  leaders: { name: string; leader_id: string; elected_at: string; expires_at: string; live: boolean }[];
}

/** A worker's latest snapshot. */
export interface WorkerRow {
  worker_id: string;
  snapshot_at: string;
  age_ms: number;
  stale: boolean;
  hostname: string | null;
  pid: number | null;
  processes: number | null;
  queues: string[] | null;
  tasks_running: number | null;
  tasks_claimed: number | null;
  memory_usage_mb: number | null;
  cpu_percent: number | null;
  max_claim_per_worker: number | null;
  cluster_wide_cap: number | null;
  queue_max_concurrency: Record<string, number | null> | null;
  worker_started_at: string | null;
}

/** A task with its attempts and heartbeats. */
export interface TaskDetail extends TaskRow {
  input: unknown;
  result: unknown;
  hidden: boolean;
  failed_reason: string | null;
  completed_at: string | null;
  failed_at: string | null;
  good_until: string | null;
  claim_expires_at: string | null;
  cancel_requested_at: string | null;
  resubmitted_at: string | null;
  claim_generation: number;
  worker_hostname: string | null;
  worker_pid: number | null;
  /** The latest progress its handler reported, when, and in which attempt. */
  progress: unknown;
  progress_at: string | null;
  progress_attempt: number | null;
  /** The sender's W3C trace context, when it traced the send. */
  trace_context: { traceparent: string; tracestate?: string } | null;
  /** The group the task was sent in, or null. */
  group_key: string | null;
  attempts: {
    attempt: number;
    outcome: string;
    will_retry: boolean;
    started_at: string | null;
    finished_at: string;
    error_code: string | null;
    error_message: string | null;
    worker_id: string | null;
  }[];
  heartbeats: {
    role: string;
    sender_id: string;
    sent_at: string;
    hostname: string | null;
    pid: number | null;
  }[];
}

/** A group of the dead-letter page. */
export interface DeadLetterGroup {
  task_name: string;
  queue_name: string;
  error_code: string | null;
  count: number;
  last_failed_at: string;
}

/** A row of the workflow list. */
export interface WorkflowRow {
  id: string;
  name: string;
  status: string;
  error_code: string | null;
  nodes_total: number;
  nodes_terminal: number;
  parent_workflow_id: string | null;
  sent_at: string;
  started_at: string | null;
  completed_at: string | null;
}

/** A node of a workflow's graph. */
export interface WorkflowNode {
  index: number;
  id: string;
  task: string;
  status: string;
  dependencies: number[];
  join: 'all' | 'any' | 'quorum';
  minSuccess: number | null;
  allowFailedDeps: boolean;
  errorCode: string | null;
  taskId: string | null;
  /** For a node that runs a whole workflow: that workflow's name. */
  subworkflow?: string | null;
  /** For a subworkflow node: the child run it started, once it has one. */
  childWorkflowId?: string | null;
}

/** One entry of a drawn graph: a layer of nodes, a layer summarised by counts, or a run of uniform layers. */
export type WorkflowLayer =
  | { kind: 'nodes'; depth: number; size: number; counts: Record<string, number>; nodes: WorkflowNode[] }
  | {
      kind: 'summary';
      depth: number;
      size: number;
      counts: Record<string, number>;
      tasks: Record<string, number>;
      notable: WorkflowNode[];
    }
  | {
      kind: 'run';
      depth: number;
      toDepth: number;
      size: number;
      status: string;
      tasks: Record<string, number>;
    };

/** One workflow with its graph. */
export interface WorkflowDetail {
  id: string;
  name: string;
  status: string;
  onError: string;
  errorCode: string | null;
  result: unknown;
  params: unknown;
  hidden: boolean;
  nodesTotal: number;
  nodesTerminal: number;
  parentWorkflowId: string | null;
  parentNodeIndex: number | null;
  /** The id of the parent's node that runs this child. */
  parentNodeId: string | null;
  rootWorkflowId: string;
  depth: number;
  sentAt: string;
  startedAt: string | null;
  completedAt: string | null;
  updatedAt: string;
  counts: Record<string, number>;
  layers: WorkflowLayer[];
}

/** One schedule with its state. */
export interface ScheduleRow {
  name: string;
  declared: boolean | null;
  orphaned: boolean | null;
  enabled: boolean | null;
  paused: boolean;
  task: string | null;
  pattern: string | null;
  timezone: string | null;
  nextRunAt: string | null;
  lastRunAt: string | null;
  lastTaskId: string | null;
  lastTaskStatus: string | null;
  runCount: number;
  lastError: string | null;
  lastErrorAt: string | null;
}
