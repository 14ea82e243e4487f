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
  // Positions in `nodes` stand for the nodes, in typed arrays: a run of 5,000 nodes is laid out on every read of
  // its page, and maps keyed by index took several times as long.
  const n = nodes.length;
  const position = new Map<number, number>();
  nodes.forEach((node, i) => position.set(node.index, i));
  const waiting = new Float64Array(n);
  // The dependents of each node, as one list cut by offsets.
  const edgeCount = new Int32Array(n + 1);
  for (let i = 0; i < n; i += 1) {
    const deps = nodes[i]!.dependencies;
    let known = 0;
    for (const d of deps) {
      const p = position.get(d);
      if (p === undefined) continue;
      known += 1;
      edgeCount[p + 1]! += 1;
    }
    waiting[i] = known === deps.length ? known : Infinity;
  }
  for (let i = 0; i < n; i += 1) edgeCount[i + 1]! += edgeCount[i]!;
  const dependents = new Int32Array(edgeCount[n]!);
  const fill = edgeCount.slice(0, n);
  for (let i = 0; i < n; i += 1) {
    for (const d of nodes[i]!.dependencies) {
      const p = position.get(d);
      if (p !== undefined) dependents[fill[p]!++] = i;
    }
  }
  const depth = new Int32Array(n).fill(-1);
  let frontier: number[] = [];
  for (let i = 0; i < n; i += 1) {
    if (waiting[i] === 0) {
      depth[i] = 0;
      frontier.push(i);
    }
  }
  while (frontier.length > 0) {
    const next: number[] = [];
    for (const i of frontier) {
      for (let e = edgeCount[i]!; e < edgeCount[i + 1]!; e += 1) {
        const dependent = dependents[e]!;
        depth[dependent] = Math.max(depth[dependent]!, depth[i]! + 1, 0);
        waiting[dependent]! -= 1;
        if (waiting[dependent] === 0) next.push(dependent);
      }
    }
    frontier = next;
  }
  const result: number[][] = [];
  const stray: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const d = depth[i]!;
    if (d < 0 || waiting[i] !== 0) stray.push(nodes[i]!.index);
    else (result[d] ??= []).push(nodes[i]!.index);
  }
  for (const layer of result) layer?.sort((a, b) => a - b);
  const dense = result.filter((layer): layer is number[] => layer !== undefined);
  if (stray.length > 0) dense.push(stray.sort((a, b) => a - b));
  return dense;
}
