/**
 * Flow control on the claim side: a rate limit held exactly across worker processes (counted from the rows'
 * started_at), an upstream's throttle pausing its limiter without using the task's retries, claims taking groups
 * in turn, a tenant's burst of 100,000 tasks not starving a small one, the reason getTask gives for a waiting
 * task, and bad configuration refused.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, TaskThrottledError, createApp } from '../../src/index.js';
import { TaskClaimLimited, TaskStartLimited } from '../../src/db/flow.js';
import { createWorker } from '../../src/worker/Worker.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { startWorkerProcess } from '../support/processes.js';
import { runCli } from '../support/cli.js';

const t = await useTestSchema();
await t.query(
  `CREATE TABLE {{schema}}.cap_runs (task_id text, queue text, label text, started bigint, finished bigint, pid int)`,
);

/** Most starts within any window of `windowMs` (from the start times, in µs since the epoch). */
function mostStartsInWindow(startsUs: number[], windowMs: number): number {
  const sorted = [...startsUs].sort((a, b) => a - b);
  let most = 0;
  let first = 0;
  for (let last = 0; last < sorted.length; last += 1) {
    while (sorted[last]! - sorted[first]! >= windowMs * 1000) first += 1;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

describe('rate limits', () => {
  it('hold exactly across three worker processes, counted from the rows started_at', async () => {
    const limit = { max: 4, intervalMs: 300 };
    const appConfig = { queues: [{ name: 'rated', rateLimit: limit }] };
    const env = {
      databaseUrl: databaseUrl(),
      schema: t.schema,
      appConfig,
      module: 'test/fixtures/capacityApp.ts',
    };
    const workers = [0, 1, 2].map(() =>
      startWorkerProcess(env, ['--concurrency', '4', '--poll-interval', '50']),
    );
    await Promise.all(workers.map((w) => w.ready));

    const producer = t.app(appConfig);
    const work = producer.task({
      name: 'cap.work',
      input: z.object({ ms: z.number(), label: z.string() }),
      handler: () => 'unused',
    });
    const total = 36;
    const handles = await work.sendMany(
      Array.from({ length: total }, (_, i) => ({ input: { ms: 5, label: `r${i}` } })),
    );
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 60_000 })));

    const rows = await t.query<{ us: string; pid: number }>(
      `SELECT (extract(epoch FROM started_at) * 1000000)::bigint::text AS us, worker_pid AS pid
       FROM {{schema}}.horsies_tasks WHERE queue_name = 'rated' AND status = 'COMPLETED'`,
    );
    expect(rows).toHaveLength(total);
    const starts = rows.map((r) => Number(r.us));
    // Never more than the limit in any window; the limit was reached, so the limiter (not chance) spaced them.
    expect(mostStartsInWindow(starts, limit.intervalMs)).toBe(limit.max);
    const spanMs = (Math.max(...starts) - Math.min(...starts)) / 1000;
    expect(spanMs).toBeGreaterThanOrEqual((total / limit.max - 1) * limit.intervalMs);
    // More than one process started them, so the limit held across processes (which of the three get a turn in
    // each window is up to their polls: on a loaded machine one may get none).
    expect(new Set(rows.map((r) => r.pid)).size).toBeGreaterThanOrEqual(2);
    for (const w of workers) w.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.exited));
  }, 90_000);

  it("a task's own limit binds that task only, in a queue without one", async () => {
    const app = t.app({ queues: ['mixed'] });
    const limited = app.task({
      name: 'flow.limited',
      rateLimit: { max: 3, intervalMs: 400 },
      input: z.object({}),
      handler: () => null,
    });
    const free = app.task({ name: 'flow.free', input: z.object({}), handler: () => null });
    const worker = createWorker(app, { concurrency: 8, pollIntervalMs: 50 });
    await worker.start();
    const handles = [
      ...(await limited.sendMany(Array.from({ length: 12 }, () => ({ input: {} })))),
      ...(await free.sendMany(Array.from({ length: 12 }, () => ({ input: {} })))),
    ];
    for (const h of handles)
      await expect(h.result({ timeoutMs: 20_000 })).resolves.toMatchObject({ ok: true });
    await worker.stop();
    const rows = await t.query<{ us: string }>(
      `SELECT (extract(epoch FROM started_at) * 1000000)::bigint::text AS us
       FROM {{schema}}.horsies_tasks WHERE task_name = 'flow.limited'`,
    );
    const starts = rows.map((r) => Number(r.us));
    expect(mostStartsInWindow(starts, 400)).toBe(3);
    expect((Math.max(...starts) - Math.min(...starts)) / 1000).toBeGreaterThanOrEqual(3 * 400);
    const limiters = await t.query<{ limiter_key: string }>(
      `SELECT limiter_key FROM {{schema}}.horsies_rate_limiters WHERE limiter_key LIKE '%flow.%' OR limiter_key = 'queue:mixed'`,
    );
    expect(limiters.map((l) => l.limiter_key)).toEqual(['task:flow.limited']);
  }, 60_000);

  it('a claim starts at once only what the limiter has room for and records it; tasks claimed beyond start later under it', async () => {
    const app = t.app({ queues: [{ name: 'rated-claim', rateLimit: { max: 3, intervalMs: 60_000 } }] });
    const job = app.task({ name: 'flow.rc', queue: 'rated-claim', input: z.object({}), handler: () => null });
    await job.sendMany(Array.from({ length: 8 }, () => ({ input: {} })));
    const limiters = [{ key: 'queue:rated-claim', maxStarts: 3, intervalMs: 60_000 }];
    const claim = (start: number) =>
      app.db.run(TaskClaimLimited, {
        queue: 'rated-claim',
        taskNames: ['flow.rc'],
        limit: 8,
        leaseMs: 60_000,
        worker: { workerId: 'w-rc', hostname: 'h', pid: 1, processName: 'p' },
        limiters,
        groupLimit: null,
        start,
        waitForFlush: true,
      });
    const recorded = async () =>
      (
        await t.query<{ n: number }>(
          `SELECT COALESCE((SELECT sum(c) FROM unnest(window_count) c), 0)::int AS n
           FROM {{schema}}.horsies_rate_limiters WHERE limiter_key = 'queue:rated-claim'`,
        )
      )[0]?.n;

    // Room for 3: two started by the claim (and recorded), a third only claimed.
    const first = await claim(2);
    expect(first.map((r) => r.status).sort()).toEqual(['CLAIMED', 'RUNNING', 'RUNNING']);
    expect(first.filter((r) => r.status === 'RUNNING').every((r) => r.started_at !== null)).toBe(true);
    expect(await recorded()).toBe(2);
    // The claimed one starts under the limiter, which then is full.
    const held = first.find((r) => r.status === 'CLAIMED')!;
    const [started] = await app.db.run(TaskStartLimited, {
      limiters,
      workerId: 'w-rc',
      tasks: [{ id: held.id, token: held.claim_token, workflow: false }],
      waitForFlush: true,
    });
    expect(started).toMatchObject({ id: held.id, status: 'RUNNING' });
    expect(await recorded()).toBe(3);
    // No room left: a claim that would start and one that would only claim both take nothing.
    expect(await claim(8)).toEqual([]);
    expect(await claim(0)).toEqual([]);
    const counts = await t.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE queue_name = 'rated-claim'
       GROUP BY status ORDER BY status`,
    );
    expect(counts).toEqual([
      { status: 'PENDING', n: 5 },
      { status: 'RUNNING', n: 3 },
    ]);
  });

  it('an upstream throttle pauses the limiter for everyone, and the task retries without using its retries', async () => {
    const app = t.app({ queues: [{ name: 'upstream', rateLimit: { max: 100, intervalMs: 1000 } }] });
    const pauseMs = 1_500;
    const api = app.task({
      name: 'flow.api',
      queue: 'upstream',
      input: z.object({ label: z.string() }),
      handler: async ({ label }, ctx) => {
        if (label === 'first' && ctx.attempt === 1) throw new TaskThrottledError({ retryAfterMs: pauseMs });
        return label;
      },
    });
    const worker = createWorker(app, { concurrency: 4, pollIntervalMs: 50 });
    await worker.start();
    const first = await api.send({ label: 'first' });
    // The throttled attempt is written: the task is PENDING again, its limiter paused.
    const paused = await eventually(async () => {
      const [row] = await t.query<{ paused_until: Date | null }>(
        `SELECT paused_until FROM {{schema}}.horsies_rate_limiters WHERE limiter_key = 'queue:upstream'`,
      );
      return row?.paused_until ?? undefined;
    });
    const others = await api.sendMany([{ input: { label: 'a' } }, { input: { label: 'b' } }]);
    const waiting = await app.getTask(others[0]!.id);
    expect(waiting?.status).toBe('PENDING');
    expect(waiting?.waiting).toMatch(/^rate limited until .* \(queue:upstream\)$/);
    const listed = await runCli(['queues', 'list', '--schema', t.schema], { DATABASE_URL: databaseUrl() });
    expect(listed.stdout).toMatch(/queue:upstream +100 per 1000 ms +\d+ +(paused until |open)/);
    const json = await runCli(['queues', 'list', '--schema', t.schema, '--json'], {
      DATABASE_URL: databaseUrl(),
    });
    const upstream = json.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { queue: string; rateLimit: { max: number; pausedUntil: string } | null })
      .find((r) => r.queue === 'upstream');
    expect(upstream?.rateLimit).toMatchObject({
      max: 100,
      intervalMs: 1000,
      pausedUntil: paused.toISOString(),
    });

    await expect(first.result({ timeoutMs: 20_000 })).resolves.toEqual({ ok: true, value: 'first' });
    for (const h of others)
      await expect(h.result({ timeoutMs: 20_000 })).resolves.toMatchObject({ ok: true });
    await worker.stop();

    const rows = await t.query<{ id: string; started_at: Date; retry_count: number; max_retries: number }>(
      `SELECT id, started_at, retry_count, max_retries FROM {{schema}}.horsies_tasks WHERE task_name = 'flow.api'`,
    );
    // Nothing of that limiter started before the pause ended: neither the other tasks nor the throttled one.
    for (const row of rows) expect(row.started_at.getTime()).toBeGreaterThanOrEqual(paused.getTime());
    const firstRow = rows.find((r) => r.id === first.id)!;
    expect(firstRow).toMatchObject({ retry_count: 0, max_retries: 0 });
    const info = await app.getTask(first.id, { attempts: true });
    expect(info?.attempts?.map((a) => [a.attempt, a.outcome, a.errorCode, a.willRetry])).toEqual([
      [1, 'FAILED', 'TASK_THROTTLED', true],
      [2, 'COMPLETED', null, false],
    ]);
  }, 60_000);
});

describe('fair sharing', () => {
  it('a grouped claim takes the groups in turn, each within its room', async () => {
    const app = t.app({ queues: [{ name: 'turns', maxConcurrencyPerGroup: 2 }] });
    const job = app.task({ name: 'flow.turn', queue: 'turns', input: z.object({}), handler: () => null });
    for (const group of ['a', 'b', 'c']) {
      await job.sendMany(Array.from({ length: 5 }, () => ({ input: {}, group })));
    }
    const claim = (limit: number) =>
      app.db.run(TaskClaimLimited, {
        queue: 'turns',
        taskNames: ['flow.turn'],
        limit,
        leaseMs: 60_000,
        worker: { workerId: 'w-test', hostname: 'h', pid: 1, processName: 'p' },
        limiters: [],
        groupLimit: 2,
        start: 0,
        waitForFlush: true,
      });
    const groupsOf = async (ids: string[]) =>
      (
        await t.query<{ group_key: string }>(
          `SELECT group_key FROM {{schema}}.horsies_tasks WHERE id = ANY ($1) ORDER BY group_key`,
          [ids],
        )
      ).map((r) => r.group_key);
    // Two per claim: one group after the other, starting where the last claim ended.
    expect(await groupsOf((await claim(2)).map((r) => r.id))).toEqual(['a', 'b']);
    expect(await groupsOf((await claim(2)).map((r) => r.id))).toEqual(['a', 'c']);
    // Every group now has 1 or 2 in flight: room for 3 more in all, never a third of one group.
    expect(await groupsOf((await claim(10)).map((r) => r.id))).toEqual(['b', 'c']);
    expect(await claim(10)).toEqual([]);
  });

  it("a small tenant's tasks all finish while a large tenant's burst of 100,000 still drains", async () => {
    const app = t.app({ queues: [{ name: 'tenants', maxConcurrencyPerGroup: 4 }] });
    const job = app.task({
      name: 'flow.tenant',
      queue: 'tenants',
      input: z.object({}),
      handler: () => null,
    });
    // The burst first (one COPY), then the small tenant's work behind it.
    await job.sendMany(Array.from({ length: 100_000 }, () => ({ input: {}, group: 'big' })));
    const small = await job.sendMany(Array.from({ length: 100 }, () => ({ input: {}, group: 'small' })));
    const worker = createWorker(app, { concurrency: 8, pollIntervalMs: 50 });
    await worker.start();
    for (const h of small)
      await expect(h.result({ timeoutMs: 60_000 })).resolves.toEqual({ ok: true, value: null });
    await worker.stop();
    const [counts] = await t.query<{ big_pending: number; small_done: number }>(
      `SELECT count(*) FILTER (WHERE group_key = 'big' AND status = 'PENDING')::int AS big_pending,
              count(*) FILTER (WHERE group_key = 'small' AND status = 'COMPLETED')::int AS small_done
       FROM {{schema}}.horsies_tasks WHERE queue_name = 'tenants'`,
    );
    expect(counts).toEqual({ big_pending: expect.any(Number), small_done: 100 });
    expect(counts!.big_pending).toBeGreaterThan(90_000);
    // What a waiting task of the large tenant says, and what the CLI shows, while its group is full.
    const [queued] = await t.query<{ id: string }>(
      `SELECT id FROM {{schema}}.horsies_tasks WHERE group_key = 'big' AND status = 'PENDING' LIMIT 1`,
    );
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET status = 'RUNNING', claimed = true, claimed_at = now(), started_at = now(),
              claimed_by_worker_id = 'elsewhere', claim_expires_at = now() + interval '1 minute'
       WHERE id IN (SELECT id FROM {{schema}}.horsies_tasks WHERE group_key = 'big' AND status = 'PENDING'
                    AND id <> $1 LIMIT 4)`,
      [queued!.id],
    );
    expect((await app.getTask(queued!.id))?.waiting).toBe('group "big" at its limit (4 of 4 in flight)');
    const shown = await runCli(['tasks', 'show', queued!.id, '--schema', t.schema], {
      DATABASE_URL: databaseUrl(),
    });
    expect(shown.stdout).toMatch(/waiting +group "big" at its limit \(4 of 4 in flight\)/);
    const listed = await runCli(['queues', 'list', '--schema', t.schema], { DATABASE_URL: databaseUrl() });
    expect(listed.stdout).toMatch(/tenants +4 +1 +1/);
  }, 120_000);
});

describe('configuration', () => {
  it('refuses bad rate limits and group limits, naming the field', () => {
    const problems = (fn: () => unknown): string[] => {
      try {
        fn();
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).problems.map((p) => `${p.field}: ${p.message}`);
      }
      throw new Error('accepted');
    };
    expect(
      problems(() =>
        createApp({
          queues: [
            { name: 'a', rateLimit: { max: 0, intervalMs: 1000 } },
            { name: 'b', maxConcurrencyPerGroup: 0 },
          ],
        }),
      ),
    ).toEqual([
      expect.stringMatching(/^queues\.0\.rateLimit\.max: /),
      expect.stringMatching(/^queues\.1\.maxConcurrencyPerGroup: /),
    ]);
    expect(problems(() => createApp({ queues: [{ name: 'a', rateLimit: { max: 5 } as never }] }))).toEqual([
      expect.stringMatching(/^queues\.0\.rateLimit\.intervalMs: /),
    ]);
    const app = createApp();
    expect(
      problems(() =>
        app.task({
          name: 'bad.rate',
          input: z.object({}),
          handler: () => null,
          rateLimit: { max: 10, intervalMs: -1 },
        }),
      ),
    ).toEqual([expect.stringMatching(/^rateLimit\.intervalMs: /)]);
    expect(() => new TaskThrottledError({ retryAfterMs: -5 })).toThrow(RangeError);
    expect(TaskThrottledError.fromRetryAfter('3').retryAfterMs).toBe(3000);
    expect(TaskThrottledError.fromRetryAfter(undefined, 250).retryAfterMs).toBe(250);
  });
});
