/**
 * Where a workflow's nodes and edges go. Up to {@link ELK_LIMIT} nodes, elkjs lays the graph out (layered,
 * top-down, run in a Web Worker so the page stays responsive); it was measured against @dagrejs/dagre on the
 * same graphs (scripts/dashboard-layout.ts): dagre grows faster than linearly (7.5 s at 1,000 nodes with its
 * fastest ranker, 139 s with the default one), elkjs about linearly but with a floor of a second or two (21 s at
 * 5,000 nodes). Above the limit, a layered layout of our own places a node at its depth (the longest path to it
 * from a root) and orders each layer once by the mean position of its dependencies: linear, a few milliseconds
 * for 5,000 nodes, with straight edges.
 */
import type { WorkflowNode } from '../../../contract.js';

/** Above this many nodes the graph is laid out in layers here rather than by elkjs. */
export const ELK_LIMIT = 500;
export const NODE_W = 190;
export const NODE_H = 50;
const GAP_X = 24;
const GAP_Y = 56;

export interface Box {
  x: number;
  y: number;
}

export interface Edge {
  from: number;
  to: number;
  /** The polyline from the dependency's bottom to the dependent's top. */
  points: [number, number][];
}

export interface Layout {
  /** Top-left corner of each node's box, by node index. */
  boxes: Map<number, Box>;
  edges: Edge[];
  width: number;
  height: number;
  engine: 'elkjs' | 'layers';
}

function straightEdges(nodes: readonly WorkflowNode[], boxes: Map<number, Box>): Edge[] {
  const edges: Edge[] = [];
  for (const n of nodes) {
    const to = boxes.get(n.index);
    if (!to) continue;
    for (const d of n.dependencies) {
      const from = boxes.get(d);
      if (!from) continue;
      edges.push({
        from: d,
        to: n.index,
        points: [
          [from.x + NODE_W / 2, from.y + NODE_H],
          [to.x + NODE_W / 2, to.y],
        ],
      });
    }
  }
  return edges;
}

/** Each node's depth: the longest path to it from a root (iterative, in dependency order). */
export function depths(nodes: readonly WorkflowNode[]): Map<number, number> {
  const byIndex = new Map(nodes.map((n) => [n.index, n]));
  const waiting = new Map<number, number>();
  const dependents = new Map<number, number[]>();
  for (const n of nodes) {
    const deps = n.dependencies.filter((d) => byIndex.has(d));
    waiting.set(n.index, deps.length);
    for (const d of deps) {
      const list = dependents.get(d);
      if (list) list.push(n.index);
      else dependents.set(d, [n.index]);
    }
  }
  const depth = new Map<number, number>();
  const queue = nodes.filter((n) => waiting.get(n.index) === 0).map((n) => n.index);
  for (const i of queue) depth.set(i, 0);
  for (let head = 0; head < queue.length; head += 1) {
    const i = queue[head]!;
    for (const next of dependents.get(i) ?? []) {
      depth.set(next, Math.max(depth.get(next) ?? 0, depth.get(i)! + 1));
      const left = waiting.get(next)! - 1;
      waiting.set(next, left);
      if (left === 0) queue.push(next);
    }
  }
  // A stored workflow has no cycle; anything left unplaced goes below the rest rather than nowhere.
  const last = Math.max(0, ...depth.values()) + 1;
  for (const n of nodes) if (!depth.has(n.index)) depth.set(n.index, last);
  return depth;
}

/** The layered layout of our own, for large runs. */
export function layoutInLayers(nodes: readonly WorkflowNode[]): Layout {
  const depth = depths(nodes);
  const rows: WorkflowNode[][] = [];
  for (const n of nodes) (rows[depth.get(n.index)!] ??= []).push(n);
  const slot = new Map<number, number>();
  let widest = 0;
  for (const row of rows) {
    if (!row) continue;
    // One barycentre pass: a node goes near the mean slot of what it waits for, which untangles fan-ins.
    const keyed = row.map((n, i) => {
      const known = n.dependencies.map((d) => slot.get(d)).filter((s): s is number => s !== undefined);
      return { n, key: known.length ? known.reduce((a, b) => a + b, 0) / known.length : i };
    });
    keyed.sort((a, b) => a.key - b.key || a.n.index - b.n.index);
    keyed.forEach(({ n }, i) => slot.set(n.index, i));
    widest = Math.max(widest, row.length);
  }
  const boxes = new Map<number, Box>();
  const fullWidth = widest * (NODE_W + GAP_X);
  rows.forEach((row, d) => {
    if (!row) return;
    const offset = (fullWidth - row.length * (NODE_W + GAP_X)) / 2;
    for (const n of row)
      boxes.set(n.index, { x: offset + slot.get(n.index)! * (NODE_W + GAP_X), y: d * (NODE_H + GAP_Y) });
  });
  return {
    boxes,
    edges: straightEdges(nodes, boxes),
    width: Math.max(fullWidth, NODE_W),
    height: rows.length * (NODE_H + GAP_Y),
    engine: 'layers',
  };
}

interface ElkResult {
  width?: number;
  height?: number;
  children?: { id: string; x?: number; y?: number }[];
  edges?: {
    id: string;
    sections?: {
      startPoint: { x: number; y: number };
      endPoint: { x: number; y: number };
      bendPoints?: { x: number; y: number }[];
    }[];
  }[];
}

/** Lays the graph out with elkjs in a Web Worker (loaded on first use, a chunk of its own). */
export async function layoutWithElk(nodes: readonly WorkflowNode[]): Promise<Layout> {
  const [{ default: ELK }, { default: workerUrl }] = await Promise.all([
    import('elkjs/lib/elk-api.js'),
    import('elkjs/lib/elk-worker.min.js?url'),
  ]);
  const elk = new ELK({ workerFactory: () => new Worker(workerUrl) });
  const known = new Set(nodes.map((n) => n.index));
  try {
    const result = (await elk.layout({
      id: 'root',
      layoutOptions: {
        'elk.algorithm': 'layered',
        'elk.direction': 'DOWN',
        'elk.layered.thoroughness': '3',
        'elk.layered.nodePlacement.strategy': 'BRANDES_KOEPF',
        'elk.edgeRouting': 'POLYLINE',
        'elk.spacing.nodeNode': String(GAP_X),
        'elk.layered.spacing.nodeNodeBetweenLayers': String(GAP_Y),
      },
      children: nodes.map((n) => ({ id: String(n.index), width: NODE_W, height: NODE_H })),
      edges: nodes.flatMap((n) =>
        n.dependencies
          .filter((d) => known.has(d))
          .map((d) => ({ id: `${d}>${n.index}`, sources: [String(d)], targets: [String(n.index)] })),
      ),
    })) as ElkResult;
    const boxes = new Map<number, Box>();
    for (const c of result.children ?? []) boxes.set(Number(c.id), { x: c.x ?? 0, y: c.y ?? 0 });
    const edges: Edge[] = (result.edges ?? []).map((e) => {
      const [from, to] = e.id.split('>').map(Number) as [number, number];
      const s = e.sections?.[0];
      const points: [number, number][] = s
        ? [
            [s.startPoint.x, s.startPoint.y],
            ...(s.bendPoints ?? []).map((p): [number, number] => [p.x, p.y]),
            [s.endPoint.x, s.endPoint.y],
          ]
        : [];
      return { from, to, points };
    });
    return { boxes, edges, width: result.width ?? 0, height: result.height ?? 0, engine: 'elkjs' };
  } finally {
    elk.terminateWorker();
  }
}
