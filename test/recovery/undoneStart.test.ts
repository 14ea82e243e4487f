/**
 * A start undone by a server crash, seen from the worker that made it. The claim that starts a task commits without
 * waiting for its WAL flush, so a crash can put the row back to PENDING with the claim generation and attempt count
 * it had before, while the run it started goes on. If the same worker claims the task again, the new claim has the
 * generation the running run holds, but another claim token: the run going on is stopped and fenced out, and the
 * worker starts the new claim only once that run has left (it never runs a task twice at once). Here the crash's
 * effect on the row is written by hand; `claimToken.test.ts` causes it with a real crash.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const app = t.app();

let runs = 0;
let running = 0;
let mostAtOnce = 0;
let firstLeft = false;
let firstStarted: () => void = () => undefined;
const started = new Promise<void>((resolve) => (firstStarted = resolve));
const again = app.task({
  name: 'undone.again',
  input: z.object({}),
  handler: async (_input, ctx) => {
    runs += 1;
    const run = runs;
    running += 1;
    mostAtOnce = Math.max(mostAtOnce, running);
    try {
      if (run === 1) {
        firstStarted();
        // Runs until the worker stops it: its claim is gone.
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        firstLeft = true;
        return 'first';
      }
      return firstLeft ? `run ${run}` : 'ran beside the first run';
    } finally {
      running -= 1;
    }
  },
});

const worker = createWorker(app, { concurrency: 2, pollIntervalMs: 50, snapshotIntervalMs: 0 });
beforeAll(() => worker.start());
afterAll(() => worker.stop());

// What the crash leaves: the row as it was before the claim that started it.
const UNDO = `UPDATE {{schema}}.horsies_tasks
  SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL, claim_expires_at = NULL,
      started_at = NULL, attempt = attempt - 1, claim_generation = claim_generation - 1, claim_token = NULL`;

it('a task the same worker claims again while its undone run goes on: that run is stopped and fenced out, the new claim runs after it', async () => {
  const handle = await again.send({});
  await started;
  // This worker has a free slot: its next poll claims the task again, and starts it in that claim.
  await t.query(`${UNDO} WHERE id = $1`, [handle.id]);
  expect(await handle.result({ timeoutMs: 20_000 })).toEqual({ ok: true, value: 'run 2' });
  expect(runs).toBe(2);
  expect(mostAtOnce).toBe(1);
  // The first run's outcome (a crashed attempt, as for any run whose claim was lost) was fenced out.
  const attempts = await t.query<{ attempt: number; outcome: string }>(
    'SELECT attempt, outcome FROM {{schema}}.horsies_task_attempts WHERE task_id = $1',
    [handle.id],
  );
  expect(attempts).toEqual([{ attempt: 1, outcome: 'COMPLETED' }]);
});

it('a run stopped as lost that ignores its AbortSignal keeps the new claim of its task waiting until it returns', async () => {
  // Runner heartbeats every 50 ms notice the undone start before any claim: the poll is a minute away, the row is
  // made claimable only after that, and the claim comes when a second task is sent.
  const fast = t.app({ recovery: { runnerHeartbeatIntervalMs: 50, runningStaleThresholdMs: 60_000 } });
  let stubbornRuns = 0;
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  const stubborn = fast.task({
    name: 'undone.stubborn',
    input: z.object({ n: z.number() }),
    // Ignores its AbortSignal until released: the stopped run is still going when the new claim comes.
    handler: async ({ n }) => {
      stubbornRuns += 1;
      await released;
      return n;
    },
  });
  const other = fast.task({ name: 'undone.other', input: z.object({}), handler: () => null });
  const second = createWorker(fast, {
    concurrency: 2,
    pollIntervalMs: 60_000,
    shutdown: { abortGraceMs: 30_000 },
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
    await t.query(`${UNDO}, enqueued_at = now() + interval '1 hour' WHERE id = $1`, [handle.id]);
    await lost;
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET enqueued_at = now() - interval '1 second' WHERE id = $1`,
      [handle.id],
    );
    // The notification of a new task makes the worker claim: it takes the older task back while the stopped run
    // still goes on, and keeps that claim aside.
    const reclaimed = new Promise<void>((resolve) =>
      second.on('task:claimed', (ids) => ids.includes(handle.id) && resolve()),
    );
    await other.send({});
    await reclaimed;
    expect(stubbornRuns).toBe(1);
    release();
    // The stopped run's outcome is fenced out; the new claim then runs, and its outcome is the one written.
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 3 });
    expect(stubbornRuns).toBe(2);
    const attempts = await t.query<{ attempt: number; outcome: string }>(
      'SELECT attempt, outcome FROM {{schema}}.horsies_task_attempts WHERE task_id = $1',
      [handle.id],
    );
    expect(attempts).toEqual([{ attempt: before!.attempt, outcome: 'COMPLETED' }]);
  } finally {
    release();
    await second.stop();
  }
});
