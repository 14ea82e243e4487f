/**
 * Eager dispatch: a workflow step lent free slots by the worker that runs it starts the nodes it enqueues for that
 * worker, RUNNING in the step's own transaction, and leaves PENDING what it may not take: beyond the slots, in a
 * queue or task the worker does not serve, in a paused queue, or behind a task already waiting in claim order.
 * The routine is called directly on hand-shaped rows; then a real worker runs a chain whose every step after the
 * first starts eagerly.
 */
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { StepSlots } from '../../src/db/workflows.js';
import { createWorker } from '../../src/worker/Worker.js';
import type { WorkerConfig } from '../../src/worker/config.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { startedRows } from '../../src/db/workflows.js';
import { stepOnServer } from '../../src/workflow/step.js';
import { useTestSchema } from '../support/db.js';
import { insertTask } from '../support/factories.js';

const t = await useTestSchema();
const app = t.app();

const worker = { workerId: 'w-eager', hostname: 'h', pid: 7, processName: 'p' };
const lend = (slots: number, over: Partial<StepSlots> = {}): StepSlots => ({
  slots,
  queues: ['default'],
  taskNames: ['down'],
  worker,
  leaseMs: 30_000,
  ...over,
});

/** A workflow whose node 0 ended (its task COMPLETED) and whose `fanOut` dependents become READY in its step. */
async function shape(fanOut: number, node: { queue?: string; priority?: number } = {}): Promise<string> {
  const id = randomUUID();
  const up = await insertTask(t, { taskName: 'up', status: 'COMPLETED' });
  await t.query(
    `INSERT INTO {{schema}}.horsies_workflows (id, name, status, definition_sha, nodes_total, root_workflow_id)
     VALUES ($1, 'eager', 'RUNNING', 'x', $2, $1)`,
    [id, fanOut + 1],
  );
  const downs = Array.from({ length: fanOut }, (_, i) => i + 1);
  await t.query(
    `INSERT INTO {{schema}}.horsies_workflow_tasks
       (workflow_id, node_index, node_id, task_name, queue_name, priority, dependencies, dependents, input_template,
        status, task_id, allow_failed_deps)
     VALUES ($1, 0, 'up', 'up', 'default', 100, '{}', $3::int[], '{"static":null,"refs":[]}', 'ENQUEUED', $2, false)`,
    [id, up, downs],
  );
  await t.query(
    `INSERT INTO {{schema}}.horsies_workflow_tasks
       (workflow_id, node_index, node_id, task_name, queue_name, priority, dependencies, dependents, input_template,
        status, allow_failed_deps)
     SELECT $1, i, 'down-' || i, 'down', $3, $4, '{0}', '{}', jsonb_build_object('static', i, 'refs', '[]'::jsonb),
            'PENDING', false
     FROM unnest($2::int[]) AS i`,
    [id, downs, node.queue ?? 'default', node.priority ?? 100],
  );
  return id;
}

async function tasksOf(id: string) {
  return t.query<{
    workflow_node: number;
    status: string;
    claimed_by_worker_id: string | null;
    attempt: number;
    claim_generation: number;
    same_tx: boolean;
  }>(
    `SELECT workflow_node, status, claimed_by_worker_id, attempt, claim_generation,
            claimed_at IS NOT DISTINCT FROM enqueued_at AND started_at IS NOT DISTINCT FROM enqueued_at AS same_tx
     FROM {{schema}}.horsies_tasks WHERE workflow_id = $1 ORDER BY workflow_node`,
    [id],
  );
}

const statuses = (rows: { status: string }[]) => rows.map((r) => r.status);

// What a test leaves waiting would be ahead of the next test's nodes, and a task started for the made-up worker
// would be given back to PENDING by a reaper.
beforeEach(async () => {
  await t.query(`DELETE FROM {{schema}}.horsies_tasks WHERE status IN ('PENDING', 'CLAIMED', 'RUNNING')`);
});

describe('the step lent free slots', () => {
  it('starts as many ready nodes as it has slots, in claim order, and enqueues the rest', async () => {
    const id = await shape(4);
    const rows = await stepOnServer(app.db, new Map([[id, [0]]]), true, lend(2));
    expect(rows[0]).toMatchObject({ settled: 1, enqueued: 4 });
    const started = startedRows(rows);
    expect(started.map((r) => r.workflow_node)).toEqual([1, 2]);
    expect(started[0]).toMatchObject({ status: 'RUNNING', attempt: 1, claim_generation: 1, kwargs: 1 });
    expect(started[0]!.claim_token).toMatch(/^[0-9a-f-]{36}$/);
    expect(started[0]!.started_at).toBeInstanceOf(Date);
    const tasks = await tasksOf(id);
    expect(statuses(tasks)).toEqual(['RUNNING', 'RUNNING', 'PENDING', 'PENDING']);
    expect(tasks.slice(0, 2).every((r) => r.claimed_by_worker_id === 'w-eager' && r.same_tx)).toBe(true);
    expect(tasks.slice(2).every((r) => r.claimed_by_worker_id === null && r.attempt === 0)).toBe(true);
  });

  it('shares its slots among the workflows of one batch', async () => {
    const a = await shape(2);
    const b = await shape(2);
    const rows = await stepOnServer(
      app.db,
      new Map([
        [a, [0]],
        [b, [0]],
      ]),
      true,
      lend(3),
    );
    expect(startedRows(rows)).toHaveLength(3);
    const all = [...(await tasksOf(a)), ...(await tasksOf(b))];
    expect(statuses(all).filter((s) => s === 'RUNNING')).toHaveLength(3);
  });

  it('starts nothing behind a task already waiting in the queue, ahead of it in claim order', async () => {
    const waiting = await insertTask(t, { taskName: 'other', queue: 'default' });
    try {
      const id = await shape(2);
      expect(startedRows(await stepOnServer(app.db, new Map([[id, [0]]]), true, lend(4)))).toEqual([]);
      expect(statuses(await tasksOf(id))).toEqual(['PENDING', 'PENDING']);
      // A waiting task of a lower priority (a higher number) is not ahead of the nodes.
      await t.query(`DELETE FROM {{schema}}.horsies_tasks WHERE status = 'PENDING' AND id <> $1`, [waiting]);
      await t.query(`UPDATE {{schema}}.horsies_tasks SET priority = 90 WHERE id = $1`, [waiting]);
      const next = await shape(2, { priority: 50 });
      expect(startedRows(await stepOnServer(app.db, new Map([[next, [0]]]), true, lend(4)))).toHaveLength(2);
    } finally {
      await t.query(`DELETE FROM {{schema}}.horsies_tasks WHERE id = $1`, [waiting]);
    }
  });

  it('leaves PENDING the tasks of a queue or a task the worker does not serve, and of a paused queue', async () => {
    const other = await shape(1, { queue: 'elsewhere' });
    const unknown = await shape(1);
    const paused = await shape(1, { queue: 'held' });
    await t.query(
      `INSERT INTO {{schema}}.horsies_queue_state (queue_name, paused, paused_at) VALUES ('held', true, now())`,
    );
    expect(startedRows(await stepOnServer(app.db, new Map([[other, [0]]]), true, lend(4)))).toEqual([]);
    expect(
      startedRows(
        await stepOnServer(app.db, new Map([[unknown, [0]]]), true, lend(4, { taskNames: ['up'] })),
      ),
    ).toEqual([]);
    expect(
      startedRows(
        await stepOnServer(app.db, new Map([[paused, [0]]]), true, lend(4, { queues: ['default', 'held'] })),
      ),
    ).toEqual([]);
    for (const id of [other, unknown, paused]) expect(statuses(await tasksOf(id))).toEqual(['PENDING']);
  });

  it('without slots, enqueues every ready node PENDING', async () => {
    const id = await shape(3);
    expect(startedRows(await stepOnServer(app.db, new Map([[id, [0]]]), true, null))).toEqual([]);
    expect(statuses(await tasksOf(id))).toEqual(['PENDING', 'PENDING', 'PENDING']);
  });
});

describe('a worker running a chain', () => {
  /** Runs a chain of six on a new worker of `config`; the rows of its tasks, in chain order. */
  async function runChain(name: string, config: WorkerConfig, limited = false) {
    const chainApp = t.app();
    const add = chainApp.task({
      name: `${name}.add`,
      input: z.object({ n: z.number() }),
      handler: ({ n }) => n + 1,
      ...(limited ? { maxConcurrentPerWorker: 2 } : {}),
    });
    // No poll during the test: every claim pass comes from a notification, so none competes with a step for slots.
    const worker = createWorker(chainApp, {
      concurrency: 4,
      pollIntervalMs: 60_000,
      maintenance: false,
      ...config,
    });
    // The chain starts after the worker's first claim pass: a pass in flight when the first link is sent may claim
    // it before the link's notification arrives, and that late notification would keep the first step from being
    // lent slots (the queues are no longer known dry).
    const passed = worker.testSignals.producer.passed;
    passed.enable();
    await worker.start();
    try {
      await passed.wait();
      const wf = workflow(chainApp, name);
      let last = wf.node(add, { input: { n: 0 } });
      for (let i = 1; i < 6; i += 1) last = wf.node(add, { input: { n: last.result } });
      const handle = await wf.build({ output: last }).start();
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 6 });
      const tasks = await tasksOf(handle.id);
      expect(tasks).toHaveLength(6);
      expect(tasks.every((r) => r.status === 'COMPLETED' && r.attempt === 1)).toBe(true);
      expect(tasks.every((r) => r.claimed_by_worker_id === worker.id)).toBe(true);
      return tasks;
    } finally {
      await worker.stop();
    }
  }

  it('starts every step after the first in the step that made it ready, and gets the right result', async () => {
    const tasks = await runChain('eager-chain', {});
    expect(tasks.map((r) => r.same_tx)).toEqual([false, true, true, true, true, true]);
  });

  // At 'high' the slot a link frees may be registered for hand-offs before its step asks for it, so how many links
  // start in their step depends on timing; what must hold is the result, each task run once, on this worker.
  it("runs a chain right at throughput 'high', whose idle slots are registered for hand-offs", async () => {
    await runChain('eager-high', { throughput: 'high' });
  });

  it('starts nothing in a step while a task has a per-worker limit (its starts are counted one by one)', async () => {
    const tasks = await runChain('eager-limited', {}, true);
    expect(tasks.map((r) => r.same_tx)).toEqual([false, false, false, false, false, false]);
  });
});
