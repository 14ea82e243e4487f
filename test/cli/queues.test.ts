/** `horsies queues pause|resume`, run as real processes: a name nothing knows is refused, not stored. */
import { describe, expect, it } from 'vitest';
import { factoriesFor } from '../support/factories.js';
import { runCli } from '../support/cli.js';
import type { CliResult } from '../support/cli.js';
import { databaseUrl, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const { insertTask } = factoriesFor(t);

function cli(...args: string[]): Promise<CliResult> {
  return runCli([...args, '--schema', t.schema], { DATABASE_URL: databaseUrl() });
}

async function stored(): Promise<Record<string, boolean>> {
  const rows = await t.query<{ queue_name: string; paused: boolean }>(
    'SELECT queue_name, paused FROM {{schema}}.horsies_queue_state ORDER BY queue_name',
  );
  return Object.fromEntries(rows.map((r) => [r.queue_name, r.paused]));
}

describe('horsies queues pause and resume', () => {
  it('refuse a queue nothing names, with the nearest known name, and store nothing', async () => {
    await insertTask({ taskName: 'cli.mail', queue: 'emails', status: 'COMPLETED' });
    const typo = await cli('queues', 'pause', 'emial');
    expect(typo.code).toBe(1);
    expect(typo.stdout).toBe('');
    expect(typo.stderr).toContain('horsies: no queue "emial": no task, stored state or live worker names it');
    expect(typo.stderr).toContain('did you mean "emails"?');
    expect((await cli('queues', 'resume', 'emial')).code).toBe(1);
    expect(await stored()).toEqual({});

    const paused = await cli('queues', 'pause', 'emails');
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout.trim()).toBe('queue emails paused');
    const resumed = await cli('queues', 'resume', 'emails');
    expect(resumed.stdout.trim()).toBe('queue emails resumed');
    // A queue before its first task, on purpose.
    const ahead = await cli('queues', 'pause', 'invoices', '--force');
    expect(ahead.code, ahead.stderr).toBe(0);
    expect(await stored()).toEqual({ emails: false, invoices: true });
  });
});
