/**
 * horsies through PgBouncer in transaction mode (Debian's pgbouncer, started by scripts/pgbouncer.ts in front of
 * the test server): sends, results, retries, workers and the maintenance leader's passes work with prepared
 * statements off; LISTEN goes to the server directly (`listenUrl`), and without it the workers and the result
 * waiters drain by polling. The fault suite's short mode through PgBouncer closes the file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { formatReport, runFaults, SHORT_MODE } from '../../scripts/faults/harness.js';
import { startPgBouncer } from '../../scripts/pgbouncer.js';
import type { PgBouncer } from '../../scripts/pgbouncer.js';
import { createWorker } from '../../src/worker/Worker.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { requestCancelSilently } from '../support/factories.js';

const t = await useTestSchema();
let bouncer: PgBouncer;

beforeAll(async () => {
  bouncer = await startPgBouncer(databaseUrl());
});
afterAll(async () => {
  await bouncer?.stop();
});

/** A task that fails its first attempt with a retryable error and returns its input doubled on the second. */
function defineFlaky(app: ReturnType<typeof t.app>) {
  return app.task({
    name: 'bouncer.flaky',
    input: z.object({ n: z.number().int() }),
    retry: { maxRetries: 2, retryOn: ['FLAKY'], backoff: 'constant', baseDelayMs: 10 },
    errorCodes: [[Error, 'FLAKY']],
    handler: ({ n }, ctx) => {
      if (ctx.attempt === 1) throw new Error('first attempt fails');
      return n * 2;
    },
  });
}

describe('through PgBouncer in transaction mode', () => {
  it('drains sends with retries and results, LISTEN on a direct URL, no prepared statement', async () => {
    const app = t.app({
      databaseUrl: bouncer.url,
      listenUrl: databaseUrl(),
      preparedStatements: false,
      resultPollIntervalMs: 60_000,
    });
    const flaky = defineFlaky(app);
    // A 60 s poll: within the test's time only notifications (on the direct LISTEN URL) wake the worker.
    const worker = createWorker(app, { concurrency: 8, pollIntervalMs: 60_000, maintenance: false });
    await worker.start();
    try {
      const handles = await flaky.sendMany(Array.from({ length: 60 }, (_, n) => ({ input: { n } })));
      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
      expect(results).toEqual(handles.map((_, n) => ({ ok: true, value: n * 2 })));
      const attempts = await t.query<{ outcome: string; n: number }>(
        `SELECT outcome, count(*)::int AS n FROM {{schema}}.horsies_task_attempts
         WHERE task_id = ANY($1) GROUP BY outcome ORDER BY outcome`,
        [handles.map((h) => h.id)],
      );
      expect(attempts).toEqual([
        { outcome: 'COMPLETED', n: 60 },
        { outcome: 'FAILED', n: 60 },
      ]);
    } finally {
      await worker.stop();
    }
  });

  it('drains by polling when no LISTEN URL is given (notifications never cross the pooler)', async () => {
    const app = t.app({ databaseUrl: bouncer.url, preparedStatements: false, resultPollIntervalMs: 100 });
    const flaky = defineFlaky(app);
    const worker = createWorker(app, { concurrency: 4, pollIntervalMs: 100, maintenance: false });
    await worker.start();
    try {
      const handles = await flaky.sendMany(Array.from({ length: 20 }, (_, n) => ({ input: { n: n + 100 } })));
      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
      expect(results).toEqual(handles.map((_, n) => ({ ok: true, value: (n + 100) * 2 })));
    } finally {
      await worker.stop();
    }
  });

  it("runs the maintenance leader's reaper through it: a run whose worker vanished is written off and retried", async () => {
    const recovery = {
      runnerHeartbeatIntervalMs: 100,
      runningStaleThresholdMs: 400,
      claimerHeartbeatIntervalMs: 100,
      claimedStaleThresholdMs: 400,
      checkIntervalMs: 100,
    };
    const app = t.app({
      databaseUrl: bouncer.url,
      listenUrl: databaseUrl(),
      preparedStatements: false,
      recovery,
    });
    const work = app.task({
      name: 'bouncer.reaped',
      input: z.object({}),
      retry: { maxRetries: 1, retryOn: ['WORKER_CRASHED'], backoff: 'constant', baseDelayMs: 0 },
      handler: (_input, ctx) => ctx.attempt,
    });
    // A run left RUNNING by a worker that is gone: started, no heartbeat ever.
    const handle = await work.send({});
    await t.query(
      `UPDATE {{schema}}.horsies_tasks
       SET status = 'RUNNING', claimed = true, claimed_at = now() - interval '1 minute',
           started_at = now() - interval '1 minute', attempt = 1, claim_generation = claim_generation + 1,
           claimed_by_worker_id = 'gone-worker'
       WHERE id = $1`,
      [handle.id],
    );
    const worker = createWorker(app, { concurrency: 2, pollIntervalMs: 100 });
    await worker.start();
    try {
      expect(await handle.result({ timeoutMs: 30_000 })).toEqual({ ok: true, value: 2 });
      const attempts = await eventually(async () => {
        const rows = await t.query<{ attempt: number; outcome: string }>(
          'SELECT attempt, outcome FROM {{schema}}.horsies_task_attempts WHERE task_id = $1 ORDER BY attempt',
          [handle.id],
        );
        return rows.length === 2 && rows;
      });
      expect(attempts).toEqual([
        { attempt: 1, outcome: 'WORKER_FAILURE' },
        { attempt: 2, outcome: 'COMPLETED' },
      ]);
    } finally {
      await worker.stop();
    }
  });

  it('commits ctx.transaction on pipelined connections, and rolls it back when the fence refuses', async () => {
    await t.query('CREATE TABLE IF NOT EXISTS {{schema}}.bouncer_effects (task_id text NOT NULL)');
    const app = t.app({ databaseUrl: bouncer.url, listenUrl: databaseUrl(), preparedStatements: false });
    const insert = `INSERT INTO "${t.schema}".bouncer_effects (task_id) VALUES ($1)`;
    const work = app.task({
      name: 'bouncer.transactional',
      input: z.object({ refuse: z.boolean() }),
      handler: ({ refuse }, ctx) =>
        ctx.transaction(async (tx) => {
          await tx.query(insert, [ctx.taskId]);
          // A cancel request the worker does not hear of (no trigger, no notification): only the fence sees it.
          if (refuse) await requestCancelSilently(t, ctx.taskId);
          return ctx.taskId;
        }),
    });
    const worker = createWorker(app, { concurrency: 8, pollIntervalMs: 60_000, maintenance: false });
    await worker.start();
    try {
      const handles = await work.sendMany(
        Array.from({ length: 40 }, (_, n) => ({ input: { refuse: n % 10 === 9 } })),
      );
      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
      expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(
        handles.map((_, n) => (n % 10 === 9 ? 'TASK_CANCELLED' : 'ok')),
      );
      const rows = await t.query<{ task_id: string }>('SELECT task_id FROM {{schema}}.bouncer_effects');
      expect(rows.map((r) => r.task_id).sort()).toEqual(
        handles
          .filter((_, n) => n % 10 !== 9)
          .map((h) => h.id)
          .sort(),
      );
    } finally {
      await worker.stop();
    }
  });

  it(
    'passes the fault suite (short mode, smaller) with the workers behind PgBouncer',
    { timeout: 170_000 },
    async () => {
      const seed = Number(process.env.HORSIES_FAULT_SEED ?? Math.floor(Math.random() * 1_000_000));
      const options = {
        ...SHORT_MODE,
        kills: 10,
        restarts: 1,
        netFaults: 3,
        listenDrops: 2,
        durationMs: 15_000,
      };
      const report = await runFaults({ ...options, seed, pgbouncer: true });
      console.log(formatReport(report));
      expect(report.pgbouncer).toBe(true);
      expect(report.faults.kill).toBe(options.kills);
      expect(report.faults.restart).toBe(options.restarts);
      expect(report.invariants.map((i) => i.name)).toContain('no prepared-statement error');
      expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
    },
  );
});
