/**
 * Draws a workflow's graph as text, in the layers of `src/workflow/dag.ts` (a node's depth is the longest path to
 * it from a root, so every node's dependencies sit in layers above it). Each node is one line (id, task, status,
 * what it waits for, join rule; in a layer with subworkflow nodes, the child run each started); a layer of more
 * than `maxPerLayer` nodes is summarised (counts by status and by task, what its nodes wait for, and the first few
 * that failed or run), so a workflow of 10,000 nodes stays readable. A graph of more than `maxLayers` layers (a
 * long chain) draws each run of consecutive layers that share one status as one line.
 */
import type { DagNode } from '../workflow/dag.js';
import { layers } from '../workflow/dag.js';
import { formatTable } from './format.js';

/** What a subworkflow node's line says of its child: the child's id, or that none was started yet. */
export function childLabel(node: DagNode): string {
  if (!node.subworkflow) return '';
  return node.childWorkflowId ?? '(not started)';
}

/** Options of {@link renderDag}. */
export interface RenderOptions {
  /** Layers with more nodes than this are summarised. Default 40. */
  maxPerLayer?: number;
  /** Dependencies named per node before the rest are counted. Default 4. */
  maxDependencies?: number;
  /**
   * With more layers than this (a long chain), runs of consecutive layers whose nodes all have one status are
   * drawn as one line each. Default 40.
   */
  maxLayers?: number;
}

/** The join rule as shown: `all`, `any`, `quorum 2/3`, with `+failed` when failed dependencies are allowed. */
export function joinLabel(node: DagNode): string {
  if (node.dependencies.length === 0) return '';
  const rule = node.join === 'quorum' ? `quorum ${node.minSuccess}/${node.dependencies.length}` : node.join;
  return node.allowFailedDeps ? `${rule} +failed` : rule;
}

/** `COMPLETED`, or `FAILED (CODE)` for a node with an error code. */
function statusLabel(node: DagNode): string {
  return node.errorCode ? `${node.status} (${node.errorCode})` : node.status;
}

/** Counts of a list of labels, most frequent first: `COMPLETED 9,990, RUNNING 10`. */
function counts(labels: readonly string[]): string {
  const tally = new Map<string, number>();
  for (const label of labels) tally.set(label, (tally.get(label) ?? 0) + 1);
  return [...tally]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([label, n]) => `${label} ${n.toLocaleString('en-US')}`)
    .join(', ');
}

function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

/**
 * What a node waits for: the ids, or, when it waits for a whole layer, `all 10,000 of depth 1`, or the first
 * few ids and a count of the rest.
 */
function waitsForLabel(
  node: DagNode,
  ids: ReadonlyMap<number, string>,
  depthOf: ReadonlyMap<number, number>,
  layerSizes: readonly number[],
  max: number,
): string {
  const deps = node.dependencies;
  if (deps.length === 0) return '';
  if (deps.length > max) {
    const depth = depthOf.get(deps[0]!);
    if (
      depth !== undefined &&
      deps.length === layerSizes[depth] &&
      deps.every((d) => depthOf.get(d) === depth)
    ) {
      return `all ${deps.length.toLocaleString('en-US')} of depth ${depth}`;
    }
    const named = deps.slice(0, max).map((d) => ids.get(d) ?? `#${d}`);
    return `${named.join(', ')} and ${(deps.length - max).toLocaleString('en-US')} more`;
  }
  return deps.map((d) => ids.get(d) ?? `#${d}`).join(', ');
}

/** Draws the graph; see the module comment. */
export function renderDag(nodes: readonly DagNode[], options: RenderOptions = {}): string {
  const maxPerLayer = options.maxPerLayer ?? 40;
  const maxDependencies = options.maxDependencies ?? 4;
  if (nodes.length === 0) return '(no nodes)';
  const byIndex = new Map(nodes.map((n) => [n.index, n]));
  const ids = new Map(nodes.map((n) => [n.index, n.id]));
  const grouped = layers(nodes);
  const depthOf = new Map<number, number>();
  grouped.forEach((layer, depth) => layer.forEach((index) => depthOf.set(index, depth)));
  const sizes = grouped.map((layer) => layer.length);
  const maxLayers = options.maxLayers ?? 40;
  // The one status of every node of a layer, or null; only looked at when the graph is too deep to draw whole.
  const uniform = grouped.map((layer) => {
    const first = byIndex.get(layer[0]!)!.status;
    return grouped.length > maxLayers && layer.every((i) => byIndex.get(i)!.status === first) ? first : null;
  });
  const out: string[] = [];
  for (let depth = 0; depth < grouped.length; depth += 1) {
    const status = uniform[depth];
    let end = depth;
    while (status != null && uniform[end + 1] === status) end += 1;
    if (end > depth) {
      const members = grouped.slice(depth, end + 1).flat();
      out.push(
        `depth ${depth}–${end}: ${plural(members.length, 'node')} in ${end - depth + 1} layers, all ${status}`,
      );
      out.push(`  tasks: ${counts(members.map((i) => byIndex.get(i)!.task))}`);
      depth = end;
      continue;
    }
    renderLayer(depth);
  }
  return out.join('\n');

  function renderLayer(depth: number): void {
    const members = grouped[depth]!.map((i) => byIndex.get(i)!);
    out.push(`depth ${depth}: ${plural(members.length, 'node')}: ${counts(members.map((n) => n.status))}`);
    if (members.length <= maxPerLayer) {
      // A layer with subworkflow nodes names their workflow and child run; other layers keep their columns.
      const nested = members.some((n) => n.subworkflow);
      const table = formatTable(
        members.map((n) => ({
          node: n.id,
          task: n.subworkflow ? `workflow ${n.subworkflow}` : n.task,
          status: statusLabel(n),
          'waits for': waitsForLabel(n, ids, depthOf, sizes, maxDependencies),
          join: joinLabel(n),
          ...(nested ? { child: childLabel(n) } : {}),
        })),
      );
      out.push(...table.split('\n').map((line) => `  ${line}`));
      return;
    }
    out.push(`  tasks: ${counts(members.map((n) => n.task))}`);
    const waits = members.map((n) => {
      const label = waitsForLabel(n, ids, depthOf, sizes, maxDependencies);
      return label === '' ? '(nothing)' : label;
    });
    out.push(`  waiting for: ${counts(waits)}`);
    const joins = members.map(joinLabel).filter((j) => j !== '');
    if (joins.length > 0) out.push(`  joins: ${counts(joins)}`);
    for (const status of ['FAILED', 'SKIPPED', 'RUNNING']) {
      const some = members.filter((n) => n.status === status);
      if (some.length === 0) continue;
      const shown = some.slice(0, 5).map((n) => (n.errorCode ? `${n.id} (${n.errorCode})` : n.id));
      const more = some.length > 5 ? ` and ${(some.length - 5).toLocaleString('en-US')} more` : '';
      out.push(`  ${status.toLowerCase()}: ${shown.join(', ')}${more}`);
    }
  }
}
