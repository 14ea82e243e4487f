/**
 * The workflow compiler on its own, without a database: definitions are compiled or built, never started, and the
 * app's database URL points nowhere. Problems are checked as exact lists of `{ field, value, message }`, and a
 * diamond as the exact spec a start stores.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../src/client/App.js';
import { WorkflowDefinitionError } from '../../src/errors.js';
import type { ConfigProblem } from '../../src/errors.js';
import { compile } from '../../src/workflow/compile.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import type { AnyNode, SuccessPolicy } from '../../src/workflow/WorkflowNode.js';
import { thrown } from '../support/assertions.js';

// Nothing listens there: a query would fail at once, and none is made.
const NOWHERE = 'postgres://127.0.0.1:1/nowhere';
const app = createApp({ databaseUrl: NOWHERE, schema: 'compile_only', queues: ['default', 'bulk'] });
afterAll(() => app.close());

const fetchPage = app.task({
  name: 'fetch-page',
  input: z.object({ url: z.string() }),
  handler: ({ url }) => ({ body: url, status: 200 }),
});
const countWords = app.task({
  name: 'count-words',
  input: z.object({ text: z.string(), minLength: z.number().optional() }),
  handler: ({ text }) => text.split(' ').length,
});
const collect = app.task({
  name: 'collect',
  input: z.object({ outcomes: z.array(z.unknown()) }),
  handler: ({ outcomes }) => outcomes.length,
});
const double = app.task({ name: 'double', input: z.object({ n: z.number() }), handler: ({ n }) => n * 2 });
const square = app.task({ name: 'square', input: z.number(), handler: (n) => n * n });
const sum = app.task({
  name: 'sum',
  input: z.object({ values: z.array(z.number()) }),
  handler: ({ values }) => values.reduce((a, b) => a + b, 0),
});

/** The problems compiling `nodes` reports (it must throw). */
function problemsOf(
  name: string,
  nodes: readonly AnyNode[],
  options: { output?: AnyNode; successPolicy?: SuccessPolicy } = {},
): ConfigProblem[] {
  const run = () =>
    compile(app, name, nodes, {
      onError: 'fail',
      output: options.output,
      successPolicy: options.successPolicy,
    });
  return thrown(run, WorkflowDefinitionError).problems;
}

describe('the compiled shape', () => {
  it('stores a diamond as dependency indexes both ways, join rules and the wiring of every input', () => {
    const wf = workflow(app, 'diamond', { params: z.object({ url: z.string() }) });
    const top = wf.node(fetchPage, { input: { url: wf.params.url } });
    const left = wf.node(countWords, { input: { text: top.result.body, minLength: 2 } });
    const right = wf.node(collect, {
      input: { outcomes: [top.outcome] },
      allowFailedDeps: true,
      priority: 5,
      retry: { maxRetries: 2, retryOn: ['FLAKY'] },
    });
    const bottom = wf.node(collect, {
      input: { outcomes: [left.outcome, right.outcome] },
      join: { quorum: 2 },
    });

    const spec = compile(app, 'diamond', [top, left, right, bottom], {
      onError: 'pause',
      output: bottom,
      successPolicy: { cases: [[bottom], [left, right]], optional: [right] },
    });

    const run = { maxRetries: 0, taskOptions: null, goodUntil: null, subworkflow: null };
    expect(spec).toEqual({
      name: 'diamond',
      onError: 'pause',
      outputIndex: 3,
      successPolicy: { cases: [[3], [1, 2]], optional: [2] },
      nodes: [
        {
          index: 0,
          nodeId: 'fetch-page',
          taskName: 'fetch-page',
          queueName: 'default',
          priority: 100,
          ...run,
          dependencies: [],
          dependents: [1, 2],
          join: 'all',
          minSuccess: null,
          allowFailedDeps: false,
          template: {
            static: { url: null },
            refs: [{ to: ['url'], kind: 'param', node: -1, from: ['url'] }],
          },
        },
        {
          index: 1,
          nodeId: 'count-words',
          taskName: 'count-words',
          queueName: 'default',
          priority: 100,
          ...run,
          dependencies: [0],
          dependents: [3],
          join: 'all',
          minSuccess: null,
          allowFailedDeps: false,
          template: {
            static: { text: null, minLength: 2 },
            refs: [{ to: ['text'], kind: 'result', node: 0, from: ['body'] }],
          },
        },
        {
          index: 2,
          nodeId: 'collect',
          taskName: 'collect',
          queueName: 'default',
          priority: 5,
          ...run,
          maxRetries: 2,
          taskOptions: JSON.stringify({
            retry: {
              maxRetries: 2,
              retryOn: ['FLAKY'],
              backoff: 'exponential',
              baseDelayMs: 1000,
              maxDelayMs: 3_600_000,
              jitter: 0,
            },
          }),
          dependencies: [0],
          dependents: [3],
          join: 'all',
          minSuccess: null,
          allowFailedDeps: true,
          template: {
            static: { outcomes: [null] },
            refs: [{ to: ['outcomes', 0], kind: 'outcome', node: 0, from: [] }],
          },
        },
        {
          index: 3,
          nodeId: 'collect#2',
          taskName: 'collect',
          queueName: 'default',
          priority: 100,
          ...run,
          dependencies: [1, 2],
          dependents: [],
          join: 'quorum',
          minSuccess: 2,
          allowFailedDeps: false,
          template: {
            static: { outcomes: [null, null] },
            refs: [
              { to: ['outcomes', 0], kind: 'outcome', node: 1, from: [] },
              { to: ['outcomes', 1], kind: 'outcome', node: 2, from: [] },
            ],
          },
        },
      ],
      // The digest is stored with every run (with the parameters) and makes an explicit start id idempotent: if it
      // changes for an unchanged definition, a restart with an id used before this version throws WORKFLOW_MISMATCH.
      sha: '392c34d87a55b1a24085b865e165f503f44ef16f0f3bf211b98a5e1341d5d6ad',
    });
    // build() compiles the builder's own list of these nodes, and accepts them as well.
    expect(
      wf.build({ output: bottom, successPolicy: { cases: [[bottom], [left, right]], optional: [right] } })
        .name,
    ).toBe('diamond');
  });

  it('digests the whole definition: the same nodes give the same digest, one changed value another', () => {
    const wf = workflow(app, 'digest');
    const a = wf.node(double, { input: { n: 1 } });
    const b = wf.node(double, { input: { n: a.result } });
    const options = { onError: 'fail' as const, output: undefined, successPolicy: undefined };
    const first = compile(app, 'digest', [a, b], options);
    expect(compile(app, 'digest', [a, b], options).sha).toBe(first.sha);
    expect(compile(app, 'digest', [a, b], { ...options, onError: 'pause' }).sha).not.toBe(first.sha);
    expect(compile(app, 'digest', [a, b], { ...options, output: b }).sha).not.toBe(first.sha);
    const wf2 = workflow(app, 'digest');
    const a2 = wf2.node(double, { input: { n: 2 } });
    const b2 = wf2.node(double, { input: { n: a2.result } });
    expect(compile(app, 'digest', [a2, b2], options).sha).not.toBe(first.sha);
  });

  it('records the nodes an input reads from as dependencies, and waitsFor as given, sorted', () => {
    const wf = workflow(app, 'deps');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    const b = wf.node(double, { input: { n: 2 }, id: 'b' });
    const c = wf.node(sum, { input: { values: [b.result, a.result] }, id: 'c' });
    const d = wf.node(double, { input: { n: a.result }, waitsFor: [c, 'b', a], id: 'd' });
    const spec = compile(app, 'deps', [a, b, c, d], {
      onError: 'fail',
      output: undefined,
      successPolicy: undefined,
    });
    expect(spec.nodes.map((n) => [n.nodeId, n.dependencies, n.dependents])).toEqual([
      ['a', [], [2, 3]],
      ['b', [], [2, 3]],
      ['c', [0, 1], [3]],
      ['d', [0, 1, 2], []],
    ]);
  });

  it('names a node without an id after its task, numbered past every id already taken, given ones included', () => {
    const wf = workflow(app, 'names');
    const ids = [
      wf.node(double, { input: { n: 1 } }),
      wf.node(double, { input: { n: 2 }, id: 'double#2' }),
      wf.node(double, { input: { n: 3 } }),
      wf.node(square, { input: 4 }),
      wf.node(double, { input: { n: 5 }, id: 'double#5' }),
      wf.node(double, { input: { n: 6 } }),
      wf.node(double, { input: { n: 7 } }),
      wf.node(square, { input: 8 }),
    ].map((n) => n.id);
    expect(ids).toEqual([
      'double',
      'double#2',
      'double#3',
      'square',
      'double#5',
      'double#4',
      'double#6',
      'square#2',
    ]);
  });
});

describe('cycles', () => {
  it('reports a cycle among nodes by their ids, and nothing else for it', () => {
    const wf = workflow(app, 'cyclic');
    const root = wf.node(double, { input: { n: 1 }, id: 'root' });
    const x = wf.node(double, { input: { n: 1 }, waitsFor: ['y', root], id: 'x' });
    const y = wf.node(double, { input: { n: x.result }, id: 'y' });
    expect(problemsOf('cyclic', [root, x, y])).toEqual([
      { field: 'nodes', value: ['x', 'y'], message: 'form a cycle' },
    ]);
  });

  it('reports a node that waits for itself, which is a cycle of one', () => {
    const wf = workflow(app, 'selfish');
    const x = wf.node(double, { input: { n: 1 }, waitsFor: ['x'], id: 'x' });
    expect(problemsOf('selfish', [x])).toEqual([
      { field: 'nodes.x.waitsFor', value: 'x', message: 'a node cannot wait for itself' },
      { field: 'nodes', value: ['x'], message: 'form a cycle' },
    ]);
  });

  it('reports a cycle through nested definitions: a workflow that runs itself, directly or further down', () => {
    const first = workflow(app, 'nest-self');
    first.node(double, { input: { n: 1 } });
    const self = first.build();
    const again = workflow(app, 'nest-self');
    const direct = again.node(self, { id: 'direct' });
    expect(problemsOf('nest-self', [direct])).toEqual([
      {
        field: 'nodes.direct.workflow',
        value: 'nest-self',
        message: 'leads back to "nest-self": a cycle through nested workflows',
      },
    ]);

    const aBuilder = workflow(app, 'nest-a');
    aBuilder.node(double, { input: { n: 1 } });
    const a = aBuilder.build();
    const bBuilder = workflow(app, 'nest-b');
    bBuilder.node(a, {});
    const b = bBuilder.build();
    const cBuilder = workflow(app, 'nest-c');
    cBuilder.node(b, {});
    const c = cBuilder.build();
    expect([...c.nested].sort()).toEqual(['nest-a', 'nest-b']);
    // Another definition named nest-a, running nest-c, which runs nest-b, which runs nest-a.
    const loop = workflow(app, 'nest-a');
    const deep = loop.node(c, { id: 'deep' });
    expect(problemsOf('nest-a', [deep])).toEqual([
      {
        field: 'nodes.deep.workflow',
        value: 'nest-c',
        message: 'leads back to "nest-a": a cycle through nested workflows',
      },
    ]);
  });
});

describe('no root', () => {
  it('refuses a workflow without nodes, and one whose every node waits for another (a cycle, reported as such)', () => {
    expect(problemsOf('empty', [])).toEqual([
      { field: 'nodes', value: [], message: 'a workflow needs at least one node' },
    ]);
    const wf = workflow(app, 'rootless');
    const x = wf.node(double, { input: { n: 1 }, waitsFor: ['y'], id: 'x' });
    const y = wf.node(double, { input: { n: 1 }, waitsFor: ['x'], id: 'y' });
    expect(problemsOf('rootless', [x, y])).toEqual([
      { field: 'nodes', value: ['x', 'y'], message: 'form a cycle' },
    ]);
  });
});

describe('unknown and duplicate nodes', () => {
  it('refuses a duplicate id, waitsFor entries and reads that are not nodes of this workflow, and a foreign task', () => {
    const other = createApp({ databaseUrl: NOWHERE, schema: 'compile_other' });
    const foreign = other.task({ name: 'foreign', input: z.object({}), handler: () => 1 });
    const elsewhere = workflow(app, 'elsewhere');
    const stranger = elsewhere.node(double, { input: { n: 1 }, id: 'stranger' });

    const wf = workflow(app, 'unknowns');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    const a2 = wf.node(double, { input: { n: 2 }, id: 'a' });
    const b = wf.node(double, { input: { n: 3 }, waitsFor: ['nowhere', stranger, a], id: 'b' });
    const c = wf.node(sum, { input: { values: [stranger.result, 1] }, id: 'c' });
    const g = wf.node(foreign, { input: {}, id: 'g' });
    expect(
      problemsOf('unknowns', [a, a2, b, c, g], {
        output: stranger,
        successPolicy: { cases: [[a], [stranger]], optional: [stranger] },
      }),
    ).toEqual([
      { field: 'nodes.a.id', value: 'a', message: 'is used by two nodes' },
      { field: 'nodes.b.waitsFor', value: 'nowhere', message: 'is not a node of this workflow' },
      { field: 'nodes.b.waitsFor', value: 'stranger', message: 'is not a node of this workflow' },
      {
        field: 'nodes.c.input.values.0',
        value: 'stranger',
        message: 'reads from a node of another workflow',
      },
      { field: 'nodes.g.task', value: 'foreign', message: "is not a task of this workflow's app" },
      { field: 'output', value: 'stranger', message: 'is not a node of this workflow' },
      { field: 'successPolicy.cases.1', value: 'stranger', message: 'is not a node of this workflow' },
      { field: 'successPolicy.optional', value: 'stranger', message: 'is not a node of this workflow' },
    ]);
    void other.close();
  });
});

describe('data sources and dependencies', () => {
  it('refuses an input that reads from a node its waitsFor leaves out', () => {
    const wf = workflow(app, 'sources');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    const b = wf.node(double, { input: { n: 2 }, id: 'b' });
    const c = wf.node(sum, { input: { values: [a.result, b.result] }, waitsFor: [b], id: 'c' });
    const d = wf.node(collect, {
      input: { outcomes: [a.outcome] },
      waitsFor: ['b'],
      allowFailedDeps: true,
      id: 'd',
    });
    expect(problemsOf('sources', [a, b, c, d])).toEqual([
      { field: 'nodes.c.input', value: 'a', message: 'reads from a node that is not in waitsFor' },
      { field: 'nodes.d.input', value: 'a', message: 'reads from a node that is not in waitsFor' },
    ]);
  });

  it('refuses node.result under a join that may run without every dependency completed', () => {
    const wf = workflow(app, 'lenient');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    const b = wf.node(double, { input: { n: 2 }, id: 'b' });
    const any = wf.node(sum, { input: { values: [a.result, 1] }, waitsFor: [a, b], join: 'any', id: 'any' });
    const failed = wf.node(square, { input: b.result, allowFailedDeps: true, id: 'failed' });
    const message =
      'may run without every dependency completed: read upstream values through node.outcome, not node.result';
    expect(problemsOf('lenient', [a, b, any, failed])).toEqual([
      { field: 'nodes.any.input', value: ['values.0'], message },
      { field: 'nodes.failed.input', value: ['(whole input)'], message },
    ]);
  });
});

describe('join rules and quorum bounds', () => {
  it('refuses a quorum that is not an integer from 1 to the number of dependencies', () => {
    const wf = workflow(app, 'quorums');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    const b = wf.node(double, { input: { n: 2 }, id: 'b' });
    const joined = (quorum: number, id: string) =>
      wf.node(collect, { input: { outcomes: [a.outcome, b.outcome] }, join: { quorum }, id });
    const nodes = [a, b, joined(0, 'zero'), joined(3, 'three'), joined(1.5, 'half'), joined(-1, 'negative')];
    const bounds = 'must be an integer from 1 to its 2 dependencies';
    expect(problemsOf('quorums', nodes)).toEqual([
      { field: 'nodes.zero.join.quorum', value: 0, message: bounds },
      { field: 'nodes.three.join.quorum', value: 3, message: bounds },
      { field: 'nodes.half.join.quorum', value: 1.5, message: bounds },
      { field: 'nodes.negative.join.quorum', value: -1, message: bounds },
    ]);
  });

  it('refuses a join on a node without dependencies, and a join rule it does not know', () => {
    const wf = workflow(app, 'joins');
    const q = wf.node(double, { input: { n: 1 }, join: { quorum: 1 }, id: 'q' });
    const any = wf.node(double, { input: { n: 1 }, join: 'any', id: 'any' });
    const most = wf.node(collect, {
      input: { outcomes: [q.outcome] },
      join: 'most' as unknown as 'any',
      id: 'most',
    });
    expect(problemsOf('joins', [q, any, most])).toEqual([
      { field: 'nodes.q.join.quorum', value: 1, message: 'must be an integer from 1 to its 0 dependencies' },
      { field: 'nodes.q.join', value: { quorum: 1 }, message: 'needs dependencies to join' },
      { field: 'nodes.any.join', value: 'any', message: 'needs dependencies to join' },
      { field: 'nodes.most.join', value: 'most', message: "must be 'all', 'any' or { quorum: n }" },
    ]);
  });

  it('stores each join rule with its bound: all, any, quorum 1 and quorum n of n', () => {
    const wf = workflow(app, 'joined');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    const b = wf.node(double, { input: { n: 2 }, id: 'b' });
    const outcomes = { outcomes: [a.outcome, b.outcome] };
    const nodes = [
      a,
      b,
      wf.node(collect, { input: outcomes, id: 'all' }),
      wf.node(collect, { input: outcomes, join: 'any', id: 'any' }),
      wf.node(collect, { input: outcomes, join: { quorum: 1 }, id: 'one' }),
      wf.node(collect, { input: outcomes, join: { quorum: 2 }, allowFailedDeps: true, id: 'two' }),
    ];
    const spec = compile(app, 'joined', nodes, {
      onError: 'fail',
      output: undefined,
      successPolicy: undefined,
    });
    expect(spec.nodes.slice(2).map((n) => [n.nodeId, n.join, n.minSuccess, n.allowFailedDeps])).toEqual([
      ['all', 'all', null, false],
      ['any', 'any', null, false],
      ['one', 'quorum', 1, false],
      ['two', 'quorum', 2, true],
    ]);
  });
});

describe('static input JSON cannot carry', () => {
  const NUL = 'the NUL character (\\u0000) cannot be stored';
  it.each([
    ['a BigInt', 1n, 'a BigInt cannot be stored as JSON; send it as a string'],
    ['NaN', Number.NaN, 'NaN has no JSON form'],
    ['Infinity', Number.POSITIVE_INFINITY, 'Infinity has no JSON form'],
    ['a function', () => 1, 'a function cannot be stored as JSON'],
    ['a symbol', Symbol('s'), 'a symbol cannot be stored as JSON'],
    ['undefined in an array', undefined, 'undefined cannot be stored as JSON'],
    [
      'a Date',
      new Date(0),
      'a Date would not come back as itself from JSON; send an ISO string (and parse it in the schema)',
    ],
    ['a Map', new Map(), 'a Map would not come back as itself from JSON'],
    ['the NUL character', 'a\u0000b', NUL],
  ])('refuses %s, naming its path beside references', (_what, bad, reason) => {
    const wf = workflow(app, 'static');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    // The reference is not static: it is stored as null and wired; the value after it is refused.
    const f = wf.node(sum, { input: { values: [a.result, bad as number] }, id: 'f' });
    expect(problemsOf('static', [a, f])).toEqual([
      {
        field: 'nodes.f.input',
        value: { values: [null, bad] },
        message: `static input cannot be stored as JSON: nodes.f.input.values[1]: ${reason}`,
      },
    ]);
  });
});

describe('static input with a cycle', () => {
  it('is refused as a problem naming where the cycle closes, not a crash', () => {
    const looped: Record<string, unknown> = { n: 1 };
    looped.self = looped;
    const wf = workflow(app, 'looped');
    const a = wf.node(double, { input: looped as unknown as { n: number }, id: 'a' });
    expect(problemsOf('looped', [a])).toEqual([
      { field: 'nodes.a.input.self', value: '[cycle]', message: 'static input contains a cycle' },
    ]);
  });

  it('accepts the same object twice beside itself (shared, not a cycle)', () => {
    const shared = { n: 1 };
    const wf = workflow(app, 'shared');
    const a = wf.node(double, {
      input: { n: 2, pair: [shared, shared] } as unknown as { n: number },
      id: 'a',
    });
    expect(() =>
      compile(app, 'shared', [a], { onError: 'fail', output: undefined, successPolicy: undefined }),
    ).not.toThrow();
  });
});

describe('all problems at once', () => {
  it('build() throws one WorkflowDefinitionError listing every problem, in node order', () => {
    const elsewhere = workflow(app, 'elsewhere-2');
    const stranger = elsewhere.node(double, { input: { n: 1 }, id: 'stranger' });
    const wf = workflow(app, 'broken');
    const a = wf.node(double, { input: { n: 1 }, id: 'a' });
    wf.node(double, { input: { n: 2 }, id: 'a' });
    const b = wf.node(double, { input: { n: a.result }, waitsFor: ['c'], id: 'b' });
    wf.node(double, { input: { n: b.result }, id: 'c' });
    wf.node(double, { input: { n: 1 }, waitsFor: ['nowhere'], id: 'd' });
    wf.node(collect, { input: { outcomes: [a.result] }, join: { quorum: 3 }, id: 'e' });
    wf.node(sum, { input: { values: [1n as unknown as number] }, id: 'f' });
    wf.node(double, {
      input: { n: 1 },
      queue: 'nope',
      priority: 0,
      goodUntil: 'tomorrow' as unknown as Date,
      retry: { maxRetries: 2 },
      id: 'h',
    });
    const error = thrown(
      () => wf.build({ output: stranger, successPolicy: { cases: [] } }),
      WorkflowDefinitionError,
    );
    expect(error.code).toBe('WORKFLOW_INVALID');
    expect(error.problems).toEqual([
      { field: 'nodes.a.id', value: 'a', message: 'is used by two nodes' },
      { field: 'nodes.b.input', value: 'a', message: 'reads from a node that is not in waitsFor' },
      { field: 'nodes.d.waitsFor', value: 'nowhere', message: 'is not a node of this workflow' },
      { field: 'nodes.e.join.quorum', value: 3, message: 'must be an integer from 1 to its 1 dependencies' },
      {
        field: 'nodes.e.input',
        value: ['outcomes.0'],
        message:
          'may run without every dependency completed: read upstream values through node.outcome, not node.result',
      },
      {
        field: 'nodes.f.input',
        value: { values: [1n] },
        message:
          'static input cannot be stored as JSON: nodes.f.input.values[0]: a BigInt cannot be stored as JSON; send it as a string',
      },
      { field: 'nodes.h.queue', value: 'nope', message: "is not one of the app's queues (default, bulk)" },
      { field: 'nodes.h.priority', value: 0, message: 'must be an integer from 1 to 100' },
      { field: 'nodes.h.goodUntil', value: 'tomorrow', message: 'must be a valid Date' },
      {
        field: 'nodes.h.retry.retryOn',
        value: [],
        message: 'must list the error codes that retry when maxRetries > 0',
      },
      { field: 'nodes', value: ['b', 'c'], message: 'form a cycle' },
      { field: 'output', value: 'stranger', message: 'is not a node of this workflow' },
      {
        field: 'successPolicy.cases',
        value: 0,
        message: 'must list at least one case, each of at least one node',
      },
    ]);
    expect(error.message.split('\n')).toHaveLength(1 + 13);
    expect(error.message.split('\n')[0]).toBe('invalid workflow "broken":');
    // A definition that failed is not registered and can still take nodes.
    expect(() => wf.node(double, { input: { n: 1 }, id: 'late' })).not.toThrow();
  });
});
