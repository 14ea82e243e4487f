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
 *        ▼
 *   a child workflow that finished: its parent steps next, in a transaction of its own (parents are locked
 *   before children, never after)
 *
 * A PAUSED workflow settles nodes but evaluates and enqueues nothing, and gives back tasks that never ran (see
 * `control.ts`); a CANCELLED one only records the outcomes of runs that still ended. A READY subworkflow node
 * starts its child workflow (a registered definition) in the same transaction instead of a task; a READY wait node
 * starts waiting (RUNNING with no task, its key and timer set; see `signals.ts`), and ends in the same step if a
 * signal was kept for it or its timer is already due. A waiting node is settled like any other: from its first
 * delivery, or from its due timer (`WAIT_TIMEOUT`, or null for a sleep).
 *
 * The step runs on the server (routines/horsies_workflow_step.sql): the workflows of a batch of finished tasks in
 * one round trip, each locked in id order, the stages above in SQL. A worker writes its own outcomes that end nodes
 * with their step, in one transaction ({@link WorkflowStepper.finishAndStep}); other outcomes are stepped after
 * their commit. What runs the app's code or locks a tree stays here and follows that call ({@link followUp}): READY
 * subworkflow and wait nodes started, a parent stepped, and the whole step of a PAUSED workflow or one that pauses
 * on error. The statements below are that part, and the step of a start, a control operation, a delivery and the
 * recovery pass.
 *
 * Eager dispatch: the worker that runs a step after its own outcomes lends it the slots it has free
 * ({@link EagerStarts}); the step starts the nodes it enqueues in them, for that worker, in the same transaction,
 * so a chain's next task runs without waiting for a notification and a claim.
 */
import { v7 as uuidv7 } from 'uuid';
import type { Database, Queryable } from '../db/Database.js';
import { isTransientDatabaseError } from '../db/Database.js';
import { channels } from '../db/Listener.js';
import type { ClaimAndStartRow, DoneNotice, EndedTaskRow, TaskFinish, TaskFinishRow } from '../db/tasks.js';
import {
  WorkflowAdvance,
  WorkflowFinish,
  WorkflowLock,
  WorkflowNodeEnqueue,
  WorkflowNodeEvaluate,
  WorkflowNodeFail,
  WorkflowNodeLinkChild,
  WorkflowNodeListReady,
  WorkflowNodeRecount,
  WorkflowNodeSettle,
  WorkflowNodeSettleAll,
  WorkflowNodeSummaries,
  TaskFinishStep,
  WorkflowStepMany,
  WorkflowWithdrawPending,
  startedRows,
} from '../db/workflows.js';
import type {
  NodeSummaryRow,
  SettledNodeRow,
  WorkflowNodeStatus,
  WorkflowRow,
  StepSlots,
  WorkflowStatus,
  TaskFinishStepRow,
  WorkflowStepRow,
} from '../db/workflows.js';
import { WorkflowNodeStartWaits } from '../db/waits.js';
import type { JsonValue } from '../types.js';
import { pauseTree } from './tree.js';
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
  /** A child workflow that ended in this step: the parent node that waits for it. */
  parent: ParentNode | null;
}

/** A node of a parent workflow (its workflow's id and the node's index) that runs a child workflow. */
export interface ParentNode {
  id: string;
  node: number;
}

/** Where a child workflow hangs in its parent. */
export interface ParentLink {
  workflowId: string;
  nodeIndex: number;
  rootId: string;
  /** The child's depth (the parent's + 1). */
  depth: number;
}

/** A workflow a subworkflow node can start: the app registers each by its name. */
export interface ChildWorkflow {
  /**
   * Stores a run of this workflow in `tx` as the child of `parent`, with `params` (as resolved from the parent's
   * wiring; validated here). Returns the child's id, or the error that fails the parent node.
   */
  startChild(
    tx: Queryable,
    params: JsonValue,
    parent: ParentLink,
  ): Promise<{ id: string } | { error: { code: string; message: string } }>;
}

/** The registered workflows by name (an app's `workflows`). */
export type ChildWorkflows = ReadonlyMap<string, ChildWorkflow>;

/** How a step looks for work: the hot path names the nodes; recovery looks at every node. */
export interface StepOptions {
  /** Nodes whose tasks ended; null settles every node whose task ended (or vanished). */
  nodes: number[] | null;
  /** Recount dependency counters, re-evaluate PENDING nodes, enqueue READY nodes left without a task. */
  repair?: boolean;
  /** The workflows subworkflow nodes start. Without it (or its entry), such a node waits READY for recovery. */
  children?: ChildWorkflows;
  /** Nodes known to be READY without a task (a start's roots), enqueued by this step. */
  ready?: ReadyNode[];
  /**
   * Subworkflow and wait nodes the server-side step left READY: read again under the lock (another step may have
   * started them meanwhile) and started by this step.
   */
  readyIndexes?: number[];
  /**
   * Whether the commit waits for the WAL flush (default true). Only a step that follows written outcomes may
   * skip it: a server crash that undoes such a step leaves the outcomes, and recovery redoes the step. A start,
   * a control operation or a step in a caller's transaction must be durable once it returns.
   */
  waitForFlush?: boolean;
}

/**
 * Runs the step for one workflow; when that ended a child workflow, its parent steps next (in its own
 * transaction). A step that names its nodes runs on the server ({@link stepWorkflows}); a repair, or a step given
 * READY nodes, runs here in one transaction.
 */
export async function stepWorkflow(
  db: Database,
  workflowId: string,
  options: StepOptions,
): Promise<StepResult> {
  if (options.nodes !== null && !options.repair && !options.ready?.length && !options.readyIndexes) {
    const results = await stepWorkflows(db, new Map([[workflowId, options.nodes]]), options);
    return results.get(workflowId) ?? { settled: 0, enqueued: 0, status: null, parent: null };
  }
  return stepInTransaction(db, workflowId, options);
}

/** {@link step} in a transaction of its own; then the parent of a child workflow that ended. */
async function stepInTransaction(
  db: Database,
  workflowId: string,
  options: StepOptions,
): Promise<StepResult> {
  const result = await db.transaction((tx) => step(db, tx, workflowId, options));
  if (result.parent) await stepParent(db, result.parent, options.children);
  return result;
}

/**
 * Steps many workflows, each named with its nodes whose tasks ended: one round trip to the server-side step
 * ({@link stepOnServer}), then, per workflow, what it left here ({@link followUp}).
 */
export async function stepWorkflows(
  db: Database,
  batch: ReadonlyMap<string, number[]>,
  options: Pick<StepOptions, 'children' | 'waitForFlush'> = {},
): Promise<Map<string, StepResult>> {
  const results = new Map<string, StepResult>();
  for (const row of await stepOnServer(db, batch, options.waitForFlush ?? true)) {
    results.set(row.workflow_id, await followUp(db, row, batch.get(row.workflow_id) ?? [], options));
  }
  return results;
}

/**
 * The server-side step of a batch (routines/horsies_workflow_step.sql): for each workflow, in one transaction
 * and one round trip, what {@link step} does for nodes that ended, except what runs the app's code or locks a
 * workflow's children (see {@link WorkflowStepRow}).
 */
export function stepOnServer(
  db: Database,
  batch: ReadonlyMap<string, number[]>,
  waitForFlush: boolean,
  eager: StepSlots | null = null,
  notify?: DoneNotice,
): Promise<WorkflowStepRow[]> {
  return db.run(WorkflowStepMany, {
    steps: [...batch].map(([workflowId, nodes]) => ({ workflowId, nodes })),
    channel: channels.workflowDone(db.schema),
    waitForFlush,
    eager,
    notify,
  });
}

/** The worker's side of eager dispatch: slots lent to a step, and the tasks the step started in them. */
export interface EagerStarts {
  /** Reserves free slots for a step about to run; null when the worker has none to lend. */
  reserve(): StepSlots | null;
  /** The step returned (or failed, with no rows): runs what it started; the slots it left are free again. */
  started(slots: StepSlots, rows: ClaimAndStartRow[]): void;
}

/**
 * The worker's task_done notifications of written outcomes, which a step carries to its commit as a claim does:
 * after a finish, the step is the worker's next statement (a chain's next task is started by it, not claimed).
 */
export interface CarriedNotices {
  /** Takes what is queued; undefined when nothing is. */
  take(): DoneNotice | undefined;
  /** Notifications taken by a step that failed: sent on their own. */
  giveBack(notice: DoneNotice): void;
}

/**
 * Does what the server-side step left for one workflow: the whole step for a workflow it did not take (paused,
 * or pausing on error), the start of the subworkflow and wait nodes it left READY, and the step of the parent of
 * a child workflow that ended.
 */
export async function followUp(
  db: Database,
  row: WorkflowStepRow,
  nodes: number[],
  options: Pick<StepOptions, 'children' | 'waitForFlush'>,
): Promise<StepResult> {
  const { children, waitForFlush } = options;
  if (row.fallback) return stepInTransaction(db, row.workflow_id, { nodes, children, waitForFlush });
  if (row.ready.length > 0) {
    const more = await stepInTransaction(db, row.workflow_id, {
      nodes: [],
      readyIndexes: row.ready,
      children,
      waitForFlush,
    });
    return {
      settled: row.settled + more.settled,
      enqueued: row.enqueued + more.enqueued,
      status: more.status,
      parent: more.parent,
    };
  }
  const parent =
    row.parent_id !== null && row.parent_node !== null ? { id: row.parent_id, node: row.parent_node } : null;
  if (parent) await stepParent(db, parent, children);
  return { settled: row.settled, enqueued: row.enqueued, status: row.status, parent };
}

/** Steps the parent of a child workflow that ended: its node takes the child's outcome. */
export async function stepParent(
  db: Database,
  parent: ParentNode,
  children: ChildWorkflows | undefined,
): Promise<void> {
  await stepWorkflow(db, parent.id, { nodes: [parent.node], children });
}

/**
 * Follows written outcomes: every workflow with a node among them takes a step. Steps of one workflow never run
 * side by side here: nodes that finish while a step of their workflow is under way wait for it and go together
 * into the next one, so a wide workflow whose tasks finish in many small batches takes a few large steps rather
 * than queueing many small ones on its row lock. The workflows waiting go to the server-side step together, up
 * to `batchSize` in one round trip, a few round trips at once. Retries (status PENDING) are not outcomes of a
 * node and are skipped. A transient failure is retried a few times; a step that still fails is left to the
 * recovery pass and reported through `onError`.
 */
export class WorkflowStepper {
  private readonly waiting = new Map<string, Set<number>>();
  private readonly stepping = new Set<string>();
  /** Follow-ups of steps taken with their finish ({@link finishAndStep}), under way. */
  private readonly following = new Set<Promise<void>>();
  private readonly idleWaiters: (() => void)[] = [];
  private calls = 0;

  constructor(
    private readonly db: Database,
    private readonly onError: (workflowId: string, error: unknown) => void,
    private readonly children?: ChildWorkflows,
    private readonly eager: EagerStarts | null = null,
    private readonly notices: CarriedNotices | null = null,
    private readonly lanes = 4,
    private readonly batchSize = 64,
  ) {}

  /** Queues the nodes of written outcomes for a step of their workflows (but those stepped with their finish). */
  add(written: (EndedTaskRow & { stepped?: boolean })[]): void {
    for (const row of written) {
      if (row.workflow_id === null || row.workflow_node === null || row.status === 'PENDING' || row.stepped) {
        continue;
      }
      const nodes = this.waiting.get(row.workflow_id) ?? new Set<number>();
      nodes.add(row.workflow_node);
      this.waiting.set(row.workflow_id, nodes);
    }
    this.pump();
  }

  /** Resolves once every queued node has been stepped (or given up on). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Writes a worker's batch of outcomes with the step of their workflows, in one transaction and one commit
   * ({@link TaskFinishStep}), the worker's free slots lent to the step as to any other. Returns the outcomes
   * written, those whose node was stepped marked `stepped`. What the step left to the caller follows
   * ({@link followUp}), not awaited: {@link idle} waits for it.
   */
  async finishAndStep(finishes: TaskFinish[]): Promise<TaskFinishRow[]> {
    const slots = this.eager?.reserve() ?? null;
    let rows: TaskFinishStepRow[];
    try {
      rows = await this.db.run(TaskFinishStep, {
        tasks: finishes,
        channel: channels.workflowDone(this.db.schema),
        eager: slots,
      });
    } catch (error) {
      if (slots) this.eager?.started(slots, []);
      throw error;
    }
    const steps = rows.flatMap((r) => (r.step === null ? [] : [r.step]));
    // Handed over once the write that carried them is settled: a run started at once could end (and queue its
    // outcome) before the write's caller looks at what queued meanwhile, and be taken for a busy worker's.
    if (slots) setImmediate(() => this.eager?.started(slots, startedRows(steps)));
    if (steps.length > 0) {
      const nodes = new Map<string, number[]>();
      for (const r of rows) {
        if (!r.stepped || r.workflow_id === null || r.workflow_node === null) continue;
        const list = nodes.get(r.workflow_id);
        if (list) list.push(r.workflow_node);
        else nodes.set(r.workflow_id, [r.workflow_node]);
      }
      const follow = this.follow(steps, nodes).finally(() => {
        this.following.delete(follow);
        this.settleIdle();
      });
      this.following.add(follow);
    }
    return rows.filter((r) => r.step === null);
  }

  /**
   * What each step left to TypeScript ({@link followUp}), for the nodes it stepped. It follows outcomes whose
   * commit waited for the flush: a crash that undoes it is repaired by recovery, as after any step.
   */
  private async follow(steps: WorkflowStepRow[], nodes: Map<string, number[]>): Promise<void> {
    const options = { children: this.children, waitForFlush: false };
    await Promise.all(
      steps.map((step) =>
        withRetries(() => followUp(this.db, step, nodes.get(step.workflow_id) ?? [], options)).catch(
          (error: unknown) => this.onError(step.workflow_id, error),
        ),
      ),
    );
  }

  private isIdle(): boolean {
    return this.waiting.size === 0 && this.stepping.size === 0 && this.following.size === 0;
  }

  private settleIdle(): void {
    if (this.isIdle()) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private pump(): void {
    while (this.calls < this.lanes) {
      const batch = new Map<string, number[]>();
      for (const [id, nodes] of this.waiting) {
        if (this.stepping.has(id)) continue;
        batch.set(id, [...nodes]);
        if (batch.size >= this.batchSize) break;
      }
      if (batch.size === 0) return;
      for (const id of batch.keys()) {
        this.waiting.delete(id);
        this.stepping.add(id);
      }
      this.calls += 1;
      void this.run(batch).finally(() => {
        this.calls -= 1;
        for (const id of batch.keys()) this.stepping.delete(id);
        this.pump();
        this.settleIdle();
      });
    }
  }

  private async run(batch: Map<string, number[]>): Promise<void> {
    let rows: WorkflowStepRow[];
    const slots = this.eager?.reserve() ?? null;
    const notify = this.notices?.take();
    try {
      rows = await withRetries(() => stepOnServer(this.db, batch, false, slots, notify));
    } catch (error) {
      if (notify) this.notices?.giveBack(notify);
      if (slots) this.eager?.started(slots, []);
      for (const id of batch.keys()) this.onError(id, error);
      return;
    }
    if (slots) this.eager?.started(slots, startedRows(rows));
    await this.follow(rows, batch);
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

/** One step of one workflow, in `tx` (see the module comment). */
export async function step(
  db: Database,
  tx: Queryable,
  workflowId: string,
  options: StepOptions,
): Promise<StepResult> {
  const [workflow] = await db.run(
    WorkflowLock,
    { id: workflowId, waitForFlush: options.waitForFlush ?? true },
    tx,
  );
  if (!workflow) return { settled: 0, enqueued: 0, status: null, parent: null };
  if (workflow.status === 'COMPLETED' || workflow.status === 'FAILED')
    return { settled: 0, enqueued: 0, status: workflow.status, parent: null };
  const settled =
    options.nodes === null
      ? await db.run(WorkflowNodeSettleAll, { workflowId }, tx)
      : options.nodes.length === 0
        ? []
        : await db.run(WorkflowNodeSettle, { workflowId, nodes: options.nodes }, tx);
  if (workflow.status === 'CANCELLED') {
    // Runs that still ended after the cancel keep their outcome on their node; nothing else moves. Recovery also
    // recounts the terminal nodes, so a cancelled workflow leaves its list once every node is settled.
    if (settled.length > 0 || options.repair) {
      await db.run(
        WorkflowAdvance,
        { id: workflowId, terminalDelta: settled.length, status: null, recount: !!options.repair },
        tx,
      );
    }
    return { settled: settled.length, enqueued: 0, status: 'CANCELLED', parent: null };
  }
  let status: WorkflowStatus = workflow.status;
  if (workflow.on_error === 'pause' && status === 'RUNNING' && settled.some((n) => n.status === 'FAILED')) {
    // The same path as a pause from a handle: the workflow and its running children, tasks not started given back.
    await pauseTree(db, tx, workflow);
    status = 'PAUSED';
  } else if (status === 'PAUSED') {
    // A task claimed before the pause and handed back at its start (STOPPED) is given back now.
    await db.run(WorkflowWithdrawPending, { ids: [workflowId] }, tx);
  }
  const evaluate = status === 'RUNNING';
  let terminal = settled.length;
  const ready: ReadyNode[] = [...(options.ready ?? [])];
  // Applies bumps to dependents; skips cascade, READY nodes are collected.
  const cascade = async (bumps: Bumps): Promise<void> => {
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
  };
  if (options.repair) {
    // Every PENDING node is evaluated as it stands, from counters recounted from its dependencies (the nodes
    // settled above included, so their bumps are not added again).
    const pending = await db.run(WorkflowNodeRecount, { workflowId }, tx);
    await cascade(new Map(pending.map((n) => [n.node_index, { completed: 0, failed: 0, skipped: 0 }])));
  } else await cascade(bumpsFrom(settled));
  if ((options.repair || options.readyIndexes) && evaluate) {
    const queued = new Set(ready.map((r) => r.node_index));
    const wanted = options.repair ? null : new Set(options.readyIndexes);
    ready.push(
      ...(await db.run(WorkflowNodeListReady, { workflowId }, tx)).filter(
        (r) => !queued.has(r.node_index) && (wanted === null || wanted.has(r.node_index)),
      ),
    );
  }
  let enqueued = 0;
  while (evaluate && ready.length > 0) {
    const batch = ready.splice(0);
    enqueued += await enqueue(
      db,
      tx,
      workflowId,
      batch.filter((r) => !r.subworkflow && !r.wait_kind),
    );
    // Wait nodes start waiting; one with a signal kept for it, or a sleep already over, ends at once.
    const waited = await startWaits(
      db,
      tx,
      workflowId,
      batch.filter((r) => r.wait_kind),
    );
    terminal += waited.length;
    await cascade(bumpsFrom(waited));
    const nested = batch.filter((r) => r.subworkflow);
    const children = await startChildren(db, tx, workflow, nested, options.children);
    enqueued += children.started;
    // A child that could not start fails its node; its dependents learn it in this step.
    terminal += children.failed.length;
    await cascade(bumpsFrom(children.failed));
  }
  if (terminal === 0 && status === workflow.status && !options.repair)
    return { settled: 0, enqueued, status, parent: null };
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
  let parent: StepResult['parent'] = null;
  if (advanced && advanced.nodes_terminal >= advanced.nodes_total) {
    status = await finish(db, tx, workflow);
    if (workflow.parent_workflow_id !== null && workflow.parent_node_index !== null) {
      parent = { id: workflow.parent_workflow_id, node: workflow.parent_node_index };
    }
  }
  return { settled: terminal, enqueued, status, parent };
}

/**
 * Starts the child workflows of READY subworkflow nodes, each linked to its node (RUNNING). A node whose
 * workflow is not registered here stays READY (another worker, or the recovery pass, may know it); one whose
 * child refuses its parameters fails.
 */
async function startChildren(
  db: Database,
  tx: Queryable,
  workflow: WorkflowRow,
  nodes: ReadyNode[],
  children: ChildWorkflows | undefined,
): Promise<{ started: number; failed: { status: WorkflowNodeStatus; dependents: number[] }[] }> {
  let started = 0;
  const failed: { status: WorkflowNodeStatus; dependents: number[] }[] = [];
  for (const node of nodes) {
    const child = node.subworkflow ? children?.get(node.subworkflow) : undefined;
    if (!child) continue;
    const params = resolveInput(node);
    const outcome = await child.startChild(tx, params, {
      workflowId: workflow.id,
      nodeIndex: node.node_index,
      rootId: workflow.root_workflow_id,
      depth: workflow.depth + 1,
    });
    if ('id' in outcome) {
      await db.run(
        WorkflowNodeLinkChild,
        { workflowId: workflow.id, nodeIndex: node.node_index, childId: outcome.id },
        tx,
      );
      started += 1;
    } else {
      failed.push(
        ...(await db.run(
          WorkflowNodeFail,
          { workflowId: workflow.id, nodeIndex: node.node_index, ...outcome.error },
          tx,
        )),
      );
    }
  }
  return { started, failed };
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
export interface ReadyNode {
  node_index: number;
  input_template: unknown;
  upstream: Record<string, UpstreamState> | null;
  /** The workflow a subworkflow node starts (null: the node runs a task). */
  subworkflow?: string | null;
  /** What a wait node waits for (null: the node runs a task or a workflow). */
  wait_kind?: 'signal' | 'sleep' | null;
}

/**
 * READY wait nodes → RUNNING with their key (resolved from their input) and timer; then settled in the same
 * step if a delivery is already kept for them or their timer is already due. Returns the nodes that ended.
 */
async function startWaits(
  db: Database,
  tx: Queryable,
  workflowId: string,
  ready: ReadyNode[],
): Promise<SettledNodeRow[]> {
  if (ready.length === 0) return [];
  const nodes = ready.map((node) => {
    const key = resolveInput(node);
    return {
      index: node.node_index,
      key: typeof key === 'string' ? key : key === null ? '' : JSON.stringify(key),
    };
  });
  const started = await db.run(WorkflowNodeStartWaits, { workflowId, nodes }, tx);
  if (started.length === 0) return [];
  return db.run(WorkflowNodeSettle, { workflowId, nodes: started.map((n) => n.node_index) }, tx);
}

/** A READY node's input, resolved from its upstream nodes' stored results. */
function resolveInput(node: ReadyNode): JsonValue {
  const upstream = new Map(Object.entries(node.upstream ?? {}).map(([k, v]) => [Number(k), v]));
  return resolveRefs(node.input_template as InputTemplate, ['result', 'outcome'], null, upstream).static;
}

/** Resolves the inputs of READY nodes and enqueues them in one statement. Returns how many were enqueued. */
async function enqueue(db: Database, tx: Queryable, workflowId: string, ready: ReadyNode[]): Promise<number> {
  if (ready.length === 0) return 0;
  const nodes = ready.map((node) => ({
    index: node.node_index,
    taskId: uuidv7(),
    kwargs: JSON.stringify(resolveInput(node)),
  }));
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
