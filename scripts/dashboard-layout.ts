/**
 * Measures the two layout libraries the dashboard could draw a workflow's graph with, `@dagrejs/dagre` and
 * `elkjs` (layered), on the same graphs: a workflow of N nodes in stages of fan-out and joins (each node of a
 * stage waits for one to three nodes of the stage before), as the 200-node test and the 5,000-node page build.
 *
 *     npx tsx scripts/dashboard-layout.ts [200,1000,5000]
 */
import dagre from '@dagrejs/dagre';
import ElkBundled from 'elkjs/lib/elk.bundled.js';

// The bundle is CommonJS: under Node's ESM interop its default export is the module object, whose default is the class.
const ELK = ((ElkBundled as unknown as { default?: unknown }).default ?? ElkBundled) as new () => {
  layout(graph: object): Promise<unknown>;
};

/** A graph of `n` nodes in stages of `width`, each node waiting for 1 to 3 of the stage before (seeded). */
export function stagedGraph(n: number, width: number): { id: string; deps: number[] }[] {
  let seed = 7;
  const rand = (): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const nodes: { id: string; deps: number[] }[] = [];
  for (let i = 0; i < n; i += 1) {
    const stage = Math.floor(i / width);
    const deps: number[] = [];
    if (stage > 0) {
      const k = 1 + Math.floor(rand() * 3);
      for (let j = 0; j < k; j += 1) {
        const d = (stage - 1) * width + Math.floor(rand() * width);
        if (!deps.includes(d)) deps.push(d);
      }
    }
    nodes.push({ id: `n${i}`, deps });
  }
  return nodes;
}

function timeDagre(nodes: { id: string; deps: number[] }[]): number {
  const start = performance.now();
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 16, ranksep: 40 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n.id, { width: 160, height: 44 });
  for (const n of nodes) for (const d of n.deps) g.setEdge(nodes[d]!.id, n.id);
  dagre.layout(g);
  return performance.now() - start;
}

async function timeElk(nodes: { id: string; deps: number[] }[]): Promise<number> {
  const elk = new ELK();
  const start = performance.now();
  await elk.layout({
    id: 'root',
    // The options the dashboard lays graphs out with (src/dashboard/ui/src/graph/layout.ts).
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'DOWN',
      'elk.layered.thoroughness': '3',
      'elk.layered.nodePlacement.strategy': 'BRANDES_KOEPF',
      'elk.edgeRouting': 'POLYLINE',
    },
    children: nodes.map((n) => ({ id: n.id, width: 160, height: 44 })),
    edges: nodes.flatMap((n) =>
      n.deps.map((d) => ({ id: `${d}-${n.id}`, sources: [nodes[d]!.id], targets: [n.id] })),
    ),
  });
  return performance.now() - start;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const sizes = (process.argv[2] ?? '200,1000,5000').split(',').map(Number);
  for (const size of sizes) {
    const nodes = stagedGraph(size, Math.max(4, Math.round(Math.sqrt(size))));
    const edges = nodes.reduce((s, n) => s + n.deps.length, 0);
    const d = timeDagre(nodes);
    const e = await timeElk(nodes);
    console.log(`${size} nodes, ${edges} edges: dagre ${d.toFixed(0)} ms, elkjs ${e.toFixed(0)} ms`);
  }
}
