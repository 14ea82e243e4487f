/**
 * A workflow's graph as the CLI and the dashboard draw it: its nodes, and their layers by longest path (a node's
 * depth is the longest path to it from a root, so every node's dependencies sit in layers above it). Pure, and
 * imports nothing: the dashboard's API contract (`src/dashboard/contract.ts`) names {@link DagNode} for the
 * browser, whose typecheck must not reach the database layer. `dagNode` (./dagNode.ts) makes a node from its row.
 */

/** One node, as the drawings need it. */
export interface DagNode {
  index: number;
  id: string;
  task: string;
  /** The node's status as shown (RUNNING while its task runs). */
  status: string;
  /** Indexes of the nodes it waits for. */
  dependencies: number[];
  join: 'all' | 'any' | 'quorum';
  minSuccess: number | null;
  allowFailedDeps: boolean;
  /** The error code of a FAILED or SKIPPED node. */
  errorCode: string | null;
  /** The node's task, once it has one. */
  taskId: string | null;
  /** For a node that runs a whole workflow: that workflow's name (else null or absent). */
  subworkflow?: string | null;
  /** For a subworkflow node: the child workflow it started, once it has one. */
  childWorkflowId?: string | null;
  /** For a node that runs no task but waits: for a signal (or event), or a sleep (else null or absent). */
  wait?: 'signal' | 'sleep' | null;
}

/**
 * The layers of a graph: `layers[d]` holds the indexes of the nodes at depth d, in index order. Iterative (a
 * chain of 10,000 nodes needs no deep recursion). Nodes on a cycle or waiting for a missing node, which a
 * stored workflow cannot have, are put in a last layer rather than dropped.
 */
export function layers(nodes: readonly Pick<DagNode, 'index' | 'dependencies'>[]): number[][] {
  const byIndex = new Map(nodes.map((n) => [n.index, n]));
  const waiting = new Map<number, number>();
  const dependents = new Map<number, number[]>();
  for (const node of nodes) {
    const deps = node.dependencies.filter((d) => byIndex.has(d));
    waiting.set(node.index, deps.length === node.dependencies.length ? deps.length : Infinity);
    for (const dep of deps) {
      const list = dependents.get(dep) ?? [];
      list.push(node.index);
      dependents.set(dep, list);
    }
  }
  const depth = new Map<number, number>();
  let frontier = nodes.filter((n) => waiting.get(n.index) === 0).map((n) => n.index);
  for (const index of frontier) depth.set(index, 0);
  while (frontier.length > 0) {
    const next: number[] = [];
    for (const index of frontier) {
      for (const dependent of dependents.get(index) ?? []) {
        depth.set(dependent, Math.max(depth.get(dependent) ?? 0, (depth.get(index) ?? 0) + 1));
        const left = (waiting.get(dependent) ?? 0) - 1;
        waiting.set(dependent, left);
        if (left === 0) next.push(dependent);
      }
    }
    frontier = next;
  }
  const result: number[][] = [];
  const stray: number[] = [];
  for (const node of nodes) {
    const d = depth.get(node.index);
    if (d === undefined || (waiting.get(node.index) ?? 0) !== 0) stray.push(node.index);
    else (result[d] ??= []).push(node.index);
  }
  for (const layer of result) layer?.sort((a, b) => a - b);
  const dense = result.filter((layer): layer is number[] => layer !== undefined);
  if (stray.length > 0) dense.push(stray.sort((a, b) => a - b));
  return dense;
}
