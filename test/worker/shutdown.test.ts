/** Graceful shutdown: claimed tasks handed back, per-task shutdown policies, the drain timeout. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { eventually, useTestSchema, waitForEvent, trackStarts } from '../support/db.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();

const row = async (id: string) =>
  (await t.query<Record<string, unknown>>('SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1', [id]))[0]!;
const attemptCount = async (id: string) =>
  (await t.query('SELECT 1 FROM {{schema}}.horsies_task_attempts WHERE task_id = $1', [id])).length;

/** A handler that runs until released, or until its signal fires (then it rejects). */
function gatedHandler(gate: Promise<void>) {
  return (_input: unknown, ctx: { signal: AbortSignal }) =>
    new Promise<string>((resolve, reject) => {
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      void gate.then(() => resolve('finished'));
    });
}

describe('worker.stop()', () => {
  it('applies each task shutdown policy: continue, resubmit, stop', async () => {
    const app = t.app();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const input = z.object({});
    const cont = app.task({
      name: 'shutdown.continue',
      input,
      shutdown: 'continue',
      handler: gatedHandler(gate),
    });
    const resub = app.task({
      name: 'shutdown.resubmit',
      input,
      shutdown: 'resubmit',
      handler: gatedHandler(gate),
    });
    const stop = app.task({ name: 'shutdown.stop', input, shutdown: 'stop', handler: gatedHandler(gate) });
    const worker = createWorker(app, { concurrency: 3, shutdown: { drainTimeoutMs: 10_000 } });
    // Listen before sending: a task may start before the next send returns.
    const started = new Set<string>();
    worker.on('task:started', (id) => started.add(id));
    await worker.start();
    const handles = [await cont.send({}), await resub.send({}), await stop.send({})];
    await eventually(async () => handles.every((h) => started.has(h.id)));

    const stopping = worker.stop();
    // resubmit and stop act at once; continue keeps running until it finishes.
    await waitForEvent(worker, 'task:finished', (written: { id: string }[]) =>
      written.some((w) => w.id === handles[2]!.id),
    );
    expect((await row(handles[0]!.id)).status).toBe('RUNNING');
    release();
    await stopping;

    expect(await row(handles[0]!.id)).toMatchObject({ status: 'COMPLETED' });
    // resubmit: back to PENDING as if the attempt never happened.
    expect(await row(handles[1]!.id)).toMatchObject({
      status: 'PENDING',
      attempt: 0,
      retry_count: 0,
      claimed: false,
      claimed_by_worker_id: null,
      started_at: null,
    });
    expect(await attemptCount(handles[1]!.id)).toBe(0);
    // stop: fails with WORKER_SHUTDOWN, one attempt.
    expect(await row(handles[2]!.id)).toMatchObject({ status: 'FAILED', error_code: 'WORKER_SHUTDOWN' });
    expect(await attemptCount(handles[2]!.id)).toBe(1);
  });

  it('hands claimed-but-not-started tasks back to PENDING at once', async () => {
    const app = t.app();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const task = app.task({
      name: 'shutdown.prefetched',
      input: z.object({ i: z.number() }),
      handler: gatedHandler(gate),
    });
    const worker = createWorker(app, { concurrency: 1, prefetch: { size: 3 } });
    await worker.start();
    const firstStart = waitForEvent(worker, 'task:started');
    const handles = await task.sendMany([0, 1, 2, 3].map((i) => ({ input: { i } })));
    await firstStart;
    const claimed = async () =>
      (
        await t.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE task_name = 'shutdown.prefetched' AND status = 'CLAIMED'`,
        )
      )[0]!.n;
    await eventually(async () => (await claimed()) === 3);

    const stopping = worker.stop();
    // Before the running task is released, the three prefetched ones are PENDING again.
    await eventually(async () => (await claimed()) === 0);
    release();
    await stopping;
    const statuses = await Promise.all(handles.map(async (h) => (await row(h.id)).status));
    expect(statuses.sort()).toEqual(['COMPLETED', 'PENDING', 'PENDING', 'PENDING']);
    for (const h of handles)
      if ((await row(h.id)).status === 'PENDING') expect(await attemptCount(h.id)).toBe(0);
  });

  it('resubmits tasks still running at the drain timeout', async () => {
    const app = t.app();
    const never = new Promise<void>(() => undefined);
    const task = app.task({ name: 'shutdown.slow', input: z.object({}), handler: gatedHandler(never) });
    const worker = createWorker(app, { shutdown: { drainTimeoutMs: 200 } });
    const started = trackStarts(worker);
    await worker.start();
    const handle = await task.send({});
    await started(handle.id);
    await worker.stop();
    expect(await row(handle.id)).toMatchObject({ status: 'PENDING', attempt: 0 });
    expect(await attemptCount(handle.id)).toBe(0);
    // Another worker picks it up later and the attempt numbers start at 1.
    const again = t.app();
    again.task({ name: 'shutdown.slow', input: z.object({}), handler: () => 'done now' });
    const second = createWorker(again);
    await second.start();
    expect(await again.handle(handle.id).result({ timeoutMs: 10_000 })).toEqual({
      ok: true,
      value: 'done now',
    });
    expect(await row(handle.id)).toMatchObject({ status: 'COMPLETED', attempt: 1 });
    await second.stop();
  });
});
