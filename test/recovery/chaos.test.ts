/**
 * Chaos: several worker processes drain thousands of tasks while random ones are killed with SIGKILL and
 * restarted. Every task must end terminal, none completed twice, and the attempt rows must be unique and
 * consistent with the task rows.
 */
import { afterAll, expect, it } from 'vitest';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { createRunsTable, fastRecovery, importFixture } from '../support/fixtures.js';
import { startWorkerProcess } from '../support/processes.js';
import type { WorkerProcess } from '../support/processes.js';

const t = await useTestSchema();
await createRunsTable(t);
const recovery = fastRecovery;
const fixture = await importFixture({ schema: t.schema }, () => import('../fixtures/app.js'));
afterAll(() => fixture.app.close());

const TASKS = 2_000;
const WORKERS = 3;
const KILLS = 8;

/** A small seeded generator, so a failing run can be replayed with the seed it printed. */
function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

it('loses nothing and completes nothing twice under random SIGKILLs', async () => {
  const seed = Number(process.env.HORSIES_CHAOS_SEED ?? Date.now() % 1_000_000);
  const random = mulberry32(seed);
  const env = { databaseUrl: databaseUrl(), schema: t.schema, recovery };
  const args = ['--concurrency', '4', '--prefetch', '2', '--poll-interval', '200'];
  const workers: WorkerProcess[] = [];
  for (let i = 0; i < WORKERS; i += 1) workers.push(startWorkerProcess(env, args));
  await Promise.all(workers.map((w) => w.ready));

  const started = Date.now();
  await fixture.crashy.sendMany(
    Array.from({ length: TASKS }, () => ({ input: { ms: Math.floor(random() * 40) } })),
  );
  // The faults follow the drain's progress, not the clock: each kill comes after a random number of handler runs
  // (50 to 150), so every run sees the same share of the work interrupted, however fast the machine is.
  const runs = async (): Promise<number> =>
    (await t.query<{ n: number }>('SELECT count(*)::int AS n FROM {{schema}}.test_runs'))[0]!.n;
  let kills = 0;
  let chaosMs = 0;
  while (kills < KILLS) {
    const target = (await runs()) + 50 + Math.floor(random() * 100);
    if (target >= TASKS) break;
    await eventually(async () => (await runs()) >= target, 60_000);
    const index = Math.floor(random() * workers.length);
    const victim = workers[index]!;
    victim.child.kill('SIGKILL');
    await victim.exited;
    kills += 1;
    // The replacement boots while the chaos goes on; it may itself be killed before it is ready.
    workers[index] = startWorkerProcess(env, args);
    chaosMs = Date.now() - started;
  }
  for (const [index, w] of workers.entries()) {
    if (w.child.exitCode !== null || w.child.signalCode !== null)
      workers[index] = startWorkerProcess(env, args);
  }
  await Promise.all(workers.map((w) => w.ready));

  const terminal = await eventually(async () => {
    const [c] = await t.query<{ open: number }>(
      `SELECT count(*) FILTER (WHERE status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED'))::int AS open
       FROM {{schema}}.horsies_tasks`,
    );
    return c!.open === 0 ? true : undefined;
  }, 120_000);
  expect(terminal).toBe(true);
  const drainMs = Date.now() - started;

  const [summary] = await t.query<{
    tasks: number;
    completed: number;
    failed: number;
    attempts: number;
    crashes: number;
    runs: number;
  }>(
    `SELECT (SELECT count(*)::int FROM {{schema}}.horsies_tasks) AS tasks,
            (SELECT count(*)::int FROM {{schema}}.horsies_tasks WHERE status = 'COMPLETED') AS completed,
            (SELECT count(*)::int FROM {{schema}}.horsies_tasks WHERE status = 'FAILED') AS failed,
            (SELECT count(*)::int FROM {{schema}}.horsies_task_attempts) AS attempts,
            (SELECT count(*)::int FROM {{schema}}.horsies_task_attempts WHERE outcome = 'WORKER_FAILURE') AS crashes,
            (SELECT count(*)::int FROM {{schema}}.test_runs) AS runs`,
  );
  expect(kills).toBeGreaterThanOrEqual(KILLS / 2);
  expect(summary!.tasks).toBe(TASKS);
  expect(summary!.completed + summary!.failed).toBe(TASKS);

  // No task has two COMPLETED attempts.
  const doubles = await t.query(
    `SELECT task_id FROM {{schema}}.horsies_task_attempts WHERE outcome = 'COMPLETED' GROUP BY task_id HAVING count(*) > 1`,
  );
  expect(doubles).toEqual([]);
  // Attempts per task are numbered 1..n without gaps, n is the task's attempt count, and the last attempt
  // agrees with the task's final status; every earlier attempt scheduled a retry.
  const inconsistent = await t.query(
    `WITH a AS (
       SELECT task_id, count(*) AS n, max(attempt) AS top, min(attempt) AS bottom,
              bool_and(will_retry OR attempt = (SELECT max(attempt) FROM {{schema}}.horsies_task_attempts b WHERE b.task_id = x.task_id)) AS retries_ok
       FROM {{schema}}.horsies_task_attempts x GROUP BY task_id
     )
     SELECT t.id, t.status, t.attempt, a.n, a.top, a.bottom, last.outcome
     FROM {{schema}}.horsies_tasks t
     LEFT JOIN a ON a.task_id = t.id
     LEFT JOIN {{schema}}.horsies_task_attempts last ON last.task_id = t.id AND last.attempt = t.attempt
     WHERE a.n IS NULL OR a.n <> a.top OR a.bottom <> 1 OR t.attempt <> a.top OR NOT a.retries_ok
        OR (t.status = 'COMPLETED' AND last.outcome <> 'COMPLETED')
        OR (t.status = 'FAILED' AND last.outcome = 'COMPLETED')
     LIMIT 5`,
  );
  expect(inconsistent).toEqual([]);
  // Every COMPLETED task ran to its end at least once (its handler's record exists).
  const [missing] = await t.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks t
     WHERE t.status = 'COMPLETED' AND NOT EXISTS (SELECT 1 FROM {{schema}}.test_runs r WHERE r.task_id = t.id)`,
  );
  expect(missing!.n).toBe(0);

  console.log(
    `chaos (seed ${seed}): ${TASKS} tasks, ${WORKERS} worker processes, ${kills} SIGKILLs over ${chaosMs} ms; ` +
      `drained in ${drainMs} ms: ${summary!.completed} COMPLETED, ${summary!.failed} FAILED, ` +
      `${summary!.attempts} attempts (${summary!.crashes} WORKER_FAILURE), ${summary!.runs} handler runs recorded`,
  );
  for (const w of workers) w.child.kill('SIGTERM');
  await Promise.all(workers.map((w) => w.exited));
}, 180_000);
