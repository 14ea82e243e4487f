/** The text drawing of a workflow's graph: node lines, summaries of huge layers, runs of uniform layers. */
import { describe, expect, it } from 'vitest';
import { joinLabel, renderDag } from '../../src/cli/dag.js';
import type { DagNode } from '../../src/workflow/dag.js';

function node(index: number, id: string, dependencies: number[] = [], extra: Partial<DagNode> = {}): DagNode {
  return {
    index,
    id,
    task: 'noop',
    status: 'COMPLETED',
    dependencies,
    join: 'all',
    minSuccess: null,
    allowFailedDeps: false,
    errorCode: null,
    taskId: null,
    ...extra,
  };
}

describe('joinLabel', () => {
  it('names the rule, the quorum and allowFailedDeps; nothing for a root', () => {
    expect(joinLabel(node(0, 'root'))).toBe('');
    expect(joinLabel(node(3, 'j', [0, 1, 2], { join: 'quorum', minSuccess: 2 }))).toBe('quorum 2/3');
    expect(joinLabel(node(3, 'j', [0, 1], { join: 'any' }))).toBe('any');
    expect(joinLabel(node(3, 'j', [0, 1], { allowFailedDeps: true }))).toBe('all +failed');
  });
});

describe('renderDag', () => {
  it('draws a small graph one node per line with status, dependencies and join', () => {
    const text = renderDag([
      node(0, 'fetch', [], { task: 'wf.fetch' }),
      node(1, 'count', [0], { task: 'wf.count', status: 'RUNNING' }),
      node(2, 'broken', [0], { task: 'wf.fail', status: 'FAILED', errorCode: 'BOOM' }),
      node(3, 'sum', [1, 2], { task: 'wf.sum', status: 'SKIPPED', errorCode: 'UPSTREAM_SKIPPED' }),
    ]);
    const lines = text.split('\n');
    expect(lines[0]).toBe('depth 0: 1 node: COMPLETED 1');
    expect(lines[1]).toMatch(/^ {2}node\s+task\s+status\s+waits for\s+join$/);
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}fetch\s+wf\.fetch\s+COMPLETED$/));
    expect(text).toContain('depth 1: 2 nodes: FAILED 1, RUNNING 1');
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}count\s+wf\.count\s+RUNNING\s+fetch\s+all$/));
    expect(lines).toContainEqual(
      expect.stringMatching(/^ {2}broken\s+wf\.fail\s+FAILED \(BOOM\)\s+fetch\s+all$/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^ {2}sum\s+wf\.sum\s+SKIPPED \(UPSTREAM_SKIPPED\)\s+count, broken\s+all$/),
    );
  });

  it('summarises a huge layer and names a whole layer as a dependency', () => {
    const nodes = [node(0, 'root')];
    for (let i = 1; i <= 10_000; i += 1) {
      const status = i <= 3 ? 'FAILED' : i <= 13 ? 'RUNNING' : i <= 100 ? 'ENQUEUED' : 'COMPLETED';
      nodes.push(node(i, `n${i}`, [0], { status, errorCode: status === 'FAILED' ? 'BOOM' : null }));
    }
    nodes.push(
      node(
        10_001,
        'join',
        Array.from({ length: 10_000 }, (_, i) => i + 1),
        { status: 'PENDING' },
      ),
    );
    const text = renderDag(nodes);
    const lines = text.split('\n');
    expect(lines.length).toBeLessThan(20);
    expect(text).toContain('depth 1: 10,000 nodes: COMPLETED 9,900, ENQUEUED 87, RUNNING 10, FAILED 3');
    expect(text).toContain('  tasks: noop 10,000');
    expect(text).toContain('  waiting for: root 10,000');
    expect(text).toContain('  failed: n1 (BOOM), n2 (BOOM), n3 (BOOM)');
    expect(text).toContain('  running: n4, n5, n6, n7, n8 and 5 more');
    expect(lines).toContainEqual(
      expect.stringMatching(/^ {2}join\s+noop\s+PENDING\s+all 10,000 of depth 1\s+all$/),
    );
  });

  it('names the first dependencies and counts the rest when they are not one whole layer', () => {
    const nodes = Array.from({ length: 8 }, (_, i) => node(i, `r${i}`));
    nodes.push(node(8, 'extra', [0]));
    nodes.push(node(9, 'join', [1, 2, 3, 4, 5, 6, 8], { join: 'any' }));
    expect(renderDag(nodes)).toMatch(/join\s+noop\s+COMPLETED\s+r1, r2, r3, r4 and 3 more\s+any/);
  });

  it('draws a long chain as runs of layers that share a status, around the nodes that differ', () => {
    const chain = Array.from({ length: 500 }, (_, i) =>
      node(i, `c${i}`, i === 0 ? [] : [i - 1], {
        status: i < 300 ? 'COMPLETED' : i === 300 ? 'RUNNING' : 'PENDING',
      }),
    );
    const lines = renderDag(chain).split('\n');
    expect(lines[0]).toBe('depth 0–299: 300 nodes in 300 layers, all COMPLETED');
    expect(lines[1]).toBe('  tasks: noop 300');
    expect(lines[2]).toBe('depth 300: 1 node: RUNNING 1');
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}c300\s+noop\s+RUNNING\s+c299\s+all$/));
    expect(lines.at(-2)).toBe('depth 301–499: 199 nodes in 199 layers, all PENDING');
    expect(lines).toHaveLength(8);
    // A graph within maxLayers is drawn whole.
    expect(renderDag(chain.slice(0, 30)).split('\n')).toHaveLength(30 * 4);
  });

  it('says so for a graph without nodes', () => {
    expect(renderDag([])).toBe('(no nodes)');
  });
});
