/**
 * Workflow definitions, generated: random graphs of task nodes whose edges may point forward, backward, at
 * themselves, at ids no node has or at nodes of another workflow; joins of every kind with quorums in and out of
 * bounds; inputs wired from other nodes' results and outcomes beside static values JSON cannot carry; node options
 * (queue, priority, expiry, retry) and ids a caller could pass; outputs and success policies naming any node. A
 * build either compiles or throws one WorkflowDefinitionError listing its problems; a start of what compiled
 * stores the run or throws a typed error and stores nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { WorkflowDefinitionError } from '../../src/errors.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import type { WorkflowDefinition } from '../../src/workflow/WorkflowDefinition.js';
import type { AnyNode, NodeOptions } from '../../src/workflow/WorkflowNode.js';
import { useTestSchema } from '../support/db.js';
import {
  errorOf,
  expectTypedError,
  fuzzParams,
  fuzzTimeout,
  hostileString,
  hostileValue,
  rowCounter,
} from './support.js';

const t = await useTestSchema();
const app = t.app({ queues: ['default', 'bulk'] });
const tasks = ['a', 'b', 'c'].map((name) =>
  app.task({ name: `fuzz.${name}`, input: z.unknown(), handler: () => null }),
);
const counts = await rowCounter(t);
// Nodes of another workflow, for edges and wiring that must be refused.
const foreign = workflow(app, 'fuzz.foreign').node(tasks[0]!, { input: { none: true } });

const maybe = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: 15, arbitrary: valid }, { weight: 1, arbitrary: hostileValue });

/** How one node refers to another: by position (earlier nodes only, as objects), by id, or a stranger. */
type Edge = { index: number } | { id: string } | { foreign: true } | { raw: unknown };
const edge: fc.Arbitrary<Edge> = fc.oneof(
  { weight: 6, arbitrary: fc.nat({ max: 7 }).map((index) => ({ index })) },
  {
    weight: 2,
    arbitrary: fc.oneof(fc.constantFrom('n0', 'n1', 'n2', 'n3', 'x'), hostileString).map((id) => ({ id })),
  },
  { weight: 1, arbitrary: fc.constant({ foreign: true as const }) },
  { weight: 1, arbitrary: hostileValue.map((raw) => ({ raw })) },
);
/** A wired input: static values with references to other nodes' results or outcomes in it. */
type Wire =
  | { static: unknown }
  | { ref: Edge; kind: 'result' | 'outcome'; path: string[] }
  | { object: [string, Wire][] };
const wire: fc.Arbitrary<Wire> = fc.letrec<{ wire: Wire }>((tie) => ({
  wire: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.oneof(fc.jsonValue({ maxDepth: 2 }), hostileValue).map((v) => ({ static: v })),
    fc
      .record({
        ref: edge,
        kind: fc.constantFrom('result' as const, 'outcome' as const),
        path: fc.array(fc.constantFrom('x', 'ok', '0'), { maxLength: 2 }),
      })
      .map((r) => r),
    fc
      .array(fc.tuple(fc.constantFrom('p', 'q', 'r'), tie('wire')), { maxLength: 3 })
      .map((object) => ({ object })),
  ) as fc.Arbitrary<Wire>,
})).wire;

const nodeSpec = fc.record(
  {
    task: fc.oneof(
      { weight: 15, arbitrary: fc.nat({ max: 2 }) },
      { weight: 1, arbitrary: fc.constant('foreign' as const) },
    ),
    id: fc.option(
      fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom('n0', 'n1', 'n2', 'n3') },
        { weight: 1, arbitrary: hostileString },
      ),
      { nil: undefined, freq: 2 },
    ),
    input: wire,
    waitsFor: fc.option(fc.array(edge, { maxLength: 4 }), { nil: undefined, freq: 2 }),
    join: fc.option(
      fc.oneof(
        fc.constantFrom('all', 'any', 'some'),
        fc.integer({ min: -1, max: 5 }).map((quorum) => ({ quorum })),
        fc.constantFrom({ quorum: 1.5 }, { quorum: Number.NaN }, {}, null),
      ),
      { nil: undefined, freq: 2 },
    ),
    allowFailedDeps: maybe(fc.boolean()),
    queue: fc.option(maybe(fc.constantFrom('default', 'bulk', 'other')), { nil: undefined, freq: 2 }),
    priority: fc.option(maybe(fc.integer({ min: -1, max: 101 })), { nil: undefined, freq: 2 }),
    goodUntil: fc.option(maybe(fc.date({ noInvalidDate: false })), { nil: undefined, freq: 2 }),
    retry: fc.option(
      maybe(
        fc.record(
          {
            maxRetries: maybe(fc.integer({ min: -1, max: 30 })),
            retryOn: maybe(fc.array(fc.constantFrom('BOOM', 'bad code', ''))),
          },
          { requiredKeys: [] },
        ),
      ),
      { nil: undefined, freq: 2 },
    ),
  },
  { requiredKeys: ['task', 'input'] },
);
const definition = fc.record({
  name: fc.oneof({ weight: 8, arbitrary: fc.constant('fuzz.wf') }, { weight: 1, arbitrary: hostileString }),
  nodes: fc.array(nodeSpec, { maxLength: 6 }),
  output: fc.option(edge, { nil: undefined }),
  successPolicy: fc.option(
    fc.record({
      cases: fc.array(fc.array(edge, { maxLength: 3 }), { maxLength: 3 }),
      optional: fc.option(fc.array(edge, { maxLength: 2 }), { nil: undefined }),
    }),
    { nil: undefined },
  ),
  startId: fc.option(fc.oneof(fc.uuid(), hostileString), { nil: undefined }),
});
type Definition = typeof definition extends fc.Arbitrary<infer D> ? D : never;

// Definitions that mostly compile, so that starts are tried often: edges point only backward, joins fit, and
// one hostile value at most (a node id, an expiry, a static input, a start id).
const tameNode = fc.record({
  task: fc.nat({ max: 2 }),
  id: fc.option(fc.oneof(fc.constantFrom('n0', 'n1', 'n2'), hostileString), { nil: undefined, freq: 4 }),
  input: fc.oneof(
    fc.jsonValue({ maxDepth: 2 }).map((v) => ({ static: v }) as Wire),
    fc.nat({ max: 5 }).map((index) => ({ ref: { index }, kind: 'outcome' as const, path: [] }) as Wire),
    hostileValue.map((v) => ({ static: v }) as Wire),
  ),
  goodUntil: fc.option(fc.date({ noInvalidDate: false }), { nil: undefined, freq: 4 }),
});
const tame: fc.Arbitrary<Definition> = fc
  .record({
    name: fc.oneof(
      { weight: 8, arbitrary: fc.constant('fuzz.tame') },
      { weight: 1, arbitrary: hostileString },
    ),
    nodes: fc.array(tameNode, { minLength: 1, maxLength: 5 }),
    startId: fc.option(fc.oneof(fc.uuid(), hostileString), { nil: undefined }),
  })
  .map((d) => ({
    name: d.name,
    // A node reads only from earlier nodes; a forward reference is dropped to a static value.
    nodes: d.nodes.map((n, i) => ({
      ...n,
      id: n.id === undefined ? undefined : `${n.id}${i}`,
      input: 'ref' in n.input && (n.input.ref as { index: number }).index >= i ? { static: null } : n.input,
    })),
    output: undefined,
    successPolicy: undefined,
    startId: d.startId,
  }));

/** Builds the generated definition through the public builder: the node objects edges resolve to as it goes. */
function build(d: Definition): WorkflowDefinition<unknown, unknown> {
  const wf = workflow(app, d.name);
  const built: AnyNode[] = [];
  const resolve = (e: Edge): unknown => {
    if ('index' in e) return built[e.index] ?? `n${e.index}`;
    if ('id' in e) return e.id;
    if ('foreign' in e) return foreign;
    return e.raw;
  };
  const wired = (w: Wire): unknown => {
    if ('static' in w) return w.static;
    if ('object' in w) return Object.fromEntries(w.object.map(([k, v]) => [k, wired(v)]));
    const target = resolve(w.ref);
    if (typeof target !== 'object' || target === null || !('result' in target)) return target;
    let ref = (target as AnyNode)[w.kind] as unknown;
    for (const step of w.path) ref = (ref as Record<string, unknown>)[step];
    return ref;
  };
  for (const n of d.nodes) {
    const options: Record<string, unknown> = { input: wired(n.input) };
    for (const key of ['id', 'join', 'allowFailedDeps', 'queue', 'priority', 'goodUntil', 'retry'] as const) {
      if (n[key] !== undefined) options[key] = n[key];
    }
    if (n.waitsFor !== undefined) options.waitsFor = n.waitsFor.map(resolve);
    const task = n.task === 'foreign' ? { ...tasks[0]!, name: 'fuzz.a' } : tasks[n.task]!;
    built.push(wf.node(task as (typeof tasks)[0], options as unknown as NodeOptions<unknown>));
  }
  const options: Record<string, unknown> = {};
  if (d.output !== undefined) options.output = resolve(d.output);
  if (d.successPolicy !== undefined) {
    options.successPolicy = {
      cases: d.successPolicy.cases.map((c) => c.map(resolve)),
      ...(d.successPolicy.optional ? { optional: d.successPolicy.optional.map(resolve) } : {}),
    };
  }
  return wf.build(options as never) as WorkflowDefinition<unknown, unknown>;
}

describe('workflow definitions, generated', () => {
  it(
    'a build compiles or throws one WorkflowDefinitionError; a start stores the run or stores nothing',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.oneof(definition, tame), async (d) => {
          let def: WorkflowDefinition<unknown, unknown>;
          try {
            def = build(d);
          } catch (error) {
            expectTypedError(error);
            expect(error).toBeInstanceOf(WorkflowDefinitionError);
            return;
          }
          const before = await counts();
          const start = def.start as (params?: unknown, options?: { id?: string }) => Promise<{ id: string }>;
          const refused = await errorOf(() =>
            start.call(def, undefined, d.startId === undefined ? {} : { id: d.startId }),
          );
          if (refused !== null) {
            expectTypedError(refused);
            expect(await counts()).toEqual(before);
          }
        }),
        fuzzParams<[Definition]>(
          (
            [
              // Each found a bug: a success policy naming undefined (a TypeError), a root input of null (stored
              // as SQL NULL), a node id or a name PostgreSQL refuses, an expiry before 4713 BC.
              { nodes: [], successPolicy: { cases: [[{ raw: undefined }]] } },
              { nodes: [{ task: 0, input: { static: null } }] },
              { nodes: [{ task: 0, input: { static: 1 }, id: 'x'.repeat(256) }] },
              { nodes: [{ task: 0, input: { static: 1 }, id: 'a\u0000' }] },
              { nodes: [{ task: 0, input: { static: 1 }, goodUntil: new Date(-8.64e15) }] },
              { name: 'y'.repeat(256), nodes: [{ task: 0, input: { static: 1 } }] },
              { nodes: [{ task: 0, input: { static: 1 } }], startId: '\ud800' },
            ] as Partial<Definition>[]
          ).map((d) => [
            {
              name: 'fuzz.example',
              output: undefined,
              successPolicy: undefined,
              startId: undefined,
              ...d,
            } as Definition,
          ]),
        ),
      );
    },
    fuzzTimeout(1, 30),
  );
});
