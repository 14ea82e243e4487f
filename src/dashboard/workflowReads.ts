/**
 * What the workflow and schedule pages read, and the workflow actions they run (through the library's control
 * functions). A workflow's graph comes from `DashboardWorkflowGraph` (no inputs or results, so a workflow of 10,000
 * nodes reads in one cheap statement) and is laid out in layers by `layers` (src/workflow/dag.ts): a node's depth
 * is the longest path to it from a root. Layers of more than {@link MAX_PER_LAYER} nodes are sent as counts (by
 * status, by task) and the first few nodes that failed, were skipped or run, as the CLI draws them; with more than
 * {@link MAX_LAYERS} layers, runs of consecutive layers that share one status are sent as one entry. The answers'
 * shapes are those of contract.ts.
 */
import type { App } from '../client/App.js';
import type { Database } from '../db/Database.js';
import {
  DashboardWorkflowGraph,
  DashboardWorkflowNode,
  DashboardWorkflowPage,
  DashboardWorkflowSpans,
} from '../db/dashboard.js';
import { WORKFLOW_STATUSES, WorkflowGet } from '../db/workflows.js';
import { cancelWorkflow, pauseWorkflow, resumeWorkflow, retryFailedWorkflow } from '../workflow/control.js';
import { layers } from '../workflow/dag.js';
import type { DagNode } from '../workflow/dag.js';
import { dagNode } from '../workflow/dagNode.js';
import { listSchedules } from '../scheduler/operations.js';
import type {
  ScheduleRow,
  WiredInput,
  WorkflowDetail,
  WorkflowLayer,
  WorkflowNodeDetail,
  WorkflowPage,
  WorkflowTimeline,
} from './contract.js';
import { BadRequest, readTask } from './reads.js';

/** Layers with more nodes than this are sent as counts. */
export const MAX_PER_LAYER = 40;
/** With more layers than this, runs of layers of one status are sent as one entry. */
export const MAX_LAYERS = 40;
/** Nodes of each notable status named in a summarised layer. */
const NOTABLE = 5;

/** A workflow list request. */
export interface WorkflowListQuery {
  status: string | null;
  name: string | null;
  /** Only the child runs of this workflow. */
  parent: string | null;
  cursor: string | null;
  limit: number;
}

/** A page of workflows, newest first. */
export async function readWorkflowPage(db: Database, q: WorkflowListQuery): Promise<WorkflowPage<Date>> {
  if (q.status !== null && !(WORKFLOW_STATUSES as readonly string[]).includes(q.status)) {
    throw new BadRequest(`status must be one of ${WORKFLOW_STATUSES.join(', ')}`);
  }
  let after: [string, string] | null = null;
  if (q.cursor !== null) {
    try {
      const values: unknown = JSON.parse(Buffer.from(q.cursor, 'base64url').toString());
      if (Array.isArray(values) && values.length === 2 && values.every((v) => typeof v === 'string'))
        after = values as [string, string];
    } catch {
      // reported below
    }
    if (after === null) throw new BadRequest('cursor is not valid');
  }
  const rows = await db.run(DashboardWorkflowPage, {
    status: q.status,
    name: q.name,
    parent: q.parent,
    afterSentAt: after?.[0] ?? null,
    afterId: after?.[1] ?? null,
    limit: q.limit + 1,
  });
  const page = rows.slice(0, q.limit);
  const last = page.at(-1);
  const nextCursor =
    rows.length > q.limit && last
      ? Buffer.from(JSON.stringify([last.sort_at, last.id])).toString('base64url')
      : null;
  return { rows: page.map(({ sort_at: _sortAt, ...row }) => row), nextCursor };
}

function tally(labels: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const label of labels) out[label] = (out[label] ?? 0) + 1;
  return out;
}

/** The graph in layers, summarised where it is too wide or too deep to draw whole. */
export function layerViews(nodes: readonly DagNode[]): WorkflowLayer[] {
  const byIndex = new Map(nodes.map((n) => [n.index, n]));
  const grouped = layers(nodes).map((layer) => layer.map((i) => byIndex.get(i)!));
  const uniform = grouped.map((layer) => {
    const first = layer[0]!.status;
    return grouped.length > MAX_LAYERS && layer.every((n) => n.status === first) ? first : null;
  });
  const out: WorkflowLayer[] = [];
  for (let depth = 0; depth < grouped.length; depth += 1) {
    const status = uniform[depth];
    let end = depth;
    while (status != null && uniform[end + 1] === status) end += 1;
    if (status != null && end > depth) {
      const members = grouped.slice(depth, end + 1).flat();
      out.push({
        kind: 'run',
        depth,
        toDepth: end,
        size: members.length,
        status,
        tasks: tally(members.map((n) => n.task)),
      });
      depth = end;
      continue;
    }
    const members = grouped[depth]!;
    const counts = tally(members.map((n) => n.status));
    if (members.length <= MAX_PER_LAYER) {
      out.push({ kind: 'nodes', depth, size: members.length, counts, nodes: members });
      continue;
    }
    out.push({
      kind: 'summary',
      depth,
      size: members.length,
      counts,
      tasks: tally(members.map((n) => n.task)),
      notable: ['FAILED', 'SKIPPED', 'RUNNING'].flatMap((s) =>
        members.filter((n) => n.status === s).slice(0, NOTABLE),
      ),
    });
  }
  return out;
}

/** One workflow: its row (result and params left out when data is hidden), its node counts and its layers. */
export async function readWorkflow(
  db: Database,
  id: string,
  hideData: boolean,
): Promise<WorkflowDetail<Date> | null> {
  const [row] = await db.run(WorkflowGet, { id });
  if (!row) return null;
  const nodes = (await db.run(DashboardWorkflowGraph, { workflowId: id })).map(dagNode);
  // A child run names the node of its parent that runs it.
  let parentNodeId: string | null = null;
  if (row.parent_workflow_id !== null) {
    const parentNodes = await db.run(DashboardWorkflowGraph, { workflowId: row.parent_workflow_id });
    parentNodeId = parentNodes.find((n) => n.node_index === row.parent_node_index)?.node_id ?? null;
  }
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    onError: row.on_error,
    errorCode: row.error_code,
    result: hideData ? null : row.result,
    params: hideData ? null : row.params,
    hidden: hideData,
    nodesTotal: row.nodes_total,
    nodesTerminal: row.nodes_terminal,
    parentWorkflowId: row.parent_workflow_id,
    parentNodeIndex: row.parent_node_index,
    parentNodeId,
    rootWorkflowId: row.root_workflow_id,
    depth: row.depth,
    sentAt: row.sent_at,
    startedAt: row.started_at,
    completedAt: row.completed_at,
    updatedAt: row.updated_at,
    counts: tally(nodes.map((n) => n.status)),
    nodes,
    layers: layerViews(nodes),
  };
}

/** The stored input template of a node (see src/workflow/wiring.ts), as far as the panel reads it. */
interface StoredTemplate {
  static?: unknown;
  refs?: { to: (string | number)[]; kind: WiredInput['kind']; node: number; from: (string | number)[] }[];
}

/**
 * One node of a workflow: its wiring (each reference named by its upstream node's id), its stored result, and
 * its task as the task page reads it. Null when the workflow or the node does not exist.
 */
export async function readWorkflowNode(
  db: Database,
  workflowId: string,
  index: number,
  hideData: boolean,
): Promise<WorkflowNodeDetail<Date> | null> {
  const [row] = await db.run(DashboardWorkflowNode, { workflowId, nodeIndex: index });
  if (!row) return null;
  const graph = (await db.run(DashboardWorkflowGraph, { workflowId })).map(dagNode);
  const node = graph.find((n) => n.index === index);
  if (!node) return null;
  const ids = new Map(graph.map((n) => [n.index, n.id]));
  const template = (row.input_template ?? {}) as StoredTemplate;
  const wired = (template.refs ?? []).map((r) => ({
    to: r.to,
    kind: r.kind,
    node: r.node,
    nodeId: r.node < 0 ? null : (ids.get(r.node) ?? null),
    from: r.from,
  }));
  return {
    workflowId,
    node,
    wired,
    staticInput: hideData ? null : (template.static ?? null),
    result: hideData ? null : row.result,
    hidden: hideData,
    createdAt: row.created_at,
    enqueuedAt: row.enqueued_at,
    completedAt: row.completed_at,
    task: node.taskId ? await readTask(db, node.taskId, hideData) : null,
  };
}

/** Each node's span, for the timeline of a run; null for an unknown workflow. */
export async function readWorkflowTimeline(
  db: Database,
  workflowId: string,
): Promise<WorkflowTimeline<Date> | null> {
  const [row] = await db.run(WorkflowGet, { id: workflowId });
  if (!row) return null;
  const spans = await db.run(DashboardWorkflowSpans, { workflowId });
  return {
    workflowId,
    sentAt: row.sent_at,
    spans: spans.map((s) => ({
      index: s.node_index,
      id: s.node_id,
      status: s.status,
      enqueuedAt: s.enqueued_at,
      startedAt: s.started_at,
      finishedAt: s.finished_at,
    })),
  };
}

/** The workflow actions of the dashboard, as the last part of their path. */
export const WORKFLOW_ACTIONS = ['pause', 'resume', 'cancel', 'retry-failed'] as const;
export type WorkflowAction = (typeof WORKFLOW_ACTIONS)[number];

/** What a workflow action answers: its HTTP status and body. */
export interface WorkflowActionAnswer {
  status: 200 | 404 | 409;
  body: object;
}

/** The status in which each action has nothing left to do, and what it applies to, for the answer's words. */
const ACTION_RULES: Record<WorkflowAction, { already: string | null; appliesTo: string }> = {
  pause: { already: 'PAUSED', appliesTo: 'a RUNNING workflow' },
  resume: { already: 'RUNNING', appliesTo: 'a PAUSED workflow' },
  cancel: { already: 'CANCELLED', appliesTo: 'a PENDING, RUNNING or PAUSED workflow' },
  'retry-failed': { already: null, appliesTo: "a FAILED or PAUSED workflow's failed nodes" },
};

/**
 * Runs a workflow action through the library's control functions (resume, cancel and retry start child
 * workflows when the dashboard is served from the app, which knows their definitions). 200 with what changed
 * when the action applied or the workflow already was where it puts it (`changed` then empty); 404 for an
 * unknown id; 409 when the action does not apply to the workflow's status.
 */
export async function runWorkflowAction(
  db: Database,
  app: App | null,
  id: string,
  action: WorkflowAction,
): Promise<WorkflowActionAnswer> {
  const children = app?.workflows;
  const result =
    action === 'pause'
      ? await pauseWorkflow(db, id)
      : action === 'resume'
        ? await resumeWorkflow(db, id, children)
        : action === 'cancel'
          ? await cancelWorkflow(db, id, children)
          : await retryFailedWorkflow(db, id, children);
  if (result.status === null) return { status: 404, body: { error: `no workflow with id ${id}` } };
  const rule = ACTION_RULES[action];
  const applied = result.changed.includes(id) || result.status === rule.already;
  if (!applied) {
    return {
      status: 409,
      body: {
        error: `workflow ${id} is ${result.status}: ${action} applies only to ${rule.appliesTo}`,
        status: result.status,
      },
    };
  }
  return { status: 200, body: { workflow: id, action, ...result } };
}

/**
 * The schedules: with an app, its declarations joined to the state rows (undeclared rows marked orphaned);
 * with a bare database, the state rows only (`declared` and `orphaned` null).
 */
export function readSchedules(db: Database, app: App | null): Promise<ScheduleRow<Date>[]> {
  return app ? app.listSchedules() : listSchedules(db);
}
