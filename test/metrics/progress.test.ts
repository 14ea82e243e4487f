/**
 * `ctx.progress()`: a handler's progress, written throttled and fenced, readable by getTask, the CLI and the
 * dashboard, and announced on `task_progress`.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { channels } from '../../src/db/Listener.js';
import { TaskProgressSet } from '../../src/db/progress.js';
import { NotSerializableError, TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { MAX_PROGRESS_BYTES, ProgressTooLargeError } from '../../src/worker/ProgressReporter.js';
import { runCli } from '../support/cli.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { listenTo } from '../support/notifications.js';
import { serveDashboard } from '../dashboard/support.js';
import { fixtureModule, importFixture } from '../support/fixtures.js';
import { gate } from '../support/gate.js';

const t = await useTestSchema();

/** A gate a handler waits on until the test opens it. */

describe('ctx.progress', () => {
  it('is readable while the task runs, throttled, and its last value is stored before the outcome', async () => {
    const app = t.app({ queues: ['progress'] });
    const hold = gate();
    const task = app.task({
      name: 'p.steps',
      queue: 'progress',
      input: z.object({ steps: z.number() }),
      handler: async ({ steps }, ctx) => {
        ctx.progress({ done: 0, total: steps });
        await hold.wait;
        // A burst: throttled into a few writes, the last value kept.
        for (let done = 1; done <= steps; done += 1) ctx.progress({ done, total: steps });
        return steps;
      },
    });
    const listening = await listenTo([channels.taskProgress(t.schema)]);
    const worker = createWorker(app, { queues: ['progress'] });
    await worker.start();
    try {
      const handle = await task.send({ steps: 200 });
      // The first report is written at once, and announced with the task's id.
      await eventually(async () => listening.received.some((n) => n.payload === handle.id));
      const running = await app.getTask(handle.id);
      expect(running?.status).toBe('RUNNING');
      expect(running?.progress).toMatchObject({ value: { done: 0, total: 200 }, attempt: 1 });
      expect(running?.progress?.at).toBeInstanceOf(Date);

      hold.open();
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 200 });
      const done = await app.getTask(handle.id);
      expect(done?.progress?.value).toEqual({ done: 200, total: 200 });
      await listening.settled();
      const writes = listening.received.filter((n) => n.payload === handle.id).length;
      // 201 reports, a handful of writes: the first, maybe one in the burst, and the last before the outcome.
      expect(writes).toBeGreaterThanOrEqual(2);
      expect(writes).toBeLessThanOrEqual(4);

      // The CLI shows it, as text and as JSON.
      const env = { DATABASE_URL: databaseUrl(), HORSIES_SCHEMA: t.schema };
      const shown = await runCli(['tasks', 'show', handle.id], env);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(/^progress\s+\{"done":200,"total":200\} \(attempt 1, /m);
      const asJson = await runCli(['tasks', 'show', handle.id, '--json'], env);
      expect(JSON.parse(asJson.stdout).progress).toMatchObject({
        value: { done: 200, total: 200 },
        attempt: 1,
      });
    } finally {
      await worker.stop();
      await listening.end();
    }
  });

  it('refuses a value JSON cannot carry, or one over the size limit, at the call', async () => {
    const app = t.app({ queues: ['badprogress'] });
    const task = app.task({
      name: 'p.bad',
      queue: 'badprogress',
      input: z.object({ kind: z.enum(['bigint', 'large']) }),
      handler: ({ kind }, ctx) => {
        try {
          ctx.progress((kind === 'bigint' ? { n: 1n } : 'x'.repeat(MAX_PROGRESS_BYTES)) as unknown as string);
        } catch (error) {
          if (error instanceof NotSerializableError) return new TaskError('NOT_JSON', error.message);
          if (error instanceof ProgressTooLargeError) return new TaskError('TOO_LARGE', error.message);
          throw error;
        }
        return 'accepted';
      },
    });
    const worker = createWorker(app, { queues: ['badprogress'] });
    await worker.start();
    try {
      const bigint = await task.send({ kind: 'bigint' });
      const large = await task.send({ kind: 'large' });
      const first = await bigint.result({ timeoutMs: 10_000 });
      const second = await large.result({ timeoutMs: 10_000 });
      expect(first.ok ? null : first.error.code).toBe('NOT_JSON');
      expect(second.ok ? null : second.error.code).toBe('TOO_LARGE');
      expect((await app.getTask(bigint.id))?.progress).toBeNull();
      expect((await app.getTask(large.id))?.progress).toBeNull();
    } finally {
      await worker.stop();
    }
  });

  it('is fenced: a writer whose claim was superseded, or a task not running, changes nothing', async () => {
    const app = t.app({ queues: ['fenced'] });
    const hold = gate();
    const task = app.task({
      name: 'p.fenced',
      queue: 'fenced',
      input: z.object({}),
      handler: async () => {
        await hold.wait;
        return null;
      },
    });
    const worker = createWorker(app, { queues: ['fenced'] });
    const started = new Promise<string>((resolve) => {
      worker.on('task:started', (id) => resolve(id));
    });
    await worker.start();
    try {
      const handle = await task.send({});
      await started;
      const [row] = await t.query<{ claimed_by_worker_id: string; claim_token: string }>(
        'SELECT claimed_by_worker_id, claim_token FROM {{schema}}.horsies_tasks WHERE id = $1',
        [handle.id],
      );
      const write = (workerId: string, token: string) =>
        app.db.run(TaskProgressSet, {
          id: handle.id,
          workerId,
          token,
          value: '"late"',
          channel: channels.taskProgress(t.schema),
        });
      expect(await write(row!.claimed_by_worker_id, randomUUID())).toEqual([]);
      expect(await write('another-worker', row!.claim_token)).toEqual([]);
      expect((await app.getTask(handle.id))?.progress).toBeNull();
      hold.open();
      await handle.result({ timeoutMs: 10_000 });
      expect(await write(row!.claimed_by_worker_id, row!.claim_token)).toEqual([]);
      expect((await app.getTask(handle.id))?.progress).toBeNull();
    } finally {
      hold.open();
      await worker.stop();
    }
  });

  it('shows on the dashboard: the task API returns it and the live feed names the task', async () => {
    const app = t.app({ queues: ['shown'] });
    const hold = gate();
    const task = app.task({
      name: 'p.shown',
      queue: 'shown',
      input: z.object({}),
      handler: async (_input, ctx) => {
        ctx.progress(0.25);
        await hold.wait;
        return null;
      },
    });
    const served = await serveDashboard(app, { live: { debounceMs: 10 } });
    // An open event stream keeps the feed listening.
    const stream = await fetch(`${served.url}api/events`);
    await new Promise<void>((resolve) => served.dashboard.live.once('listening', () => resolve()));
    const worker = createWorker(app, { queues: ['shown'] });
    await worker.start();
    try {
      const handle = await task.send({});
      const [event] = await new Promise<[{ progress: string[] }]>((resolve) => {
        const onChange = (e: { progress: string[] }): void => {
          if (!e.progress.includes(handle.id)) return;
          served.dashboard.live.off('change', onChange);
          resolve([e]);
        };
        served.dashboard.live.on('change', onChange);
      });
      expect(event.progress).toContain(handle.id);
      const detail = await served.get<{ progress: unknown; progress_attempt: number; status: string }>(
        `api/tasks/${handle.id}`,
      );
      expect(detail.status).toBe(200);
      expect(detail.body).toMatchObject({ progress: 0.25, progress_attempt: 1, status: 'RUNNING' });
    } finally {
      hold.open();
      await worker.stop();
      await stream.body?.cancel();
    }
  });

  it('comes from the thread of a blocking task too', async () => {
    // The thread loads the app module again, with the environment as it is when it starts: keep it set.
    const fixture = await importFixture(
      { schema: t.schema, keep: true },
      () => import('../fixtures/progressApp.js'),
    );
    const worker = createWorker(fixture.app, {
      appModule: fixtureModule('progressApp.ts'),
      blockingThreads: 1,
    });
    await worker.start();
    try {
      const handle = await fixture.crunch.send({ steps: 50 });
      expect(await handle.result({ timeoutMs: 20_000 })).toEqual({ ok: true, value: 50 });
      expect((await fixture.app.getTask(handle.id))?.progress).toMatchObject({
        value: { done: 50, total: 50, thread: true },
        attempt: 1,
      });
    } finally {
      await worker.stop();
      await fixture.app.close();
    }
  });
});
