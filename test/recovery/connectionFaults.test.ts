/**
 * Connection faults: the LISTEN connections are killed by the server (`pg_terminate_backend`), and the whole
 * PostgreSQL server restarts under a running worker. LISTEN must come back by itself, and no task may be lost or
 * completed twice.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { App } from '../../src/client/App.js';
import type { Worker } from '../../src/worker/Worker.js';
import { eventually, testLogger, useTestSchema, waitForEvent } from '../support/db.js';
import { countOrMinusOne, queryThroughOutage, startOwnServer } from '../support/ownServer.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('the LISTEN connections killed by the server', () => {
  it('come back by themselves: tasks sent during and after the fault are claimed at once, each run once', async () => {
    await t.query('CREATE TABLE {{schema}}.fault_runs (task_id text NOT NULL, attempt int NOT NULL)');
    // Results are polled only every 30 s too: a quick result needs the app's LISTEN on task_done as well.
    const app = t.app({ resultPollIntervalMs: 30_000 });
    const work = app.task({
      name: 'fault.record',
      input: z.object({ n: z.number().int() }),
      handler: async ({ n }, ctx) => {
        await t.query('INSERT INTO {{schema}}.fault_runs (task_id, attempt) VALUES ($1, $2)', [
          ctx.taskId,
          ctx.attempt,
        ]);
        return n * 2;
      },
    });
    // A 30 s poll: within the 5 s waits below, only a notification can wake the worker.
    const worker = createWorker(app, { pollIntervalMs: 30_000, concurrency: 4, maintenance: false });
    await worker.start();
    try {
      const first = await work.send({ n: 1 });
      expect(await first.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 2 });

      // Other test files share the server: only this schema's listeners (their last statement is a LISTEN on
      // one of its channels) are touched. One is the worker's, one the app's result waiter's.
      const listeners = async (): Promise<number[]> =>
        (
          await t.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity
             WHERE application_name = 'horsies:listen' AND datname = current_database()
               AND strpos(query, $1) > 0`,
            [`LISTEN "${t.schema}:`],
          )
        ).map((r) => r.pid);
      const before = await eventually(async () => {
        const pids = await listeners();
        return pids.length === 2 && pids;
      });
      const terminated = await t.query<{ ok: boolean }>(
        'SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE pid = ANY($1)',
        [before],
      );
      expect(terminated).toEqual([{ ok: true }, { ok: true }]);

      const during = await work.sendMany([2, 3, 4].map((n) => ({ input: { n } })));
      const reconnectedAt = Date.now();
      const after = await eventually(async () => {
        const pids = await listeners();
        return pids.length === 2 && pids.every((pid) => !before.includes(pid)) && pids;
      }, 10_000);
      const reconnectMs = Date.now() - reconnectedAt;
      expect(after).toHaveLength(2);

      // The tasks sent while LISTEN was down are picked up on the reconnect (its wake), not by the 30 s poll.
      const duringResults = await Promise.all(during.map((h) => h.result({ timeoutMs: 5_000 })));
      expect(duringResults).toEqual([4, 6, 8].map((value) => ({ ok: true, value })));

      // The worker is idle again, asleep until a notification (or its 30 s poll): only the new LISTEN
      // connections (task_queue for the worker, task_done for the result) can make this quick.
      const sentAt = Date.now();
      const next = await work.send({ n: 5 });
      expect(await next.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 10 });
      const nextMs = Date.now() - sentAt;

      const ids = [first, ...during, next].map((h) => h.id);
      const tasks = await t.query<{ id: string; status: string }>(
        'SELECT id, status FROM {{schema}}.horsies_tasks WHERE id = ANY($1)',
        [ids],
      );
      expect(tasks.map((r) => r.status)).toEqual(ids.map(() => 'COMPLETED'));
      const attempts = await t.query<{ task_id: string; attempt: number; outcome: string }>(
        'SELECT task_id, attempt, outcome FROM {{schema}}.horsies_task_attempts WHERE task_id = ANY($1)',
        [ids],
      );
      expect(attempts.map((a) => `${a.task_id}:${a.attempt}:${a.outcome}`).sort()).toEqual(
        ids.map((id) => `${id}:1:COMPLETED`).sort(),
      );
      const runs = await t.query<{ task_id: string; attempt: number }>(
        'SELECT task_id, attempt FROM {{schema}}.fault_runs',
      );
      expect(runs.map((r) => `${r.task_id}:${r.attempt}`).sort()).toEqual(ids.map((id) => `${id}:1`).sort());
      console.log(
        `LISTEN killed: new listener backends after ${reconnectMs} ms; ` +
          `a task sent afterwards completed in ${nextMs} ms (worker poll interval 30,000 ms)`,
      );
    } finally {
      await worker.stop();
    }
  });
});

describe('a PostgreSQL restart under a running worker', () => {
  it('loses no task and completes each exactly once', { timeout: 120_000 }, async () => {
    const TASKS = 300;
    const own = await startOwnServer();
    const pool = own.side;
    let app: App | null = null;
    let worker: Worker | null = null;
    try {
      app = new App({
        databaseUrl: own.url,
        schema: 'restart_test',
        logger: testLogger,
        recovery: {
          runnerHeartbeatIntervalMs: 200,
          runningStaleThresholdMs: 10_000,
          claimerHeartbeatIntervalMs: 200,
          claimedStaleThresholdMs: 5_000,
          checkIntervalMs: 500,
        },
      });
      await app.migrate();
      // One row per run, keyed by attempt, so a retried insert of the same run cannot count twice.
      await pool.query(
        'CREATE TABLE restart_test.restart_runs (task_id text NOT NULL, attempt int NOT NULL, PRIMARY KEY (task_id, attempt))',
      );
      const work = app.task({
        name: 'restart.work',
        input: z.object({ n: z.number().int() }),
        // A task whose start was committed but whose answer was lost with the connection stays RUNNING with no
        // runner; the reaper fails it WORKER_CRASHED, and this retry runs it again.
        retry: { maxRetries: 3, retryOn: ['WORKER_CRASHED'], backoff: 'constant', baseDelayMs: 0 },
        handler: async ({ n }, ctx) => {
          await sleep(20);
          // The record survives the outage: retried while the server is away (the run is not abandoned).
          await queryThroughOutage(
            pool,
            'INSERT INTO restart_test.restart_runs (task_id, attempt) VALUES ($1, $2) ON CONFLICT DO NOTHING',
            [ctx.taskId, ctx.attempt],
            ctx.signal,
          );
          return n;
        },
      });
      worker = createWorker(app, { pollIntervalMs: 200, concurrency: 4 });
      let completedEvents = 0;
      let markSome: () => void = () => undefined;
      const some = new Promise<void>((resolve) => (markSome = resolve));
      worker.on('task:finished', (finished) => {
        completedEvents += finished.filter((f) => f.status === 'COMPLETED').length;
        if (completedEvents >= 40) markSome();
      });
      await worker.start();
      const handles = await work.sendMany(Array.from({ length: TASKS }, (_, n) => ({ input: { n } })));
      const ids = handles.map((h) => h.id);
      await some;

      const completedCount = (): Promise<number> =>
        countOrMinusOne(
          pool,
          "SELECT count(*)::int AS n FROM restart_test.horsies_tasks WHERE status = 'COMPLETED'",
        );
      const completedBeforeStop = await completedCount();
      expect(completedBeforeStop).toBeGreaterThan(0);
      expect(completedBeforeStop).toBeLessThan(TASKS);

      const stoppingAt = Date.now();
      // The outage lasts until the worker has met it (a failed claim, heartbeat or write), not a fixed time.
      const noticed = waitForEvent(worker, 'worker:error', () => true, 30_000);
      await own.stop('clean');
      const stoppedAt = Date.now();
      await noticed;
      await own.start();
      const restartedAt = Date.now();
      await eventually(async () => (await completedCount()) === TASKS, 60_000);
      const recoveredMs = Date.now() - restartedAt;

      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 15_000 })));
      expect(results).toEqual(ids.map((_, n) => ({ ok: true, value: n })));

      const tasks = (
        await pool.query<{ id: string; status: string }>('SELECT id, status FROM restart_test.horsies_tasks')
      ).rows;
      expect(tasks).toHaveLength(TASKS);
      expect(new Set(tasks.map((r) => r.id))).toEqual(new Set(ids));
      expect(tasks.every((r) => r.status === 'COMPLETED')).toBe(true);

      const attempts = (
        await pool.query<{ task_id: string; attempt: number; outcome: string; error_code: string | null }>(
          'SELECT task_id, attempt, outcome, error_code FROM restart_test.horsies_task_attempts',
        )
      ).rows;
      const completedAttempt = new Map<string, number>();
      for (const a of attempts) {
        if (a.outcome !== 'COMPLETED') continue;
        expect(completedAttempt.has(a.task_id), `task ${a.task_id} completed twice`).toBe(false);
        completedAttempt.set(a.task_id, a.attempt);
      }
      expect(completedAttempt.size).toBe(TASKS);
      // Any other attempt is one the reaper wrote off (WORKER_CRASHED), never a handler failure.
      const writtenOff = attempts.filter((a) => a.outcome !== 'COMPLETED');
      for (const a of writtenOff)
        expect([a.outcome, a.error_code]).toEqual(['WORKER_FAILURE', 'WORKER_CRASHED']);

      // The recording table holds one row per run (task, attempt). Exactly one run per task, the one of its
      // COMPLETED attempt: a run's outcome is lost only if its runner heartbeats stay silent longer than
      // runningStaleThresholdMs (10 s), so that the reaper writes it off and the retry runs the task again, and
      // the outage here is far shorter (checked below); a finish that fails to write is retried, not dropped.
      // The only write-off possible is a start whose commit answer was lost with the connection: that task is
      // RUNNING with nobody running it, and its handler never ran, so it recorded nothing.
      expect(restartedAt - stoppingAt).toBeLessThan(7_000);
      const runs = (
        await pool.query<{ task_id: string; attempt: number }>(
          'SELECT task_id, attempt FROM restart_test.restart_runs',
        )
      ).rows;
      expect(runs.map((r) => `${r.task_id}:${r.attempt}`).sort()).toEqual(
        [...completedAttempt].map(([id, attempt]) => `${id}:${attempt}`).sort(),
      );

      console.log(
        `PostgreSQL restart: ${completedBeforeStop}/${TASKS} completed before the stop; stop took ` +
          `${stoppedAt - stoppingAt} ms, down ${restartedAt - stoppedAt} ms (incl. start-up); all ${TASKS} ` +
          `completed ${recoveredMs} ms after the restart; ${writtenOff.length} attempts written off by the ` +
          `reaper`,
      );
    } finally {
      // With the server down (a failed test), the worker's last writes would retry forever.
      if (worker) await Promise.race([worker.stop(), sleep(15_000)]);
      await app?.close();
      await own.close();
    }
  });
});
