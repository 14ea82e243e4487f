/**
 * Storing one run of a compiled workflow, in a transaction the caller holds: the workflow row, every node row with
 * its wiring (the start parameters filled in), and the root nodes' tasks or child workflows. It is the one part of
 * a start that writes; the builder (`WorkflowDefinition.ts`) decides the id, the parameters and the transaction,
 * and the compiler (`compile.ts`) stays free of the database.
 */
import { createHash } from 'node:crypto';
import type { Database, Queryable } from '../db/Database.js';
import type { TraceCarrier } from '../db/tasks.js';
import { WorkflowInsert, WorkflowNodeInsertMany } from '../db/workflows.js';
import { WorkflowMismatchError } from '../errors.js';
import type { JsonValue } from '../types.js';
import type { WorkflowSpec } from './compile.js';
import { step } from './step.js';
import type { ChildWorkflows, ParentLink } from './step.js';
import { resolveRefs } from './wiring.js';

/** One run to store. */
export interface RunToInsert {
  /** The run's id (an explicit one makes the start idempotent). */
  id: string;
  /** The start parameters as canonical JSON; with the definition, they make the run's digest. */
  paramsJson: string;
  /** For a child workflow: where it hangs in its parent; null for a run started on its own. */
  parent: ParentLink | null;
  /** The starter's trace context, which the run's tasks carry; null when tracing is off. */
  traceContext: TraceCarrier | null;
}

/**
 * Inserts the run in `tx`: the workflow row RUNNING, its nodes (roots READY, the others PENDING) and, through a
 * workflow step, the roots' tasks or child workflows. A run with this id already stored with the same definition
 * and parameters is left as it is; with another definition or other parameters this throws a
 * {@link WorkflowMismatchError}. `children` are the workflows subworkflow nodes start.
 */
export async function insertRun(
  db: Database,
  tx: Queryable,
  spec: WorkflowSpec,
  run: RunToInsert,
  children: ChildWorkflows,
): Promise<void> {
  const { id, paramsJson, parent, traceContext } = run;
  const sha = createHash('sha256').update(spec.sha).update('\0').update(paramsJson).digest('hex');
  const [stored] = await db.run(
    WorkflowInsert,
    {
      id,
      name: spec.name,
      onError: spec.onError,
      outputIndex: spec.outputIndex,
      successPolicy: spec.successPolicy === null ? null : JSON.stringify(spec.successPolicy),
      definitionSha: sha,
      params: paramsJson,
      nodesTotal: spec.nodes.length,
      parent: parent && {
        workflowId: parent.workflowId,
        nodeIndex: parent.nodeIndex,
        rootId: parent.rootId,
        depth: parent.depth,
      },
      traceContext,
    },
    tx,
  );
  if (!stored?.created) {
    if (stored?.definition_sha !== sha) throw new WorkflowMismatchError(id);
    return;
  }
  const parsedParams = JSON.parse(paramsJson) as JsonValue;
  const nodes = spec.nodes.map((node) => ({
    node,
    template: resolveRefs(node.template, ['param'], parsedParams, new Map()),
  }));
  await db.run(
    WorkflowNodeInsertMany,
    {
      workflowId: id,
      nodes: nodes.map(({ node, template }) => ({
        ...node,
        inputTemplate: JSON.stringify(template),
        status: node.dependencies.length === 0 ? ('READY' as const) : ('PENDING' as const),
      })),
    },
    tx,
  );
  // The roots are READY: their tasks are enqueued, or their child workflows started, in this transaction.
  const roots = nodes.filter(({ node }) => node.dependencies.length === 0);
  await step(db, tx, id, {
    nodes: [],
    ready: roots.map(({ node, template }) => ({
      node_index: node.index,
      input_template: template,
      upstream: null,
      subworkflow: node.subworkflow,
      wait_kind: node.waitKind ?? null,
    })),
    children,
  });
}
