/**
 * The claim token: a fence that never repeats. A claim and start commit without waiting for their WAL flush, so a
 * server crash can undo them; the task is then PENDING with the claim generation it had before, and the next claim,
 * by the same worker, draws the same generation again. The token is drawn at random at each claim: the run whose
 * claim was lost holds another one, and every statement it still sends is refused.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { App } from '../../src/client/App.js';
import { channels } from '../../src/db/Listener.js';
import { HeartbeatInsertMany } from '../../src/db/liveness.js';
import { TaskProgressSet, TaskStepSave } from '../../src/db/progress.js';
import { TaskClaimAndStart, TaskFinishMany } from '../../src/db/tasks.js';
import type { ClaimAndStartRow, TaskFinish, WorkerIdentity } from '../../src/db/tasks.js';
import { eventually, testLogger } from '../support/db.js';
import { startOwnServer } from '../support/ownServer.js';

const worker: WorkerIdentity = { workerId: 'w-token', hostname: 'test-host', pid: 4242, processName: 'test' };

function completion(claim: ClaimAndStartRow, result: string): TaskFinish {
  return {
    id: claim.id,
    workerId: worker.workerId,
    token: claim.claim_token,
    status: 'COMPLETED',
    result,
    errorCode: null,
    errorMessage: null,
    failedReason: null,
    retryDelayMs: 0,
    crashed: false,
  };
}

describe('the claim token', () => {
  it(
    "refuses every statement of a run whose start a server crash undid, though the worker's next claim has its generation",
    { timeout: 180_000 },
    async () => {
      const own = await startOwnServer();
      let app: App | null = null;
      try {
        // The WAL writer writes asynchronous commits out at most every 10 s (unless a WAL page fills up): an
        // immediate shutdown right after such a commit loses it.
        await own.side.query("ALTER SYSTEM SET wal_writer_delay = '10s'");
        await own.side.query('SELECT pg_reload_conf()');
        app = new App({ databaseUrl: own.url, schema: 'token_test', logger: testLogger });
        await app.migrate();
        const task = app.task({ name: 'token.work', input: z.object({}), handler: () => null });
        const claimAndStart = (): Promise<ClaimAndStartRow[]> =>
          app!.db.run(TaskClaimAndStart, {
            queue: 'default',
            taskNames: ['token.work'],
            limit: 1,
            start: 1,
            leaseMs: 30_000,
            worker,
            waitForFlush: false,
          });

        // A start survives the crash when its commit happened to reach the disk (a WAL page filled up): the
        // task is then RUNNING after the restart, and the next task tries again.
        let lost: ClaimAndStartRow | null = null;
        for (let round = 0; round < 5 && lost === null; round += 1) {
          const handle = await task.send({});
          const [claimed] = await claimAndStart();
          expect(claimed).toMatchObject({ id: handle.id, status: 'RUNNING', attempt: 1 });
          await own.stop('crash');
          await own.start();
          const after = await eventually(async () => {
            try {
              return (await app!.getTask(handle.id)) ?? null;
            } catch {
              return null;
            }
          }, 30_000);
          if (after?.status === 'PENDING') lost = claimed!;
        }
        expect(lost, 'no start was undone by five crashes in a row').not.toBeNull();

        // The same worker claims and starts the task again: the generation repeats, the token does not.
        const [again] = await claimAndStart();
        expect(again).toMatchObject({ id: lost!.id, status: 'RUNNING', attempt: 1 });
        expect(again!.claim_generation).toBe(lost!.claim_generation);
        expect(again!.claim_token).not.toBe(lost!.claim_token);

        // Everything the lost run still sends is refused: heartbeat, progress, a durable step, its finish.
        const beat = (claim: ClaimAndStartRow) =>
          app!.db.run(HeartbeatInsertMany, {
            worker,
            role: 'runner',
            tasks: [{ id: claim.id, token: claim.claim_token }],
            leaseMs: 30_000,
            maxClaimAgeMs: 600_000,
          });
        const fence = (claim: ClaimAndStartRow) => ({
          id: claim.id,
          workerId: worker.workerId,
          token: claim.claim_token,
        });
        expect(await beat(lost!)).toEqual([]);
        const progress = { value: '"late"', channel: channels.taskProgress('token_test') };
        expect(await app.db.run(TaskProgressSet, { ...fence(lost!), ...progress })).toEqual([]);
        const step = { name: 'charge', seq: 1, result: '{"n":1}' };
        expect(await app.db.run(TaskStepSave, { ...fence(lost!), ...step })).toEqual([]);
        expect(await app.db.run(TaskFinishMany, { tasks: [completion(lost!, '{"ok":"lost"}')] })).toEqual([]);

        // The new run's own statements go through, and its outcome is the one written.
        expect(await beat(again!)).toEqual([{ id: again!.id }]);
        expect(await app.db.run(TaskStepSave, { ...fence(again!), ...step })).toEqual([{ name: 'charge' }]);
        expect(
          await app.db.run(TaskFinishMany, { tasks: [completion(again!, '{"ok":"new"}')] }),
        ).toHaveLength(1);
        const info = await app.getTask(lost!.id);
        expect(info).toMatchObject({ status: 'COMPLETED', result: { ok: 'new' } });
      } finally {
        await app?.close();
        await own.close();
      }
    },
  );
});
