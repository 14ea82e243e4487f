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
  DashboardWorkflowGraphNode,
  DashboardWorkflowNode,
  DashboardWorkflowNodeIds,
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
  WorkflowGraphColumns,
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

/** Runs whose layers are kept, the latest read. */
const LAYER_CACHE_SIZE = 16;
const layerCache = new Map<string, number[][]>();

/**
 * The layers of a run's nodes. A run's structure never changes once started, only its statuses, so the layers of
 * the last few runs read are kept, keyed by the structure itself (each node's dependencies): a page that re-reads a
 * large run on every change lays it out once.
 */
function layersOf(nodes: readonly DagNode[]): number[][] {
  const key = nodes.map((n) => `${n.index}:${n.dependencies.join(',')}`).join(';');
  const known = layerCache.get(key);
  if (known) {
    layerCache.delete(key);
    layerCache.set(key, known);
    return known;
  }
  const computed = layers(nodes);
  layerCache.set(key, computed);
  if (layerCache.size > LAYER_CACHE_SIZE) layerCache.delete(layerCache.keys().next().value!);
  return computed;
}

/** The graph in layers, summarised where it is too wide or too deep to draw whole. */
export function layerViews(nodes: readonly DagNode[]): WorkflowLayer[] {
  const byIndex = new Map(nodes.map((n) => [n.index, n]));
  const grouped = layersOf(nodes).map((layer) => layer.map((i) => byIndex.get(i)!));
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
      out.push({ kind: 'nodes', depth, size: members.length, counts, nodes: members.map((n) => n.index) });
      continue;
    }
    out.push({
      kind: 'summary',
      depth,
      size: members.length,
      counts,
      tasks: tally(members.map((n) => n.task)),
      notable: ['FAILED', 'SKIPPED', 'RUNNING'].flatMap((s) =>
        members
          .filter((n) => n.status === s)
          .slice(0, NOTABLE)
          .map((n) => n.index),
      ),
    });
  }
  return out;
}

/**
 * The nodes (read in index order, indexes 0 to n-1) in columns: each task name and status once, the rare fields
 * by index. See {@link WorkflowGraphColumns}.
 */
export function graphColumns(nodes: readonly DagNode[]): WorkflowGraphColumns {
  const taskNames: string[] = [];
  const statusNames: string[] = [];
  const taskAt = new Map<string, number>();
  const statusAt = new Map<string, number>();
  const position = (value: string, names: string[], at: Map<string, number>): number => {
    let i = at.get(value);
    if (i === undefined) {
      i = names.push(value) - 1;
      at.set(value, i);
    }
    return i;
  };
  const g: WorkflowGraphColumns = {
    id: [],
    taskNames,
    task: [],
    statusNames,
    status: [],
    deps: [],
    join: {},
    allowFailedDeps: [],
    errorCode: {},
    subworkflow: {},
    childWorkflowId: {},
  };
  nodes.forEach((n, i) => {
    if (n.index !== i)
      throw new Error(`workflow node ${n.index} read at position ${i}: indexes must be dense`);
    g.id.push(n.id);
    g.task.push(position(n.task, taskNames, taskAt));
    g.status.push(position(n.status, statusNames, statusAt));
    g.deps.push(n.dependencies);
    if (n.join !== 'all') g.join[i] = [n.join, n.minSuccess];
    if (n.allowFailedDeps) g.allowFailedDeps.push(i);
    if (n.errorCode) g.errorCode[i] = n.errorCode;
    if (n.subworkflow) g.subworkflow[i] = n.subworkflow;
    if (n.childWorkflowId) g.childWorkflowId[i] = n.childWorkflowId;
  });
  return g;
}

/** One workflow: its row (result and params left out when data is hidden), its node counts and its layers. */
export async function readWorkflow(
  db: Database,
  id: string,
  hideData: boolean,
): Promise<WorkflowDetail<Date> | null> {
  // The row and the nodes at once (an unknown id finds no nodes either).
  const [[row], graphRows] = await Promise.all([
    db.run(WorkflowGet, { id }),
    db.run(DashboardWorkflowGraph, { workflowId: id }),
  ]);
  if (!row) return null;
  // A child run names the node of its parent that runs it.
  const parentRows =
    row.parent_workflow_id !== null && row.parent_node_index !== null
      ? await db.run(DashboardWorkflowNodeIds, {
          workflowId: row.parent_workflow_id,
          nodeIndexes: [row.parent_node_index],
        })
      : [];
  const nodes = graphRows.map(dagNode);
  const parentNodeId = parentRows[0]?.node_id ?? null;
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
    graph: graphColumns(nodes),
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
  const [[row], [graphRow]] = await Promise.all([
    db.run(DashboardWorkflowNode, { workflowId, nodeIndex: index }),
    db.run(DashboardWorkflowGraphNode, { workflowId, nodeIndex: index }),
  ]);
  if (!row || !graphRow) return null;
  const node = dagNode(graphRow);
  const template = (row.input_template ?? {}) as StoredTemplate;
  // The ids of the nodes its input comes from, read by index (not the whole graph).
  const upstream = [...new Set((template.refs ?? []).map((r) => r.node).filter((i) => i >= 0))];
  const ids = new Map(
    upstream.length === 0
      ? []
      : (await db.run(DashboardWorkflowNodeIds, { workflowId, nodeIndexes: upstream })).map((r) => [
          r.node_index,
          r.node_id,
        ]),
  );
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

/** Each node's span, for the timeline of a run (in columns, see {@link WorkflowTimeline}); null for an unknown run. */
export async function readWorkflowTimeline(
  db: Database,
  workflowId: string,
): Promise<WorkflowTimeline<Date> | null> {
  const [row] = await db.run(WorkflowGet, { id: workflowId });
  if (!row) return null;
  const spans = await db.run(DashboardWorkflowSpans, { workflowId });
  const sent = row.sent_at.getTime();
  const after = (at: Date | null): number | null => (at === null ? null : at.getTime() - sent);
  const statusNames: string[] = [];
  const statusAt = new Map<string, number>();
  const timeline: WorkflowTimeline<Date> = {
    workflowId,
    sentAt: row.sent_at,
    statusNames,
    status: [],
    enqueuedMs: [],
    startedMs: [],
    finishedMs: [],
  };
  spans.forEach((s, i) => {
    if (s.node_index !== i) throw new Error(`workflow node ${s.node_index} read at position ${i}`);
    let at = statusAt.get(s.status);
    if (at === undefined) {
      at = statusNames.push(s.status) - 1;
      statusAt.set(s.status, at);
    }
    timeline.status.push(at);
    timeline.enqueuedMs.push(after(s.enqueued_at));
    timeline.startedMs.push(after(s.started_at));
    timeline.finishedMs.push(after(s.finished_at));
  });
  return timeline;
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
