/**
 * The scheduler against the database with an injected clock: first slots, downtime with and without catch-up, a
 * pattern change, an input that stopped validating, pause and resume, disabled and orphaned schedules, triggers,
 * three schedulers racing over an hour of one-minute slots, and declarations that fail all at once.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ManualClock } from '../../src/clock.js';
import { Database } from '../../src/db/Database.js';
import { ConfigError, HorsiesError, InputValidationError } from '../../src/errors.js';
import type { ScheduleConfig } from '../../src/scheduler/declare.js';
import { declareSchedules } from '../../src/scheduler/declare.js';
import {
  listSchedules,
  pauseSchedule,
  resumeSchedule,
  triggerSchedule,
} from '../../src/scheduler/operations.js';
import { Scheduler, slotTaskId } from '../../src/scheduler/Scheduler.js';
import { rejection, thrown } from '../support/assertions.js';
import { databaseUrl, eventually, testLogger, useTestSchema, waitForEvent } from '../support/db.js';
import { defineTick, sentSlots } from './support.js';

const t = await useTestSchema();
const app = t.app({ queues: ['default', 'cron'] });
const tick = defineTick(app);
/** Flipped by tests: the schema of `strict` accepts inputs only while it is true. */
let strictAccepts = true;
app.task({
  name: 'strict',
  input: z.object({ schedule: z.string() }).refine(() => strictAccepts, 'rejected by the new rules'),
  handler: () => 'ok',
});

const MINUTE = 60_000;
const T0 = new Date('2026-06-01T12:00:30Z');

beforeEach(async () => {
  strictAccepts = true;
  await t.query('TRUNCATE {{schema}}.horsies_tasks, {{schema}}.horsies_schedule_state CASCADE');
});

function everyMinute(name: string, extra: Partial<ScheduleConfig> = {}): ScheduleConfig {
  return {
    name,
    task: 'tick',
    input: { schedule: name },
    pattern: { kind: 'interval', minutes: 1 },
    ...extra,
  };
}

function scheduler(schedules: ScheduleConfig[], clock: ManualClock, db = app.db): Scheduler {
  return new Scheduler(db, {
    schedules,
    tasks: app.tasks,
    queues: app.config.queues,
    clock,
    logger: testLogger,
  });
}

function minutesAfter(start: Date, ...minutes: number[]): string[] {
  const base = Math.floor(start.getTime() / MINUTE) * MINUTE;
  return minutes.map((m) => new Date(base + m * MINUTE).toISOString());
}

async function stateOf(name: string) {
  const [row] = await t.query<{
    next_run_at: Date | null;
    last_run_at: Date | null;
    last_task_id: string | null;
    run_count: number;
    last_error: string | null;
    paused: boolean;
  }>('SELECT * FROM {{schema}}.horsies_schedule_state WHERE schedule_name = $1', [name]);
  return row;
}

describe('a new schedule', () => {
  it('fires first at its next slot, never at once; each slot is one task with a derived id and sent_at', async () => {
    const clock = new ManualClock(T0);
    const s = scheduler([everyMinute('fresh')], clock);
    const first = await s.runOnce();
    expect(first.sent).toEqual([]);
    expect(first.started).toEqual([
      { schedule: 'fresh', nextRunAt: new Date(minutesAfter(T0, 1)[0] as string) },
    ]);
    clock.advance(20_000); // 12:00:50, still before the first slot
    expect((await s.runOnce()).sent).toEqual([]);
    clock.advance(10_000); // 12:01:00, the first slot
    const fired = await s.runOnce();
    const slot = new Date(minutesAfter(T0, 1)[0] as string);
    expect(fired.sent).toEqual([{ schedule: 'fresh', slot, taskId: slotTaskId('fresh', slot) }]);
    const [task] = await t.query<{ id: string; sent_at: Date; task_name: string; status: string }>(
      'SELECT id, sent_at, task_name, status FROM {{schema}}.horsies_tasks',
    );
    expect(task).toEqual({
      id: slotTaskId('fresh', slot),
      sent_at: slot,
      task_name: 'tick',
      status: 'PENDING',
    });
    expect(await stateOf('fresh')).toMatchObject({ last_run_at: slot, run_count: 1, last_task_id: task?.id });
    expect((await s.runOnce()).sent).toEqual([]); // same instant: nothing more
  });
});

describe('downtime of 10 slots', () => {
  async function downtime(extra: Partial<ScheduleConfig>) {
    const clock = new ManualClock(T0);
    const s = scheduler([everyMinute('down', extra)], clock);
    await s.runOnce();
    clock.advance(MINUTE);
    await s.runOnce(); // slot 1 sent
    clock.advance(10 * MINUTE + 15_000); // slots 2..11 missed, now 12:11:45
    return { result: await s.runOnce(), clock, s };
  }

  it('sends the latest missed slot once by default', async () => {
    const { result } = await downtime({});
    expect(result.sent.map((x) => x.slot.toISOString())).toEqual(minutesAfter(T0, 11));
    expect(await sentSlots(t, 'down')).toEqual(minutesAfter(T0, 1, 11));
    expect(await stateOf('down')).toMatchObject({
      run_count: 2,
      next_run_at: new Date(minutesAfter(T0, 12)[0] as string),
    });
  });

  it('sends every missed slot, oldest first, with catchUp', async () => {
    const { result } = await downtime({ catchUp: true });
    const missed = minutesAfter(T0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    expect(result.sent.map((x) => x.slot.toISOString())).toEqual(missed);
    expect(await sentSlots(t, 'down')).toEqual([...minutesAfter(T0, 1), ...missed]);
    expect(await stateOf('down')).toMatchObject({ run_count: 11 });
  });

  it('sends at most maxCatchUpRuns of them, the latest ones', async () => {
    const { result } = await downtime({ catchUp: true, maxCatchUpRuns: 3 });
    expect(result.sent.map((x) => x.slot.toISOString())).toEqual(minutesAfter(T0, 9, 10, 11));
  });
});

describe('a changed pattern or time zone', () => {
  it('recomputes the next run from now and sends nothing for the old pattern', async () => {
    const clock = new ManualClock(T0);
    await scheduler([everyMinute('changing')], clock).runOnce();
    clock.advance(5 * MINUTE); // the old pattern's slots at 12:01..12:05 are due
    const hourly = scheduler([everyMinute('changing', { pattern: { kind: 'hourly', minute: 30 } })], clock);
    const result = await hourly.runOnce();
    expect(result.sent).toEqual([]);
    expect(result.recomputed).toEqual([
      { schedule: 'changing', nextRunAt: new Date('2026-06-01T12:30:00Z') },
    ]);
    // The same pattern written differently keeps its place; a new zone moves it.
    const same = scheduler(
      [everyMinute('changing', { pattern: { kind: 'hourly', minute: 30, second: 0 } })],
      clock,
    );
    expect((await same.runOnce()).recomputed).toEqual([]);
    const zoned = scheduler(
      [everyMinute('changing', { pattern: { kind: 'hourly', minute: 30 }, timezone: 'Asia/Kolkata' })],
      clock,
    );
    // Kolkata is 5:30 ahead: local minute 30 is minute 0 in UTC.
    expect((await zoned.runOnce()).recomputed).toEqual([
      { schedule: 'changing', nextRunAt: new Date('2026-06-01T13:00:00Z') },
    ]);
    clock.set(new Date('2026-06-01T13:00:00Z'));
    expect((await zoned.runOnce()).sent.map((x) => x.slot)).toEqual([new Date('2026-06-01T13:00:00Z')]);
    expect(await sentSlots(t, 'changing')).toEqual(['2026-06-01T13:00:00.000Z']);
  });
});

describe('a schedule whose input stopped validating', () => {
  it('does not advance, reports and stores the failure, lets the others go on, and resumes once it passes', async () => {
    const clock = new ManualClock(T0);
    const schedules = [everyMinute('broken', { task: 'strict' }), everyMinute('healthy')];
    const s = scheduler(schedules, clock);
    await s.runOnce();
    strictAccepts = false;
    clock.advance(MINUTE);
    const slot = new Date(minutesAfter(T0, 1)[0] as string);
    const result = await s.runOnce();
    expect(result.sent.map((x) => x.schedule)).toEqual(['healthy']);
    expect(result.failed).toHaveLength(1);
    expect(result.failed[0]).toMatchObject({ schedule: 'broken', slot });
    expect(result.failed[0]?.error).toBeInstanceOf(InputValidationError);
    expect(await stateOf('broken')).toMatchObject({ next_run_at: slot, run_count: 0 });
    expect((await stateOf('broken'))?.last_error).toMatch(/rejected by the new rules/);
    expect(await sentSlots(t, 'broken')).toEqual([]);

    clock.advance(MINUTE); // still failing a slot later: the latest due slot fails, the next run stays put
    const later = new Date(minutesAfter(T0, 2)[0] as string);
    expect((await s.runOnce()).failed.map((f) => f.slot)).toEqual([later]);
    expect((await listSchedules(app.db, { schedules: s.schedules }))[0]).toMatchObject({
      name: 'broken',
      nextRunAt: slot,
      lastError: expect.stringMatching(/InputValidationError/),
    });

    strictAccepts = true; // fixed: the latest missed slot goes out, the error is cleared
    const fixed = await s.runOnce();
    expect(fixed.failed).toEqual([]);
    expect(fixed.sent.map((x) => [x.schedule, x.slot.toISOString()])).toEqual([
      ['broken', later.toISOString()],
    ]);
    expect(await stateOf('broken')).toMatchObject({ last_error: null, run_count: 1 });
  });
});

describe('operating schedules', () => {
  it('pause stops every scheduler; resume restarts at the next slot without sending the paused ones', async () => {
    const clock = new ManualClock(T0);
    const s = scheduler([everyMinute('pausable')], clock);
    await s.runOnce();
    await pauseSchedule(app.db, 'pausable');
    clock.advance(3 * MINUTE);
    expect((await s.runOnce()).sent).toEqual([]);
    expect((await listSchedules(app.db))[0]).toMatchObject({
      name: 'pausable',
      paused: true,
      orphaned: null,
    });
    await resumeSchedule(app.db, 'pausable');
    const resumed = await s.runOnce();
    expect(resumed.sent).toEqual([]);
    expect(resumed.recomputed).toEqual([
      { schedule: 'pausable', nextRunAt: new Date(minutesAfter(T0, 4)[0] as string) },
    ]);
    clock.advance(MINUTE);
    expect((await s.runOnce()).sent.map((x) => x.slot.toISOString())).toEqual(minutesAfter(T0, 4));
  });

  it('pause of an unknown name fails; of a declared schedule with no row yet, it creates the row', async () => {
    const error = await rejection(pauseSchedule(app.db, 'nope'), HorsiesError);
    expect(error.code).toBe('SCHEDULE_NOT_FOUND');
    await pauseSchedule(app.db, 'early', { declared: ['early'] });
    const clock = new ManualClock(T0);
    const s = scheduler([everyMinute('early')], clock);
    clock.advance(5 * MINUTE);
    expect((await s.runOnce()).sent).toEqual([]);
    expect(await stateOf('early')).toMatchObject({ paused: true });
  });

  it('trigger sends one run now outside the slots; list shows it, disabled and orphaned schedules', async () => {
    const clock = new ManualClock(T0);
    await scheduler([everyMinute('old'), everyMinute('main')], clock).runOnce();
    const current = scheduler([everyMinute('main'), everyMinute('off', { enabled: false })], clock);
    await current.runOnce();
    const main = current.schedules.find((x) => x.name === 'main');
    if (!main) throw new Error('no main schedule');
    const { taskId } = await triggerSchedule(app.db, main);
    const list = await listSchedules(app.db, { schedules: current.schedules });
    expect(list.map((x) => [x.name, x.declared, x.orphaned, x.enabled])).toEqual([
      ['main', true, false, true],
      ['off', true, false, false],
      ['old', false, true, null],
    ]);
    expect(list[0]).toMatchObject({
      lastTaskId: taskId,
      lastTaskStatus: 'PENDING',
      runCount: 1,
      task: 'tick',
      pattern: 'every 60s',
      nextRunAt: new Date(minutesAfter(T0, 1)[0] as string),
    });
    // The orphan's row is kept, and no scheduler touches it.
    clock.advance(2 * MINUTE);
    const later = await current.runOnce();
    expect(later.sent.map((x) => x.schedule)).toEqual(['main']);
    expect(await stateOf('old')).toMatchObject({ run_count: 0 });
    expect(await stateOf('off')).toBeUndefined();
  });

  it('disabling clears the next run; enabling again starts at the next slot', async () => {
    const clock = new ManualClock(T0);
    await scheduler([everyMinute('toggle')], clock).runOnce();
    clock.advance(2 * MINUTE);
    expect((await scheduler([everyMinute('toggle', { enabled: false })], clock).runOnce()).sent).toEqual([]);
    expect(await stateOf('toggle')).toMatchObject({ next_run_at: null });
    clock.advance(2 * MINUTE);
    const enabled = await scheduler([everyMinute('toggle')], clock).runOnce();
    expect(enabled.sent).toEqual([]);
    expect(enabled.recomputed.map((r) => r.nextRunAt?.toISOString())).toEqual(minutesAfter(T0, 5));
  });
});

describe('three schedulers at once', () => {
  it('send exactly one task per slot over a simulated hour of one-minute slots', async () => {
    // Separate pools, clocks a little apart, passes every 20 simulated seconds, all three started together.
    const dbs = [0, 1, 2].map(
      () => new Database({ connectionString: databaseUrl(), schema: t.schema, poolSize: 3 }),
    );
    const clocks = [0, 150, -150].map((skew) => new ManualClock(new Date(T0.getTime() + skew)));
    const schedules = [everyMinute('raced', { catchUp: true }), everyMinute('raced-latest')];
    const schedulers = dbs.map((db, i) => scheduler(schedules, clocks[i] as ManualClock, db));
    try {
      const results = [];
      for (let step = 0; step <= 3 * 60; step += 1) {
        results.push(...(await Promise.all(schedulers.map((s) => s.runOnce()))));
        for (const clock of clocks) clock.advance(20_000);
      }
      expect(results.flatMap((r) => r.failed)).toEqual([]);
      const hour = minutesAfter(T0, ...Array.from({ length: 60 }, (_, m) => m + 1));
      for (const name of ['raced', 'raced-latest']) {
        expect(await sentSlots(t, name)).toEqual(hour);
        expect(await stateOf(name)).toMatchObject({ run_count: 60 });
        // Each slot was sent by exactly one of the three.
        const sent = results.flatMap((r) => r.sent).filter((x) => x.schedule === name);
        expect(sent.map((x) => x.slot.toISOString()).sort()).toEqual(hour);
      }
    } finally {
      await Promise.all(dbs.map((db) => db.end()));
    }
  });
});

describe('the loop', () => {
  it('wakes for the next slot on the real clock, and stop() is idempotent', async () => {
    const s = new Scheduler(app.db, {
      schedules: [everyMinute('looping', { pattern: { kind: 'interval', seconds: 1 } })],
      tasks: app.tasks,
      logger: testLogger,
      checkIntervalMs: 5000,
    });
    // The first pass records the schedule; the loop must then wake for the next second, well before 5 s.
    const sent = waitForEvent(s, 'scheduler:ran', (r) => r.sent.length > 0, 4000);
    s.start();
    const [result] = await sent;
    await s.stop();
    await s.stop();
    const lagMs = await eventually(async () => {
      const [row] = await t.query<{ lag: number }>(
        `SELECT extract(epoch FROM created_at - sent_at) * 1000 AS lag FROM {{schema}}.horsies_tasks WHERE id = $1`,
        [result.sent[0]?.taskId],
      );
      return row ? Number(row.lag) : undefined;
    });
    expect(lagMs).toBeGreaterThanOrEqual(0);
    expect(lagMs).toBeLessThan(1000);
  });
});

describe('a start during a stop', () => {
  it('runs the loop again once the stopping one has ended (leadership lost and regained at once)', async () => {
    const s = new Scheduler(app.db, {
      schedules: [everyMinute('restarted', { pattern: { kind: 'interval', seconds: 1 } })],
      tasks: app.tasks,
      logger: testLogger,
      checkIntervalMs: 5000,
    });
    s.start();
    await waitForEvent(s, 'scheduler:ran', () => true, 4000);
    const stopping = s.stop();
    s.start();
    await stopping;
    // The restarted loop keeps sending: a slot after the stop is sent.
    const [result] = await waitForEvent(s, 'scheduler:ran', (r) => r.sent.length > 0, 4000);
    expect(result.sent[0]?.schedule).toBe('restarted');
    await s.stop();
  });
});

describe('declarations', () => {
  it('report every problem of every schedule in one ConfigError', () => {
    const error = thrown(
      () =>
        declareSchedules(
          [
            { name: 'a', task: 'tick', input: { schedule: 'a' }, pattern: { kind: 'interval', seconds: 0 } },
            { name: 'a', task: 'tick', input: { schedule: 1 }, pattern: { kind: 'daily', at: '25:00' } },
            { name: 'b', task: 'nope', pattern: { kind: 'cron', expression: '* * *' } },
            {
              name: 'c',
              task: tick,
              input: { schedule: 'c' },
              timezone: 'Mars/Olympus',
              queue: 'elsewhere',
              pattern: { kind: 'weekly', days: ['funday' as 'monday'], at: '09:00' },
            },
            {
              name: 'd',
              task: tick,
              input: { schedule: 'd' },
              pattern: { kind: 'cron', expression: '61 * * * *' },
            },
            {
              name: '',
              task: tick,
              pattern: { kind: 'monthly', day: 32, at: '09:00' },
              extra: 1,
            } as ScheduleConfig,
          ],
          { tasks: app.tasks, queues: app.config.queues },
        ),
      ConfigError,
    );
    const fields = error.problems.map((p) => p.field).sort();
    expect(fields).toEqual(
      [
        'schedules.0.pattern',
        'schedules.1.name',
        'schedules.1.pattern.at',
        'schedules.1.input.schedule',
        'schedules.2.task',
        'schedules.2.pattern.expression',
        'schedules.3.queue',
        'schedules.3.timezone',
        'schedules.3.pattern.days.0',
        'schedules.4.pattern.expression',
        'schedules.5.name',
        'schedules.5.pattern.day',
        'schedules.5.input',
        'schedules.5.extra',
      ].sort(),
    );
    expect(error.message).toContain('repeats the name of schedules.0');
  });

  it('check the queue and the input of valid schedules against the app', () => {
    const error = thrown(
      () =>
        new Scheduler(app.db, {
          schedules: [everyMinute('q', { queue: 'elsewhere' }), everyMinute('i', { input: { schedule: 5 } })],
          tasks: app.tasks,
          queues: app.config.queues,
          checkIntervalMs: 0,
        }),
      ConfigError,
    );
    expect(error.problems.map((p) => p.field).sort()).toEqual(
      ['checkIntervalMs', 'schedules.0.queue', 'schedules.1.input.schedule'].sort(),
    );
  });
});
