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
