/**
 * Blocking (CPU-bound) tasks run on worker threads: the worker's event loop stays free to heartbeat, so a long
 * spin is not reaped; the same spin on the main thread starves the heartbeats and is reaped. A blocking task
 * past its timeout has its thread terminated and replaced; error mapping and the context work across threads.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { App } from '../../src/client/App.js';
import type { TaskFinishRow } from '../../src/db/tasks.js';
import { ConfigError } from '../../src/errors.js';
import { databaseUrl, eventually, useTestSchema, waitForEvent, trackStarts } from '../support/db.js';
import { fixtureModule, importFixture } from '../support/fixtures.js';
import { spinFor } from '../support/spin.js';
import { startWorkerProcess } from '../support/processes.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();
await t.query('CREATE TABLE {{schema}}.test_runs (task_id text NOT NULL, worker_pid int NOT NULL)');

const recovery = {
  runnerHeartbeatIntervalMs: 100,
  runningStaleThresholdMs: 500,
  claimerHeartbeatIntervalMs: 100,
  claimedStaleThresholdMs: 500,
  checkIntervalMs: 200,
};

// The fixture modules read their settings at import time; the threads of blocking tasks import them again, with
// a copy of this environment taken when each thread starts, so the variables stay set for the whole file (it
// runs in its own process). Worker processes started by this file inherit them too.
const fixtureEnv = { schema: t.schema, recovery, keep: true };
const fixture = await importFixture(fixtureEnv, () => import('../fixtures/app.js'));
const blocking = await importFixture(fixtureEnv, () => import('../fixtures/blockingApp.js'));
const appModule = fixtureModule('app.ts');
const blockingModule = fixtureModule('blockingApp.ts');
afterAll(async () => {
  await fixture.app.close();
  await blocking.app.close();
});

interface Heartbeat {
  sent_at: Date;
  sender_id: string;
}

async function runnerHeartbeats(taskId: string): Promise<Heartbeat[]> {
  return t.query<Heartbeat & Record<string, unknown>>(
    `SELECT sent_at, sender_id FROM {{schema}}.horsies_heartbeats
     WHERE task_id = $1 AND role = 'runner' ORDER BY sent_at`,
    [taskId],
  );
}

/** Largest gap between consecutive ticks of a 50 ms interval, measured until `stop()` is called. */
function measureEventLoop(): { stop(): number } {
  let last = performance.now();
  let maxGap = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
  }, 50);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(maxGap, performance.now() - last);
    },
  };
}

describe('a CPU-bound blocking task', () => {
  it('runs longer than the runner stale threshold without being reaped, and the event loop stays free', async () => {
    const app: App = fixture.app;
    const worker = createWorker(app, { appModule, blockingThreads: 1 });
    const started = trackStarts(worker);
    const elected = waitForEvent(worker, 'leader:elected');
    let reaperPasses = 0;
    const reaped: string[] = [];
    worker.on('maintenance:ran', (service, result) => {
      if (service !== 'reaper') return;
      reaperPasses += 1;
      reaped.push(...(result as { failed: string[]; retried: string[] }).failed);
    });
    await worker.start();
    await elected;
    try {
      const handle = await fixture.spin.send({ ms: 2000 });
      await started(handle.id);
      const loop = measureEventLoop();
      const passesBefore = reaperPasses;
      const result = await handle.result({ timeoutMs: 15_000 });
      const maxGapMs = loop.stop();
      const passesDuring = reaperPasses - passesBefore;

      expect(result).toEqual({ ok: true, value: { spunMs: 2000, x: true } });
      const task = await app.getTask(handle.id, { attempts: true });
      expect(task?.status).toBe('COMPLETED');
      expect(task?.attempts?.map((a) => [a.attempt, a.outcome])).toEqual([[1, 'COMPLETED']]);
      expect(reaped).not.toContain(handle.id);
      // The leader's reaper really looked while the task ran (every 200 ms over ~2 s).
      expect(passesDuring).toBeGreaterThanOrEqual(4);

      // Runner heartbeats kept coming during the spin (every 100 ms over 2 s), from this worker, never as far
      // apart as the 500 ms stale threshold.
      const beats = await runnerHeartbeats(handle.id);
      expect(beats.length).toBeGreaterThanOrEqual(8);
      expect(new Set(beats.map((b) => b.sender_id))).toEqual(new Set([worker.id]));
      const times = [task!.startedAt!, ...beats.map((b) => b.sent_at)].map((d) => d.getTime());
      const beatGaps = times.slice(1).map((time, i) => time - times[i]!);
      const maxBeatGapMs = Math.max(...beatGaps);
      expect(maxBeatGapMs).toBeLessThan(recovery.runningStaleThresholdMs);

      // The main event loop kept ticking while the thread spun (logged: a figure, not a timed assertion).
      console.log(
        `blocking spin 2000 ms: ${beats.length} runner heartbeats, largest heartbeat gap ${maxBeatGapMs} ms, ` +
          `${passesDuring} reaper passes, largest event-loop gap ${maxGapMs.toFixed(0)} ms`,
      );
    } finally {
      await worker.stop();
    }
  });

  it('spun on the main thread instead, starves the heartbeats and is reaped by a leader in another process', async () => {
    // An in-process leader could not reap the task: its reaper shares the event loop the spin blocks, and runs
    // only after the spin, when the starved worker's own heartbeat and finish race it. The leader therefore runs
    // in a worker process (the fixture app, which has no task of this name, so it only does maintenance here).
    const leader = startWorkerProcess({ databaseUrl: databaseUrl(), schema: t.schema, recovery });
    try {
      await leader.ready;
      const pid = leader.child.pid!;
      await eventually(async () => {
        const rows = await t.query(
          `SELECT 1 FROM {{schema}}.horsies_leaders
           WHERE name = 'maintenance' AND leader_id LIKE $1 AND expires_at > now()`,
          [`%:${pid}:%`],
        );
        return rows.length === 1;
      });

      const app = t.app({ recovery });
      const mainThreadSpin = app.task({
        name: 'spin.mainThread',
        input: z.object({ ms: z.number().int().min(0) }),
        handler: ({ ms }) => spinFor(ms),
      });
      const worker = createWorker(app, { maintenance: false });
      await worker.start();
      try {
        const handle = await mainThreadSpin.send({ ms: 1500 });
        // The spin blocks this process from the handler's start; the worker's finish, written afterwards, is
        // fenced out because the leader failed the task in the meantime.
        const [, lost] = await waitForEvent(
          worker,
          'task:finished',
          (finished: TaskFinishRow[], lostIds: string[]) =>
            lostIds.includes(handle.id) || finished.some((f) => f.id === handle.id),
          15_000,
        );
        expect(lost).toContain(handle.id);

        const task = await app.getTask(handle.id, { attempts: true });
        expect(task).toMatchObject({ status: 'FAILED', errorCode: 'WORKER_CRASHED' });
        expect(task?.attempts?.map((a) => [a.outcome, a.errorCode])).toEqual([
          ['WORKER_FAILURE', 'WORKER_CRASHED'],
        ]);
        expect(await handle.result({ timeoutMs: 1_000 })).toMatchObject({
          ok: false,
          error: { code: 'WORKER_CRASHED' },
        });
        // The starvation itself: not one runner heartbeat while the main thread spun.
        const startedAt = task!.startedAt!.getTime();
        const during = (await runnerHeartbeats(handle.id)).filter(
          (b) => b.sent_at.getTime() < startedAt + 1400,
        );
        expect(during).toEqual([]);
      } finally {
        await worker.stop();
      }
    } finally {
      leader.child.kill('SIGTERM');
      await leader.exited;
    }
  });
});

type ContextValue = { taskId: string; attempt: number; threadId: number };

function valueOf<T>(result: { ok: true; value: T } | { ok: false; error: unknown }): T {
  if (!result.ok) throw new Error(`expected a value, got ${JSON.stringify(result.error)}`);
  return result.value;
}

describe('a blocking task on a thread', () => {
  it('past its timeout has its thread terminated and replaced; errors are mapped; the context is passed', async () => {
    const app: App = blocking.app;
    // One thread: the task after the timeout can only run soon if the spinning thread was replaced.
    const worker = createWorker(app, {
      appModule: blockingModule,
      blockingThreads: 1,
      shutdown: { abortGraceMs: 100 },
      maintenance: false,
    });
    const scratch = mkdtempSync(join(tmpdir(), 'horsies-blocking-'));
    await worker.start();
    try {
      // Warm-up (no timeout): the thread has loaded the app, so the timeout below is spent in the spin.
      const first = await blocking.spinContext.send({ ms: 10 });
      const firstValue = valueOf(await first.result({ timeoutMs: 30_000 })) as ContextValue;
      expect(firstValue).toMatchObject({ taskId: first.id, attempt: 1 });
      expect(firstValue.threadId).toBeGreaterThan(0);

      const doneFile = join(scratch, 'spin-finished');
      const slow = await blocking.spinTimeout.send({ ms: 5000, doneFile });
      const slowResult = await slow.result({ timeoutMs: 10_000 });
      expect(slowResult).toMatchObject({ ok: false, error: { code: 'TASK_TIMEOUT' } });
      const slowTask = await app.getTask(slow.id, { attempts: true });
      expect(slowTask).toMatchObject({ status: 'FAILED', errorCode: 'TASK_TIMEOUT' });
      expect(slowTask?.attempts?.map((a) => [a.attempt, a.outcome, a.errorCode])).toEqual([
        [1, 'FAILED', 'TASK_TIMEOUT'],
      ]);
      // The attempt ended before the 5 s spin could have (database clock): the outcome did not wait for it.
      const [attempt] = slowTask!.attempts!;
      const attemptMs = attempt!.finishedAt.getTime() - attempt!.startedAt!.getTime();
      expect(attemptMs).toBeLessThan(5_000);

      // The next blocking task runs on a fresh thread: the only one there was got terminated and replaced.
      const next = await blocking.spinContext.send({ ms: 10 });
      const nextValue = valueOf(await next.result({ timeoutMs: 10_000 })) as ContextValue;
      expect(nextValue).toMatchObject({ taskId: next.id, attempt: 1 });
      expect(nextValue.threadId).not.toBe(firstValue.threadId);

      const thrown = await blocking.spinThrows.send({ ms: 10 });
      expect(await thrown.result({ timeoutMs: 10_000 })).toMatchObject({
        ok: false,
        error: { code: 'MY_CODE', message: 'MyError: mapped failure', data: { name: 'MyError' } },
      });
      expect(await app.getTask(thrown.id)).toMatchObject({ status: 'FAILED', errorCode: 'MY_CODE' });

      const returned = await blocking.spinOwnError.send({ ms: 10 });
      expect(await returned.result({ timeoutMs: 10_000 })).toMatchObject({
        ok: false,
        error: { code: 'OWN_CODE', message: 'the handler returned its own error', data: { spunMs: 10 } },
      });
      expect(await app.getTask(returned.id)).toMatchObject({ status: 'FAILED', errorCode: 'OWN_CODE' });
      // The timed-out spin never reached its end: its thread was terminated, not left to burn a core. The outcome
      // is written only once terminate() resolved (the thread's exit), and the one thread of the pool was
      // replaced (the thread ids above differ), so a spin that could still finish would have to be that thread.
      expect(existsSync(doneFile)).toBe(false);
      console.log(
        `blocking timeout 600 ms (shutdown.abortGraceMs 100) on a 5 s spin: the attempt lasted ${attemptMs} ms`,
      );
    } finally {
      await worker.stop();
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('counts only its own run against its timeout, not the wait for a busy thread', async () => {
    // Three 300 ms spins with a 600 ms timeout on one thread: each run fits its timeout with 300 ms to spare (for
    // a loaded machine), but the third waits ~600 ms for the thread. An execution timeout must not fail a handler
    // for time it spent queued (nor for a thread's start-up): it would end TASK_TIMEOUT having run for little or
    // nothing.
    const app: App = blocking.app;
    const worker = createWorker(app, {
      appModule: blockingModule,
      blockingThreads: 1,
      concurrency: 3,
      shutdown: { abortGraceMs: 0 },
      maintenance: false,
    });
    await worker.start();
    try {
      const warm = await blocking.spinContext.send({ ms: 0 });
      expect((await warm.result({ timeoutMs: 30_000 })).ok).toBe(true);
      const spins = Array.from({ length: 3 }, () => ({ input: { ms: 300 } }));
      const handles = await blocking.spinTimeout.sendMany(spins);
      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
      expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['ok', 'ok', 'ok']);
    } finally {
      await worker.stop();
    }
  });
});

describe('a worker for an app with blocking tasks', () => {
  it('requires appModule', () => {
    const app = t.app();
    app.task({ name: 'needs.thread', blocking: true, input: z.object({}), handler: () => null });
    let error: unknown = null;
    try {
      createWorker(app, { concurrency: 2 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.map((p) => p.field)).toEqual(['appModule']);
    expect((error as ConfigError).message).toMatch(/appModule/);
  });
});
