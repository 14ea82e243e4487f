/**
 * The soak's app (`npm run soak`, scripts/soak.ts), defined once for both sides: the worker processes
 * (`horsies worker scripts/soak/workerApp.ts`) and the soak itself, which only sends and starts workflows.
 *
 * - `soak.noop`, queue `soak`: the steady stream; returns nothing. The queue keeps completed tasks
 *   `SOAK_RETENTION_MS` (their `purge_after` path of retention).
 * - `soak.step` and `soak.sum`, queue `default`: the workflow `soak.diamond`, a → (b, c) → d = b + c.
 * - `soak.tick`, queue `default`: two schedules, every 5 seconds and every minute.
 *
 * Everything terminal is deleted `SOAK_RETENTION_MS` after it finished (tasks, attempts, workflows, heartbeats), and
 * maintenance runs every 5 seconds, so that the retainer purges all through the run.
 */
import { z } from 'zod';
import { createApp, workflow } from '../../src/index.js';
import type { AppConfig } from '../../src/index.js';

/** The soak's app, its stream task and its workflow; `retentionMs` is how long anything terminal is kept. */
export function defineSoakApp(
  config: Pick<AppConfig, 'databaseUrl' | 'schema' | 'logger'>,
  retentionMs: number,
) {
  const retentionHours = retentionMs / 3_600_000;
  const app = createApp({
    ...config,
    queues: ['default', { name: 'soak', retentionMs }],
    metrics: false,
    tracing: false,
    recovery: {
      checkIntervalMs: 5_000,
      terminalRecordRetentionHours: retentionHours,
      heartbeatRetentionHours: retentionHours,
      workerStateRetentionHours: retentionHours,
    },
  });

  const noop = app.task({
    name: 'soak.noop',
    queue: 'soak',
    input: z.object({ i: z.number().int() }),
    handler: () => null,
  });

  const step = app.task({
    name: 'soak.step',
    input: z.object({ n: z.number().int() }),
    handler: ({ n }) => n + 1,
  });

  const sum = app.task({
    name: 'soak.sum',
    input: z.object({ values: z.array(z.number().int()) }),
    handler: ({ values }) => values.reduce((a, b) => a + b, 0),
  });

  const tick = app.task({ name: 'soak.tick', input: z.object({}), handler: () => 'tick' });
  app.schedule({ name: 'soak.every-5s', task: tick, input: {}, pattern: { kind: 'interval', seconds: 5 } });
  app.schedule({
    name: 'soak.every-minute',
    task: tick,
    input: {},
    pattern: { kind: 'interval', minutes: 1 },
  });

  const wf = workflow(app, 'soak.diamond', { params: z.object({ n: z.number().int() }) });
  const a = wf.node(step, { id: 'a', input: { n: wf.params.n } });
  const b = wf.node(step, { id: 'b', input: { n: a.result } });
  const c = wf.node(step, { id: 'c', input: { n: a.result } });
  const d = wf.node(sum, { id: 'd', input: { values: [b.result, c.result] } });
  const diamond = wf.build({ output: d });
  return { app, noop, diamond };
}
