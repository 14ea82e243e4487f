/**
 * A workflow waiting for a signal outlives its worker and its server: the worker that ran the step before the
 * wait is killed with SIGKILL and PostgreSQL crashes (an immediate shutdown) and restarts; a signal afterwards
 * completes the run, with the payload typed end to end.
 */
import { describe, expect, it } from 'vitest';
import { isTransientDatabaseError } from '../../src/db/Database.js';
import type { TaskResult } from '../../src/errors.js';
import type { SignalReceipt } from '../../src/workflow/signals.js';
import type { WorkflowHandle } from '../../src/workflow/WorkflowHandle.js';
import { eventually } from '../support/db.js';
import { fastRecovery } from '../support/fixtures.js';
import { startOwnServer } from '../support/ownServer.js';
import { startWorkerProcess } from '../support/processes.js';

const SCHEMA = 'wait_restart';
const MODULE = 'test/fixtures/approvalApp.ts';

// A call that the restarted server may refuse once or twice while the app's pool drops its dead connections.
async function throughRestart<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await fn();
    } catch (error) {
      if (attempt >= 50 || !isTransientDatabaseError(error)) throw error;
    }
  }
}

describe('an approval workflow across a worker SIGKILL and a PostgreSQL restart', () => {
  it('waits, then completes with the signal sent afterwards', { timeout: 120_000 }, async () => {
    const own = await startOwnServer();
    const env = { databaseUrl: own.url, schema: SCHEMA, recovery: fastRecovery };
    process.env.DATABASE_URL = own.url;
    process.env.HORSIES_SCHEMA = SCHEMA;
    process.env.HORSIES_LOG_LEVEL = 'silent';
    const fixture = await import('../fixtures/approvalApp.js');
    try {
      await fixture.app.migrate();
      const victim = startWorkerProcess({ ...env, module: MODULE }, ['--concurrency', '2']);
      await victim.ready;
      const handle: WorkflowHandle<string> = await fixture.refundFlow.start({ order: 'o-7', amount: 12 });
      await eventually(
        async () => (await handle.nodes()).find((n) => n.id === 'approval.decision')?.status === 'RUNNING',
      );
      victim.child.kill('SIGKILL');
      expect(await victim.exited).toBe('SIGKILL');
      await own.stop('crash');
      await own.start();

      const survivor = startWorkerProcess({ ...env, module: MODULE }, ['--concurrency', '2']);
      await survivor.ready;
      // Nothing ran the wait: no task stands for it, and no worker held it.
      const [tasks] = (
        await own.side.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_tasks`)
      ).rows;
      expect(tasks?.n).toBe(1);
      const receipt: SignalReceipt = await throughRestart(() =>
        handle.signal(fixture.approval, { approved: true, by: 'ann' }),
      );
      // The step that started the wait commits without waiting for its flush: if the crash undid it, the
      // recovery pass redoes it, and a signal that came first is kept for the node.
      expect(['resumed', 'kept']).toContain(receipt.delivered);
      const result: TaskResult<string> = await handle.result({ timeoutMs: 30_000 });
      expect(result).toEqual({ ok: true, value: 'o-7: refund of 1200 cents approved by ann' });
      survivor.child.kill('SIGTERM');
      await survivor.exited;
    } finally {
      await fixture.app.close();
      await own.close();
    }
  });
});
