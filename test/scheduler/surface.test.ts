/**
 * The scheduler as scheduler.md shows it, from the package's index only: schedules declared on the app with a task
 * definition, a scheduler made by `createScheduler(app, { clock })` and driven pass by pass with a `ManualClock`,
 * and the app's operations (`listSchedules`, `triggerSchedule`, `pauseSchedule`, `resumeSchedule`).
 */
import { expect, it } from 'vitest';
import { z } from 'zod';
import { ManualClock, createScheduler } from '../../src/index.js';
import { testLogger, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

it('runs the app’s schedules with an injected clock and operates them through the app', async () => {
  const app = t.app({ queues: ['default', 'reports'] });
  const report = app.task({
    name: 'report',
    queue: 'reports',
    input: z.object({ format: z.enum(['pdf', 'csv']) }),
    handler: ({ format }) => format,
  });
  app.schedule({
    name: 'morning-report',
    task: report,
    input: { format: 'pdf' },
    timezone: 'Europe/Berlin',
    pattern: { kind: 'daily', at: '09:00' },
  });

  // 08:59 in Berlin (summer time): the first pass records the next slot, the pass after 09:00 sends it.
  const clock = new ManualClock(new Date('2026-06-01T06:59:00Z'));
  const scheduler = createScheduler(app, { clock, logger: testLogger });
  expect((await scheduler.runOnce()).sent).toEqual([]);
  clock.advance(2 * 60_000);
  const { sent } = await scheduler.runOnce();
  expect(sent).toEqual([
    { schedule: 'morning-report', slot: new Date('2026-06-01T07:00:00Z'), taskId: expect.any(String) },
  ]);

  const [listed] = await app.listSchedules();
  expect(listed).toMatchObject({
    name: 'morning-report',
    task: 'report',
    pattern: 'daily at 09:00',
    timezone: 'Europe/Berlin',
    runCount: 1,
    lastTaskId: sent[0]?.taskId,
  });
  const { taskId } = await app.triggerSchedule('morning-report');
  expect((await app.getTask(taskId))?.queueName).toBe('reports');
  await app.pauseSchedule('morning-report');
  expect((await app.listSchedules())[0]?.paused).toBe(true);
  await app.resumeSchedule('morning-report');
  expect((await app.listSchedules())[0]?.paused).toBe(false);
});
