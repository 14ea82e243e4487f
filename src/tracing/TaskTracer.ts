/**
 * OpenTelemetry spans for sends and runs, after the OpenTelemetry messaging conventions: a `send <queue>` span
 * (kind PRODUCER) around each send call, and a `process <queue>` span (kind CONSUMER) around each run. The send
 * span's context is stored with the task (W3C trace context, `trace_context` column), so the run, on whichever
 * machine, continues the sender's trace: its span's parent is the send span. Every attempt of a retried task is a
 * child of the same send span, so retries sit in the sender's trace; a handler's own spans, and the sends it makes,
 * are children of its run's span, so a chain of tasks is one trace.
 *
 * `@opentelemetry/api` is an optional peer dependency, loaded here on first use only if it is installed: without
 * it, no tracer exists and sends and runs do no tracing work at all. With it but no SDK registered, its no-op
 * tracer makes spans that record nothing, and the stored context is the caller's (if any).
 */
import { createRequire } from 'node:module';
import type * as Otel from '@opentelemetry/api';
import type { ClaimedTaskRow, TaskFinish, TraceCarrier } from '../db/tasks.js';

type OtelApi = typeof Otel;

let loaded: OtelApi | null | undefined;

/** `@opentelemetry/api` if installed (loaded once), else null. */
function otel(): OtelApi | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('@opentelemetry/api') as OtelApi;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}

/** The instrumentation scope's name, as spans report it. */
export const TRACER_NAME = 'horsies';
const SYSTEM = 'horsies';

/** A send under way: its context goes with the tasks; end it once they are stored. */
export interface SendSpan {
  /** The context to store with the tasks, or null when there is none to carry (no valid span context). */
  readonly carrier: TraceCarrier | null;
  /** The tasks were stored: their ids (one id names the message). */
  end(ids: readonly string[]): void;
  /** The send threw: nothing (or not everything) was stored. */
  fail(error: unknown): void;
}

/** A run under way: run the handler within it, end it with the run's outcome. */
export interface RunSpan {
  /** Calls `fn` with the run's span active, so the handler's spans and sends are its children. */
  within<T>(fn: () => T): T;
  end(finish: TaskFinish): void;
}

const UNTRACED_RUN: RunSpan = { within: (fn) => fn(), end: () => undefined };

/** Makes the spans of sends and runs (see the module comment). */
export class TaskTracer {
  /** Parent contexts by stored traceparent: the tasks of one send share theirs, and a worker runs many of them. */
  private readonly parents = new Map<string, Otel.Context | null>();

  private constructor(
    private readonly api: OtelApi,
    private readonly tracer: Otel.Tracer,
  ) {}

  /** A tracer, or null when tracing is off or `@opentelemetry/api` is not installed. */
  static create(enabled: boolean): TaskTracer | null {
    if (!enabled) return null;
    const api = otel();
    return api === null ? null : new TaskTracer(api, api.trace.getTracer(TRACER_NAME));
  }

  /** Starts the span of a send of `count` tasks of `taskName` to `queue`, a child of the active span. */
  startSend(queue: string, taskName: string, count: number): SendSpan {
    const { SpanKind, SpanStatusCode } = this.api;
    const attributes: Otel.Attributes = {
      'messaging.system': SYSTEM,
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'send',
      'messaging.destination.name': queue,
      'horsies.task.name': taskName,
    };
    if (count !== 1) attributes['messaging.batch.message_count'] = count;
    const span = this.tracer.startSpan(`send ${queue}`, { kind: SpanKind.PRODUCER, attributes });
    return {
      carrier: toCarrier(this.api, span.spanContext()),
      end: (ids) => {
        if (ids.length === 1) span.setAttribute('messaging.message.id', ids[0] as string);
        span.end();
      },
      fail: (error) => {
        span.recordException(error instanceof Error ? error : String(error));
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
        span.setAttribute(
          'error.type',
          (error as { code?: string })?.code ?? (error as Error)?.name ?? 'Error',
        );
        span.end();
      },
    };
  }

  /**
   * Starts the span of a workflow's start (a child of the active span): its context goes with the workflow, and
   * every node's task carries it, so each node's run continues the starter's trace.
   */
  startWorkflow(name: string, id: string): SendSpan {
    const { SpanKind, SpanStatusCode } = this.api;
    const span = this.tracer.startSpan(`start workflow ${name}`, {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': SYSTEM,
        'messaging.operation.type': 'create',
        'messaging.operation.name': 'start',
        'horsies.workflow.name': name,
        'horsies.workflow.id': id,
      },
    });
    return {
      carrier: toCarrier(this.api, span.spanContext()),
      end: () => span.end(),
      fail: (error) => {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
        span.setAttribute(
          'error.type',
          (error as { code?: string })?.code ?? (error as Error)?.name ?? 'Error',
        );
        span.end();
      },
    };
  }

  /** Starts the span of one run of `task`, a child of the context its sender stored (or a root without one). */
  startRun(task: ClaimedTaskRow, attempt: number): RunSpan {
    const { SpanKind, SpanStatusCode, context, trace } = this.api;
    const parent = this.parentOf(task.trace_context);
    const attributes: Otel.Attributes = {
      'messaging.system': SYSTEM,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': task.queue_name,
      'messaging.message.id': task.id,
      'horsies.task.name': task.task_name,
      'horsies.task.attempt': attempt,
      'horsies.task.retry_count': task.retry_count,
    };
    if (task.workflow_id !== null) {
      attributes['horsies.workflow.id'] = task.workflow_id;
      if (task.workflow_node !== null) attributes['horsies.workflow.node'] = task.workflow_node;
    }
    const base = parent ?? context.active();
    const span = this.tracer.startSpan(
      `process ${task.queue_name}`,
      { kind: SpanKind.CONSUMER, attributes },
      base,
    );
    // No SDK is registered and no sender's context is carried on (the span has no trace): the handler runs as it
    // would untraced, without a context made for a span that stands for nothing.
    if (!trace.isSpanContextValid(span.spanContext())) return UNTRACED_RUN;
    const active = trace.setSpan(base, span);
    return {
      within: (fn) => context.with(active, fn),
      end: (finish) => {
        if (finish.errorCode !== null && finish.status !== 'COMPLETED') {
          span.setAttributes({ 'horsies.task.outcome': finish.status, 'error.type': finish.errorCode });
          span.setStatus({ code: SpanStatusCode.ERROR, message: finish.errorMessage ?? finish.errorCode });
        } else {
          span.setAttribute('horsies.task.outcome', finish.status);
        }
        span.end();
      },
    };
  }

  // The remote parent a stored context stands for, read once per distinct context (at most 1,000 kept).
  // A stored value of another shape (a hand-written or damaged row) stands for no parent: the run is traced as a root.
  private parentOf(stored: TraceCarrier | null): Otel.Context | null {
    const carrier = readCarrier(stored);
    if (!carrier) return null;
    const key = carrier.tracestate ? `${carrier.traceparent} ${carrier.tracestate}` : carrier.traceparent;
    let parent = this.parents.get(key);
    if (parent === undefined) {
      parent = fromCarrier(this.api, carrier);
      if (this.parents.size >= 1_000) this.parents.clear();
      this.parents.set(key, parent);
    }
    return parent;
  }
}

/** A span context as a stored W3C trace context; null for an invalid one (nothing to carry). */
function toCarrier(api: OtelApi, ctx: Otel.SpanContext): TraceCarrier | null {
  if (!api.isSpanContextValid(ctx)) return null;
  const flags = (ctx.traceFlags & 0xff).toString(16).padStart(2, '0');
  const carrier: TraceCarrier = { traceparent: `00-${ctx.traceId}-${ctx.spanId}-${flags}` };
  const state = ctx.traceState?.serialize();
  if (state) carrier.tracestate = state;
  return carrier;
}

/** A stored trace context if its fields are strings, else null (the column is written by senders, or by hand). */
function readCarrier(stored: unknown): TraceCarrier | null {
  if (typeof stored !== 'object' || stored === null) return null;
  const { traceparent, tracestate } = stored as Record<string, unknown>;
  if (typeof traceparent !== 'string') return null;
  return typeof tracestate === 'string' && tracestate !== '' ? { traceparent, tracestate } : { traceparent };
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The context a stored trace context stands for, as a remote parent; null when there is none or it is malformed. */
function fromCarrier(api: OtelApi, carrier: TraceCarrier | null): Otel.Context | null {
  const match = carrier?.traceparent ? TRACEPARENT.exec(carrier.traceparent) : null;
  if (!match || match[1] === 'ff') return null;
  const spanContext: Otel.SpanContext = {
    traceId: match[2] as string,
    spanId: match[3] as string,
    traceFlags: parseInt(match[4] as string, 16),
    isRemote: true,
  };
  if (!api.isSpanContextValid(spanContext)) return null;
  if (carrier?.tracestate) {
    try {
      spanContext.traceState = api.createTraceState(carrier.tracestate);
    } catch {
      // A tracestate the API cannot parse is dropped; the parent span still holds.
    }
  }
  return api.trace.setSpanContext(api.ROOT_CONTEXT, spanContext);
}
