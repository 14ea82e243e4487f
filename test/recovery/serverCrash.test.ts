/**
 * A PostgreSQL crash under a running worker. Claims and starts commit without waiting for their WAL flush
 * (migration 6), so an immediate shutdown, which writes no checkpoint and flushes nothing, can undo the last of
 * them. No task may be lost, stuck or completed twice: a lost claim leaves the task PENDING, a lost start leaves it
 * CLAIMED until its owner notices and the reaper requeues it.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { App } from '../../src/client/App.js';
import type { Worker } from '../../src/worker/Worker.js';
import { eventually, testLogger } from '../support/db.js';
import { countOrMinusOne, queryThroughOutage, startOwnServer } from '../support/ownServer.js';
import { createWorker } from '../../src/worker/Worker.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('a PostgreSQL crash under a running worker', () => {
  it('loses no task and completes each exactly once', { timeout: 120_000 }, async () => {
    const TASKS = 400;
    const own = await startOwnServer();
    const pool = own.side;
    let app: App | null = null;
    let worker: Worker | null = null;
    try {
      app = new App({
        databaseUrl: own.url,
        schema: 'crash_test',
        logger: testLogger,
        recovery: {
          claimerHeartbeatIntervalMs: 200,
          claimedStaleThresholdMs: 2_000,
          runnerHeartbeatIntervalMs: 200,
          runningStaleThresholdMs: 4_000,
          checkIntervalMs: 500,
        },
      });
      await app.migrate();
      await pool.query(
        'CREATE TABLE crash_test.crash_runs (id bigserial PRIMARY KEY, task_id text NOT NULL)',
      );
      const work = app.task({
        name: 'crash.work',
        input: z.object({ n: z.number().int() }),
        // A start that committed while its answer was lost leaves a RUNNING task nobody runs: the reaper writes it
        // off as WORKER_CRASHED, and this retry runs it again.
        retry: { maxRetries: 5, retryOn: ['WORKER_CRASHED'], backoff: 'constant', baseDelayMs: 0 },
        handler: async ({ n }, ctx) => {
          await sleep(10);
          await queryThroughOutage(
            pool,
            'INSERT INTO crash_test.crash_runs (task_id) VALUES ($1)',
            [ctx.taskId],
            ctx.signal,
          );
          return n;
        },
      });
      worker = createWorker(app, { pollIntervalMs: 200, concurrency: 8, prefetch: { size: 8 } });
      let completed = 0;
      let markSome: () => void = () => undefined;
      const some = new Promise<void>((resolve) => (markSome = resolve));
      worker.on('task:finished', (finished) => {
        completed += finished.filter((f) => f.status === 'COMPLETED').length;
        if (completed >= 60) markSome();
      });
      await worker.start();
      const handles = await work.sendMany(Array.from({ length: TASKS }, (_, n) => ({ input: { n } })));
      await some;

      // An immediate shutdown: nothing is flushed or checkpointed, and the next start runs crash recovery from the
      // WAL on disk.
      await own.stop('crash');
      await own.start();
      const restartedAt = Date.now();
      await eventually(
        async () =>
          (await countOrMinusOne(
            pool,
            "SELECT count(*)::int AS n FROM crash_test.horsies_tasks WHERE status = 'COMPLETED'",
          )) === TASKS,
        60_000,
      );
      const recoveredMs = Date.now() - restartedAt;

      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 15_000 })));
      expect(results).toEqual(handles.map((_, n) => ({ ok: true, value: n })));
      const attempts = (
        await pool.query<{ task_id: string; outcome: string; error_code: string | null }>(
          'SELECT task_id, outcome, error_code FROM crash_test.horsies_task_attempts',
        )
      ).rows;
      const completedAttempts = attempts.filter((a) => a.outcome === 'COMPLETED');
      expect(completedAttempts).toHaveLength(TASKS);
      expect(new Set(completedAttempts.map((a) => a.task_id)).size).toBe(TASKS);
      // Any other attempt is one the reaper wrote off, never a handler failure.
      for (const a of attempts.filter((x) => x.outcome !== 'COMPLETED'))
        expect([a.outcome, a.error_code]).toEqual(['WORKER_FAILURE', 'WORKER_CRASHED']);
      // Every task's handler ran at least once (runs recorded before the crash may have been undone with it).
      const runs = (await pool.query<{ task_id: string }>('SELECT task_id FROM crash_test.crash_runs')).rows;
      expect(new Set(runs.map((r) => r.task_id)).size).toBe(TASKS);
      console.log(
        `PostgreSQL crash: all ${TASKS} completed ${recoveredMs} ms after the restart; ` +
          `${runs.length - TASKS} extra runs recorded; ${attempts.length - TASKS} attempts written off`,
      );
    } finally {
      if (worker) await Promise.race([worker.stop(), sleep(15_000)]);
      await app?.close();
      await own.close();
    }
  });
});
