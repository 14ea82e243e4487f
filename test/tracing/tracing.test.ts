/**
 * Traces across the queue, in one process with the SDK's in-memory exporter: the send span, the stored trace
 * context, the run's span continuing it, the handler's own spans and sends below it, retries, bulk sends,
 * tracing turned off, and a stored context that cannot be read.
 */
import { trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { useTestSchema } from '../support/db.js';
import { finished, registerInMemoryTracing } from './spans.js';
import type { SpanRecord } from './spans.js';

const exporter = registerInMemoryTracing();
const t = await useTestSchema();
const tracer = trace.getTracer('test');

const PRODUCER = 3;
const CONSUMER = 4;
const ERROR = 2;

const storedContext = async (id: string): Promise<{ traceparent: string } | null> =>
  (
    await t.query<{ trace_context: { traceparent: string } | null }>(
      'SELECT trace_context FROM {{schema}}.horsies_tasks WHERE id = $1',
      [id],
    )
  )[0]!.trace_context;

function only(spans: SpanRecord[], match: (s: SpanRecord) => boolean, what: string): SpanRecord {
  const found = spans.filter(match);
  if (found.length !== 1)
    throw new Error(`expected one ${what}, found ${found.length}: ${JSON.stringify(spans)}`);
  return found[0]!;
}

const message = (id: string) => (s: SpanRecord) => s.attributes['messaging.message.id'] === id;

describe('a traced send and its run', () => {
  it('continues the sender’s trace: send under the active span, run under the send, the handler’s work under the run', async () => {
    exporter.reset();
    const app = t.app({ queues: ['traced'] });
    let secondId = '';
    const second = app.task({
      name: 'tr.second',
      queue: 'traced',
      input: z.object({}),
      handler: () => 'end',
    });
    const first = app.task({
      name: 'tr.first',
      queue: 'traced',
      input: z.object({}),
      handler: async () =>
        tracer.startActiveSpan('inner work', async (span) => {
          secondId = (await second.send({})).id;
          span.end();
          return 'ok';
        }),
    });
    const worker = createWorker(app, { queues: ['traced'] });
    await worker.start();
    const handle = await tracer.startActiveSpan('request', async (span) => {
      const sent = await first.send({});
      span.end();
      return sent;
    });
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'ok' });
    expect(await second.handle(secondId).result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'end' });
    await worker.stop();

    const spans = finished(exporter);
    const request = only(spans, (s) => s.name === 'request', 'request span');
    const sendFirst = only(
      spans,
      (s) => s.kind === PRODUCER && message(handle.id)(s),
      'send of the first task',
    );
    const runFirst = only(
      spans,
      (s) => s.kind === CONSUMER && message(handle.id)(s),
      'run of the first task',
    );
    const inner = only(spans, (s) => s.name === 'inner work', 'handler span');
    const sendSecond = only(
      spans,
      (s) => s.kind === PRODUCER && message(secondId)(s),
      'send of the second task',
    );
    const runSecond = only(
      spans,
      (s) => s.kind === CONSUMER && message(secondId)(s),
      'run of the second task',
    );

    expect(sendFirst).toMatchObject({ name: 'send traced', parentSpanId: request.spanId });
    expect(sendFirst.attributes).toMatchObject({
      'messaging.system': 'horsies',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'traced',
      'horsies.task.name': 'tr.first',
    });
    expect(runFirst).toMatchObject({ name: 'process traced', parentSpanId: sendFirst.spanId });
    expect(runFirst.attributes).toMatchObject({
      'messaging.operation.type': 'process',
      'horsies.task.attempt': 1,
      'horsies.task.outcome': 'COMPLETED',
    });
    expect(inner.parentSpanId).toBe(runFirst.spanId);
    expect(sendSecond.parentSpanId).toBe(inner.spanId);
    expect(runSecond.parentSpanId).toBe(sendSecond.spanId);
    for (const span of [sendFirst, runFirst, inner, sendSecond, runSecond])
      expect(span.traceId).toBe(request.traceId);
    // What the row carries is the send span's context, as a W3C traceparent (sampled).
    expect(await storedContext(handle.id)).toEqual({
      traceparent: `00-${request.traceId}-${sendFirst.spanId}-01`,
    });
  });

  it('puts every attempt of a retried task under its one send span; a failed attempt is an error with its code', async () => {
    exporter.reset();
    const app = t.app({ queues: ['retried'] });
    const flaky = app.task({
      name: 'tr.flaky',
      queue: 'retried',
      input: z.object({}),
      retry: { maxRetries: 2, retryOn: ['FLAKY'], backoff: 'constant', baseDelayMs: 0 },
      handler: (_input, ctx) =>
        ctx.attempt < 3 ? new TaskError('FLAKY', `attempt ${ctx.attempt}`) : 'third',
    });
    const worker = createWorker(app, { queues: ['retried'] });
    await worker.start();
    const handle = await flaky.send({});
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'third' });
    await worker.stop();
    const spans = finished(exporter);
    const send = only(spans, (s) => s.kind === PRODUCER && message(handle.id)(s), 'send');
    expect(send.parentSpanId).toBeNull();
    const runs = spans
      .filter((s) => s.kind === CONSUMER && message(handle.id)(s))
      .sort(
        (a, b) => Number(a.attributes['horsies.task.attempt']) - Number(b.attributes['horsies.task.attempt']),
      );
    expect(
      runs.map((r) => [r.parentSpanId, r.traceId, r.attributes['horsies.task.attempt'], r.status]),
    ).toEqual([
      [send.spanId, send.traceId, 1, ERROR],
      [send.spanId, send.traceId, 2, ERROR],
      [send.spanId, send.traceId, 3, 0],
    ]);
    expect(runs[0]!.attributes).toMatchObject({ 'error.type': 'FLAKY', 'horsies.task.outcome': 'RETRY' });
  });

  it('gives every task of a bulk send (COPY) the context of its one send span', async () => {
    exporter.reset();
    const app = t.app({ queues: ['bulk'] });
    const task = app.task({
      name: 'tr.bulk',
      queue: 'bulk',
      input: z.object({ n: z.number() }),
      handler: () => null,
    });
    const handles = await task.sendMany(Array.from({ length: 200 }, (_, n) => ({ input: { n } })));
    const send = only(finished(exporter), (s) => s.kind === PRODUCER, 'send');
    expect(send.attributes['messaging.batch.message_count']).toBe(200);
    const rows = await t.query<{ trace_context: { traceparent: string } }>(
      'SELECT DISTINCT trace_context FROM {{schema}}.horsies_tasks WHERE id = ANY($1::text[])',
      [handles.map((h) => h.id)],
    );
    expect(rows.map((r) => r.trace_context)).toEqual([
      { traceparent: `00-${send.traceId}-${send.spanId}-01` },
    ]);
  });

  it('records a send that fails as an error span, and stores nothing', async () => {
    exporter.reset();
    const app = t.app({ queues: ['refused'] });
    const task = app.task({ name: 'tr.refused', queue: 'refused', input: z.object({}), handler: () => null });
    await task.send({}, { id: 'tr-fixed-id' });
    await expect(task.send({}, { id: 'tr-fixed-id', priority: 5 })).resolves.toBeDefined();
    // Same id, other input: a mismatch.
    const other = app.task({
      name: 'tr.other',
      queue: 'refused',
      input: z.object({ x: z.number() }),
      handler: () => null,
    });
    await expect(other.send({ x: 1 }, { id: 'tr-fixed-id' })).rejects.toThrow();
    const failed = finished(exporter).filter((s) => s.status === ERROR);
    expect(failed).toHaveLength(1);
    expect(failed[0]!.attributes).toMatchObject({
      'horsies.task.name': 'tr.other',
      'error.type': 'PAYLOAD_MISMATCH',
    });
  });
});

describe('a traced workflow', () => {
  it('puts every node’s run under the span of the workflow’s start, in the starter’s trace', async () => {
    exporter.reset();
    const app = t.app({ queues: ['flow'] });
    const double = app.task({
      name: 'tr.wf.double',
      queue: 'flow',
      input: z.object({ n: z.number() }),
      handler: ({ n }) => n * 2,
    });
    const wf = workflow(app, 'tr-chain');
    const first = wf.node(double, { input: { n: 5 } });
    const second = wf.node(double, { input: { n: first.result } });
    const definition = wf.build({ output: second });
    const worker = createWorker(app, { queues: ['flow'] });
    await worker.start();
    const handle = await tracer.startActiveSpan('request', async (span) => {
      const started = await definition.start();
      span.end();
      return started;
    });
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 20 });
    await worker.stop();
    const spans = finished(exporter);
    const request = only(spans, (s) => s.name === 'request', 'request');
    const start = only(spans, (s) => s.name === 'start workflow tr-chain', 'workflow start');
    expect(start).toMatchObject({ kind: PRODUCER, parentSpanId: request.spanId, traceId: request.traceId });
    expect(start.attributes['horsies.workflow.id']).toBe(handle.id);
    const runs = spans.filter((s) => s.kind === CONSUMER);
    expect(runs.map((r) => [r.attributes['horsies.workflow.node'], r.parentSpanId, r.traceId])).toEqual([
      [0, start.spanId, request.traceId],
      [1, start.spanId, request.traceId],
    ]);
    expect(runs.every((r) => r.attributes['horsies.workflow.id'] === handle.id)).toBe(true);
  });
});

describe('without a trace to follow', () => {
  it('stores no context and makes no span with tracing: false', async () => {
    exporter.reset();
    const app = t.app({ queues: ['untraced'], tracing: false });
    const task = app.task({ name: 'tr.off', queue: 'untraced', input: z.object({}), handler: () => 'done' });
    const worker = createWorker(app, { queues: ['untraced'] });
    await worker.start();
    const handle = await tracer.startActiveSpan('request', async (span) => {
      const sent = await task.send({});
      span.end();
      return sent;
    });
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'done' });
    await worker.stop();
    expect(await storedContext(handle.id)).toBeNull();
    expect(finished(exporter).map((s) => s.name)).toEqual(['request']);
  });

  it('runs a task whose stored context cannot be read, in a trace of its own', async () => {
    exporter.reset();
    const app = t.app({ queues: ['garbled'] });
    const task = app.task({
      name: 'tr.garbled',
      queue: 'garbled',
      input: z.object({}),
      handler: () => 'ran',
    });
    const handle = await task.send({});
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET trace_context = '{"traceparent": "00-zz-yy-01"}' WHERE id = $1`,
      [handle.id],
    );
    const worker = createWorker(app, { queues: ['garbled'] });
    await worker.start();
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'ran' });
    await worker.stop();
    const run = only(finished(exporter), (s) => s.kind === CONSUMER, 'run');
    expect(run.parentSpanId).toBeNull();
  });
});
