/** A run's graph as the API sends it (in columns, see contract.ts) back into one object per node. */
import type { WorkflowGraphColumns, WorkflowNode } from '../../../contract.js';

/** The nodes of a graph in columns, by index. Task ids are not sent with the graph: a node's detail has its own. */
export function graphNodes(g: WorkflowGraphColumns): WorkflowNode[] {
  const afterFailed = new Set(g.allowFailedDeps);
  return g.id.map((id, i) => {
    const join = g.join[i];
    return {
      index: i,
      id,
      task: g.taskNames[g.task[i] ?? -1] ?? '',
      status: g.statusNames[g.status[i] ?? -1] ?? '',
      dependencies: g.deps[i] ?? [],
      join: join?.[0] ?? 'all',
      minSuccess: join?.[1] ?? null,
      allowFailedDeps: afterFailed.has(i),
      errorCode: g.errorCode[i] ?? null,
      taskId: null,
      subworkflow: g.subworkflow[i] ?? null,
      childWorkflowId: g.childWorkflowId[i] ?? null,
    };
  });
}
