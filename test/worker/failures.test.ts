/** Failure semantics with a real worker: retries and backoff, error codes, deadlines, timeouts, cancellation. */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { z } from 'zod';
import { ConfigError, TaskError } from '../../src/errors.js';
import { useTestSchema, waitForEvent, trackStarts } from '../support/db.js';
import { createWorker } from '../../src/worker/Worker.js';

const t = await useTestSchema();

interface AttemptRow {
  attempt: number;
  outcome: string;
  will_retry: boolean;
  error_code: string | null;
  started_at: Date;
  finished_at: Date;
}

const attempts = (id: string) =>
  t.query<AttemptRow & Record<string, unknown>>(
    'SELECT * FROM {{schema}}.horsies_task_attempts WHERE task_id = $1 ORDER BY attempt',
    [id],
  );
const row = async (id: string) =>
  (await t.query<Record<string, unknown>>('SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1', [id]))[0]!;

class NetworkError extends Error {}

describe('retries', () => {
  it('retries a listed code with the policy delays, then completes', async () => {
    const app = t.app();
    let calls = 0;
    const flaky = app.task({
      name: 'failures.flaky',
      input: z.object({}),
      retry: { maxRetries: 3, retryOn: ['FLAKY'], backoff: 'linear', baseDelayMs: 300 },
      handler: () => {
        calls += 1;
        return calls <= 2 ? new TaskError('FLAKY', `failure ${calls}`) : 'third time lucky';
      },
    });
    const worker = createWorker(app, { pollIntervalMs: 5_000 });
    await worker.start();
    const handle = await flaky.send({});
    expect(await handle.result({ timeoutMs: 15_000 })).toEqual({ ok: true, value: 'third time lucky' });

    const rows = await attempts(handle.id);
    expect(rows.map((r) => [r.attempt, r.outcome, r.will_retry, r.error_code])).toEqual([
      [1, 'FAILED', true, 'FLAKY'],
      [2, 'FAILED', true, 'FLAKY'],
      [3, 'COMPLETED', false, null],
    ]);
    // linear: 300 ms before retry 1, 600 ms before retry 2 (measured on the database clock).
    const gap1 = rows[1]!.started_at.getTime() - rows[0]!.finished_at.getTime();
    const gap2 = rows[2]!.started_at.getTime() - rows[1]!.finished_at.getTime();
    expect(gap1).toBeGreaterThanOrEqual(300);
    expect(gap2).toBeGreaterThanOrEqual(600);
    // Woken by the worker's own timer, not by its 5 s poll.
    expect(gap1).toBeLessThan(2_000);
    expect(gap2).toBeLessThan(2_000);
    const task = await row(handle.id);
    expect(task).toMatchObject({ status: 'COMPLETED', retry_count: 2, attempt: 3, max_retries: 3 });
    // enqueued_at moved forward with each retry; next_retry_at is cleared once the task is terminal.
    expect((task.enqueued_at as Date).getTime() - (task.sent_at as Date).getTime()).toBeGreaterThanOrEqual(
      900,
    );
    expect(task.next_retry_at).toBeNull();
    await worker.stop();
  });

  it('fails at once on a code the policy does not list', async () => {
    const app = t.app();
    const picky = app.task({
      name: 'failures.unlisted',
      input: z.object({}),
      retry: { maxRetries: 5, retryOn: ['FLAKY'], baseDelayMs: 0 },
      handler: () => new TaskError('BAD_INPUT', 'not retryable'),
    });
    const worker = createWorker(app);
    await worker.start();
    const handle = await picky.send({});
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('BAD_INPUT');
    expect((await attempts(handle.id)).map((r) => [r.outcome, r.will_retry])).toEqual([['FAILED', false]]);
    expect(await row(handle.id)).toMatchObject({ status: 'FAILED', retry_count: 0, error_code: 'BAD_INPUT' });
    await worker.stop();
  });

  it('stops retrying when the budget is spent', async () => {
    const app = t.app();
    const always = app.task({
      name: 'failures.exhausted',
      input: z.object({}),
      retry: { maxRetries: 2, retryOn: ['FLAKY'], backoff: 'constant', baseDelayMs: 0 },
      handler: () => new TaskError('FLAKY', 'again'),
    });
    const worker = createWorker(app);
    await worker.start();
    const handle = await always.send({});
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('FLAKY');
    expect((await attempts(handle.id)).map((r) => r.will_retry)).toEqual([true, true, false]);
    expect(await row(handle.id)).toMatchObject({ status: 'FAILED', retry_count: 2 });
    await worker.stop();
  });

  it('does not retry past good_until: the task fails with its own error', async () => {
    const app = t.app();
    const late = app.task({
      name: 'failures.deadline',
      input: z.object({}),
      retry: { maxRetries: 3, retryOn: ['FLAKY'], backoff: 'constant', baseDelayMs: 60_000 },
      handler: () => new TaskError('FLAKY', 'would retry in a minute'),
    });
    const worker = createWorker(app);
    await worker.start();
    const handle = await late.send({}, { goodUntil: new Date(Date.now() + 10_000) });
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('FLAKY');
    expect(await row(handle.id)).toMatchObject({ status: 'FAILED', retry_count: 0, error_code: 'FLAKY' });
    expect((await attempts(handle.id)).map((r) => r.will_retry)).toEqual([false]);
    await worker.stop();
  });

  it('maps thrown error classes to codes that can retry', async () => {
    const app = t.app({ errorCodes: [[Error, 'SOMETHING_BROKE']] });
    let calls = 0;
    const fetcher = app.task({
      name: 'failures.mapped',
      input: z.object({}),
      errorCodes: [[NetworkError, 'NETWORK_DOWN']],
      retry: { maxRetries: 1, retryOn: ['NETWORK_DOWN'], baseDelayMs: 0 },
      handler: () => {
        calls += 1;
        if (calls === 1) throw new NetworkError('connection reset');
        throw new TypeError('a bug');
      },
    });
    const worker = createWorker(app);
    await worker.start();
    const handle = await fetcher.send({});
    const result = await handle.result({ timeoutMs: 10_000 });
    // First the task's map (retried), then the app's map (not listed: fails).
    expect((await attempts(handle.id)).map((r) => r.error_code)).toEqual(['NETWORK_DOWN', 'SOMETHING_BROKE']);
    expect(result.ok ? null : result.error.code).toBe('SOMETHING_BROKE');
    await worker.stop();
  });

  it('validates policies at definition time', () => {
    const app = t.app();
    const define = (extra: object) => () =>
      app.task({ name: `failures.bad.${Math.random()}`, input: z.object({}), handler: () => null, ...extra });
    expect(define({ retry: { maxRetries: 2 } })).toThrow(ConfigError);
    // retryOn may come from the app's default policy.
    const withDefaults = t.app({ retry: { retryOn: ['FLAKY'], baseDelayMs: 10 } });
    const inherits = withDefaults.task({
      name: 'failures.inherits',
      input: z.object({}),
      retry: { maxRetries: 2 },
      handler: () => null,
    });
    expect(inherits.policies.retry).toMatchObject({ maxRetries: 2, retryOn: ['FLAKY'], baseDelayMs: 10 });
    expect(define({ retry: { maxRetries: 2 } })).toThrow(/retryOn/);
    expect(define({ retry: { maxRetries: 1, retryOn: ['not-a-code'] } })).toThrow(/UPPER_SNAKE/);
    expect(define({ errorCodes: [[Error, 'TASK_TIMEOUT']] })).toThrow(/reserved/);
    expect(define({ defaultErrorCode: 'UNHANDLED_ERROR' })).toThrow(/reserved/);
    expect(define({ retry: { backoff: 'fibonacci' } })).toThrow(ConfigError);
    expect(define({ timeoutMs: 0 })).toThrow(ConfigError);
    try {
      define({ retry: { maxRetries: -1, jitter: 2 }, timeoutMs: -5 })();
    } catch (error) {
      expect((error as ConfigError).problems.map((p) => p.field).sort()).toEqual([
        'retry.jitter',
        'retry.maxRetries',
        'timeoutMs',
      ]);
    }
  });
});

describe('timeouts', () => {
  it('aborts the handler and ends TASK_TIMEOUT, retried when listed', async () => {
    const app = t.app();
    let calls = 0;
    let sawAbort = false;
    const slow = app.task({
      name: 'failures.timeout',
      input: z.object({}),
      timeoutMs: 200,
      retry: { maxRetries: 1, retryOn: ['TASK_TIMEOUT'], baseDelayMs: 0 },
      handler: async (_input, ctx) => {
        calls += 1;
        if (calls > 1) return 'fast enough';
        await new Promise((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => {
            sawAbort = true;
            reject(ctx.signal.reason);
          }),
        );
      },
    });
    const worker = createWorker(app);
    await worker.start();
    const handle = await slow.send({});
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 'fast enough' });
    expect(sawAbort).toBe(true);
    expect((await attempts(handle.id)).map((r) => [r.outcome, r.error_code])).toEqual([
      ['FAILED', 'TASK_TIMEOUT'],
      ['COMPLETED', null],
    ]);
    await worker.stop();
  });

  it('gives a handler that reads its signal only after the timeout an aborted signal with the reason', async () => {
    const app = t.app();
    let late: { aborted: boolean; reason: unknown } | null = null;
    const readsLate = app.task({
      name: 'failures.late_signal',
      input: z.object({}),
      timeoutMs: 100,
      handler: async (_input, ctx) => {
        // The signal is first read here, after the run was stopped.
        await new Promise((resolve) => setTimeout(resolve, 300));
        late = { aborted: ctx.signal.aborted, reason: ctx.signal.reason };
        return 'too late';
      },
    });
    const worker = createWorker(app, { shutdown: { abortGraceMs: 1_000 } });
    await worker.start();
    const handle = await readsLate.send({});
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('TASK_TIMEOUT');
    expect(late).toMatchObject({ aborted: true });
    expect(String((late as { reason: unknown } | null)?.reason)).toContain('task stopped: timeout');
    await worker.stop();
  });

  it('finishes a handler that ignores the signal after the grace period, and frees its slot', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) });
    const app = t.app({ logger });
    const stubborn = app.task({
      name: 'failures.leak',
      input: z.object({ n: z.number() }),
      timeoutMs: 100,
      handler: ({ n }) =>
        n === 1
          ? new Promise<string>((resolve) => setTimeout(() => resolve('too late'), 3_000))
          : 'next one ran',
    });
    const worker = createWorker(app, { concurrency: 1, shutdown: { abortGraceMs: 100 } });
    await worker.start();
    const first = await stubborn.send({ n: 1 });
    const second = await stubborn.send({ n: 2 });
    const r1 = await first.result({ timeoutMs: 10_000 });
    expect(r1.ok ? null : r1.error.code).toBe('TASK_TIMEOUT');
    // The leaked handler still sleeps, yet the single slot is free again.
    expect(await second.result({ timeoutMs: 2_000 })).toEqual({ ok: true, value: 'next one ran' });
    expect(await row(first.id)).toMatchObject({ status: 'FAILED', error_code: 'TASK_TIMEOUT' });
    const leak = lines
      .map((l) => JSON.parse(l) as { msg: string; taskId?: string })
      .find((l) => l.msg.includes('leaked'));
    expect(leak?.taskId).toBe(first.id);
    await worker.stop();
  });
});

describe('cancelling a running task', () => {
  it('fires the handler signal through NOTIFY and ends CANCELLED', async () => {
    const app = t.app();
    let observed: unknown = null;
    const long = app.task({
      name: 'failures.cancel',
      input: z.object({}),
      retry: { maxRetries: 3, retryOn: ['UNHANDLED_ERROR'], baseDelayMs: 0 },
      handler: (_input, ctx) =>
        new Promise((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => {
            observed = ctx.signal.reason;
            reject(new Error('aborted'));
          }),
        ),
    });
    // A long poll interval: the cancel must arrive by notification, not by the backstop poll.
    const worker = createWorker(app, { pollIntervalMs: 30_000 });
    const started = trackStarts(worker);
    await worker.start();
    const handle = await long.send({});
    await started(handle.id);
    const cancelling = waitForEvent(worker, 'task:cancelling', (id) => id === handle.id, 5_000);
    expect(await handle.cancel()).toEqual({
      id: handle.id,
      outcome: 'cancel_requested',
      previousStatus: 'RUNNING',
    });
    await cancelling;
    const result = await handle.result({ timeoutMs: 10_000 });
    expect(result.ok ? null : result.error.code).toBe('TASK_CANCELLED');
    expect(observed).toBeInstanceOf(Error);
    const task = await row(handle.id);
    expect(task).toMatchObject({ status: 'CANCELLED', error_code: 'TASK_CANCELLED', retry_count: 0 });
    expect(task.finished_at).toBeInstanceOf(Date);
    expect((await attempts(handle.id)).map((r) => [r.outcome, r.error_code, r.will_retry])).toEqual([
      ['FAILED', 'TASK_CANCELLED', false],
    ]);
    await worker.stop();
  });

  it('finishes a handler that ignores the cancel after the grace period', async () => {
    const app = t.app();
    const deaf = app.task({
      name: 'failures.deaf',
      input: z.object({}),
      handler: () => new Promise<string>((resolve) => setTimeout(() => resolve('ignored the cancel'), 4_000)),
    });
    const worker = createWorker(app, { shutdown: { abortGraceMs: 100 } });
    const started = trackStarts(worker);
    await worker.start();
    const handle = await deaf.send({});
    await started(handle.id);
    await handle.cancel();
    const result = await handle.result({ timeoutMs: 3_000 });
    expect(result.ok ? null : result.error.code).toBe('TASK_CANCELLED');
    await worker.stop();
  });

  it('uses the backstop poll when the notification is missed', async () => {
    const app = t.app();
    const long = app.task({
      name: 'failures.cancelpoll',
      input: z.object({}),
      handler: (_input, ctx) =>
        new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', reject)),
    });
    const worker = createWorker(app, { pollIntervalMs: 200 });
    const started = trackStarts(worker);
    await worker.start();
    const handle = await long.send({});
    await started(handle.id);
    // Set the request without the trigger's notification (as if it were lost).
    await t.query('ALTER TABLE {{schema}}.horsies_tasks DISABLE TRIGGER horsies_tasks_notify_change');
    try {
      await t.query('UPDATE {{schema}}.horsies_tasks SET cancel_requested_at = now() WHERE id = $1', [
        handle.id,
      ]);
    } finally {
      await t.query('ALTER TABLE {{schema}}.horsies_tasks ENABLE TRIGGER horsies_tasks_notify_change');
    }
    const result = await handle.result({ timeoutMs: 5_000 });
    expect(result.ok ? null : result.error.code).toBe('TASK_CANCELLED');
    await worker.stop();
  });
});
