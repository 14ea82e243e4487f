/**
 * The batch finish (`horsies_finish_tasks`): each outcome is written the same whatever else its batch holds (a
 * batch with a retry in it decides the retry on the latest row), the fences hold, and a finish that meets a
 * concurrent change of its task (a cancel request, a requeue) waits for it and checks the fences on what was
 * committed.
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const WORKER = 'finish-worker';

interface Outcome {
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'RELEASE' | 'RETRY';
  result?: string | null;
  errorCode?: string | null;
  errorMessage?: string | null;
  failedReason?: string | null;
  retryDelayMs?: number;
  crashed?: boolean;
}

interface Running {
  id: string;
  claim_generation: number;
}

const app = t.app();
const kept = app.task({ name: 'finish.kept', input: z.object({ i: z.number() }), handler: () => null });
const short = app.task({
  name: 'finish.short',
  input: z.object({ i: z.number() }),
  retentionMs: 0,
  handler: () => null,
});

/**
 * Sends one task per entry and claims and starts them all for WORKER; returns them in send order. Tasks an
 * earlier test left PENDING (released, or retried) are removed first, so that the claim takes these.
 */
async function running(definitions: (typeof kept)[]): Promise<Running[]> {
  await t.query(`DELETE FROM {{schema}}.horsies_tasks WHERE status = 'PENDING'`);
  const handles = [];
  for (const [i, definition] of definitions.entries()) handles.push(await definition.send({ i }));
  const ids = handles.map((h) => h.id);
  const rows = await t.query<Running>(
    `SELECT c.id, c.claim_generation
     FROM {{schema}}.horsies_claim_and_start('default', $1::text[], $2, 60000, $3, 'host', 1, 'proc', $2, true) c`,
    [['finish.kept', 'finish.short'], ids.length, WORKER],
  );
  expect(rows).toHaveLength(ids.length);
  return ids.map((id) => rows.find((r) => r.id === id) as Running);
}

/** Finishes `tasks` with their outcomes in one call of horsies_finish_tasks; returns the rows it reports. */
async function finish(
  tasks: { task: Running; outcome: Outcome }[],
  options: { on?: pg.ClientBase; unlessCancelRequested?: boolean } = {},
): Promise<{ id: string; status: string }[]> {
  const column = <K extends keyof Outcome>(key: K, fallback: Outcome[K]) =>
    tasks.map(({ outcome }) => (outcome[key] === undefined ? fallback : outcome[key]));
  const sql = `SELECT id, status FROM "${t.schema}".horsies_finish_tasks($1::text[], $2::text[], $3::int[],
     $4::text[], $5::jsonb[], $6::text[], $7::text[], $8::text[], $9::int[], $10::bool[], $11, false)`;
  const values = [
    tasks.map(({ task }) => task.id),
    tasks.map(() => WORKER),
    tasks.map(({ task }) => task.claim_generation),
    column('status', 'COMPLETED'),
    column('result', '{"ok":null}'),
    column('errorCode', null),
    column('errorMessage', null),
    column('failedReason', null),
    column('retryDelayMs', 0),
    column('crashed', false),
    options.unlessCancelRequested ?? false,
  ];
  const result = await (options.on ?? t.pool).query<{ id: string; status: string }>(sql, values);
  return result.rows;
}

/**
 * What a finish left of a task: its columns (timestamps as "set" or null, and whether finished_at equals the
 * time it names) and its attempt rows, without ids or times that differ between two tasks.
 */
async function written(id: string): Promise<unknown> {
  const [task] = await t.query(
    `SELECT status, result, error_code, failed_reason, claimed, claim_generation, attempt, retry_count,
            claimed_by_worker_id, worker_hostname, worker_pid, worker_process_name,
            claimed_at IS NOT NULL AS claimed_at, started_at IS NOT NULL AS started_at,
            completed_at IS NOT NULL AS completed_at, failed_at IS NOT NULL AS failed_at,
            finished_at IS NOT NULL AS finished_at, claim_expires_at IS NOT NULL AS claim_expires_at,
            next_retry_at IS NOT NULL AS next_retry_at, purge_after IS NOT NULL AS purge_after,
            finished_at = coalesce(completed_at, failed_at, finished_at) AS finished_at_matches,
            updated_at >= started_at AS updated
     FROM {{schema}}.horsies_tasks WHERE id = $1`,
    [id],
  );
  const attempts = await t.query(
    `SELECT a.attempt, a.outcome, a.will_retry, a.started_at = t.started_at AS started_at_kept,
            a.finished_at = t.finished_at AS finished_at_matches, a.error_code, a.error_message, a.failed_reason,
            a.worker_id, a.worker_hostname, a.worker_pid, a.worker_process_name
     FROM {{schema}}.horsies_task_attempts a JOIN {{schema}}.horsies_tasks t ON t.id = a.task_id
     WHERE a.task_id = $1 ORDER BY a.attempt`,
    [id],
  );
  return { task, attempts };
}

const OUTCOMES: { name: string; definition: typeof kept; outcome: Outcome }[] = [
  { name: 'completed', definition: kept, outcome: { status: 'COMPLETED', result: '{"ok":{"n":1}}' } },
  { name: 'completed, short retention', definition: short, outcome: { status: 'COMPLETED' } },
  {
    name: 'failed',
    definition: kept,
    outcome: {
      status: 'FAILED',
      result: '{"err":{"code":"BOOM","message":"it broke"}}',
      errorCode: 'BOOM',
      errorMessage: 'it broke',
      failedReason: 'TASK_EXCEPTION',
    },
  },
  {
    name: 'crashed',
    definition: kept,
    outcome: {
      status: 'FAILED',
      result: '{"err":{"code":"WORKER_CRASHED","message":"gone"}}',
      errorCode: 'WORKER_CRASHED',
      errorMessage: 'gone',
      failedReason: 'WORKER_CRASHED',
      crashed: true,
    },
  },
  {
    name: 'cancelled',
    definition: kept,
    outcome: {
      status: 'CANCELLED',
      result: '{"err":{"code":"TASK_CANCELLED","message":"stopped"}}',
      errorCode: 'TASK_CANCELLED',
      errorMessage: 'stopped',
    },
  },
  { name: 'released', definition: kept, outcome: { status: 'RELEASE', result: 'null' } },
];

const RETRY: Outcome = {
  status: 'RETRY',
  result: '{"err":{"code":"FLAKY","message":"again"}}',
  errorCode: 'FLAKY',
  errorMessage: 'again',
  retryDelayMs: 60_000,
};

describe('the batch finish', () => {
  it('writes every outcome the same with or without a retry in its batch', async () => {
    // One batch without a retry.
    const alone = await running(OUTCOMES.map((o) => o.definition));
    const reported = await finish(alone.map((task, i) => ({ task, outcome: OUTCOMES[i]!.outcome })));
    expect(reported).toHaveLength(OUTCOMES.length);
    const writtenAlone = [];
    for (const task of alone) writtenAlone.push(await written(task.id));

    for (const [i, { name, definition, outcome }] of OUTCOMES.entries()) {
      // The same outcome beside a retry.
      const [task, other] = await running([definition, kept]);
      const beside = await finish([
        { task: task!, outcome },
        { task: other!, outcome: RETRY },
      ]);
      expect(beside.map((r) => r.status).sort(), name).toEqual(
        [outcome.status === 'RELEASE' ? 'PENDING' : outcome.status, 'PENDING'].sort(),
      );
      expect(writtenAlone[i], name).toEqual(await written(task!.id));
    }

    // And what the outcomes are, beyond being the same both ways.
    const completed = writtenAlone[0] as { task: Record<string, unknown>; attempts: unknown[] };
    expect(completed.task).toMatchObject({
      status: 'COMPLETED',
      result: { ok: { n: 1 } },
      claimed: false,
      claimed_by_worker_id: WORKER,
      completed_at: true,
      finished_at: true,
      finished_at_matches: true,
      claim_expires_at: false,
      purge_after: false,
    });
    expect(completed.attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'COMPLETED', will_retry: false, started_at_kept: true }),
    ]);
    const shortKept = writtenAlone[1] as { task: Record<string, unknown> };
    expect(shortKept.task).toMatchObject({ status: 'COMPLETED', purge_after: true });
    const crashed = writtenAlone[3] as { attempts: unknown[] };
    expect(crashed.attempts).toEqual([
      expect.objectContaining({ outcome: 'WORKER_FAILURE', error_code: 'WORKER_CRASHED' }),
    ]);
    const released = writtenAlone[5] as { task: Record<string, unknown>; attempts: unknown[] };
    expect(released.task).toMatchObject({
      status: 'PENDING',
      attempt: 0,
      claimed: false,
      claimed_by_worker_id: null,
      started_at: false,
      finished_at: false,
      result: null,
    });
    expect(released.attempts).toEqual([]);
  });

  it('changes nothing when a fence fails: another worker, another claim generation, a task not running', async () => {
    const [a, b, c] = await running([kept, kept, kept]);
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET claim_generation = claim_generation + 1 WHERE id = $1`,
      [b!.id],
    );
    const stale = await finish([
      { task: a!, outcome: { status: 'COMPLETED' } },
      { task: b!, outcome: { status: 'COMPLETED' } },
    ]);
    expect(stale.map((r) => r.id)).toEqual([a!.id]);
    // Finished once: a second finish of the same claim finds the task no longer RUNNING.
    expect(await finish([{ task: a!, outcome: { status: 'FAILED' } }])).toEqual([]);
    const other = await t.pool.query(
      `SELECT id FROM "${t.schema}".horsies_finish_tasks(ARRAY[$1], ARRAY['someone-else'], ARRAY[$2::int],
         ARRAY['COMPLETED'], ARRAY['{"ok":null}'::jsonb], ARRAY[NULL], ARRAY[NULL], ARRAY[NULL], ARRAY[0],
         ARRAY[false], false, false)`,
      [c!.id, c!.claim_generation],
    );
    expect(other.rows).toEqual([]);
    const rows = await t.query<{ id: string; status: string; attempts: string }>(
      `SELECT t.id, t.status, (SELECT count(*) FROM {{schema}}.horsies_task_attempts a WHERE a.task_id = t.id) AS attempts
       FROM {{schema}}.horsies_tasks t WHERE t.id = ANY ($1) ORDER BY t.id`,
      [[a!.id, b!.id, c!.id]],
    );
    expect(Object.fromEntries(rows.map((r) => [r.id, [r.status, r.attempts]]))).toEqual({
      [a!.id]: ['COMPLETED', '1'],
      [b!.id]: ['RUNNING', '0'],
      [c!.id]: ['RUNNING', '0'],
    });
  });

  it('waits for a concurrent change of the task and checks the fences on what it committed', async () => {
    const [cancelled, requeued, untouched] = await running([kept, kept, kept]);
    const other = await t.pool.connect();
    const finisher = await t.pool.connect();
    try {
      // Another transaction requests a cancel of one task and requeues another, and has not committed yet.
      await other.query('BEGIN');
      await other.query(`UPDATE "${t.schema}".horsies_tasks SET cancel_requested_at = now() WHERE id = $1`, [
        cancelled!.id,
      ]);
      await other.query(
        `UPDATE "${t.schema}".horsies_tasks
         SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL, started_at = NULL,
             claim_expires_at = NULL, attempt = attempt - 1
         WHERE id = $1`,
        [requeued!.id],
      );
      // The finish (unless a cancel was requested) has to wait for those rows.
      const pending = finish(
        [
          { task: cancelled!, outcome: { status: 'COMPLETED' } },
          { task: requeued!, outcome: { status: 'COMPLETED' } },
          { task: untouched!, outcome: { status: 'COMPLETED' } },
        ],
        { on: finisher, unlessCancelRequested: true },
      );
      await expect
        .poll(
          async () => {
            const waiting = await t.query<{ n: string }>(
              `SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`,
              [(finisher as unknown as { processID: number }).processID],
            );
            return waiting[0]!.n;
          },
          { timeout: 10_000 },
        )
        .toBe('1');
      await other.query('COMMIT');
      expect((await pending).map((r) => r.id)).toEqual([untouched!.id]);
    } finally {
      // Ends the other transaction if the test failed before it committed (a no-op after the commit).
      await other.query('ROLLBACK').catch(() => undefined);
      other.release();
      finisher.release();
    }
    const rows = await t.query<{ id: string; status: string; cancel: boolean; attempts: string }>(
      `SELECT t.id, t.status, t.cancel_requested_at IS NOT NULL AS cancel,
              (SELECT count(*) FROM {{schema}}.horsies_task_attempts a WHERE a.task_id = t.id) AS attempts
       FROM {{schema}}.horsies_tasks t WHERE t.id = ANY ($1)`,
      [[cancelled!.id, requeued!.id, untouched!.id]],
    );
    expect(Object.fromEntries(rows.map((r) => [r.id, [r.status, r.cancel, r.attempts]]))).toEqual({
      [cancelled!.id]: ['RUNNING', true, '0'],
      [requeued!.id]: ['PENDING', false, '0'],
      [untouched!.id]: ['COMPLETED', false, '1'],
    });
  });
});
