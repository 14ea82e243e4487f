/**
 * The dashboard's JSON API as types: what each endpoint answers. The server (Dashboard.ts, reads.ts,
 * workflowReads.ts) declares its answers with these types and the UI (ui/src) reads them with the same, so a shape
 * that one side changes and the other does not follow fails the typecheck. Types only: the UI imports this module
 * with `import type`, so its build loads none of the server's code, and its typecheck follows only the imports
 * below, which import nothing.
 *
 * Times are the type parameter `Time`: the server builds these shapes with Dates (`Time = Date`), which JSON
 * carries as ISO strings, what the UI reads (`Time = string`, the default).
 */
import type { ScheduleInfo } from '../scheduler/ScheduleInfo.js';
import type { DagNode } from '../workflow/dag.js';

/** `GET api/config`: the server settings the UI follows. */
export interface ServerConfig {
  /** Actions are enabled (a token is set); requests must carry it. */
  actions: boolean;
  /** Task and workflow inputs and results are left out of every answer. */
  hideData: boolean;
  /** Reads need a token too (in `x-horsies-token`); without it every other endpoint answers 401. */
  readToken: boolean;
}

/** A row of a task list. */
export interface TaskRow<Time = string> {
  id: string;
  task_name: string;
  queue_name: string;
  priority: number;
  status: string;
  sent_at: Time;
  enqueued_at: Time;
  claimed_at: Time | null;
  started_at: Time | null;
  finished_at: Time | null;
  error_code: string | null;
  attempt: number;
  retry_count: number;
  max_retries: number;
  next_retry_at: Time | null;
  claimed_by_worker_id: string | null;
  resubmit_count: number;
}

/** `GET api/tasks`: a page of tasks and where the next one starts (null on the last page). */
export interface TaskPage<Time = string> {
  rows: TaskRow<Time>[];
  /** Opaque: pass it back as `cursor` for the next page. */
  nextCursor: string | null;
}

/** One queue's figures: live counts (exact), finished in the last hour, paused, and the workers' settings. */
export interface QueueSummary<Time = string> {
  queue: string;
  paused: boolean;
  pending: number;
  scheduled: number;
  claimed: number;
  running: number;
  oldestReadyAt: Time | null;
  /** Tasks finished in the last hour, by status. */
  lastHour: Record<string, number>;
  /** Priority and concurrency caps, as the live workers serving the queue report them. */
  priority: number | null;
  maxConcurrency: number | null;
  workers: number;
}

/** `GET api/overview`: queues, totals, the last hour's throughput by minute, workers and leaders. */
export interface Overview<Time = string> {
  queues: QueueSummary<Time>[];
  totals: {
    pending: number;
    scheduled: number;
    claimed: number;
    running: number;
    lastHour: Record<string, number>;
  };
  oldestReadyAt: Time | null;
  throughput: { bucket: Time; completed: number; failed: number; other: number }[];
  /** Workers seen in the last ten minutes: live, silent (stale), and stopped cleanly. */
  workers: { live: number; stale: number; stopped: number };
  leaders: { name: string; leader_id: string; elected_at: Time; expires_at: Time; live: boolean }[];
}

/**
 * A worker's latest snapshot, or its stop record when it stopped cleanly (`GET api/workers` lists those of the last
 * ten minutes: live and stale workers, then stopped ones). A stopped worker's figures are null.
 */
export interface WorkerRow<Time = string> {
  worker_id: string;
  /** The latest snapshot's time; for a stopped worker, when it stopped. */
  snapshot_at: Time;
  age_ms: number;
  /** Older than the live window (never for a stopped worker). */
  stale: boolean;
  /** When it stopped cleanly; null while it runs (or when it died: then `stale`). */
  stopped_at: Time | null;
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
  worker_started_at: Time | null;
}

/** `GET api/tasks/:id/steps`: the results a task's runs stored with `ctx.step()`, in order. */
export interface TaskSteps<Time = string> {
  /** Results left out (`hideData`). */
  hidden: boolean;
  steps: { name: string; result: unknown; attempt: number; storedAt: Time }[];
}

/** `GET api/tasks/:id`: a task with its attempts and latest heartbeats. */
export interface TaskDetail<Time = string> extends TaskRow<Time> {
  /** Null when `hidden`. */
  input: unknown;
  /** Null when `hidden`. */
  result: unknown;
  /** The server hides inputs and results. */
  hidden: boolean;
  failed_reason: string | null;
  completed_at: Time | null;
  failed_at: Time | null;
  good_until: Time | null;
  claim_expires_at: Time | null;
  cancel_requested_at: Time | null;
  resubmitted_at: Time | null;
  claim_generation: number;
  worker_hostname: string | null;
  worker_pid: number | null;
  /** The latest progress its handler reported, when, and in which attempt. */
  progress: unknown;
  progress_at: Time | null;
  progress_attempt: number | null;
  /** The sender's W3C trace context, when it traced the send. */
  trace_context: { traceparent: string; tracestate?: string } | null;
  /** The group the task was sent in, or null. */
  group_key: string | null;
  attempts: {
    attempt: number;
    outcome: string;
    will_retry: boolean;
    started_at: Time | null;
    finished_at: Time;
    error_code: string | null;
    error_message: string | null;
    worker_id: string | null;
  }[];
  heartbeats: {
    role: string;
    sender_id: string;
    sent_at: Time;
    hostname: string | null;
    pid: number | null;
  }[];
}

/** `GET api/dead-letters`: dead letters (FAILED, CANCELLED, EXPIRED) of one task, queue and error code. */
export interface DeadLetterGroup<Time = string> {
  task_name: string;
  queue_name: string;
  error_code: string | null;
  count: number;
  last_failed_at: Time;
}

/** A row of the workflow list. */
export interface WorkflowRow<Time = string> {
  id: string;
  name: string;
  status: string;
  error_code: string | null;
  nodes_total: number;
  nodes_terminal: number;
  parent_workflow_id: string | null;
  sent_at: Time;
  started_at: Time | null;
  completed_at: Time | null;
}

/** `GET api/workflows`: a page of workflows, newest first, and where the next one starts (null on the last). */
export interface WorkflowPage<Time = string> {
  rows: WorkflowRow<Time>[];
  /** Opaque: pass it back as `cursor` for the next page. */
  nextCursor: string | null;
}

/** A node of a workflow's graph: the one the CLI draws too. */
export type WorkflowNode = DagNode;

/**
 * A run's graph in columns, the shape `GET api/workflows/:id` sends it in (a 5,000-node run in about a seventh of
 * the bytes of one object per node): node i (its index) is at position i of `id`, `task`, `status` and `deps`;
 * task names and statuses are sent once and referred to by position; what few nodes have (a join other than
 * `all`, an error code, a child run) maps a node's index to its value. A node's task id, input and result come
 * with its detail (`api/workflows/:id/nodes/:index`).
 */
export interface WorkflowGraphColumns {
  id: string[];
  /** Each task name once. */
  taskNames: string[];
  /** Each node's task: a position in `taskNames`. */
  task: number[];
  /** Each status once. */
  statusNames: string[];
  /** Each node's status (RUNNING while its task runs): a position in `statusNames`. */
  status: number[];
  /** The indexes each node waits for. */
  deps: number[][];
  /** Nodes whose join is not `all`: the join and its `minSuccess`. */
  join: Record<number, ['any' | 'quorum', number | null]>;
  /** Nodes that run after failed dependencies too. */
  allowFailedDeps: number[];
  /** The error code of a FAILED or SKIPPED node. */
  errorCode: Record<number, string>;
  /** A subworkflow node's workflow name. */
  subworkflow: Record<number, string>;
  /** A subworkflow node's child run, once started. */
  childWorkflowId: Record<number, string>;
}

/**
 * One entry of a drawn graph: a layer of nodes, a layer summarised by counts, or a run of uniform layers. Nodes
 * are named by index (see {@link WorkflowGraphColumns}).
 */
export type WorkflowLayer =
  | { kind: 'nodes'; depth: number; size: number; counts: Record<string, number>; nodes: number[] }
  | {
      kind: 'summary';
      depth: number;
      size: number;
      counts: Record<string, number>;
      tasks: Record<string, number>;
      /** The first few FAILED, SKIPPED and RUNNING nodes. */
      notable: number[];
    }
  | {
      kind: 'run';
      depth: number;
      toDepth: number;
      size: number;
      status: string;
      tasks: Record<string, number>;
    };

/** `GET api/workflows/:id`: one workflow with its node counts and its graph in layers. */
export interface WorkflowDetail<Time = string> {
  id: string;
  name: string;
  status: string;
  onError: string;
  errorCode: string | null;
  /** Null when `hidden`. */
  result: unknown;
  /** Null when `hidden`. */
  params: unknown;
  /** The server hides inputs and results. */
  hidden: boolean;
  nodesTotal: number;
  nodesTerminal: number;
  parentWorkflowId: string | null;
  parentNodeIndex: number | null;
  /** The id of the parent's node that runs this child. */
  parentNodeId: string | null;
  rootWorkflowId: string;
  depth: number;
  sentAt: Time;
  startedAt: Time | null;
  completedAt: Time | null;
  updatedAt: Time;
  /** Nodes by status. */
  counts: Record<string, number>;
  /** Every node with the indexes it waits for: the graph the page lays out and draws. */
  graph: WorkflowGraphColumns;
  /** The graph in layers, summarised where wide or deep (the text view of a large run). */
  layers: WorkflowLayer[];
}

/** One reference of a node's input: the value at `to` comes from an upstream node (or the run's parameters). */
export interface WiredInput {
  /** Where the value goes in the input; `[]` is the whole input. */
  to: (string | number)[];
  /** `result`: the upstream's ok value at `from`; `outcome`: its whole result; `param`: the run's parameters. */
  kind: 'result' | 'outcome' | 'param';
  /** The upstream node's index, -1 for the parameters. */
  node: number;
  /** The upstream node's id, null for the parameters. */
  nodeId: string | null;
  from: (string | number)[];
}

/** `GET api/workflows/:id/nodes/:index`: one node, its wiring, and its task with attempts and heartbeats. */
export interface WorkflowNodeDetail<Time = string> {
  workflowId: string;
  node: WorkflowNode;
  /** What came from which upstream node. */
  wired: WiredInput[];
  /** The input's static part (the references filled in at enqueue); null when `hidden`. */
  staticInput: unknown;
  /** The node's stored result envelope; null when `hidden` or not finished. */
  result: unknown;
  hidden: boolean;
  createdAt: Time;
  enqueuedAt: Time | null;
  completedAt: Time | null;
  /** The node's task (input as enqueued, result or error, attempts, heartbeats), once it has one. */
  task: TaskDetail<Time> | null;
}

/**
 * `GET api/workflows/:id/timeline`: each node's queued, running and finished span, in columns as the graph is
 * (node i at position i; ids are the graph's). Times are milliseconds after `sentAt`, null while not reached:
 * enqueued (its task sent, or its child run started; null while it waits for its dependencies), its task's
 * current attempt started, and finished.
 */
export interface WorkflowTimeline<Time = string> {
  workflowId: string;
  sentAt: Time;
  /** Each status once. */
  statusNames: string[];
  /** Each node's status: a position in `statusNames`. */
  status: number[];
  enqueuedMs: (number | null)[];
  startedMs: (number | null)[];
  finishedMs: (number | null)[];
}

/** One schedule with its state: declared or not, paused, its next and last runs. */
export type ScheduleRow<Time = string> = ScheduleInfo<Time>;

/** `GET api/schedules`: the schedules, and whether the server has the app (which knows the declarations). */
export interface ScheduleList<Time = string> {
  fromApp: boolean;
  schedules: ScheduleRow<Time>[];
}

/** A rate limiter (`queue:<name>` or `task:<name>`): its setting, its starts in the window, and its pause. */
export interface RateLimiterView<Time = string> {
  key: string;
  maxStarts: number;
  intervalMs: number;
  /** Starts within the last interval. */
  used: number;
  /** No start before this (set after an upstream's 429); null when never paused. */
  pausedUntil: Time | null;
  /** When it has room again: now when it has room. */
  freeAt: Time;
  /** `paused`: a pause stands; `full`: no room until `freeAt`; `open`: room now. */
  state: 'open' | 'full' | 'paused';
  updatedAt: Time;
}

/** One group's tasks in flight in one queue, against the queue's group limit. */
export interface GroupInFlightView {
  queue: string;
  group: string;
  /** Claimed (lease held) and running: what the limit counts. */
  inFlight: number;
  running: number;
  /** The queue's `maxConcurrencyPerGroup`, null when it has none. */
  limit: number | null;
}

/** A dedupe or debounce key a task holds now. */
export interface HeldKeyView<Time = string> {
  taskId: string;
  taskName: string;
  queue: string;
  key: string;
  /** `debounce` for a debounce key, else the dedupe scope. */
  scope: 'pending' | 'debounce' | 'running' | 'finished';
  status: string;
  sentAt: Time;
  /** When the task is due: for a debounced task, the last send plus its delay. */
  dueAt: Time;
  /** A `finished` holder: the end of its window; null for the other scopes. */
  heldUntil: Time | null;
}

/**
 * `GET api/flow` (optionally `?queue=`): the flow control in force. Each list holds at most {@link FlowState.limit}
 * entries (`more` says there are others). The queue filter applies to groups and keys; limiters are all listed
 * (a task's limiter applies wherever the task runs).
 */
export interface FlowState<Time = string> {
  /** The database's clock when read. */
  now: Time;
  limit: number;
  limiters: RateLimiterView<Time>[];
  limitersMore: boolean;
  /** Queues with a group limit. */
  groupLimits: { queue: string; limit: number }[];
  groups: GroupInFlightView[];
  groupsMore: boolean;
  keys: HeldKeyView<Time>[];
  keysMore: boolean;
}
