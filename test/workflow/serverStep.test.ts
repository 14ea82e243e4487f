/**
 * The server-side step (routines/horsies_workflow_step.sql) resolves a READY node's input from its upstream
 * results in SQL: it must give exactly what `resolveRefs` of wiring.ts gives, for any static part, any upstream
 * outcome and any paths into them. Rows are shaped by hand: an upstream node whose task ended, and a consumer
 * with a generated input template; one step of the upstream node enqueues the consumer.
 */
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stepOnServer } from '../../src/workflow/step.js';
import { resolveRefs } from '../../src/workflow/wiring.js';
import type { InputTemplate, PathStep, StoredRef, UpstreamState } from '../../src/workflow/wiring.js';
import type { JsonValue } from '../../src/types.js';
import { useTestSchema } from '../support/db.js';
import { insertTask } from '../support/factories.js';

const t = await useTestSchema();
const app = t.app();

const key = fc.constantFrom('a', 'b', '0', '2', 'ok', 'err', 'value');
const json: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.integer({ min: -5, max: 5 }),
    fc.constantFrom('', 'x', 'ok'),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(key, tie('value'), { maxKeys: 3 }),
  ),
})).value;
const path: fc.Arbitrary<PathStep[]> = fc.array(fc.oneof(key, fc.integer({ min: 0, max: 3 })), {
  maxLength: 3,
});

// Compiled templates never place one reference inside another's value: no `to` is a prefix of another.
const isPrefix = (a: PathStep[], b: PathStep[]): boolean =>
  a.length <= b.length && a.every((step, i) => String(step) === String(b[i]));
const refs = fc
  .array(
    fc.record({
      to: path,
      kind: fc.constantFrom<StoredRef['kind']>('result', 'outcome'),
      node: fc.constantFrom(0, 0, 0, 7),
      from: path,
    }),
    { maxLength: 4 },
  )
  .map((list) =>
    list.filter((r, i) => list.every((o, j) => j === i || (!isPrefix(r.to, o.to) && !isPrefix(o.to, r.to)))),
  );

// The upstream task's stored result: an ok value, an error, or a row without either.
const upstream = fc.oneof(
  fc.record({ status: fc.constant('COMPLETED' as const), result: json.map((ok) => ({ ok })) }),
  fc.record({ status: fc.constant('COMPLETED' as const), result: fc.constant({}) }),
  fc.record({
    status: fc.constant('FAILED' as const),
    result: json.map((data) => ({ err: { code: 'BOOM', message: 'm', data } })),
  }),
);

async function shape(template: InputTemplate, up: { status: 'COMPLETED' | 'FAILED'; result: unknown }) {
  const id = randomUUID();
  const taskId = await insertTask(t, { taskName: 'upstream', status: up.status });
  await t.query('UPDATE {{schema}}.horsies_tasks SET result = $2::jsonb WHERE id = $1', [
    taskId,
    JSON.stringify(up.result),
  ]);
  await t.query(
    `INSERT INTO {{schema}}.horsies_workflows (id, name, status, definition_sha, nodes_total, root_workflow_id)
     VALUES ($1, 'wiring', 'RUNNING', 'x', 2, $1)`,
    [id],
  );
  await t.query(
    `INSERT INTO {{schema}}.horsies_workflow_tasks
       (workflow_id, node_index, node_id, task_name, queue_name, priority, dependencies, dependents, input_template,
        status, task_id, allow_failed_deps)
     VALUES ($1, 0, 'up', 'upstream', 'default', 100, '{}', '{1}', '{"static":null,"refs":[]}', 'ENQUEUED', $2, false),
            ($1, 1, 'down', 'downstream', 'default', 100, '{0}', '{}', $3::jsonb, 'PENDING', NULL, true)`,
    [id, taskId, JSON.stringify(template)],
  );
  return id;
}

describe('the server-side step', () => {
  it('resolves a READY node’s input exactly as resolveRefs does', async () => {
    await fc.assert(
      fc.asyncProperty(json, refs, upstream, async (value, list, up) => {
        const template: InputTemplate = { static: value, refs: list };
        const id = await shape(template, up);
        const [row] = await stepOnServer(app.db, new Map([[id, [0]]]), true);
        expect(row).toMatchObject({
          workflow_id: id,
          status: 'RUNNING',
          settled: 1,
          enqueued: 1,
          fallback: false,
        });
        const [node] = await t.query<{ status: string; result: unknown }>(
          `SELECT status, result FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1 AND node_index = 0`,
          [id],
        );
        const [task] = await t.query<{ id: string; kwargs: unknown }>(
          `SELECT t.id, t.kwargs FROM {{schema}}.horsies_workflow_tasks n
           JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
           WHERE n.workflow_id = $1 AND n.node_index = 1 AND n.status = 'ENQUEUED'`,
          [id],
        );
        const states = new Map<number, UpstreamState>([[0, node!]]);
        const expected = resolveRefs(structuredClone(template), ['result', 'outcome'], null, states).static;
        expect(task!.kwargs).toEqual(JSON.parse(JSON.stringify(expected)));
        expect(task!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      }),
      { numRuns: 100 },
    );
  });
});
