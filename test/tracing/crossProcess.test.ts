/**
 * A trace that starts in one process and continues in another: this test process sends (its SDK exporting to
 * memory), a `horsies worker` process runs the tasks (its SDK exporting to memory and to a file the test reads).
 * The worker's spans must have the sender's send spans as parents, in the sender's trace.
 */
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { importFixture } from '../support/fixtures.js';
import { startWorkerProcess } from '../support/processes.js';
import { finished, registerInMemoryTracing } from './spans.js';
import type { SpanRecord } from './spans.js';

const exporter = registerInMemoryTracing();
const t = await useTestSchema();

describe('a trace across processes', () => {
  it('continues in the worker process under the sender’s send spans, retries included', async () => {
    const spansFile = join(mkdtempSync(join(tmpdir(), 'horsies-spans-')), 'worker.jsonl');
    process.env.HORSIES_TEST_SPANS = spansFile;
    const worker = startWorkerProcess({
      databaseUrl: databaseUrl(),
      schema: t.schema,
      module: 'test/fixtures/tracedApp.ts',
    });
    // Only the worker process exports to the file; this process keeps its own in-memory exporter.
    delete process.env.HORSIES_TEST_SPANS;
    await worker.ready;
    const { traced, flaky } = await importFixture(
      { schema: t.schema },
      () => import('../fixtures/tracedApp.js'),
    );
    try {
      const [double, retried] = await trace.getTracer('test').startActiveSpan('request', async (span) => {
        const handles = await Promise.all([traced.send({ n: 21 }), flaky.send({})]);
        span.end();
        return handles;
      });
      expect(await double.result({ timeoutMs: 15_000 })).toEqual({ ok: true, value: 42 });
      expect(await retried.result({ timeoutMs: 15_000 })).toEqual({ ok: true, value: 'second' });

      const mine = finished(exporter);
      const request = mine.find((s) => s.name === 'request')!;
      const sendOf = (id: string) =>
        mine.find((s) => s.kind === 3 && s.attributes['messaging.message.id'] === id)!;
      const workerSpans = await eventually(async () => {
        if (!existsSync(spansFile)) return undefined;
        const spans = readFileSync(spansFile, 'utf8')
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as SpanRecord);
        // Both runs of the flaky task and the run of the other, with its handler's span.
        return spans.filter((s) => s.kind === 4).length >= 3 && spans.some((s) => s.name === 'handler work')
          ? spans
          : undefined;
      });
      const runsOf = (id: string) =>
        workerSpans.filter((s) => s.kind === 4 && s.attributes['messaging.message.id'] === id);

      const [doubleRun] = runsOf(double.id);
      expect(doubleRun).toMatchObject({
        name: 'process default',
        traceId: request.traceId,
        parentSpanId: sendOf(double.id).spanId,
      });
      expect(sendOf(double.id).parentSpanId).toBe(request.spanId);
      const handlerSpan = workerSpans.find((s) => s.name === 'handler work')!;
      expect(handlerSpan).toMatchObject({ traceId: request.traceId, parentSpanId: doubleRun!.spanId });

      const flakyRuns = runsOf(retried.id).sort(
        (a, b) => Number(a.attributes['horsies.task.attempt']) - Number(b.attributes['horsies.task.attempt']),
      );
      expect(flakyRuns.map((r) => [r.traceId, r.parentSpanId, r.attributes['horsies.task.attempt']])).toEqual(
        [
          [request.traceId, sendOf(retried.id).spanId, 1],
          [request.traceId, sendOf(retried.id).spanId, 2],
        ],
      );
      // The sender's process recorded no run: the runs are the worker process's.
      expect(mine.filter((s) => s.kind === 4)).toEqual([]);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
  });
});
