/**
 * A start undone by a server crash, seen from the worker that made it. The claim that starts a task commits without
 * waiting for its WAL flush, so a crash can put the row back to PENDING with the claim generation and attempt count
 * it had before, while the run it started goes on. If the same worker claims the task again, the new claim writes
 * the very generation the running run holds, and fencing cannot tell the two apart: the worker itself must not run
 * the task a second time. Here the crash's effect on the row is written by hand (the fault suite causes it with real
 * crashes, rarely).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import { eventually, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app();

const runs = new Map<string, number>();
let open: () => void = () => undefined;
const gate = new Promise<void>((resolve) => (open = resolve));
const held = app.task({
  name: 'undone.held',
  input: z.object({ n: z.number() }),
  handler: async ({ n }, ctx) => {
    runs.set(ctx.taskId, (runs.get(ctx.taskId) ?? 0) + 1);
    await gate;
    return n;
  },
});

const worker = createWorker(app, { concurrency: 2, pollIntervalMs: 50 });
beforeAll(() => worker.start());
afterAll(() => worker.stop());

it('a task the same worker claims again after its start was undone runs once, under the new claim', async () => {
  const handle = await held.send({ n: 7 });
  await eventually(async () => runs.get(handle.id) === 1);
  const [before] = await t.query<{ claim_generation: number; attempt: number }>(
    'SELECT claim_generation, attempt FROM {{schema}}.horsies_tasks WHERE id = $1',
    [handle.id],
  );

  // Every start this worker launches is announced (synchronously, as the claim's rows are taken in).
  const starts: string[] = [];
  const onStarted = (id: string) => starts.push(id);
  worker.on('task:started', onStarted);
  const reclaimed = new Promise<void>((resolve) => {
    const onClaimed = (ids: string[]) => {
      if (!ids.includes(handle.id)) return;
      worker.off('task:claimed', onClaimed);
      resolve();
    };
    worker.on('task:claimed', onClaimed);
  });

  // What the crash leaves: the row as it was before the claim that started it.
  await t.query(
    `UPDATE {{schema}}.horsies_tasks
     SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL,
         claim_expires_at = NULL, started_at = NULL, attempt = attempt - 1, claim_generation = claim_generation - 1
     WHERE id = $1`,
    [handle.id],
  );
  // The worker's next poll claims it again, with the same generation as before, and starts it in that claim.
  await reclaimed;
  await new Promise((resolve) => setImmediate(resolve));
  worker.off('task:started', onStarted);
  const [again] = await t.query<{ status: string; claim_generation: number; attempt: number }>(
    'SELECT status, claim_generation, attempt FROM {{schema}}.horsies_tasks WHERE id = $1',
    [handle.id],
  );
  expect(again).toEqual({ status: 'RUNNING', ...before });
  // Not launched a second time: the run already going carries on under the new claim.
  expect(starts).toEqual([]);
  expect(runs.get(handle.id)).toBe(1);

  open();
  expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 7 });
  expect(runs.get(handle.id)).toBe(1);
  const attempts = await t.query<{ attempt: number; outcome: string }>(
    'SELECT attempt, outcome FROM {{schema}}.horsies_task_attempts WHERE task_id = $1',
    [handle.id],
  );
  expect(attempts).toEqual([{ attempt: before!.attempt, outcome: 'COMPLETED' }]);
});

it('a run stopped as lost before the same worker claimed its task again ends as a worker failure, not a handler one', async () => {
  // Runner heartbeats every 50 ms notice the undone start before any claim: the poll is a minute away, the row is
  // made claimable only after that, and the claim comes when a second task is sent.
  const fast = t.app({ recovery: { runnerHeartbeatIntervalMs: 50, runningStaleThresholdMs: 60_000 } });
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  const stubborn = fast.task({
    name: 'undone.stubborn',
    input: z.object({ n: z.number() }),
    // Ignores its AbortSignal until released: the stopped run is still going when the new claim comes.
    handler: async ({ n }) => {
      await released;
      return n;
    },
  });
  const other = fast.task({ name: 'undone.other', input: z.object({}), handler: () => null });
  const second = createWorker(fast, {
    concurrency: 2,
    pollIntervalMs: 60_000,
    abortGraceMs: 30_000,
    maintenance: false,
  });
  await second.start();
  try {
    const started = new Promise<void>((resolve) => second.once('task:started', () => resolve()));
    const handle = await stubborn.send({ n: 3 });
    await started;
    const [before] = await t.query<{ claim_generation: number; attempt: number }>(
      'SELECT claim_generation, attempt FROM {{schema}}.horsies_tasks WHERE id = $1',
      [handle.id],
    );
    const lost = new Promise<void>((resolve) =>
      second.on('task:lost', (ids) => ids.includes(handle.id) && resolve()),
    );
    // The crash's effect, but not yet claimable (the notification of the change would wake a claim at once).
    await t.query(
      `UPDATE {{schema}}.horsies_tasks
       SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL,
           claim_expires_at = NULL, started_at = NULL, attempt = attempt - 1, claim_generation = claim_generation - 1,
           enqueued_at = now() + interval '1 hour'
       WHERE id = $1`,
      [handle.id],
    );
    await lost;
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET enqueued_at = now() - interval '1 second' WHERE id = $1`,
      [handle.id],
    );
    // The notification of a new task makes the worker claim: it takes the older task back, with the generation
    // its stopped run holds, and adopts that run.
    const reclaimed = new Promise<void>((resolve) =>
      second.on('task:claimed', (ids) => ids.includes(handle.id) && resolve()),
    );
    await other.send({});
    await reclaimed;
    release();
    expect(await handle.result({ timeoutMs: 10_000 })).toMatchObject({
      ok: false,
      error: { code: 'WORKER_CRASHED' },
    });
    const attempts = await t.query<{ attempt: number; outcome: string; error_code: string }>(
      'SELECT attempt, outcome, error_code FROM {{schema}}.horsies_task_attempts WHERE task_id = $1',
      [handle.id],
    );
    expect(attempts).toEqual([
      { attempt: before!.attempt, outcome: 'WORKER_FAILURE', error_code: 'WORKER_CRASHED' },
    ]);
  } finally {
    release();
    await second.stop();
  }
});
