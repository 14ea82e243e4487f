/**
 * Signals and events: deliveries of a payload to wait nodes (`wf.waitFor()`).
 *
 * - A signal goes to one node of one run (`handle.signal(node, payload)`, `app.signal(id, nodeId, payload)`). If
 *   the node waits, it completes in the same transaction; if the run has not reached it yet, the signal is kept
 *   for the node, which completes with it as soon as it starts; if the node (or the run) has ended, nothing is
 *   stored (`ignored`).
 * - An event goes to every node waiting for its name with its key at the time it commits (`app.emit(name,
 *   payload, { key })`). An event is not kept for runs that reach such a node later.
 *
 * The payload is validated with the schema the wait nodes of that name declare, and must be JSON, before
 * anything is stored. Each delivery has an id (given, or a new UUIDv7), unique per node: a repeated delivery is a
 * no-op (`duplicate`). A node completes with its first delivery, in the order deliveries were stored under the
 * run's row lock; later ones are kept but change nothing.
 *
 * Lock order as everywhere: the run's row, then its nodes (and deliveries). An emit locks every run it reaches in
 * id order before storing, so concurrent emits wait for each other rather than deadlock. A child run that ends
 * through a delivery steps its parent after the commit; with the caller's transaction (`tx`) the parent is
 * stepped by the recovery pass instead, since a parent is never locked after its child.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { v7 as uuidv7 } from 'uuid';
import type { Database, Queryable } from '../db/Database.js';
import {
  WorkflowEventStore,
  WorkflowEventTargetsLock,
  WorkflowSignalStore,
  WorkflowWaitNodeGet,
} from '../db/waits.js';
import { WorkflowLock } from '../db/workflows.js';
import { InputValidationError, SignalError, toIssue } from '../errors.js';
import { toCanonicalJson } from '../json.js';
import { isStorableText } from '../types.js';
import { step, stepParent } from './step.js';
import type { ChildWorkflows, ParentNode } from './step.js';

/** What delivering needs of the app: an `App` is one. */
export interface SignalHost {
  readonly db: Database;
  /** Payload schemas by signal name (registered when workflows with wait nodes are built). */
  readonly signals: ReadonlyMap<string, StandardSchemaV1>;
  /** Workflows subworkflow nodes start (a step after a delivery may start one). */
  readonly workflows?: ChildWorkflows;
}

/** Options of one signal. */
export interface SignalOptions {
  /** The delivery's id (1 to 255 characters): the same id to the same node again is a no-op. Default: a new one. */
  id?: string | undefined;
  /** Deliver inside the caller's transaction: if it rolls back, the signal never came. */
  tx?: Queryable | undefined;
}

/** What a signal did. */
export interface SignalReceipt {
  /** The delivery's id. */
  id: string;
  /**
   * `resumed`: the node was waiting and completed with this payload. `kept`: the run has not reached the node;
   * it completes with this payload when it does (unless an earlier one was kept). `duplicate`: this delivery id
   * was already stored for the node. `ignored`: the node or the run has ended; nothing was stored.
   */
  delivered: 'resumed' | 'kept' | 'duplicate' | 'ignored';
}

/** Options of one event. */
export interface EmitOptions {
  /** Only nodes waiting with this key get the event. Default: none (nodes declared without a key). */
  key?: string | undefined;
  /** The delivery's id: a node that already got this id ignores the event. Default: a new one. */
  id?: string | undefined;
  /** Deliver inside the caller's transaction: if it rolls back, the event never happened. */
  tx?: Queryable | undefined;
}

/** What an event did. */
export interface EmitReceipt {
  /** The delivery's id. */
  id: string;
  /** The runs it reached, each with the ids of the nodes it completed. */
  resumed: { workflowId: string; nodes: number[] }[];
}

/**
 * Delivers `payload` to the node `nodeId` of run `workflowId`. With `schema` (a handle's typed signal) the
 * payload is validated with it; without, with the schema registered for the signal the node waits for.
 */
export async function signalNode(
  host: SignalHost,
  workflowId: string,
  node: { id: string; index?: number | undefined; schema?: StandardSchemaV1 | undefined },
  payload: unknown,
  options: SignalOptions = {},
): Promise<SignalReceipt> {
  const deliveryId = checkDeliveryId(options.id);
  let { index, schema } = node;
  let name = node.id;
  if (index === undefined || schema === undefined) {
    const [row] = await host.db.run(WorkflowWaitNodeGet, { workflowId, nodeId: node.id }, options.tx);
    if (!row) throw new SignalError('NODE_NOT_FOUND', `workflow ${workflowId} has no node "${node.id}"`);
    if (row.wait_kind !== 'signal' || row.wait_name === null) {
      throw new SignalError(
        'NOT_A_WAIT_NODE',
        `node "${node.id}" of workflow ${workflowId} waits for no signal`,
      );
    }
    index = row.node_index;
    name = row.wait_name;
    schema ??= registeredSchema(host, row.wait_name);
  }
  const json = await payloadJson(name, schema, payload);
  const nodeIndex = index;
  const deliver = async (tx: Queryable): Promise<{ receipt: SignalReceipt; parent: ParentNode | null }> => {
    const [run] = await host.db.run(WorkflowLock, { id: workflowId, waitForFlush: true }, tx);
    if (!run) throw new SignalError('WORKFLOW_NOT_FOUND', `no workflow ${workflowId}`);
    const ignored = { receipt: { id: deliveryId, delivered: 'ignored' as const }, parent: null };
    if (!['RUNNING', 'PAUSED'].includes(run.status)) return ignored;
    const [stored] = await host.db.run(
      WorkflowSignalStore,
      { workflowId, nodeIndex, deliveryId, payload: json },
      tx,
    );
    if (!stored) {
      throw new SignalError(
        'NOT_A_WAIT_NODE',
        `node "${node.id}" of workflow ${workflowId} waits for no signal`,
      );
    }
    if (!['PENDING', 'READY', 'RUNNING'].includes(stored.status)) return ignored;
    if (!stored.stored) return { receipt: { id: deliveryId, delivered: 'duplicate' }, parent: null };
    if (stored.status !== 'RUNNING') return { receipt: { id: deliveryId, delivered: 'kept' }, parent: null };
    const stepped = await step(host.db, tx, workflowId, { nodes: [nodeIndex], children: host.workflows });
    return { receipt: { id: deliveryId, delivered: 'resumed' }, parent: stepped.parent };
  };
  if (options.tx) return (await deliver(options.tx)).receipt;
  const { receipt, parent } = await host.db.transaction(deliver);
  if (parent) await stepParent(host.db, parent, host.workflows);
  return receipt;
}

/** Delivers the event `name` to every node waiting for it with the key (see the module comment). */
export async function emitEvent(
  host: SignalHost,
  name: string,
  payload: unknown,
  options: EmitOptions = {},
): Promise<EmitReceipt> {
  const deliveryId = checkDeliveryId(options.id);
  const key = options.key ?? '';
  if (typeof key !== 'string' || !isStorableText(key)) {
    throw new SignalError('INVALID_SIGNAL_OPTIONS', 'key: must be a string without NUL or a lone surrogate');
  }
  const json = await payloadJson(name, registeredSchema(host, name), payload);
  const deliver = async (tx: Queryable): Promise<{ receipt: EmitReceipt; parents: ParentNode[] }> => {
    const locked = await host.db.run(WorkflowEventTargetsLock, { name, key }, tx);
    if (locked.length === 0) return { receipt: { id: deliveryId, resumed: [] }, parents: [] };
    const stored = await host.db.run(
      WorkflowEventStore,
      { ids: locked.map((r) => r.id), name, key, deliveryId, payload: json },
      tx,
    );
    const byRun = new Map<string, number[]>();
    for (const row of stored)
      byRun.set(row.workflow_id, [...(byRun.get(row.workflow_id) ?? []), row.node_index]);
    const resumed: EmitReceipt['resumed'] = [];
    const parents: ParentNode[] = [];
    for (const [workflowId, nodes] of [...byRun].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const stepped = await step(host.db, tx, workflowId, { nodes, children: host.workflows });
      resumed.push({ workflowId, nodes: nodes.sort((a, b) => a - b) });
      if (stepped.parent) parents.push(stepped.parent);
    }
    return { receipt: { id: deliveryId, resumed }, parents };
  };
  if (options.tx) return (await deliver(options.tx)).receipt;
  const { receipt, parents } = await host.db.transaction(deliver);
  for (const parent of parents) await stepParent(host.db, parent, host.workflows);
  return receipt;
}

function registeredSchema(host: SignalHost, name: string): StandardSchemaV1 {
  const schema = host.signals.get(name);
  if (!schema) {
    throw new SignalError(
      'UNKNOWN_SIGNAL',
      `no workflow of this app waits for signal "${name}" (build the workflows that wait for it in this process)`,
    );
  }
  return schema;
}

function checkDeliveryId(id: string | undefined): string {
  if (id === undefined) return uuidv7();
  if (typeof id !== 'string' || id.length === 0 || id.length > 255 || !isStorableText(id)) {
    throw new SignalError(
      'INVALID_SIGNAL_OPTIONS',
      'id: must be 1 to 255 characters, without NUL or a lone surrogate',
    );
  }
  return id;
}

// The payload validated with its schema (its output is what is stored), as JSON.
async function payloadJson(name: string, schema: StandardSchemaV1, payload: unknown): Promise<string> {
  const result = await schema['~standard'].validate(payload);
  if (result.issues) throw new InputValidationError(name, result.issues.map(toIssue), 'signal');
  return toCanonicalJson(result.value ?? null, 'payload');
}
