/**
 * One update writes RUNNING to a task row (`horsies_start_rows`): a claim calls it for the rows it locked, a later
 * start for rows the worker holds CLAIMED. Both kinds of call, through the statements the worker sends, write the
 * same columns of a start, and a later start is fenced on the claim.
 */
import { describe, expect, it } from 'vitest';
import { TaskClaim, TaskClaimAndStart, TaskStartMany } from '../../src/db/tasks.js';
import type { ClaimAndStartRow, ClaimedTaskRow } from '../../src/db/tasks.js';
import { useTestSchema } from '../support/db.js';
import { insertTasks } from '../support/factories.js';

const t = await useTestSchema();
const worker = { workerId: 'w-start', hostname: 'host-a', pid: 41, processName: 'start-test' };

interface Row {
  id: string;
  status: string;
  attempt: number;
  claimed: boolean;
  claimed_by_worker_id: string | null;
  claim_generation: number;
  claim_token: string | null;
  started_at: Date | null;
  claim_expires_at: Date | null;
  worker_pid: number | null;
  error_code: string | null;
  finished_at: Date | null;
}

async function rows(ids: string[]): Promise<Row[]> {
  const found = await t.query<Row>(
    `SELECT id, status, attempt, claimed, claimed_by_worker_id, claim_generation, claim_token::text, started_at,
            claim_expires_at, worker_pid, error_code, finished_at
     FROM {{schema}}.horsies_tasks WHERE id = ANY ($1) ORDER BY array_position($1, id)`,
    [ids],
  );
  return found;
}

function claimParams(queue: string, limit: number) {
  return { queue, taskNames: ['start.job'], limit, leaseMs: 30_000, worker };
}

describe('the one start', () => {
  it('a claim writes its rows in claim order: the first it starts RUNNING, the rest CLAIMED, one token', async () => {
    const ids = await insertTasks(t, { taskName: 'start.job', queue: 'q-claim', count: 3 });
    const claimed: ClaimAndStartRow[] = await t
      .app()
      .db.run(TaskClaimAndStart, { ...claimParams('q-claim', 3), start: 2 });
    expect(claimed.map((r) => r.status)).toEqual(['RUNNING', 'RUNNING', 'CLAIMED']);
    const after = await rows(claimed.map((r) => r.id));
    expect(new Set(after.map((r) => r.id))).toEqual(new Set(ids));
    expect(new Set(after.map((r) => r.claim_token)).size).toBe(1);
    for (const [i, row] of after.entries()) {
      const started = i < 2;
      expect(row).toMatchObject({
        status: started ? 'RUNNING' : 'CLAIMED',
        attempt: started ? 1 : 0,
        claimed: true,
        claimed_by_worker_id: worker.workerId,
        claim_generation: 1,
        worker_pid: worker.pid,
      });
      expect(row.started_at !== null).toBe(started);
      expect(row.claim_expires_at).not.toBeNull();
    }
  });

  it('a later start is fenced on the claim token and keeps the claim; a stale token starts nothing', async () => {
    await insertTasks(t, { taskName: 'start.job', queue: 'q-fence', count: 2 });
    const [a, b] = await t.app().db.run(TaskClaim, claimParams('q-fence', 2));
    const before = await rows([a!.id, b!.id]);
    const stale = '00000000-0000-4000-8000-000000000000';
    const started = await t.app().db.run(TaskStartMany, {
      workerId: worker.workerId,
      tasks: [
        { id: a!.id, token: a!.claim_token },
        { id: b!.id, token: stale },
      ],
    });
    expect(started).toEqual([
      { id: a!.id, status: 'RUNNING', attempt: 1, started_at: expect.any(Date) as Date },
    ]);
    const [ra, rb] = await rows([a!.id, b!.id]);
    // The claim is the one the claim made: same generation, token, lease and worker.
    expect(ra).toMatchObject({
      status: 'RUNNING',
      attempt: 1,
      claim_generation: before[0]!.claim_generation,
      claim_token: before[0]!.claim_token,
      claim_expires_at: before[0]!.claim_expires_at,
      worker_pid: worker.pid,
    });
    expect(rb).toEqual(before[1]);
  });

  it("a start under another worker's name starts nothing", async () => {
    await insertTasks(t, { taskName: 'start.job', queue: 'q-other' });
    const [a] = await t.app().db.run(TaskClaim, claimParams('q-other', 1));
    const before = await rows([a!.id]);
    const started = await t.app().db.run(TaskStartMany, {
      workerId: 'w-someone-else',
      tasks: [{ id: a!.id, token: a!.claim_token }],
    });
    expect(started).toEqual([]);
    expect(await rows([a!.id])).toEqual(before);
  });

  it('a claimed task whose good_until passed is EXPIRED at its start, with no attempt', async () => {
    await insertTasks(t, { taskName: 'start.job', queue: 'q-expire', goodUntilAgoMs: -60_000 });
    const [a] = await t.app().db.run(TaskClaim, claimParams('q-expire', 1));
    await t.query(
      `UPDATE {{schema}}.horsies_tasks SET good_until = now() - interval '1 second' WHERE id = $1`,
      [a!.id],
    );
    const started = await t.app().db.run(TaskStartMany, {
      workerId: worker.workerId,
      tasks: [{ id: a!.id, token: a!.claim_token }],
    });
    expect(started).toEqual([{ id: a!.id, status: 'EXPIRED', attempt: 0, started_at: null }]);
    expect((await rows([a!.id]))[0]).toMatchObject({
      status: 'EXPIRED',
      attempt: 0,
      claimed: false,
      started_at: null,
      claim_expires_at: null,
      error_code: 'TASK_EXPIRED',
      finished_at: expect.any(Date) as Date,
    });
  });

  it('a start fenced on the claim generation (a worker of 0.1) still starts its task', async () => {
    await insertTasks(t, { taskName: 'start.job', queue: 'q-gen' });
    const [a] = (await t.app().db.run(TaskClaim, claimParams('q-gen', 1))) as ClaimedTaskRow[];
    const started = await t.query<{ id: string; status: string }>(
      `SELECT id, status FROM {{schema}}.horsies_start_tasks($1, $2::text[], $3::text[], true, '{}')`,
      [worker.workerId, [a!.id], [`${a!.id}:${a!.claim_generation}`]],
    );
    expect(started).toEqual([{ id: a!.id, status: 'RUNNING' }]);
  });
});
