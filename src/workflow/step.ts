/**
 * The workflow step (phase 2 of a finish): after a workflow task's outcome has committed (phase 1, as for any
 * task), the step moves its workflow on. It runs from the stored rows alone, so any worker, and the recovery
 * pass, can run it, and running it again changes nothing:
 *
 *   lock the workflow ─► settle nodes whose task ended (compare-and-set ENQUEUED/RUNNING → COMPLETED/FAILED)
 *        │                 └─ onError 'pause' and a node FAILED: the workflow PAUSES, nothing new becomes READY
 *        ▼
 *   bump the dependents' counters ─► apply their join rules ─► SKIPPED ones bump their own dependents (cascade)
 *        ▼
 *   enqueue every node that became READY (one statement: node rows linked, task rows inserted)
 *        ▼
 *   count terminal nodes ─► all terminal: finish the workflow once (result or first failure) and notify
 *
 * A batch of finished tasks is grouped by workflow: one transaction per workflow, not one per task.
 */
import { v7 as uuidv7 } from 'uuid';
import type { Database, Queryable } from '../db/Database.js';
import { isTransientDatabaseError } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import type { EndedTaskRow } from '../db/tasks.js';
import {
  WorkflowAdvance,
  WorkflowFinish,
  WorkflowLock,
  WorkflowNodeEnqueue,
  WorkflowNodeEvaluate,
  WorkflowNodeListReady,
  WorkflowNodeRecount,
  WorkflowNodeSettle,
  WorkflowNodeSettleAll,
  WorkflowNodeSummaries,
} from '../db/workflows.js';
import type { NodeSummaryRow, WorkflowNodeStatus, WorkflowRow, WorkflowStatus } from '../db/workflows.js';
import type { JsonValue } from '../types.js';
import { outcomeOf, resolveRefs } from './wiring.js';
import type { InputTemplate, UpstreamState } from './wiring.js';

/** What one step did to one workflow. */
export interface StepResult {
  /** Nodes that turned terminal (settled from their tasks, or skipped). */
  settled: number;
  /** Nodes enqueued. */
  enqueued: number;
  /** The workflow's status after the step (null: no such workflow). */
  status: WorkflowStatus | null;
}

/** How a step looks for work: the hot path names the nodes; recovery looks at every node. */
export interface StepOptions {
  /** Nodes whose tasks ended; null settles every node whose task ended (or vanished). */
  nodes: number[] | null;
  /** Recount dependency counters, re-evaluate PENDING nodes, enqueue READY nodes left without a task. */
  repair?: boolean;
}

const TERMINAL_WORKFLOW: readonly WorkflowStatus[] = ['COMPLETED', 'FAILED', 'CANCELLED'];

/** Runs the step for one workflow in its own transaction. */
export function stepWorkflow(db: Database, workflowId: string, options: StepOptions): Promise<StepResult> {
  return db.transaction((tx) => step(db, tx, workflowId, options));
}

/**
 * Follows written outcomes: every workflow with a node among them takes a step. Steps of one workflow never run
 * side by side here: nodes that finish while a step of their workflow is under way wait for it and go together
 * into the next one, so a wide workflow whose tasks finish in many small batches takes a few large steps rather
 * than queueing many small ones on its row lock. A few workflows step at once. Retries (status PENDING) are not
 * outcomes of a node and are skipped. A transient failure is retried a few times; a step that still fails is
 * left to the recovery pass and reported through `onError`.
 */
export class WorkflowStepper {
  private readonly waiting = new Map<string, Set<number>>();
  private readonly stepping = new Set<string>();
  private readonly idleWaiters: (() => void)[] = [];

  constructor(
    private readonly db: Database,
    private readonly onError: (workflowId: string, error: unknown) => void,
    private readonly lanes = 4,
  ) {}

  /** Queues the nodes of written outcomes for a step of their workflows. */
  add(written: EndedTaskRow[]): void {
    for (const row of written) {
      if (row.workflow_id === null || row.workflow_node === null || row.status === 'PENDING') continue;
      const nodes = this.waiting.get(row.workflow_id) ?? new Set<number>();
      nodes.add(row.workflow_node);
      this.waiting.set(row.workflow_id, nodes);
    }
    this.pump();
  }

  /** Resolves once every queued node has been stepped (or given up on). */
  idle(): Promise<void> {
    if (this.waiting.size === 0 && this.stepping.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    for (const [id, nodes] of this.waiting) {
      if (this.stepping.size >= this.lanes) return;
      if (this.stepping.has(id)) continue;
      this.waiting.delete(id);
      this.stepping.add(id);
      void withRetries(() => stepWorkflow(this.db, id, { nodes: [...nodes] }))
        .catch((error: unknown) => this.onError(id, error))
        .finally(() => {
          this.stepping.delete(id);
          this.pump();
          if (this.waiting.size === 0 && this.stepping.size === 0) {
            for (const resolve of this.idleWaiters.splice(0)) resolve();
          }
        });
    }
  }
}

async function withRetries<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await fn();
    } catch (error) {
      if (attempt >= 3 || !isTransientDatabaseError(error)) throw error;
    }
  }
}

async function step(
  db: Database,
  tx: Queryable,
  workflowId: string,
  options: StepOptions,
): Promise<StepResult> {
  // A step is redone by recovery if a crash undoes it: its commit need not wait for the disk.
  const [workflow] = await db.run(WorkflowLock, { id: workflowId, waitForFlush: false }, tx);
  if (!workflow) return { settled: 0, enqueued: 0, status: null };
  if (TERMINAL_WORKFLOW.includes(workflow.status))
    return { settled: 0, enqueued: 0, status: workflow.status };
  const settled =
    options.nodes === null
      ? await db.run(WorkflowNodeSettleAll, { workflowId }, tx)
      : await db.run(WorkflowNodeSettle, { workflowId, nodes: options.nodes }, tx);
  let status = workflow.status;
  if (workflow.on_error === 'pause' && status === 'RUNNING' && settled.some((n) => n.status === 'FAILED')) {
    status = 'PAUSED';
  }
  const evaluate = status === 'RUNNING';
  let terminal = settled.length;
  let bumps: Bumps;
  if (options.repair) {
    // Every PENDING node is evaluated as it stands, from counters recounted from its dependencies (the nodes
    // settled above included, so their bumps are not added again).
    const pending = await db.run(WorkflowNodeRecount, { workflowId }, tx);
    bumps = new Map(pending.map((n) => [n.node_index, { completed: 0, failed: 0, skipped: 0 }]));
  } else bumps = bumpsFrom(settled);
  const ready: ReadyNode[] = [];
  while (bumps.size > 0) {
    const rows = await db.run(
      WorkflowNodeEvaluate,
      { workflowId, bumps: [...bumps].map(([index, b]) => ({ index, ...b })), evaluate },
      tx,
    );
    const skipped = rows.filter((r) => r.changed && r.status === 'SKIPPED');
    ready.push(...rows.filter((r) => r.changed && r.status === 'READY'));
    terminal += skipped.length;
    bumps = bumpsFrom(skipped);
  }
  if (options.repair && evaluate) {
    const queued = new Set(ready.map((r) => r.node_index));
    ready.push(
      ...(await db.run(WorkflowNodeListReady, { workflowId }, tx)).filter((r) => !queued.has(r.node_index)),
    );
  }
  const enqueued = evaluate ? await enqueue(db, tx, workflowId, ready) : 0;
  const [advanced] = await db.run(
    WorkflowAdvance,
    {
      id: workflowId,
      terminalDelta: terminal,
      status: status === workflow.status ? null : status,
      recount: !!options.repair,
    },
    tx,
  );
  if (advanced && advanced.nodes_terminal >= advanced.nodes_total) {
    status = await finish(db, tx, workflow);
  }
  return { settled: terminal, enqueued, status };
}

type Bumps = Map<number, { completed: number; failed: number; skipped: number }>;

// What each dependent learns from nodes that just turned terminal.
function bumpsFrom(changed: { status: WorkflowNodeStatus; dependents: number[] }[]): Bumps {
  const bumps: Bumps = new Map();
  for (const node of changed) {
    for (const dependent of node.dependents) {
      const b = bumps.get(dependent) ?? { completed: 0, failed: 0, skipped: 0 };
      if (node.status === 'COMPLETED') b.completed += 1;
      else if (node.status === 'FAILED') b.failed += 1;
      else b.skipped += 1;
      bumps.set(dependent, b);
    }
  }
  return bumps;
}

/** A READY node with what resolving its input needs. */
interface ReadyNode {
  node_index: number;
  input_template: unknown;
  upstream: Record<string, UpstreamState> | null;
}

/** Resolves the inputs of READY nodes and enqueues them in one statement. Returns how many were enqueued. */
export async function enqueue(
  db: Database,
  tx: Queryable,
  workflowId: string,
  ready: ReadyNode[],
): Promise<number> {
  if (ready.length === 0) return 0;
  const nodes = ready.map((node) => {
    const upstream = new Map(Object.entries(node.upstream ?? {}).map(([k, v]) => [Number(k), v]));
    const input = resolveRefs(
      node.input_template as InputTemplate,
      ['result', 'outcome'],
      null,
      upstream,
    ).static;
    return { index: node.node_index, taskId: uuidv7(), kwargs: JSON.stringify(input) };
  });
  return (await db.run(WorkflowNodeEnqueue, { workflowId, nodes }, tx)).length;
}

/** Ends a workflow whose nodes are all terminal: its result, or its first failure. Returns the final status. */
async function finish(db: Database, tx: Queryable, workflow: WorkflowRow): Promise<WorkflowStatus> {
  const nodes = await db.run(
    WorkflowNodeSummaries,
    { workflowId: workflow.id, outputIndex: workflow.output_index },
    tx,
  );
  const outcome = decideOutcome(workflow, nodes);
  const rows = await db.run(
    WorkflowFinish,
    {
      id: workflow.id,
      status: 'ok' in outcome ? 'COMPLETED' : 'FAILED',
      result: JSON.stringify(outcome),
      errorCode: 'err' in outcome ? outcome.err.code : null,
      channel: channels.workflowDone(db.schema),
    },
    tx,
  );
  return rows.length > 0 ? ('ok' in outcome ? 'COMPLETED' : 'FAILED') : workflow.status;
}

type Envelope = { ok: JsonValue } | { err: { code: string; message: string; data?: JsonValue } };

/**
 * The outcome of a workflow whose nodes are all terminal. Success: no FAILED node, or with a success policy some
 * case whose nodes all COMPLETED (optional nodes never count). The result is the output node's value, or else the
 * map of terminal nodes' outcomes by node id. A failure names the first failed node (by completion) that counts.
 */
function decideOutcome(
  workflow: Pick<WorkflowRow, 'name' | 'output_index' | 'success_policy'>,
  nodes: NodeSummaryRow[],
): Envelope {
  const byIndex = new Map(nodes.map((n) => [n.node_index, n]));
  const policy = workflow.success_policy;
  const optional = new Set(policy?.optional ?? []);
  const firstFailed = nodes.find((n) => n.status === 'FAILED' && !optional.has(n.node_index));
  const success = policy
    ? policy.cases.some((c) => c.every((i) => byIndex.get(i)?.status === 'COMPLETED'))
    : firstFailed === undefined;
  const output = workflow.output_index === null ? null : byIndex.get(workflow.output_index);
  if (success && output?.status === 'COMPLETED') {
    return { ok: ((output.result as { ok?: JsonValue } | null)?.ok ?? null) as JsonValue };
  }
  if (success && workflow.output_index === null) {
    const terminal = nodes.filter((n) => n.terminal).sort((a, b) => a.node_index - b.node_index);
    return { ok: Object.fromEntries(terminal.map((n) => [n.node_id, outcomeOf(n)])) };
  }
  const culprit = success ? output : (firstFailed ?? null);
  if (culprit) {
    const error = (culprit.result as { err?: JsonValue } | null)?.err ?? null;
    return {
      err: {
        code: 'WORKFLOW_FAILED',
        message: `workflow "${workflow.name}" failed: node "${culprit.node_id}" ended ${culprit.status}`,
        data: { node: culprit.node_id, error },
      },
    };
  }
  return {
    err: {
      code: 'WORKFLOW_SUCCESS_CASE_NOT_MET',
      message: `workflow "${workflow.name}" met none of its success cases`,
      data: { nodes: Object.fromEntries(nodes.map((n) => [n.node_id, n.status])) },
    },
  };
}
