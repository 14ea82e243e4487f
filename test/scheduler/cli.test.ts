/** `horsies scheduler <module>` and `horsies schedules ...`, run as real processes. */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { databaseUrl, eventually, useTestSchema } from '../support/db.js';

const ROOT = resolve(import.meta.dirname, '../..');
const t = await useTestSchema();
const env = { DATABASE_URL: databaseUrl(), HORSIES_SCHEMA: t.schema, HORSIES_LOG_LEVEL: 'warn' };
const appArgs = ['--app', 'test/fixtures/scheduleApp.ts'];

async function taskCount(schedule: string): Promise<number> {
  const [row] = await t.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE kwargs->>'schedule' = $1`,
    [schedule],
  );
  return row?.n ?? 0;
}

describe('horsies scheduler', () => {
  it('runs the schedules of the module until SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'scheduler', 'test/fixtures/scheduleApp.ts'],
      { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
    try {
      await eventually(async () => (await taskCount('every-second')) >= 2, 20_000);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, output).toBe(0);
  });
});

describe('horsies schedules', () => {
  it('lists, pauses, resumes and triggers', async () => {
    await t.query(`INSERT INTO {{schema}}.horsies_schedule_state (schedule_name) VALUES ('retired')`);
    const paused = await runCli(['schedules', 'pause', 'nightly', ...appArgs], env);
    expect(paused.code, paused.stderr).toBe(0);
    expect(paused.stdout).toContain('schedule nightly paused');

    const unknown = await runCli(['schedules', 'pause', 'nope'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no schedule "nope"');

    const triggered = await runCli(['schedules', 'trigger', 'nightly', ...appArgs], env);
    expect(triggered.code, triggered.stderr).toBe(0);
    const taskId = /task (\S+)/.exec(triggered.stdout)?.[1];
    expect(await t.query('SELECT task_name FROM {{schema}}.horsies_tasks WHERE id = $1', [taskId])).toEqual([
      { task_name: 'tick' },
    ]);

    const list = await runCli(['schedules', 'list', '--json', ...appArgs], env);
    expect(list.code, list.stderr).toBe(0);
    const rows = list.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const byName = new Map(rows.map((r) => [r.name, r]));
    expect(byName.get('nightly')).toMatchObject({
      paused: true,
      orphaned: false,
      lastTaskId: taskId,
      lastTaskStatus: 'PENDING',
      runCount: 1,
      pattern: 'daily at 02:30',
      timezone: 'Europe/Berlin',
    });
    expect(byName.get('retired')).toMatchObject({ orphaned: true, declared: false });

    const resumed = await runCli(['schedules', 'resume', 'nightly'], env);
    expect(resumed.code, resumed.stderr).toBe(0);
    // Without the app, the rows only: no pattern or zone to show, and none guessed.
    const table = await runCli(['schedules', 'list'], env);
    expect(table.stdout).toMatch(/nightly\s+active/);
    expect(table.stdout.split('\n')[0]).toMatch(/^schedule\s+state\s+next run\s+last run/);
    expect(table.stdout).not.toContain('?');
    expect(table.stdout).toContain('give --app <module> for their patterns and zones');
    const withApp = await runCli(['schedules', 'list', ...appArgs], env);
    expect(withApp.stdout.split('\n')[0]).toMatch(/^schedule\s+state\s+pattern\s+zone\s+next run/);
    expect(withApp.stdout).toMatch(/nightly\s+active\s+daily at 02:30\s+Europe\/Berlin/);
  });
});
