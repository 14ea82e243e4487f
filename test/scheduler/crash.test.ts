/**
 * A scheduler process SIGKILLed after it inserted a slot's task and before it updated the schedule's row: its
 * transaction dies with it, and the next scheduler sends the slot, once.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Scheduler, slotTaskId } from '../../src/scheduler/Scheduler.js';
import type { SchedulerResult } from '../../src/scheduler/Scheduler.js';
import { databaseUrl, eventually, testLogger, useTestSchema } from '../support/db.js';
import { defineTick } from './support.js';

const ROOT = resolve(import.meta.dirname, '../..');
const t = await useTestSchema();
const app = t.app();
defineTick(app);

const children: Array<{ kill(signal: NodeJS.Signals): unknown }> = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

/** Starts the fixture with its clock at `now`; resolves with the child once it paused with the slot sent. */
function startPausedScheduler(now: Date) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/schedulerProcess.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl(),
      HORSIES_SCHEMA: t.schema,
      HORSIES_TEST_NOW: now.toISOString(),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  const exited = new Promise<number | string>((res) =>
    child.once('exit', (code, sig) => res(code ?? sig ?? -1)),
  );
  const paused = new Promise<{ slots: string[] }>((res, rej) => {
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const line = output.split('\n').find((l) => l.includes('"event":"sent"'));
      if (line) res(JSON.parse(line) as { slots: string[] });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) =>
      rej(new Error(`scheduler process exited (${code}) before pausing:\n${output}`)),
    );
  });
  return { child, paused, exited };
}

describe('a scheduler killed between sending a slot and updating its state', () => {
  it('leaves no task behind, and the next scheduler sends the slot exactly once', async () => {
    const start = new Date('2026-06-01T12:00:30Z');
    const slot = new Date('2026-06-01T12:01:00Z');
    const due = new Date('2026-06-01T12:01:10Z');
    const schedule = {
      name: 'crashy',
      task: 'tick',
      input: { schedule: 'crashy' },
      pattern: { kind: 'interval', minutes: 1 },
    } as const;
    const clock = new ManualClock(start);
    const survivor = new Scheduler(app.db, {
      schedules: [schedule],
      tasks: app.tasks,
      clock,
      logger: testLogger,
    });
    await survivor.runOnce(); // the schedule's row, next run 12:01

    const victim = startPausedScheduler(due);
    const { slots } = await victim.paused;
    expect(slots).toEqual([slot.toISOString()]);
    // The victim's task is inserted but not committed: nothing is visible outside its transaction.
    expect(await t.query('SELECT id FROM {{schema}}.horsies_tasks')).toEqual([]);
    // The victim holds the row: a pass now skips the schedule instead of sending the slot a second time.
    clock.set(due);
    expect((await survivor.runOnce()).busy).toEqual(['crashy']);

    victim.child.kill('SIGKILL');
    expect(await victim.exited).toBe('SIGKILL');

    // Once the server has ended the victim's session (its transaction rolls back), the survivor sends the slot.
    const sent = await eventually<SchedulerResult>(async () => {
      const result = await survivor.runOnce();
      return result.sent.length > 0 ? result : undefined;
    });
    expect(sent.sent).toEqual([{ schedule: 'crashy', slot, taskId: slotTaskId('crashy', slot) }]);
    const tasks = await t.query<{ id: string; sent_at: Date }>(
      `SELECT id, sent_at FROM {{schema}}.horsies_tasks WHERE kwargs->>'schedule' = 'crashy'`,
    );
    expect(tasks).toEqual([{ id: slotTaskId('crashy', slot), sent_at: slot }]);
    const [state] = await t.query<{ run_count: number; last_run_at: Date }>(
      `SELECT run_count, last_run_at FROM {{schema}}.horsies_schedule_state WHERE schedule_name = 'crashy'`,
    );
    expect(state).toEqual({ run_count: 1, last_run_at: slot });
    expect((await survivor.runOnce()).sent).toEqual([]);
  });
});
