/**
 * `horsies workflows signal`, run as a real process with the app module that declares the signal's schema, against
 * an approval run stepped by an in-process worker.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { WorkflowHandle } from '../../src/workflow/WorkflowHandle.js';
import { createWorker } from '../../src/worker/Worker.js';
import { runCli } from '../support/cli.js';
import type { CliResult } from '../support/cli.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';
import { importFixture } from '../support/fixtures.js';

const t = await useTestSchema();
const fixture = await importFixture({ schema: t.schema }, () => import('../fixtures/approvalApp.js'));
const worker = createWorker(fixture.app, { concurrency: 2 });
afterAll(async () => {
  await worker.stop();
  await fixture.app.close();
});

function signal(...args: string[]): Promise<CliResult> {
  return runCli(['workflows', 'signal', ...args, '--app', 'test/fixtures/approvalApp.ts'], {
    DATABASE_URL: databaseUrl(),
    HORSIES_SCHEMA: t.schema,
    HORSIES_LOG_LEVEL: 'silent',
  });
}

async function waiting(order: string): Promise<WorkflowHandle<string>> {
  const handle = await fixture.refundFlow.start({ order, amount: 3 });
  await eventually(
    async () => (await handle.nodes()).find((n) => n.id === 'approval.decision')?.status === 'RUNNING',
  );
  return handle;
}

describe('horsies workflows signal', () => {
  it('completes a waiting node with the payload, once per delivery id', async () => {
    await worker.start();
    const handle = await waiting('cli-1');
    const payload = JSON.stringify({ approved: true, by: 'cli' });
    const first = await signal(handle.id, 'approval.decision', payload, '--delivery-id', 'd-1', '--json');
    expect(first.stderr).toBe('');
    expect(JSON.parse(first.stdout)).toEqual({
      workflowId: handle.id,
      node: 'approval.decision',
      id: 'd-1',
      delivered: 'resumed',
    });
    expect(await handle.result({ timeoutMs: 10_000 })).toEqual({
      ok: true,
      value: 'cli-1: refund of 300 cents approved by cli',
    });
    const again = await signal(handle.id, 'approval.decision', payload, '--delivery-id', 'd-1');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('has ended');
  });

  it('refuses a payload that fails the schema or is not JSON, and stores nothing', async () => {
    const handle = await waiting('cli-2');
    const bad = await signal(handle.id, 'approval.decision', '{"approved":"yes","by":"cli"}');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('payload of signal "approval.decision"');
    const notJson = await signal(handle.id, 'approval.decision', '{approved');
    expect(notJson.code).toBe(1);
    expect(notJson.stderr).toContain('not JSON');
    const notWait = await signal(handle.id, 'approval.prepare', '{}');
    expect(notWait.code).toBe(1);
    expect(notWait.stderr).toContain('waits for no signal');
    const [stored] = await t.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM {{schema}}.horsies_workflow_signals WHERE workflow_id = $1',
      [handle.id],
    );
    expect(stored?.n).toBe(0);
    expect(await handle.status()).toBe('RUNNING');
  });
});
