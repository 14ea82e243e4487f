/** A workflow's node, read by `WorkflowNodeGraph`, as the drawings of its graph (./dag.ts) need it. */
import type { WorkflowNodeGraphRow } from '../db/workflows.js';
import type { DagNode } from './dag.js';

/** A node read by `WorkflowNodeGraph` (its status already RUNNING while its task runs), as the drawings need it. */
export function dagNode(row: WorkflowNodeGraphRow): DagNode {
  return {
    index: row.node_index,
    id: row.node_id,
    task: row.task_name,
    status: row.status,
    dependencies: row.dependencies,
    join: row.join_rule,
    minSuccess: row.min_success,
    allowFailedDeps: row.allow_failed_deps,
    errorCode: row.error_code,
    taskId: row.task_id,
    subworkflow: row.subworkflow,
    childWorkflowId: row.child_workflow_id,
    ...(row.wait_kind ? { wait: row.wait_kind } : {}),
  };
}
