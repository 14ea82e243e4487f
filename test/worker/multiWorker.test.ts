/**
 * Four workers on one database: two in this process (each with its own pool), two as separate
 * `horsies worker` processes. Every task must end COMPLETED with exactly one attempt row and exactly one
 * execution, counted in a side table the handlers write.
 */
import { expect, it } from 'vitest';
import { databaseUrl, useTestSchema } from '../support/db.js';
import { importFixture } from '../support/fixtures.js';
import { startWorkerProcess } from '../support/processes.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();
const { record } = await importFixture({ schema: t.schema }, () => import('../fixtures/app.js'));
await t.query('CREATE TABLE {{schema}}.test_runs (task_id text NOT NULL, worker_pid int NOT NULL)');

const TASKS = 5_000;

it('drains 5,000 tasks with four workers, none run twice', async () => {
  const env = { databaseUrl: databaseUrl(), schema: t.schema };
  const processes = [
    startWorkerProcess(env, ['--concurrency', '8']),
    startWorkerProcess(env, ['--concurrency', '8']),
  ];
  await Promise.all(processes.map((p) => p.ready));

  // The in-process workers use the fixture's task definitions on apps of their own (separate pools).
  const local = [t.app(), t.app()];
  const workers = local.map((app) => {
    app.task({ name: record.name, input: record.input, handler: record.handler });
    return createWorker(app, { concurrency: 8 });
  });
  await Promise.all(workers.map((w) => w.start()));

  const producer = t.app();
  const send = producer.task({ name: record.name, input: record.input, handler: record.handler });
  const started = Date.now();
  const handles = await send.sendMany(Array.from({ length: TASKS }, (_, n) => ({ input: { n } })));
  const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 120_000 })));
  const elapsed = Date.now() - started;

  const wrong = results.flatMap((r, n) => (r.ok && r.value === n * 2 ? [] : [{ n, r }]));
  expect(wrong.slice(0, 3)).toEqual([]);
  const [summary] = await t.query<{
    tasks: number;
    completed: number;
    attempts: number;
    single: number;
    runs: number;
    distinct_runs: number;
  }>(
    `SELECT (SELECT count(*)::int FROM {{schema}}.horsies_tasks) AS tasks,
            (SELECT count(*)::int FROM {{schema}}.horsies_tasks WHERE status = 'COMPLETED' AND attempt = 1) AS completed,
            (SELECT count(*)::int FROM {{schema}}.horsies_task_attempts) AS attempts,
            (SELECT count(*)::int FROM {{schema}}.horsies_task_attempts WHERE attempt = 1 AND outcome = 'COMPLETED') AS single,
            (SELECT count(*)::int FROM {{schema}}.test_runs) AS runs,
            (SELECT count(DISTINCT task_id)::int FROM {{schema}}.test_runs) AS distinct_runs`,
  );
  expect(summary).toEqual({
    tasks: TASKS,
    completed: TASKS,
    attempts: TASKS,
    single: TASKS,
    runs: TASKS,
    distinct_runs: TASKS,
  });

  const byWorker = await t.query<{ worker_id: string; worker_pid: number; n: number }>(
    `SELECT worker_id, worker_pid, count(*)::int AS n FROM {{schema}}.horsies_task_attempts GROUP BY 1, 2 ORDER BY 3 DESC`,
  );
  const pids = new Set(byWorker.map((w) => w.worker_pid));
  // Work landed in this process and in both worker processes.
  expect(pids.has(process.pid)).toBe(true);
  for (const p of processes) expect(pids.has(p.child.pid!)).toBe(true);
  expect(byWorker.length).toBe(4);
  console.log(
    `4 workers drained ${TASKS} tasks in ${elapsed} ms (${Math.round((TASKS / elapsed) * 1000)}/s); per worker: ${byWorker
      .map((w) => w.n)
      .join(', ')}`,
  );

  await Promise.all(workers.map((w) => w.stop()));
  for (const p of processes) p.child.kill('SIGTERM');
  expect(await Promise.all(processes.map((p) => p.exited))).toEqual([0, 0]);
});
