/**
 * Timers of wait nodes (a signal's timeout, a sleep's end) fire on the maintenance leader, within one maintenance
 * interval of their time, also when the leader changes while they wait; retention deletes a run's deliveries
 * with it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { WorkflowPruneFinished } from '../../src/db/workflows.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const INTERVAL_MS = 300;

describe('timers across a leader change', () => {
  const apps = [1, 2].map(() => t.app({ recovery: { checkIntervalMs: INTERVAL_MS } }));
  // Both workers run the task; the timers' steps need no code of the workflow's.
  const [first] = apps as [(typeof apps)[0]];
  const done = (app: typeof first) =>
    app.task({
      name: 'timers.done',
      input: z.object({ after: z.string() }),
      handler: ({ after }) => `after ${after}`,
    });
  const tasks = apps.map(done);
  const workers = apps.map((app) => createWorker(app, { concurrency: 2, snapshotIntervalMs: 0 }));
  afterAll(() => Promise.all(workers.map((w) => w.stop())));

  it('fires a sleep and a timeout within one interval of their time on the new leader', async () => {
    const wf = workflow(first, 'timers.flow');
    const nap = wf.sleep({ ms: 2_000 });
    const wait = wf.waitFor('timers.never', { schema: z.object({}), timeoutMs: 2_000 });
    const afterSleep = wf.node(tasks[0]!, { input: { after: 'sleep' }, waitsFor: [nap] });
    const afterWait = wf.node(tasks[0]!, {
      id: 'after-wait',
      input: { after: 'wait' },
      waitsFor: [wait],
      allowFailedDeps: true,
    });
    const flow = wf.build({ successPolicy: { cases: [[afterSleep, afterWait]], optional: [wait] } });

    const elected = new Promise<void>((resolve) => {
      for (const w of workers) w.once('leader:elected', resolve);
    });
    await Promise.all(workers.map((w) => w.start()));
    await elected;
    const handle = await flow.start();
    const leader = workers.find((w) => w.isLeader)!;
    const other = workers.find((w) => w !== leader)!;
    const takeover = new Promise<void>((resolve) => other.once('leader:elected', resolve));
    await leader.stop();
    await takeover;

    const result = await handle.result({ timeoutMs: 15_000 });
    expect(result.ok).toBe(true);
    const nodes = await t.query<{
      node_id: string;
      status: string;
      error_code: string | null;
      late_ms: number;
    }>(
      `SELECT node_id, status, error_code,
              (extract(epoch FROM completed_at - wait_due_at) * 1000)::float8 AS late_ms
       FROM {{schema}}.horsies_workflow_tasks WHERE workflow_id = $1 AND wait_kind IS NOT NULL
       ORDER BY node_index`,
      [handle.id],
    );
    expect(nodes.map((n) => [n.node_id, n.status, n.error_code])).toEqual([
      ['sleep', 'COMPLETED', null],
      ['timers.never', 'FAILED', 'WAIT_TIMEOUT'],
    ]);
    for (const n of nodes) {
      expect(n.late_ms).toBeGreaterThanOrEqual(0);
      // One interval, plus the time a pass takes.
      expect(n.late_ms).toBeLessThan(INTERVAL_MS + 200);
    }
  });

  it("prunes a run's deliveries with it", async () => {
    const wf = workflow(first, 'timers.pruned');
    const nap = wf.sleep({ ms: 0 });
    const wait = wf.waitFor('timers.kept', { schema: z.object({ n: z.number() }), waitsFor: [nap] });
    const flow = wf.build({ output: wait });
    // Sent before the run exists in a step: the sleep of 0 ms ends at the start, and the wait takes the signal.
    const handle = await flow.start();
    expect((await handle.signal(wait, { n: 1 })).delivered).toBe('resumed');
    expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: { n: 1 } });
    const count = async () =>
      (
        await t.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM {{schema}}.horsies_workflow_signals WHERE workflow_id = $1',
          [handle.id],
        )
      )[0]?.n;
    expect(await count()).toBe(1);
    const [pruned] = await first.db.run(WorkflowPruneFinished, {
      olderThanMs: 0,
      limit: 1_000,
      now: new Date(Date.now() + 60_000),
    });
    expect(pruned?.deleted).toBeGreaterThanOrEqual(1);
    expect(await count()).toBe(0);
  });
});
