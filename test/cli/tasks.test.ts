/** `horsies tasks list|show|retry|cancel`, run as real processes against rows made directly with SQL. */
import { describe, expect, it } from 'vitest';
import { factoriesFor } from '../support/factories.js';
import { runCli } from '../support/cli.js';
import type { CliResult } from '../support/cli.js';
import { databaseUrl, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

function cli(...args: string[]): Promise<CliResult> {
  return runCli([...args, '--schema', t.schema], { DATABASE_URL: databaseUrl() });
}

const { insertTask, insertAttempt } = factoriesFor(t);

async function row(
  id: string,
): Promise<{ status: string; resubmit_count: number; error_code: string | null }> {
  const [r] = await t.query<{ status: string; resubmit_count: number; error_code: string | null }>(
    'SELECT status, resubmit_count, error_code FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  if (!r) throw new Error(`no row ${id}`);
  return r;
}

describe('horsies tasks list', () => {
  it('prints the tasks matching a status as a table', async () => {
    const failedA = await insertTask({ taskName: 'cli.list', status: 'FAILED', errorCode: 'LIST_A' });
    const failedB = await insertTask({ taskName: 'cli.list', status: 'FAILED', errorCode: 'LIST_B' });
    const completed = await insertTask({ taskName: 'cli.list', status: 'COMPLETED' });
    const run = await cli('tasks', 'list', '--status', 'failed', '--limit', '1000');
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^id\s+task\s+queue\s+status\s+error/);
    expect(lines[1]).toMatch(/^-+\s+-+/);
    const lineOf = (id: string) => lines.find((l) => l.startsWith(id));
    expect(lineOf(failedA)).toMatch(/cli\.list\s+default\s+FAILED\s+LIST_A/);
    expect(lineOf(failedB)).toMatch(/FAILED\s+LIST_B/);
    expect(run.stdout).not.toContain(completed);
    expect(lines.slice(2).every((l) => /\sFAILED\s/.test(l))).toBe(true);
  });

  it('prints one JSON object per line with --json', async () => {
    const failed = await insertTask({ taskName: 'cli.list.json', status: 'FAILED' });
    const cancelled = await insertTask({ taskName: 'cli.list.json', status: 'CANCELLED' });
    const pending = await insertTask({ taskName: 'cli.list.json' });
    const run = await cli(
      'tasks',
      'list',
      '--task',
      'cli.list.json',
      '--status',
      'failed,cancelled',
      '--json',
    );
    expect(run.code, run.stderr).toBe(0);
    const objects = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; status: string; taskName: string });
    expect(objects.map((o) => [o.id, o.status]).sort()).toEqual(
      [
        [failed, 'FAILED'],
        [cancelled, 'CANCELLED'],
      ].sort(),
    );
    expect(objects.every((o) => o.taskName === 'cli.list.json')).toBe(true);
    expect(run.stdout).not.toContain(pending);
  });

  it('says so when nothing matches', async () => {
    const run = await cli('tasks', 'list', '--task', 'cli.list.nothing');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('no tasks match');
  });

  it('rejects an unknown status, naming the valid ones', async () => {
    const run = await cli('tasks', 'list', '--status', 'bogus');
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('BOGUS');
    for (const status of ['PENDING', 'CLAIMED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED']) {
      expect(run.stderr).toContain(status);
    }
    expect(run.stdout).toBe('');
  });
});

describe('horsies tasks show', () => {
  it('prints the task for a reader, with its attempts as a table', async () => {
    const id = await insertTask({ taskName: 'cli.show', status: 'FAILED' });
    await insertAttempt(id, 1, 'FAILED');
    const run = await cli('tasks', 'show', id);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`task      ${id}`);
    expect(lines).toContain('name      cli.show');
    expect(lines).toContain('status    FAILED');
    expect(lines.find((l) => l.startsWith('attempts'))).toMatch(
      /^attempts {2}1 \(retries \d+ of \d+, resubmits 0\)$/,
    );
    const header = lines.findIndex((l) => l.startsWith('attempt '));
    expect(lines[header]).toMatch(/^attempt\s+outcome\s+retry\s+started\s+finished\s+error\s+worker$/);
    expect(lines[header + 2]).toMatch(/^1\s+FAILED\s+no\s+\S+\s+\S+\s+BOOM/);
  });

  it('prints the progress once, naming an earlier attempt', async () => {
    const id = await insertTask({ taskName: 'cli.show', status: 'PENDING' });
    await t.query(
      `UPDATE {{schema}}.horsies_tasks
       SET progress = '{"done": 3}', progress_at = now(), progress_attempt = 1, attempt = 2 WHERE id = $1`,
      [id],
    );
    const run = await cli('tasks', 'show', id);
    expect(run.code, run.stderr).toBe(0);
    const progress = run.stdout.split('\n').filter((l) => l.startsWith('progress'));
    expect(progress).toEqual([
      expect.stringMatching(/^progress {2}\{"done":3\} \(attempt 1, an earlier attempt, \S+\)$/),
    ]);
  });

  it('prints the task as JSON with its attempts with --json', async () => {
    const id = await insertTask({ taskName: 'cli.show', status: 'FAILED' });
    await insertAttempt(id, 1, 'FAILED');
    const run = await cli('tasks', 'show', id, '--json');
    expect(run.code, run.stderr).toBe(0);
    const task = JSON.parse(run.stdout) as {
      id: string;
      status: string;
      taskName: string;
      attempts: Array<{ attempt: number; outcome: string; errorCode: string }>;
    };
    expect(task).toMatchObject({ id, status: 'FAILED', taskName: 'cli.show' });
    expect(task.attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'FAILED', errorCode: 'BOOM' }),
    ]);
  });

  it('exits 1 for an unknown id', async () => {
    const run = await cli('tasks', 'show', 'no-such-task');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('no task with id no-such-task');
  });
});

describe('horsies tasks retry', () => {
  it('resubmits the given ids', async () => {
    const id = await insertTask({ taskName: 'cli.retry.id', status: 'FAILED' });
    const run = await cli('tasks', 'retry', id);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('resubmitted 1 task(s)');
    expect(await row(id)).toMatchObject({ status: 'PENDING', resubmit_count: 1, error_code: null });
  });

  it('resubmits by filter', async () => {
    const name = 'cli.retry.filter';
    const a = await insertTask({ taskName: name, status: 'FAILED' });
    const b = await insertTask({ taskName: name, status: 'FAILED' });
    const cancelled = await insertTask({ taskName: name, status: 'CANCELLED' });
    const other = await insertTask({ taskName: 'cli.retry.filter.other', status: 'FAILED' });
    const run = await cli('tasks', 'retry', '--status', 'failed', '--task', name);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('resubmitted 2 task(s)');
    expect((await row(a)).status).toBe('PENDING');
    expect((await row(b)).status).toBe('PENDING');
    expect((await row(cancelled)).status).toBe('CANCELLED');
    expect((await row(other)).status).toBe('FAILED');
  });

  it('resubmits only FAILED tasks when the filter names no status', async () => {
    const name = 'cli.retry.default';
    const failed = await insertTask({ taskName: name, status: 'FAILED' });
    const cancelled = await insertTask({ taskName: name, status: 'CANCELLED' });
    const expired = await insertTask({ taskName: name, status: 'EXPIRED' });
    const run = await cli('tasks', 'retry', '--task', name);
    expect(run.code, run.stderr).toBe(0);
    expect((await row(failed)).status).toBe('PENDING');
    expect((await row(cancelled)).status).toBe('CANCELLED');
    expect((await row(expired)).status).toBe('EXPIRED');
    expect(run.stdout).toContain('resubmitted 1 task(s)');
  });

  it('refuses to run without ids, filter or --all', async () => {
    const id = await insertTask({ taskName: 'cli.retry.nothing', status: 'FAILED' });
    const run = await cli('tasks', 'retry');
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('give task ids, filter options');
    expect(run.stderr).toContain('--all');
    expect((await row(id)).status).toBe('FAILED');
  });

  it('refuses ids together with a filter', async () => {
    const id = await insertTask({ taskName: 'cli.retry.both', status: 'FAILED' });
    const run = await cli('tasks', 'retry', id, '--task', 'cli.retry.both');
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('not both');
    expect((await row(id)).status).toBe('FAILED');
  });

  it('refuses a status that cannot be resubmitted', async () => {
    const id = await insertTask({ taskName: 'cli.retry.completed.filter', status: 'COMPLETED' });
    const run = await cli('tasks', 'retry', '--status', 'completed', '--task', 'cli.retry.completed.filter');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('only FAILED, CANCELLED and EXPIRED');
    expect((await row(id)).status).toBe('COMPLETED');
  });

  it('reports a COMPLETED id as not resubmitted and exits 1', async () => {
    const completed = await insertTask({ taskName: 'cli.retry.completed', status: 'COMPLETED' });
    const failed = await insertTask({ taskName: 'cli.retry.completed', status: 'FAILED' });
    const run = await cli('tasks', 'retry', completed, failed);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('resubmitted 1 task(s)');
    expect(run.stderr).toContain('not resubmitted');
    expect(run.stderr).toContain(completed);
    expect(run.stderr).not.toContain(failed);
    expect((await row(completed)).status).toBe('COMPLETED');
    expect((await row(failed)).status).toBe('PENDING');
  });
});

describe('horsies tasks cancel', () => {
  it('cancels a PENDING task', async () => {
    const id = await insertTask({ taskName: 'cli.cancel' });
    const run = await cli('tasks', 'cancel', id);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`task ${id} cancelled (it was PENDING)`);
    expect(await row(id)).toMatchObject({ status: 'CANCELLED', error_code: 'TASK_CANCELLED' });
  });

  it('requests the cancel of a RUNNING task and leaves a finished one alone', async () => {
    const running = await insertTask({ taskName: 'cli.cancel.running', status: 'RUNNING' });
    const done = await insertTask({ taskName: 'cli.cancel.running', status: 'COMPLETED' });
    const a = await cli('tasks', 'cancel', running);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toContain('cancel requested');
    expect((await row(running)).status).toBe('RUNNING');
    const b = await cli('tasks', 'cancel', done);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toContain('had already finished (COMPLETED)');
    expect((await row(done)).status).toBe('COMPLETED');
  });

  it('exits 1 for an unknown id', async () => {
    const run = await cli('tasks', 'cancel', 'no-such-task');
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('no task with id no-such-task');
  });
});
