/** The layers of a workflow's graph: a node's depth is the longest path to it from a root. */
import { describe, expect, it } from 'vitest';
import { layers } from '../../src/workflow/dag.js';

/** A node as the layering sees it: its index and the indexes it waits for. */
function node(index: number, dependencies: number[] = []): { index: number; dependencies: number[] } {
  return { index, dependencies };
}

describe('layers', () => {
  it('puts a node one below its deepest dependency, not its shallowest', () => {
    // 0 → 1 → 2, and 0 → 2 directly: node 2 is at depth 2.
    expect(layers([node(0), node(1, [0]), node(2, [0, 1])])).toEqual([[0], [1], [2]]);
  });

  it('handles dependencies on nodes with a higher index', () => {
    expect(layers([node(0, [1]), node(1)])).toEqual([[1], [0]]);
  });

  it('layers a chain of 10,000 nodes without deep recursion', () => {
    const chain = Array.from({ length: 10_000 }, (_, i) => node(i, i === 0 ? [] : [i - 1]));
    const result = layers(chain);
    expect(result).toHaveLength(10_000);
    expect(result[9_999]).toEqual([9_999]);
  });

  it('keeps nodes on a cycle or with a missing dependency in a last layer', () => {
    expect(layers([node(0), node(1, [2]), node(2, [1]), node(3, [7])])).toEqual([[0], [1, 2, 3]]);
  });
});
