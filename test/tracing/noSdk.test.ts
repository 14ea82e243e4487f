/**
 * `@opentelemetry/api` installed with no SDK registered (this file registers none): sends and runs go on as
 * untraced ones, nothing is stored, and a task whose row holds a sender's context still runs.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();

describe('tracing with no SDK registered', () => {
  it('runs tasks and the sends of their handlers, storing no context', async () => {
    const app = t.app({ queues: ['nosdk'] });
    const child = app.task({
      name: 'nosdk.child',
      queue: 'nosdk',
      input: z.object({}),
      handler: () => 'child',
    });
    const childIds: string[] = [];
    const parent = app.task({
      name: 'nosdk.parent',
      queue: 'nosdk',
      input: z.object({}),
      handler: async () => {
        childIds.push((await child.send({})).id);
        return 'parent';
      },
    });
    const worker = createWorker(app, { queues: ['nosdk'] });
    await worker.start();
    const plain = await parent.send({});
    // A row that carries a sender's context, as one sent by a traced process would.
    const carried = await parent.send({});
    await t.query(
      `UPDATE {{schema}}.horsies_tasks
       SET trace_context = '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'
       WHERE id = $1`,
      [carried.id],
    );
    expect(await plain.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'parent' });
    expect(await carried.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'parent' });
    expect(childIds).toHaveLength(2);
    await worker.stop();
    const stored = await t.query<{ id: string; trace_context: unknown }>(
      'SELECT id, trace_context FROM {{schema}}.horsies_tasks WHERE id = ANY ($1)',
      [[plain.id, ...childIds]],
    );
    expect(stored).toHaveLength(3);
    expect(stored.map((r) => r.trace_context)).toEqual([null, null, null]);
  });
});
