/** OpenTelemetry set up for the tracing tests: an SDK with an in-memory exporter, and spans as plain records. */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';

/** A finished span, as the tests compare them (also across processes, as JSON). */
export interface SpanRecord {
  name: string;
  /** SpanKind: 0 internal, 1 server, 2 client, 3 producer, 4 consumer. */
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  attributes: Record<string, unknown>;
  /** SpanStatusCode: 0 unset, 1 ok, 2 error. */
  status: number;
}

export function toRecord(span: ReadableSpan): SpanRecord {
  return {
    name: span.name,
    kind: span.kind,
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    parentSpanId: span.parentSpanContext?.spanId ?? null,
    attributes: { ...span.attributes },
    status: span.status.code,
  };
}

/** Registers a global tracer provider exporting to memory, with async context propagation. */
export function registerInMemoryTracing(): InMemorySpanExporter {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  return exporter;
}

/** The finished spans so far, as records. */
export function finished(exporter: InMemorySpanExporter): SpanRecord[] {
  return exporter.getFinishedSpans().map(toRecord);
}
