/**
 * The task_done notifications: a worker's completer sends them after its finish commits, carried by the worker's
 * next claim or in a statement of their own, so that finishes do not commit one at a time behind the lock
 * PostgreSQL holds for transactions that notify; every other path that ends a task notifies from the update
 * trigger, in its own transaction.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { channels } from '../../src/db/Listener.js';
import { TaskClaimAndStart, TaskFinishMany } from '../../src/db/tasks.js';
import type { TaskFinish } from '../../src/db/tasks.js';
import { DoneNotices } from '../../src/worker/DoneNotices.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { stepOnServer } from '../../src/workflow/step.js';
import { countStatements, eventually, useTestSchema } from '../support/db.js';
import { listenTo } from '../support/notifications.js';

const t = await useTestSchema();

function idsOf(received: { payload: string | undefined }[]): string[] {
  return received.flatMap((r) => (r.payload ? r.payload.split(',') : []));
}

describe('task_done', () => {
  it.each([
    { what: 'a worker', name: 'done.many', config: { concurrency: 4 } },
    // A prefetching worker claims rarely: most notifications go out in statements of their own.
    {
      what: 'a prefetching worker',
      name: 'done.prefetch',
      config: { concurrency: 2, prefetch: { size: 30 } },
    },
  ])('reaches listeners once per finished task when $what writes the outcomes', async ({ name, config }) => {
    const app = t.app();
    const task = app.task({ name, input: z.object({ i: z.number() }), handler: ({ i }) => i });
    const listening = await listenTo([channels.taskDone(t.schema)]);
    try {
      const handles = await task.sendMany(Array.from({ length: 60 }, (_, i) => ({ input: { i } })));
      const worker = createWorker(app, config);
      await worker.start();
      await Promise.all(handles.map((h) => h.result({ timeoutMs: 20_000 })));
      await worker.stop();
      await listening.settled();
      expect(idsOf(listening.received).sort()).toEqual(handles.map((h) => h.id).sort());
    } finally {
      await listening.end();
    }
  });

  it('is left out of a finish written with notifyLater, and sent by the trigger otherwise', async () => {
    const app = t.app();
    const task = app.task({ name: 'done.direct', input: z.object({}), handler: () => null });
    const [a, b] = await task.sendMany([{ input: {} }, { input: {} }]);
    const claimed = await app.db.run(TaskClaimAndStart, {
      queue: 'default',
      taskNames: ['done.direct'],
      limit: 2,
      start: 2,
      leaseMs: 30_000,
      worker: { workerId: 'w-done', hostname: 'h', pid: 1, processName: 'p' },
    });
    const finish = (id: string): TaskFinish => ({
      id,
      workerId: 'w-done',
      token: claimed.find((c) => c.id === id)!.claim_token,
      status: 'COMPLETED',
      result: '{"ok":null}',
      errorCode: null,
      errorMessage: null,
      failedReason: null,
      retryDelayMs: 0,
      crashed: false,
    });
    const listening = await listenTo([channels.taskDone(t.schema)]);
    try {
      expect(await app.db.run(TaskFinishMany, { tasks: [finish(a!.id)], notifyLater: true })).toHaveLength(1);
      await listening.settled();
      expect(listening.received).toEqual([]);
      expect(await app.db.run(TaskFinishMany, { tasks: [finish(b!.id)] })).toHaveLength(1);
      await listening.settled();
      expect(idsOf(listening.received)).toEqual([b!.id]);
      // The setting lasts for its own transaction only: a cancel on the same pool afterwards still notifies.
      const c = await task.send({});
      await app.cancel(c.id);
      await listening.settled();
      expect(idsOf(listening.received)).toEqual([b!.id, c.id]);
    } finally {
      await listening.end();
    }
  });

  it('ride on a claim (also one that finds nothing), or go alone when no claim takes them in time', async () => {
    const app = t.app();
    const channel = channels.taskDone(t.schema);
    const failures: unknown[] = [];
    const notices = new DoneNotices(app.db, 1, { onFailed: (error) => failures.push(error) });
    const claim = (notify: { channel: string; ids: string[] } | undefined, limit = 5) =>
      app.db.run(TaskClaimAndStart, {
        queue: 'default',
        taskNames: ['done.none'],
        limit,
        start: 5,
        waitForFlush: false,
        leaseMs: 30_000,
        worker: { workerId: 'w-carry', hostname: 'h', pid: 1, processName: 'p' },
        notify,
      });
    const listening = await listenTo([channel]);
    try {
      // Taken by a claim: delivered at its commit, though it claimed nothing.
      notices.add(['carried-1', 'carried-2']);
      expect(await claim(notices.take())).toEqual([]);
      await listening.settled();
      expect(idsOf(listening.received)).toEqual(['carried-1', 'carried-2']);
      // Left alone: sent in a statement of its own, a millisecond later, with nothing else asking for it.
      notices.add(['alone-1']);
      await eventually(async () => idsOf(listening.received).includes('alone-1'));
      expect(idsOf(listening.received)).toEqual(['carried-1', 'carried-2', 'alone-1']);
      // Taken by a claim that failed: given back and sent at once.
      notices.add(['back-1']);
      const taken = notices.take()!;
      await expect(claim(taken, -1)).rejects.toThrow(/LIMIT must not be negative/);
      notices.giveBack(taken);
      await notices.drain();
      await listening.settled();
      expect(idsOf(listening.received)).toEqual(['carried-1', 'carried-2', 'alone-1', 'back-1']);
      expect(failures).toEqual([]);
    } finally {
      await listening.end();
    }
  });

  it('ride on a workflow step, which delivers them at its commit', async () => {
    const app = t.app();
    const notices = new DoneNotices(app.db, 60_000, { onFailed: () => undefined });
    const listening = await listenTo([channels.taskDone(t.schema)]);
    try {
      notices.add(['stepped-1', 'stepped-2']);
      // A step of a workflow that does not exist changes nothing, and still commits the notifications it carries.
      const rows = await stepOnServer(
        app.db,
        new Map([['no-such-workflow', [0]]]),
        false,
        null,
        notices.take(),
      );
      expect(rows).toMatchObject([{ workflow_id: 'no-such-workflow', status: null, settled: 0 }]);
      await listening.settled();
      expect(idsOf(listening.received)).toEqual(['stepped-1', 'stepped-2']);
    } finally {
      await listening.end();
    }
  });

  it('reach listeners from a chain, whose finishes step their workflow', async () => {
    const app = t.app();
    const add = app.task({
      name: 'done.chain',
      input: z.object({ n: z.number() }),
      handler: ({ n }) => n + 1,
    });
    const sent = countStatements(app.db);
    const listening = await listenTo([channels.taskDone(t.schema)]);
    const worker = createWorker(app, { concurrency: 2, maintenance: false });
    await worker.start();
    try {
      const wf = workflow(app, 'done.chain');
      let last = wf.node(add, { input: { n: 0 } });
      for (let i = 1; i < 5; i += 1) last = wf.node(add, { input: { n: last.result } });
      const handle = await wf.build({ output: last }).start();
      expect(await handle.result({ timeoutMs: 10_000 })).toEqual({ ok: true, value: 5 });
      // Each outcome is written with its workflow's step, in a commit that waits for the WAL flush: its
      // notification is left out of it, for the next claim or a statement of its own (see TaskDoneNotify).
      expect(sent.get('TaskFinishStep')).toBe(5);
      const ids = (await handle.nodes()).map((n) => n.taskId);
      // The last outcome's notification may still be held for a next claim when the result is read; the stop's
      // drain sends what is held.
      await worker.stop();
      await listening.settled();
      expect(idsOf(listening.received).sort()).toEqual([...ids].sort());
    } finally {
      await worker.stop();
      await listening.end();
    }
  });
});
