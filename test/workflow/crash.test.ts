/**
 * Workflows under worker crashes, with real worker processes killed by SIGKILL: the seed's scenario (a worker
 * dies while it runs a workflow task; the reaper fails or retries the task; the workflow goes on with its
 * dependents), a workflow of 202 nodes drained while random workers are killed, and one of six chains whose workers
 * are killed while they run tasks their own steps started (eager dispatch).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { createRunsTable, fastRecovery, importFixture } from '../support/fixtures.js';
import { startWorkerProcess } from '../support/processes.js';
import type { WorkerProcess } from '../support/processes.js';

const t = await useTestSchema();
await createRunsTable(t);
const recovery = fastRecovery;
const fixture = await importFixture({ schema: t.schema, recovery }, () => import('../fixtures/app.js'));
afterAll(() => fixture.app.close());
const env = { databaseUrl: databaseUrl(), schema: t.schema, recovery };
const args = ['--concurrency', '4', '--poll-interval', '200'];

/** Numbers in [0, 1) drawn from `seed` (a linear congruential generator): a failing run replays with its seed. */
function seededRandom(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

async function taskStatus(workflowId: string, nodeIndex: number): Promise<string | undefined> {
  const [row] = await t.query<{ status: string }>(
    `SELECT t.status FROM {{schema}}.horsies_tasks t WHERE t.workflow_id = $1 AND t.workflow_node = $2`,
    [workflowId, nodeIndex],
  );
  return row?.status;
}

describe('a workflow whose worker is killed', () => {
  it('goes on: the killed task fails WORKER_CRASHED (or is retried), and its dependents run', async () => {
    const wf = workflow(fixture.app, 'seed-scenario');
    const lost = wf.node(fixture.sleepy, { input: { ms: 60_000 }, id: 'lost' });
    const retried = wf.node(fixture.steady, { input: { n: 21, ms: 60_000 }, id: 'retried' });
    const report = wf.node(fixture.collect, {
      input: { outcomes: [lost.outcome, retried.outcome] },
      allowFailedDeps: true,
      id: 'report',
    });
    const def = wf.build({ output: report, successPolicy: { cases: [[report]], optional: [lost] } });
    const first = startWorkerProcess(env, args);
    await first.ready;
    const handle = await def.start();
    await eventually(
      async () =>
        (await taskStatus(handle.id, 0)) === 'RUNNING' && (await taskStatus(handle.id, 1)) === 'RUNNING',
    );
    first.child.kill('SIGKILL');
    await first.exited;
    const second = startWorkerProcess(env, args);
    try {
      const result = await handle.result({ timeoutMs: 30_000 });
      expect(result).toEqual({
        ok: true,
        value: [
          { ok: false, error: expect.objectContaining({ code: 'WORKER_CRASHED' }) },
          { ok: true, value: 42 },
        ],
      });
      const nodes = await handle.nodes();
      expect(nodes.map((n) => [n.id, n.status])).toEqual([
        ['lost', 'FAILED'],
        ['retried', 'COMPLETED'],
        ['report', 'COMPLETED'],
      ]);
      expect(await fixture.app.getTask(nodes[1]!.taskId!)).toMatchObject({ attemptCount: 2, retryCount: 1 });
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  }, 60_000);

  it('completes a parent whose child workflow loses its worker to SIGKILL while a child node runs', async () => {
    const first = startWorkerProcess(env, args);
    await first.ready;
    // n = 5: the parent's first node gives 10; the child doubles twice (40); the parent adds 1.
    const handle = await fixture.parentFlow.start({ n: 5, ms: 60_000 });
    const childId = await eventually(async () => {
      const [run] = await fixture.app.listWorkflows({ name: 'fixture-child', limit: 10 });
      return run?.parentId === handle.id ? run.id : undefined;
    });
    await eventually(async () => (await taskStatus(childId, 0)) === 'RUNNING');
    first.child.kill('SIGKILL');
    await first.exited;
    const second = startWorkerProcess(env, args);
    try {
      expect(await handle.result({ timeoutMs: 30_000 })).toEqual({ ok: true, value: 41 });
      const child = fixture.app.getWorkflow(childId);
      expect(await child.info()).toMatchObject({ status: 'COMPLETED', parentId: handle.id, depth: 1 });
      const [firstTask] = (await child.nodes()).map((n) => n.taskId!);
      // The run that died is recorded as lost to the crash; the retry completed it.
      expect(await fixture.app.getTask(firstTask!)).toMatchObject({ status: 'COMPLETED', attemptCount: 2 });
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  }, 60_000);

  it('completes a 202-node workflow with the right result while random workers are killed', async () => {
    const WIDTH = 200;
    const seed = Number(process.env.HORSIES_CHAOS_SEED ?? Date.now() % 1_000_000);
    const random = seededRandom(seed);
    const wf = workflow(fixture.app, 'wide-under-kills');
    const root = wf.node(fixture.steady, { input: { n: 0, ms: 0 }, id: 'root' });
    const parts = Array.from({ length: WIDTH }, (_, n) =>
      wf.node(fixture.steady, {
        input: { n, ms: Math.floor(random() * 40) },
        waitsFor: [root],
        id: `part-${n}`,
      }),
    );
    const sum = wf.node(fixture.total, { input: { values: parts.map((p) => p.result) }, id: 'sum' });
    const def = wf.build({ output: sum });

    const workers: WorkerProcess[] = [0, 1, 2].map(() => startWorkerProcess(env, args));
    await Promise.all(workers.map((w) => w.ready));
    const handle = await def.start();
    const runs = async (): Promise<number> =>
      (await t.query<{ n: number }>('SELECT count(*)::int AS n FROM {{schema}}.test_runs'))[0]!.n;
    const base = await runs();
    let kills = 0;
    // Kill a random worker after every 20 to 50 more handler runs, and restart it at once.
    while (kills < 4) {
      const target = (await runs()) + 20 + Math.floor(random() * 30);
      if (target - base >= WIDTH) break;
      await eventually(async () => (await runs()) >= target, 60_000);
      const index = Math.floor(random() * workers.length);
      workers[index]!.child.kill('SIGKILL');
      await workers[index]!.exited;
      kills += 1;
      workers[index] = startWorkerProcess(env, args);
    }
    try {
      const result = await handle.result({ timeoutMs: 60_000 });
      const expected = parts.reduce((acc, _, n) => acc + n * 2, 0);
      expect(result).toEqual({ ok: true, value: expected });
      const nodes = await handle.nodes();
      expect(nodes).toHaveLength(WIDTH + 2);
      expect(nodes.filter((n) => n.status !== 'COMPLETED')).toEqual([]);
      const [crashes] = await t.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM {{schema}}.horsies_task_attempts a
         JOIN {{schema}}.horsies_tasks t ON t.id = a.task_id
         WHERE t.workflow_id = $1 AND a.outcome = 'WORKER_FAILURE'`,
        [handle.id],
      );
      expect(kills).toBeGreaterThanOrEqual(2);
      console.log(
        `workflow under kills (seed ${seed}): ${WIDTH + 2} nodes, ${kills} SIGKILLs, ${crashes!.n} runs lost to them and retried`,
      );
    } finally {
      for (const w of workers) w.child.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.exited));
    }
  }, 120_000);

  it('completes a 200-node workflow of chains right when workers die running tasks their steps started', async () => {
    const CHAINS = 6;
    const LENGTH = 33;
    const seed = Number(process.env.HORSIES_CHAOS_SEED ?? Date.now() % 1_000_000);
    const random = seededRandom(seed);
    // Six chains on three workers of four slots (eight while one restarts): a slot is free when a link ends, and
    // no task waits in the queue, so its worker's step starts the next link itself.
    const wf = workflow(fixture.app, 'chains-under-kills');
    const root = wf.node(fixture.steady, { input: { n: 0, ms: 0 }, id: 'root' });
    const ends = Array.from({ length: CHAINS }, (_, c) => {
      let link = wf.node(fixture.steady, { input: { n: c, ms: 5 }, waitsFor: [root], id: `c${c}-0` });
      for (let i = 1; i < LENGTH; i += 1) {
        link = wf.node(fixture.steady, {
          input: { n: link.result, ms: 150 + Math.floor(random() * 150) },
          id: `c${c}-${i}`,
        });
      }
      return link;
    });
    const sum = wf.node(fixture.total, { input: { values: ends.map((e) => e.result) }, id: 'sum' });
    const def = wf.build({ output: sum });

    const workers: WorkerProcess[] = [0, 1, 2].map(() => startWorkerProcess(env, args));
    await Promise.all(workers.map((w) => w.ready));
    const handle = await def.start();
    // A worker running a task that its own step started: claimed and started in the transaction that enqueued it.
    const eagerRunner = async (): Promise<number | undefined> => {
      const live = workers.map((w) => w.child.pid!);
      const [row] = await t.query<{ pid: number }>(
        `SELECT worker_pid AS pid FROM {{schema}}.horsies_tasks
         WHERE workflow_id = $1 AND status = 'RUNNING' AND claimed_at = enqueued_at AND worker_pid = ANY ($2::int[])
         LIMIT 1`,
        [handle.id, live],
      );
      return row?.pid;
    };
    const ended = async (): Promise<boolean> =>
      ['COMPLETED', 'FAILED'].includes((await handle.info())?.status ?? 'gone');
    let kills = 0;
    // Up to three kills while the chains (about 7 s on a quiet machine) run.
    while (kills < 3) {
      const pid = await eventually(async () => ((await ended()) ? -1 : await eagerRunner()), 30_000);
      if (pid === -1) break;
      const index = workers.findIndex((w) => w.child.pid === pid);
      workers[index]!.child.kill('SIGKILL');
      await workers[index]!.exited;
      kills += 1;
      workers[index] = startWorkerProcess(env, args);
    }
    try {
      const result = await handle.result({ timeoutMs: 60_000 });
      const expected = ends.reduce((acc, _, c) => acc + c * 2 ** LENGTH, 0);
      expect(result).toEqual({ ok: true, value: expected });
      const [eager] = await t.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks
         WHERE workflow_id = $1 AND attempt = 1 AND claimed_at = enqueued_at`,
        [handle.id],
      );
      // Many links started in the step of the link before (root and the chains' heads may not).
      expect(eager!.n).toBeGreaterThan((CHAINS * LENGTH) / 4);
      // Every run of a task beyond one is explained by a run the reaper wrote off (a worker killed, or one that
      // missed its heartbeats on a busy machine): an attempt ended WORKER_FAILURE.
      const runs = await t.query<{ task_id: string; pids: number[]; crashed: number }>(
        `SELECT r.task_id, array_agg(r.worker_pid) AS pids,
                (SELECT count(*)::int FROM {{schema}}.horsies_task_attempts a
                 WHERE a.task_id = r.task_id AND a.outcome = 'WORKER_FAILURE') AS crashed
         FROM {{schema}}.test_runs r
         JOIN {{schema}}.horsies_tasks t ON t.id = r.task_id
         WHERE t.workflow_id = $1 GROUP BY r.task_id`,
        [handle.id],
      );
      expect(kills).toBeGreaterThanOrEqual(1);
      expect(runs).toHaveLength(CHAINS * LENGTH + 1);
      const unexplained = runs.filter((r) => r.pids.length - 1 > r.crashed);
      expect(unexplained).toEqual([]);
      const rerun = runs.filter((r) => r.pids.length > 1).length;
      console.log(
        `chains under kills (seed ${seed}): ${CHAINS * LENGTH + 2} nodes, ${eager!.n} started by their step, ` +
          `${kills} SIGKILLs of workers running such a task, ${rerun} tasks run again after a write-off`,
      );
    } finally {
      for (const w of workers) w.child.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.exited));
    }
  }, 120_000);
});
