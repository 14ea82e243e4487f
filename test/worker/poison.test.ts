/**
 * Poison and hand-written rows: tasks written with plain SQL (by hand, or by an older or buggy sender) beside good
 * tasks, drained by a real worker. Every good task completes; every bad row ends with a clear code and the attempt
 * rows its runs left (or stays visibly PENDING when no worker can run it), and no row is claimed over and over.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkDatabase } from '../../src/client/checks.js';
import { TaskError } from '../../src/errors.js';
import { createWorker } from '../../src/worker/Worker.js';
import { eventually, useTestSchema } from '../support/db.js';
import { fastRecovery, fixtureModule, importFixture } from '../support/fixtures.js';

const t = await useTestSchema();
// Blocking tasks run on threads that load their app from a module (kept configured for this file's schema).
const blocking = await importFixture(
  { schema: t.schema, keep: true },
  () => import('../fixtures/blockingApp.js'),
);
afterAll(() => blocking.app.close());

interface Row {
  id: string;
  status: string;
  error_code: string | null;
  claim_generation: number;
  attempt: number;
  retry_count: number;
  enqueued_at: Date;
  result: unknown;
}

interface Attempt {
  task_id: string;
  attempt: number;
  outcome: string;
  will_retry: boolean;
  error_code: string | null;
}

const row = async (id: string): Promise<Row> =>
  (
    await t.query<Row & Record<string, unknown>>('SELECT * FROM {{schema}}.horsies_tasks WHERE id = $1', [id])
  )[0]!;
const attempts = (id: string): Promise<Attempt[]> =>
  t.query<Attempt & Record<string, unknown>>(
    'SELECT * FROM {{schema}}.horsies_task_attempts WHERE task_id = $1 ORDER BY attempt',
    [id],
  );

/** Columns of a hand-written PENDING row; `id` and `task_name` are required, the rest default as the table says. */
type HandRow = Record<string, string | number | null> & { id: string; task_name: string };

let seq = 0;
/** Inserts one row with plain SQL, every value given as text and cast by the column's type. */
async function insertRow(columns: Omit<HandRow, 'id'> & { id?: string }): Promise<string> {
  const id = columns.id ?? `poison-${(seq += 1)}`;
  const all: Record<string, string | number | null> = { queue_name: 'default', ...columns, id };
  const names = Object.keys(all);
  await t.query(
    `INSERT INTO {{schema}}.horsies_tasks (${names.join(', ')})
     SELECT ${names.map((n, i) => `($${i + 1}::text)::${columnType(n)}`).join(', ')}`,
    names.map((n) => (all[n] === null ? null : String(all[n]))),
  );
  return id;
}

function columnType(column: string): string {
  if (['kwargs', 'task_options', 'trace_context', 'progress', 'args'].includes(column)) return 'jsonb';
  if (column.endsWith('_at') || column === 'good_until') return 'timestamptz';
  const integers = [
    'priority',
    'attempt',
    'retry_count',
    'max_retries',
    'claim_generation',
    'resubmit_count',
  ];
  if (integers.includes(column) || column === 'progress_attempt') return 'integer';
  if (column === 'claimed') return 'boolean';
  return 'text';
}

const echoInput = z.object({ n: z.number() });

function makeApp() {
  const app = t.app({
    tracing: true,
    recovery: { ...fastRecovery, runningStaleThresholdMs: 1_000 },
  });
  const echo = app.task({ name: 'poison.echo', input: echoInput, handler: ({ n }) => n });
  const flaky = app.task({
    name: 'poison.flaky',
    input: echoInput,
    retry: { maxRetries: 2, retryOn: ['FLAKY'], baseDelayMs: 0 },
    handler: () => new TaskError('FLAKY', 'always'),
  });
  const progress = app.task({
    name: 'poison.progress',
    input: echoInput,
    handler: ({ n }, ctx) => {
      ctx.progress({ done: n });
      return n;
    },
  });
  return { app, echo, flaky, progress };
}

describe('poison and hand-written rows', () => {
  it('refuses at the database what the table constraints forbid', async () => {
    const violations: string[] = [];
    const constraints: string[] = [];
    for (const columns of [
      { task_name: 'poison.echo', priority: 0 },
      { task_name: 'poison.echo', priority: 101 },
      { task_name: 'poison.echo', args: '{"not":"an array"}' },
      { task_name: 'poison.echo', status: 'WAITING' },
      { task_name: 'poison.echo', attempt: -1 },
      { task_name: 'poison.echo', status: 'RUNNING' },
      { task_name: 'poison.echo', status: 'COMPLETED' },
      { task_name: 'poison.echo', kwargs: null },
      // Text that is not JSON at all: the column is jsonb.
      { task_name: 'poison.echo', kwargs: '{"n": 1' },
      { task_name: 'poison.echo', task_options: 'retry: 3' },
      // Counters at the top of the integer range (migration 16): the claim, start or resubmit would overflow.
      { task_name: 'poison.echo', attempt: 2147483647 },
      { task_name: 'poison.echo', claim_generation: 2147483647 },
      { task_name: 'poison.echo', resubmit_count: 2147483647 },
      // Infinite times, which reach JavaScript as numbers rather than dates (migration 16).
      { task_name: 'poison.echo', enqueued_at: '-infinity' },
      { task_name: 'poison.echo', enqueued_at: 'infinity' },
      { task_name: 'poison.echo', sent_at: '-infinity' },
      { task_name: 'poison.echo', good_until: 'infinity' },
      { task_name: 'poison.echo', next_retry_at: 'infinity' },
      { task_name: 'poison.echo', progress_at: 'infinity' },
      { task_name: 'poison.echo', cancel_requested_at: '-infinity' },
      {
        task_name: 'poison.echo',
        status: 'RUNNING',
        claimed: 'true',
        claimed_by_worker_id: 'w-dead',
        claimed_at: 'now',
        started_at: '-infinity',
      },
    ] as Omit<HandRow, 'id'>[]) {
      const error = await insertRow(columns).then(
        () => null,
        (e: { code?: string; constraint?: string }) => e,
      );
      expect(error, JSON.stringify(columns)).not.toBeNull();
      violations.push(error!.code!);
      if (error!.code === '23514') constraints.push(error!.constraint ?? '');
    }
    // 23514 check_violation, 23502 not_null_violation, 22P02 invalid_text_representation.
    expect(violations).toEqual([
      ...['23514', '23514', '23514', '23514', '23514', '23514', '23514', '23502', '22P02', '22P02'],
      ...['23514', '23514', '23514'],
      ...['23514', '23514', '23514', '23514', '23514', '23514', '23514', '23514'],
    ]);
    // Each refusal names the rule the row broke (one function checks them all since migration 18).
    expect(constraints).toEqual([
      ...['horsies_tasks_priority_check', 'horsies_tasks_priority_check', 'horsies_tasks_args_check'],
      ...['horsies_tasks_status_check', 'horsies_tasks_counts_check', 'horsies_tasks_claimed_check'],
      'horsies_tasks_finished_check',
      ...Array.from({ length: 3 }, () => 'horsies_tasks_counter_bounds_check'),
      ...Array.from({ length: 5 }, () => 'horsies_tasks_finite_times_check'),
      // progress_at without progress_attempt breaks this rule first.
      'horsies_tasks_progress_check',
      ...Array.from({ length: 2 }, () => 'horsies_tasks_finite_times_check'),
    ]);
  });

  it('drains good tasks beside bad rows; each bad row ends with its code and is claimed a bounded number of times', async () => {
    const { app, echo, flaky, progress } = makeApp();
    const before = await echo.sendMany(Array.from({ length: 10 }, (_, n) => ({ input: { n } })));

    const bad = {
      // Input that is JSON but not the task's: a scalar, null, an array, the wrong shape, the wrong type.
      scalar: await insertRow({ task_name: 'poison.echo', kwargs: '42' }),
      string: await insertRow({ task_name: 'poison.echo', kwargs: '"text"' }),
      jsonNull: await insertRow({ task_name: 'poison.echo', kwargs: 'null' }),
      array: await insertRow({ task_name: 'poison.echo', kwargs: '[1, 2]' }),
      shape: await insertRow({ task_name: 'poison.echo', kwargs: '{"m": 1}' }),
      type: await insertRow({ task_name: 'poison.echo', kwargs: '{"n": "one"}' }),
      // The same, for a task that retries: a validation failure is not in its retryOn, so it fails at once.
      flakyInput: await insertRow({ task_name: 'poison.flaky', kwargs: '[]', max_retries: 2 }),
      // A retry count at the top of the range, on a task that retries.
      retryMax: await insertRow({
        task_name: 'poison.flaky',
        kwargs: '{"n": 1}',
        retry_count: 2147483647,
        max_retries: 2147483647,
      }),
    };
    const odd = {
      // Times far from now: sent and due long ago, a deadline far ahead.
      farPast: await insertRow({
        task_name: 'poison.echo',
        kwargs: '{"n": 3}',
        sent_at: '4000-01-01 BC',
        enqueued_at: '4000-01-01 BC',
        good_until: '100000-01-01',
      }),
      // Counters high, but within the bounds.
      highCounters: await insertRow({
        task_name: 'poison.echo',
        kwargs: '{"n": 1}',
        attempt: 999_999_999,
        claim_generation: 999_999_999,
        resubmit_count: 1_000_000_000,
      }),
      // Options, trace context and progress that cannot be read: ignored, the task runs.
      optionsScalar: await insertRow({ task_name: 'poison.flaky', kwargs: '{"n": 4}', task_options: '"x"' }),
      optionsShape: await insertRow({
        task_name: 'poison.echo',
        kwargs: '{"n": 5}',
        task_options: '{"retry": {"maxRetries": "many"}}',
      }),
      traceScalar: await insertRow({
        task_name: 'poison.echo',
        kwargs: '{"n": 6}',
        trace_context: '"garbage"',
      }),
      traceState: await insertRow({
        task_name: 'poison.echo',
        kwargs: '{"n": 7}',
        trace_context:
          '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": 5}',
      }),
      traceNumbers: await insertRow({
        task_name: 'poison.echo',
        kwargs: '{"n": 8}',
        trace_context: '{"traceparent": 17, "tracestate": ["a"]}',
      }),
      progressGarbage: await insertRow({
        task_name: 'poison.progress',
        kwargs: '{"n": 9}',
        progress: '{"deeply": [[[["garbage"]]]]}',
        progress_attempt: 99,
        progress_at: '1900-01-01',
      }),
    };
    // Runs of a dead worker, for the reaper, with stored options it cannot use as they are: delays beyond what a
    // retry can wait (capped), and a policy that is not one (no retry).
    const deadRun = (taskOptions: string) =>
      insertRow({
        task_name: 'poison.echo',
        kwargs: '{"n": 1}',
        status: 'RUNNING',
        claimed: 'true',
        claimed_by_worker_id: 'w-dead',
        claimed_at: '2000-01-01',
        started_at: '2000-01-01',
        claim_generation: 1,
        attempt: 1,
        max_retries: 3,
        task_options: taskOptions,
      });
    const hugeDelay = await deadRun(
      '{"retry": {"maxRetries": 3, "retryOn": ["WORKER_CRASHED"], "backoff": "constant", "baseDelayMs": 1e300,' +
        ' "maxDelayMs": 1e300, "jitter": 0}}',
    );
    const badPolicy = await deadRun('{"retry": {"maxRetries": 3, "retryOn": "WORKER_CRASHED"}}');
    // No task of that name exists in any app: never claimed, visible as "no worker", expired by its deadline.
    const unknown = await insertRow({ task_name: 'poison.nobody', kwargs: '{}' });
    const unknownDeadline = await insertRow({
      task_name: 'poison.nobody',
      kwargs: '{}',
      good_until: new Date(Date.now() + 1_500).toISOString(),
    });
    // Due in a hundred thousand years.
    const neverDue = await insertRow({
      task_name: 'poison.echo',
      kwargs: '{"n": 1}',
      enqueued_at: '100000-01-01',
    });

    const after = await echo.sendMany(Array.from({ length: 10 }, (_, n) => ({ input: { n: n + 10 } })));
    const progressed = await progress.send({ n: 1 });
    const failing = await flaky.send({ n: 1 });

    const worker = createWorker(app, { concurrency: 4, pollIntervalMs: 200 });
    const errors: unknown[] = [];
    worker.on('worker:error', (e) => errors.push(e));
    const starts = new Map<string, number>();
    worker.on('task:started', (id: string) => starts.set(id, (starts.get(id) ?? 0) + 1));
    await worker.start();
    try {
      for (const handle of [...before, ...after, progressed]) {
        const result = await handle.result({ timeoutMs: 20_000 });
        expect(result.ok, handle.id).toBe(true);
      }
      expect(await failing.result({ timeoutMs: 20_000 })).toMatchObject({
        ok: false,
        error: { code: 'FLAKY' },
      });

      const terminal = ['COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED'];
      const ids = [...Object.values(bad), ...Object.values(odd), unknownDeadline, badPolicy];
      await eventually(async () => {
        const rows = await t.query<{ status: string }>(
          'SELECT status FROM {{schema}}.horsies_tasks WHERE id = ANY($1::text[])',
          [ids],
        );
        return rows.every((r) => terminal.includes(r.status));
      }, 20_000);

      // Input the schema refuses: FAILED with VALIDATION_FAILED, one attempt, one claim.
      for (const name of ['scalar', 'string', 'jsonNull', 'array', 'shape', 'type', 'flakyInput'] as const) {
        const id = bad[name];
        expect(await row(id), name).toMatchObject({
          status: 'FAILED',
          error_code: 'VALIDATION_FAILED',
          attempt: 1,
        });
        expect((await row(id)).claim_generation, name).toBe(1);
        expect(
          (await attempts(id)).map((a) => [a.attempt, a.outcome, a.will_retry, a.error_code]),
          name,
        ).toEqual([[1, 'FAILED', false, 'VALIDATION_FAILED']]);
        expect((await row(id)).result).toMatchObject({ err: { code: 'VALIDATION_FAILED' } });
      }

      // A retry count at the top: the run fails FLAKY, and the retry it cannot count ends the task.
      expect(await row(bad.retryMax)).toMatchObject({
        status: 'FAILED',
        error_code: 'FLAKY',
        claim_generation: 1,
      });
      expect((await attempts(bad.retryMax)).map((a) => [a.outcome, a.will_retry, a.error_code])).toEqual([
        ['FAILED', false, 'FLAKY'],
      ]);

      // Rows whose metadata is odd or unreadable run like any other.
      for (const [name, id] of Object.entries(odd)) {
        const r = await row(id);
        if (name === 'optionsScalar') {
          expect(r, name).toMatchObject({ status: 'FAILED', error_code: 'FLAKY', claim_generation: 1 });
        } else if (name === 'highCounters') {
          expect(r, name).toMatchObject({ status: 'COMPLETED', claim_generation: 1e9, attempt: 1e9 });
        } else {
          expect(r, name).toMatchObject({ status: 'COMPLETED', claim_generation: 1, attempt: 1 });
        }
      }
      // The hand-written progress was replaced by the run's own.
      const [p] = await t.query<{ progress: unknown; progress_attempt: number }>(
        'SELECT progress, progress_attempt FROM {{schema}}.horsies_tasks WHERE id = $1',
        [odd.progressGarbage],
      );
      expect(p).toEqual({ progress: { done: 9 }, progress_attempt: 1 });

      // The reaper wrote both runs off; the capped retry waits about 24.8 days.
      expect(await row(badPolicy)).toMatchObject({ status: 'FAILED', error_code: 'WORKER_CRASHED' });
      expect((await attempts(badPolicy)).map((a) => [a.outcome, a.will_retry])).toEqual([
        ['WORKER_FAILURE', false],
      ]);
      const retried = await eventually(async () => {
        const r = await row(hugeDelay);
        return r.status === 'PENDING' && r;
      });
      expect(retried).toMatchObject({ retry_count: 1, claim_generation: 1 });
      const waitDays = (retried.enqueued_at.getTime() - Date.now()) / 86_400_000;
      expect(waitDays).toBeGreaterThan(24);
      expect(waitDays).toBeLessThan(25);
      expect((await attempts(hugeDelay)).map((a) => [a.outcome, a.will_retry])).toEqual([
        ['WORKER_FAILURE', true],
      ]);

      // The unknown name: never claimed; counted as "no worker" while it waits; the one with a deadline expired.
      expect(await row(unknown)).toMatchObject({ status: 'PENDING', claim_generation: 0, attempt: 0 });
      expect(await row(unknownDeadline)).toMatchObject({
        status: 'EXPIRED',
        error_code: 'TASK_EXPIRED',
        claim_generation: 0,
      });
      const queue = (await app.listQueues()).find((q) => q.queue === 'default');
      expect(queue?.noWorker).toBe(1);
      // horsies check --live names it.
      const live = await checkDatabase(app.db, {
        tasks: [...app.tasks.values()].map((d) => ({ name: d.name, queue: d.queue })),
      });
      expect(live.problems.filter((p) => p.area === 'workers').map((p) => p.message)).toEqual([
        expect.stringContaining('no live worker serves: poison.nobody (queue default, 1 waiting)'),
      ]);
      expect(await row(neverDue)).toMatchObject({ status: 'PENDING', claim_generation: 0 });

      // No row was started more than once, nor claimed more than its attempts need.
      for (const [id, count] of starts) expect(count, id).toBeLessThanOrEqual(flakyStarts(id, failing.id));
      const claims = await t.query<{ id: string; claim_generation: number }>(
        'SELECT id, claim_generation FROM {{schema}}.horsies_tasks WHERE id <> ALL($1::text[])',
        [[failing.id, odd.highCounters]],
      );
      expect(claims.filter((c) => c.claim_generation > 1)).toEqual([]);
      // The worker itself never failed on them.
      expect(errors).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});

// The good retrying task runs 3 times (2 retries); every other task at most once.
function flakyStarts(id: string, flakyId: string): number {
  return id === flakyId ? 3 : 1;
}

describe('poison rows of a blocking task', () => {
  it('validates the stored input on the thread: VALIDATION_FAILED, and the good ones complete', async () => {
    const good = await Promise.all([1, 2, 3].map((ms) => blocking.spinContext.send({ ms })));
    const scalar = await insertRow({ task_name: 'spin.context', kwargs: '"x"' });
    const negative = await insertRow({ task_name: 'spin.context', kwargs: '{"ms": -1}' });
    const worker = createWorker(blocking.app, {
      concurrency: 2,
      blockingThreads: 1,
      appModule: fixtureModule('blockingApp.ts'),
    });
    await worker.start();
    try {
      for (const handle of good) expect((await handle.result({ timeoutMs: 20_000 })).ok).toBe(true);
      for (const id of [scalar, negative]) {
        await eventually(async () => (await row(id)).status === 'FAILED');
        expect(await row(id)).toMatchObject({
          error_code: 'VALIDATION_FAILED',
          attempt: 1,
          claim_generation: 1,
        });
        expect((await attempts(id)).map((a) => [a.outcome, a.error_code])).toEqual([
          ['FAILED', 'VALIDATION_FAILED'],
        ]);
      }
    } finally {
      await worker.stop();
    }
  });
});
