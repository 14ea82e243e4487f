/**
 * Crash recovery with real worker processes killed by SIGKILL: claimed tasks are requeued and run elsewhere,
 * a task killed mid-run fails WORKER_CRASHED (or is retried when its policy says so), and a late finisher
 * changes nothing.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/client/App.js';
import { Reaper } from '../../src/recovery/Reaper.js';
import type { ReaperResult } from '../../src/recovery/Reaper.js';
import { databaseUrl, eventually, useTestSchema, waitForEvent, trackStarts } from '../support/db.js';
import { fixtureModule, importFixture } from '../support/fixtures.js';
import { startWorkerProcess } from '../support/processes.js';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import { ManualClock } from '../../src/clock.js';

const t = await useTestSchema();
await t.query('CREATE TABLE {{schema}}.test_runs (task_id text NOT NULL, worker_pid int NOT NULL)');

const recovery = {
  claimerHeartbeatIntervalMs: 100,
  claimedStaleThresholdMs: 600,
  runnerHeartbeatIntervalMs: 100,
  runningStaleThresholdMs: 600,
  checkIntervalMs: 200,
};

// The in-process survivor uses the same app module as the worker processes, configured through the environment.
const fixture = await importFixture({ schema: t.schema, recovery }, () => import('../fixtures/app.js'));
const appModule = fixtureModule('app.ts');
const app: App = fixture.app;
afterAll(() => app.close());

const env = { databaseUrl: databaseUrl(), schema: t.schema, recovery };

async function attemptsOf(ids: string[]) {
  return t.query<{ task_id: string; attempt: number; outcome: string; error_code: string | null }>(
    'SELECT task_id, attempt, outcome, error_code FROM {{schema}}.horsies_task_attempts WHERE task_id = ANY($1) ORDER BY task_id, attempt',
    [ids],
  );
}

function reaperEvent(worker: Worker, match: (r: ReaperResult) => boolean) {
  return waitForEvent(
    worker,
    'maintenance:ran',
    (service, result) => service === 'reaper' && match(result as ReaperResult),
    15_000,
  );
}

describe('a worker killed with SIGKILL', () => {
  it('has its CLAIMED tasks requeued and completed elsewhere, and its RUNNING task failed WORKER_CRASHED', async () => {
    const victim = startWorkerProcess(env, ['--concurrency', '1', '--prefetch', '5', '--no-maintenance']);
    await victim.ready;
    const running = await fixture.sleepy.send({ ms: 60_000 });
    await eventually(async () => (await app.getTask(running.id))?.status === 'RUNNING');
    const queued = await fixture.record.sendMany(Array.from({ length: 5 }, (_, n) => ({ input: { n } })));
    const queuedIds = queued.map((h) => h.id);
    await eventually(async () => (await t.statusCounts(queuedIds)).CLAIMED === 5);

    victim.child.kill('SIGKILL');
    const killedAt = Date.now();
    expect(await victim.exited).toBe('SIGKILL');

    const survivor = createWorker(app, { concurrency: 5, appModule });
    const requeued = reaperEvent(survivor, (r) => queuedIds.every((id) => r.requeued.includes(id)));
    const crashed = reaperEvent(survivor, (r) => r.failed.includes(running.id));
    await survivor.start();
    await requeued;
    const requeueMs = Date.now() - killedAt;
    const results = await Promise.all(queued.map((h) => h.result({ timeoutMs: 15_000 })));
    expect(results).toEqual([0, 2, 4, 6, 8].map((value) => ({ ok: true, value })));
    const completedMs = Date.now() - killedAt;
    await crashed;

    const attempts = await attemptsOf([...queuedIds, running.id]);
    // The requeued tasks never ran in the killed worker: one attempt each, completed by the survivor.
    for (const id of queuedIds) {
      expect(attempts.filter((a) => a.task_id === id)).toEqual([
        { task_id: id, attempt: 1, outcome: 'COMPLETED', error_code: null },
      ]);
    }
    expect(attempts.filter((a) => a.task_id === running.id)).toEqual([
      { task_id: running.id, attempt: 1, outcome: 'WORKER_FAILURE', error_code: 'WORKER_CRASHED' },
    ]);
    const result = await running.result({ timeoutMs: 1_000 });
    expect(result.ok ? null : result.error.code).toBe('WORKER_CRASHED');
    const runs = await t.query<{ task_id: string }>(
      'SELECT task_id FROM {{schema}}.test_runs WHERE task_id = ANY($1)',
      [queuedIds],
    );
    expect(runs.map((r) => r.task_id).sort()).toEqual([...queuedIds].sort());
    const bound = recovery.claimedStaleThresholdMs + recovery.checkIntervalMs;
    console.log(
      `kill → claimed tasks requeued: ${requeueMs} ms (claimedStaleThresholdMs + checkIntervalMs = ${bound} ms); ` +
        `kill → all five completed elsewhere: ${completedMs} ms`,
    );
    expect(requeueMs).toBeLessThan(bound + 5_000);
    await survivor.stop();
  });

  it('retries a task killed mid-run when its policy lists WORKER_CRASHED, and it completes elsewhere', async () => {
    const victim = startWorkerProcess(env, ['--concurrency', '1', '--no-maintenance']);
    await victim.ready;
    const handle = await fixture.crashy.send({ ms: 60_000 });
    await eventually(async () => (await app.getTask(handle.id))?.status === 'RUNNING');
    // The idle worker started it in its claim (PENDING → RUNNING in one update): both timestamps are the
    // claim's, and the run's heartbeats go out as for any running task.
    const [direct] = await t.query<{ claimed_at: Date; started_at: Date }>(
      'SELECT claimed_at, started_at FROM {{schema}}.horsies_tasks WHERE id = $1',
      [handle.id],
    );
    expect(direct!.started_at).toEqual(direct!.claimed_at);
    await eventually(
      async () =>
        (
          await t.query(
            `SELECT 1 FROM {{schema}}.horsies_heartbeats WHERE task_id = $1 AND role = 'runner'`,
            [handle.id],
          )
        ).length > 0,
    );
    victim.child.kill('SIGKILL');
    await victim.exited;

    const survivor = createWorker(app, { concurrency: 2, appModule });
    await survivor.start();
    expect(await handle.result({ timeoutMs: 15_000 })).toEqual({ ok: true, value: 2 });
    const attempts = await t.query<{
      attempt: number;
      outcome: string;
      will_retry: boolean;
      error_code: string | null;
    }>(
      'SELECT attempt, outcome, will_retry, error_code FROM {{schema}}.horsies_task_attempts WHERE task_id = $1 ORDER BY attempt',
      [handle.id],
    );
    expect(attempts).toEqual([
      { attempt: 1, outcome: 'WORKER_FAILURE', will_retry: true, error_code: 'WORKER_CRASHED' },
      { attempt: 2, outcome: 'COMPLETED', will_retry: false, error_code: null },
    ]);
    expect(await app.getTask(handle.id)).toMatchObject({ status: 'COMPLETED', retryCount: 1 });
    await survivor.stop();
  });
});

describe('a worker killed with SIGKILL while tasks it started ahead wait for a slot (prefetch.startAhead)', () => {
  it('has them ended as crashed attempts by the reaper, retried as their policy says, and run once elsewhere', async () => {
    const victim = startWorkerProcess(env, [
      '--concurrency',
      '1',
      '--prefetch',
      '5',
      '--start-prefetched',
      '--no-maintenance',
    ]);
    await victim.ready;
    const running = await fixture.sleepy.send({ ms: 60_000 });
    await eventually(async () => (await app.getTask(running.id))?.status === 'RUNNING');
    const ahead = await fixture.crashy.sendMany(Array.from({ length: 5 }, () => ({ input: { ms: 0 } })));
    const aheadIds = ahead.map((h) => h.id);
    // Started by the claim that took them (both timestamps its own), beaten for as running tasks, not run.
    await eventually(async () => (await t.statusCounts(aheadIds)).RUNNING === 5);
    const rows = await t.query<{ claimed_at: Date; started_at: Date; attempt: number }>(
      'SELECT claimed_at, started_at, attempt FROM {{schema}}.horsies_tasks WHERE id = ANY($1)',
      [aheadIds],
    );
    for (const row of rows)
      expect(row).toEqual({ claimed_at: row.started_at, started_at: row.started_at, attempt: 1 });
    await eventually(
      async () =>
        (
          await t.query(
            `SELECT DISTINCT task_id FROM {{schema}}.horsies_heartbeats WHERE role = 'runner' AND task_id = ANY($1)`,
            [aheadIds],
          )
        ).length === 5,
    );
    victim.child.kill('SIGKILL');
    await victim.exited;

    const survivor = createWorker(app, { concurrency: 5, appModule });
    const crashed = reaperEvent(survivor, (r) => aheadIds.every((id) => r.retried.includes(id)));
    await survivor.start();
    await crashed;
    expect(await Promise.all(ahead.map((h) => h.result({ timeoutMs: 15_000 })))).toEqual(
      ahead.map(() => ({ ok: true, value: 2 })),
    );
    const attempts = await attemptsOf(aheadIds);
    for (const id of aheadIds) {
      expect(attempts.filter((a) => a.task_id === id)).toEqual([
        { task_id: id, attempt: 1, outcome: 'WORKER_FAILURE', error_code: 'WORKER_CRASHED' },
        { task_id: id, attempt: 2, outcome: 'COMPLETED', error_code: null },
      ]);
    }
    // Their handlers ran once each, in the survivor: never in the killed worker.
    const runs = await t.query<{ task_id: string; worker_pid: number }>(
      'SELECT task_id, worker_pid FROM {{schema}}.test_runs WHERE task_id = ANY($1)',
      [aheadIds],
    );
    expect(runs.map((r) => r.task_id).sort()).toEqual([...aheadIds].sort());
    expect(new Set(runs.map((r) => r.worker_pid))).toEqual(new Set([process.pid]));
    await survivor.stop();
  });
});

describe('a late finisher', () => {
  it('changes nothing after the reaper acted, and learns from its next heartbeat that the claim is gone', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    let aborted: unknown = null;
    // A worker that does not heartbeat in time (long interval): the reaper, with a short threshold, judges it dead.
    const slowApp = t.app({
      recovery: { runnerHeartbeatIntervalMs: 60_000, runningStaleThresholdMs: 120_000 },
    });
    const gated = slowApp.task({
      name: 'late.gated',
      input: fixture.record.input,
      handler: async (_input, ctx) => {
        ctx.signal.addEventListener('abort', () => (aborted = ctx.signal.reason));
        await gate;
        return 'late';
      },
    });
    const worker = createWorker(slowApp, { maintenance: false, shutdown: { abortGraceMs: 10_000 } });
    const started = trackStarts(worker);
    await worker.start();
    const handle = await gated.send({ n: 1 });
    await started(handle.id);

    // Seen from a clock 200 ms past the threshold, the run has been silent too long: no need to wait for it.
    const [row] = await t.query<{ started_at: Date }>(
      'SELECT started_at FROM {{schema}}.horsies_tasks WHERE id = $1',
      [handle.id],
    );
    const startedAt = row!.started_at;
    const threshold = slowApp.config.recovery.runningStaleThresholdMs;
    const later = new ManualClock(new Date(startedAt.getTime() + threshold + 200));
    const reaper = new Reaper(slowApp.db, slowApp.config.recovery, { clock: later });
    expect((await new Reaper(slowApp.db, slowApp.config.recovery).runOnce()).failed).toEqual([]);
    const verdict = await reaper.runOnce();
    expect(verdict.failed).toContain(handle.id);

    const lost = waitForEvent(worker, 'task:lost', (ids) => ids.includes(handle.id));
    expect(await worker.beat('runner')).not.toContain(handle.id);
    await lost;
    expect(aborted).toBeInstanceOf(Error);

    const finished = waitForEvent(worker, 'task:finished', (_written, lostIds) =>
      lostIds.includes(handle.id),
    );
    release();
    await finished;
    const task = await slowApp.getTask(handle.id, { attempts: true });
    expect(task).toMatchObject({ status: 'FAILED', errorCode: 'WORKER_CRASHED' });
    expect(task?.attempts?.map((a) => a.outcome)).toEqual(['WORKER_FAILURE']);
    await worker.stop();
  });
});
