/**
 * The slots each pattern kind produces over a month, sent by a real scheduler against the database with an
 * injected clock that jumps from one reported next run to the next: Europe/Berlin across both DST changes of 2026
 * (clocks forward on March 29 at 02:00, back on October 25 at 03:00) and the 31st in short months.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { ScheduleConfig } from '../../src/scheduler/declare.js';
import { Scheduler } from '../../src/scheduler/Scheduler.js';
import { slotRule } from '../../src/scheduler/patterns.js';
import { testLogger, useTestSchema } from '../support/db.js';
import { defineTick, sentSlots, simulateUntil, utc } from './support.js';

const t = await useTestSchema();
const app = t.app();
const tick = defineTick(app);
const zone = 'Europe/Berlin';
/** A month of hourly slots is about 750 passes, each with a transaction: slow on a loaded machine. */
const MONTH_TIMEOUT_MS = 180_000;

beforeEach(async () => {
  await t.query('TRUNCATE {{schema}}.horsies_tasks, {{schema}}.horsies_schedule_state CASCADE');
});

function schedule(name: string, pattern: ScheduleConfig['pattern']): ScheduleConfig {
  return { name, task: tick, input: { schedule: name }, timezone: zone, pattern };
}

/** Runs the schedules from `start` to `end` (instants) and returns the slots each one sent. */
async function month(configs: ScheduleConfig[], start: string, end: string): Promise<Map<string, string[]>> {
  const clock = new ManualClock(new Date(start));
  const scheduler = new Scheduler(app.db, { schedules: configs, clock, logger: testLogger });
  const results = await simulateUntil(scheduler, clock, new Date(end));
  // A new schedule never fires at once: the first pass only records each one's first slot.
  expect(results[0]?.sent).toEqual([]);
  expect(results[0]?.started.map((s) => s.schedule).sort()).toEqual(configs.map((c) => c.name).sort());
  expect(results.flatMap((r) => r.failed)).toEqual([]);
  return new Map(await Promise.all(configs.map(async (c) => [c.name, await sentSlots(t, c.name)] as const)));
}

describe('a month of slots in Europe/Berlin', { timeout: MONTH_TIMEOUT_MS }, () => {
  it('March 2026 (clocks go forward): local times in the skipped hour produce no slot', async () => {
    // 2026-03-01 00:00 local is 2026-02-28T23:00Z; 2026-04-01 00:00 local is 2026-03-31T22:00Z.
    const slots = await month(
      [
        schedule('interval', { kind: 'interval', hours: 6 }),
        schedule('hourly', { kind: 'hourly', minute: 30 }),
        schedule('daily', { kind: 'daily', at: '02:30' }),
        schedule('weekly', { kind: 'weekly', days: ['monday', 'friday'], at: '09:00' }),
        schedule('monthly', { kind: 'monthly', day: 31, at: '09:00' }),
        schedule('cron5', { kind: 'cron', expression: '30 2 * * *' }),
        schedule('cron6', { kind: 'cron', expression: '0 0 */6 * * *' }),
      ],
      '2026-02-28T23:00:00Z',
      '2026-03-31T22:00:00Z',
    );

    // Fixed durations from the epoch: 00, 06, 12, 18 UTC, whatever the zone does.
    const interval = slots.get('interval') ?? [];
    expect(interval).toHaveLength(124);
    expect(interval[0]).toBe(utc('2026-03-01T00:00')[0]);
    expect(interval.at(-1)).toBe(utc('2026-03-31T18:00')[0]);

    // 744 local hours in March, one of them (02:00-03:00 on the 29th) skipped.
    const hourly = slots.get('hourly') ?? [];
    expect(hourly).toHaveLength(743);
    // Local 00:30 and 01:30 (winter time), then 03:30 and 04:30 (summer time): every real hour, no local 02:30.
    const around = hourly.filter((s) => s >= '2026-03-28T23' && s < '2026-03-29T03');
    expect(around).toEqual(
      utc('2026-03-28T23:30', '2026-03-29T00:30', '2026-03-29T01:30', '2026-03-29T02:30'),
    );
    // The 29th has 23 local hours, so 23 slots.
    expect(hourly.filter((s) => s >= '2026-03-28T23' && s < '2026-03-29T22')).toHaveLength(23);

    const daily = slots.get('daily') ?? [];
    expect(daily).toHaveLength(30);
    expect(daily.filter((s) => s >= '2026-03-27' && s < '2026-03-31')).toEqual(
      utc('2026-03-27T01:30', '2026-03-28T01:30', '2026-03-30T00:30'),
    );
    // croner's own reading moves 02:30 to 03:00 on the 29th; the scheduler skips it like the daily pattern.
    expect(slots.get('cron5')).toEqual(daily);

    expect(slots.get('weekly')).toEqual(
      utc(
        '2026-03-02T08:00',
        '2026-03-06T08:00',
        '2026-03-09T08:00',
        '2026-03-13T08:00',
        '2026-03-16T08:00',
        '2026-03-20T08:00',
        '2026-03-23T08:00',
        '2026-03-27T08:00',
        '2026-03-30T07:00',
      ),
    );
    expect(slots.get('monthly')).toEqual(utc('2026-03-31T07:00'));

    // 00, 06, 12, 18 local every day; none falls in the gap.
    const cron6 = slots.get('cron6') ?? [];
    expect(cron6).toHaveLength(124);
    expect(cron6.filter((s) => s >= '2026-03-29' && s < '2026-03-30')).toEqual(
      utc('2026-03-29T04:00', '2026-03-29T10:00', '2026-03-29T16:00', '2026-03-29T22:00'),
    );
  });

  it('October 2026 (clocks go back): a local time that occurs twice produces one slot, the earlier', async () => {
    // 2026-10-01 00:00 local is 2026-09-30T22:00Z; 2026-11-01 00:00 local is 2026-10-31T23:00Z.
    const slots = await month(
      [
        schedule('hourly', { kind: 'hourly', minute: 30 }),
        schedule('daily', { kind: 'daily', at: '02:30' }),
        schedule('cron5', { kind: 'cron', expression: '30 * * * *' }),
        schedule('weekly', { kind: 'weekly', days: ['sunday'], at: '02:30:15' }),
      ],
      '2026-09-30T22:00:00Z',
      '2026-10-31T23:00:00Z',
    );
    // 744 local hours; 02:30 on the 25th happens at 00:30Z (summer time) and again at 01:30Z: sent once, at 00:30Z.
    const hourly = slots.get('hourly') ?? [];
    expect(hourly).toHaveLength(744);
    expect(hourly.filter((s) => s >= '2026-10-24T23' && s < '2026-10-25T04')).toEqual(
      utc('2026-10-24T23:30', '2026-10-25T00:30', '2026-10-25T02:30', '2026-10-25T03:30'),
    );
    // croner fires every-hour expressions on both occurrences; the scheduler keeps the earlier one.
    expect(slots.get('cron5')).toEqual(hourly);

    const daily = slots.get('daily') ?? [];
    expect(daily).toHaveLength(31);
    expect(daily.filter((s) => s >= '2026-10-24' && s < '2026-10-27')).toEqual(
      utc('2026-10-24T00:30', '2026-10-25T00:30', '2026-10-26T01:30'),
    );
    expect(slots.get('weekly')).toEqual(
      ['2026-10-04T00:30:15Z', '2026-10-11T00:30:15Z', '2026-10-18T00:30:15Z', '2026-10-25T00:30:15Z'].map(
        (s) => new Date(s).toISOString(),
      ),
    );
  });

  it('the 31st of the month: months without one are skipped', async () => {
    const slots = await month(
      [
        schedule('monthly31', { kind: 'monthly', day: 31, at: '23:30' }),
        schedule('monthly29', { kind: 'monthly', day: 29, at: '00:00' }),
      ],
      '2026-01-01T00:00:00Z',
      '2026-12-31T23:59:59Z',
    );
    // Local 23:30 on the 31st: 22:30Z in winter, 21:30Z in summer time.
    expect(slots.get('monthly31')).toEqual(
      utc(
        '2026-01-31T22:30',
        '2026-03-31T21:30',
        '2026-05-31T21:30',
        '2026-07-31T21:30',
        '2026-08-31T21:30',
        '2026-10-31T22:30',
        '2026-12-31T22:30',
      ),
    );
    // 2026 is not a leap year: no February 29; the year's last one (December 29) is in the window too.
    expect(slots.get('monthly29')).toHaveLength(11);
    expect((slots.get('monthly29') ?? []).some((s) => s.startsWith('2026-02'))).toBe(false);
  });
});

describe('slot rules', () => {
  it('step back to the same slots they step forward to, for every kind', () => {
    const patterns: ScheduleConfig['pattern'][] = [
      { kind: 'interval', minutes: 7, seconds: 30 },
      { kind: 'hourly', minute: 30 },
      { kind: 'daily', at: '02:30' },
      { kind: 'weekly', days: ['sunday', 'wednesday'], at: '02:30' },
      { kind: 'monthly', day: 31, at: '02:30' },
      { kind: 'cron', expression: '*/20 2 * * *' },
    ];
    for (const pattern of patterns) {
      const rule = slotRule(pattern, zone);
      const forward: Date[] = [];
      let at = new Date('2026-10-20T00:00:00Z');
      for (let i = 0; i < 12; i += 1) {
        const next = rule.next(at);
        if (!next) break;
        forward.push(next);
        at = next;
      }
      const backward: Date[] = [];
      let before: Date | null = forward.at(-1) ?? null;
      while (backward.length < forward.length && before) {
        backward.unshift(before);
        before = rule.previous(new Date(before.getTime() - 1));
      }
      expect(backward, pattern.kind).toEqual(forward);
      expect(forward.length, pattern.kind).toBeGreaterThan(3);
    }
  });
});
