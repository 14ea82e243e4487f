/**
 * What metrics and tracing cost a drain. `npm run bench:observability` (uses DATABASE_URL, or starts an embedded
 * PostgreSQL) runs ROUNDS interleaved rounds (default 3) of two variants, in alternating order, each on emptied
 * tables and with a new worker (concurrency 10):
 *
 *   off: an app with `metrics: false, tracing: false`;
 *   on:  an app with metrics and tracing on, and an OpenTelemetry SDK registered (a BatchSpanProcessor whose
 *        exporter counts and drops spans), so every send and every run makes a recorded span.
 *
 * With VARIANTS=off,metrics,tracing,on the run also measures metrics alone and tracing alone.
 *
 * Each variant sends TASKS (default 20,000) no-op tasks with sendMany (timed: the send), then a worker drains them
 * (timed from its start to the last outcome written: tasks/s; and the CPU time this Node.js process spent per task
 * meanwhile, which other load on the machine disturbs less than the wall clock). Prints each round, then the
 * medians and the ratio on/off of each figure (1.00 = no cost), with the lowest and highest ratio of the rounds in
 * brackets.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import type { ExportResult } from '@opentelemetry/core';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { pino } from 'pino';
import { z } from 'zod';
import { createApp, createWorker } from '../src/index.js';
import type { App } from '../src/index.js';
import { runScript, withDatabase } from './database.js';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const TASKS = Number(process.env.TASKS ?? 20_000);
const SCHEMA = 'bench_observability';

/** Counts exported spans and drops them: the cost of making and batching spans, none of shipping them. */
class CountingExporter implements SpanExporter {
  count = 0;
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.count += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

type VariantName = 'off' | 'metrics' | 'tracing' | 'on';

interface Variant {
  name: VariantName;
  app: App;
  send: (n: number) => Promise<unknown>;
}

interface Figures {
  sendMs: number;
  drainPerS: number;
  /** CPU time of this Node.js process per task during the drain (user + system), in µs. */
  cpuPerTaskUs: number;
}

function variant(name: VariantName, databaseUrl: string): Variant {
  const app = createApp({
    databaseUrl,
    schema: SCHEMA,
    logger: pino({ level: 'warn' }),
    metrics: name === 'on' || name === 'metrics',
    tracing: name === 'on' || name === 'tracing',
  });
  const noop = app.task({ name: 'noop', input: z.object({ i: z.number() }), handler: ({ i }) => i });
  return {
    name,
    app,
    send: (n) => noop.sendMany(Array.from({ length: n }, (_, i) => ({ input: { i } }))),
  };
}

async function reset(app: App): Promise<void> {
  await app.db.pool.query(
    `TRUNCATE ${SCHEMA}.horsies_tasks, ${SCHEMA}.horsies_task_steps, ${SCHEMA}.horsies_task_attempts, ${SCHEMA}.horsies_heartbeats`,
  );
  await app.db.pool.query('CHECKPOINT').catch(() => undefined);
}

async function measure(v: Variant, tasks = TASKS): Promise<Figures> {
  await reset(v.app);
  const sendStart = performance.now();
  await v.send(tasks);
  const sendMs = performance.now() - sendStart;
  const worker = createWorker(v.app, { concurrency: 10, snapshotIntervalMs: 0, maintenance: false });
  worker.on('worker:error', (error) => console.error('worker error:', error));
  let finished = 0;
  const done = new Promise<void>((resolve) =>
    worker.on('task:finished', (rows) => {
      finished += rows.length;
      if (finished >= tasks) resolve();
    }),
  );
  const started = performance.now();
  const cpu = process.cpuUsage();
  await worker.start();
  await done;
  const drainPerS = tasks / ((performance.now() - started) / 1000);
  const used = process.cpuUsage(cpu);
  await worker.stop();
  return { sendMs, drainPerS, cpuPerTaskUs: (used.user + used.system) / tasks };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function spread(values: number[]): string {
  return `${median(values).toFixed(2)} [${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}]`;
}

async function main(): Promise<void> {
  const exporter = new CountingExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [
      new BatchSpanProcessor(exporter, {
        maxQueueSize: 65_536,
        maxExportBatchSize: 1_024,
        scheduledDelayMillis: 200,
      }),
    ],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);

  const names = (process.env.VARIANTS ?? 'off,on').split(',') as VariantName[];
  if (!names.includes('off') || names.some((n) => !['off', 'metrics', 'tracing', 'on'].includes(n))) {
    throw new Error('VARIANTS lists off and any of metrics, tracing, on');
  }
  await withDatabase(async (databaseUrl) => {
    const variants = names.map((name) => variant(name, databaseUrl));
    await variants[0]!.app.migrate();
    // A warm-up drain of each, not counted: JIT, prepared statements, the server's caches.
    for (const v of variants) await measure(v, 2_000);
    const results = new Map<VariantName, Figures[]>(names.map((n) => [n, []]));
    console.log(`${TASKS} no-op tasks per variant, ${ROUNDS} interleaved rounds (worker concurrency 10)`);
    for (let round = 1; round <= ROUNDS; round += 1) {
      // Each round starts with the next variant, so none always runs first.
      const order = variants.map((_, i) => variants[(i + round - 1) % variants.length]!);
      for (const v of order) {
        const figures = await measure(v);
        results.get(v.name)!.push(figures);
        console.log(
          `round ${round} ${v.name.padEnd(7)}  send ${figures.sendMs.toFixed(0).padStart(6)} ms  ` +
            `drain ${figures.drainPerS.toFixed(0).padStart(6)} tasks/s  ` +
            `Node.js CPU ${figures.cpuPerTaskUs.toFixed(0).padStart(4)} µs/task`,
        );
      }
    }
    await provider.forceFlush();
    const off = results.get('off')!;
    console.log('');
    console.log(
      `off: drain ${median(off.map((f) => f.drainPerS)).toFixed(0)} tasks/s, Node.js CPU ` +
        `${median(off.map((f) => f.cpuPerTaskUs)).toFixed(0)} µs/task, send ${median(off.map((f) => f.sendMs)).toFixed(0)} ms`,
    );
    for (const name of names.filter((n) => n !== 'off')) {
      const mine = results.get(name)!;
      const ratio = (pick: (f: Figures) => number) => spread(mine.map((f, i) => pick(f) / pick(off[i]!)));
      console.log(
        `${name}: drain ${median(mine.map((f) => f.drainPerS)).toFixed(0)} tasks/s, ratio ${ratio((f) => f.drainPerS)}; ` +
          `Node.js CPU ${median(mine.map((f) => f.cpuPerTaskUs)).toFixed(0)} µs/task, ratio ${ratio((f) => f.cpuPerTaskUs)}; ` +
          `send ${median(mine.map((f) => f.sendMs)).toFixed(0)} ms, ratio ${ratio((f) => f.sendMs)}`,
      );
    }
    const on = variants.find((v) => v.name === 'on');
    if (on) {
      const completed = (
        await on.app.metrics!.registry.getSingleMetricAsString('horsies_tasks_completed_total')
      )
        .split('\n')
        .filter((line) => line.startsWith('horsies_tasks_completed_total{'))
        .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
      console.log(`check: "on" counted ${completed} completions (expected ${2_000 + ROUNDS * TASKS})`);
    }
    const traced = names.filter((n) => n === 'on' || n === 'tracing').length;
    // Warm-up included: each task is one run span, each send call one send span.
    console.log(
      `check: spans exported ${exporter.count} (expected ${traced * (2_000 + 1 + ROUNDS * (TASKS + 1))})`,
    );
    await Promise.all(variants.map((v) => v.app.close()));
  });
  await provider.shutdown();
}

runScript(main);
