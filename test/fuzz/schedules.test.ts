/**
 * Schedules, generated: patterns of every kind with fields in and out of range (intervals up to the largest safe
 * integer, hours and minutes past their bounds, times of day that are not), cron expressions built from croner's
 * vocabulary and from noise, time zones real and made up, names, queues, priorities and inputs a caller could
 * pass. A declaration either yields schedules whose slots are valid instants on the right side of the reference,
 * or throws one ConfigError listing its problems; a scheduler built from it runs a pass without an error that is
 * not the library's, and one refused stores nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ManualClock } from '../../src/clock.js';
import { ConfigError } from '../../src/errors.js';
import type { ScheduleConfig } from '../../src/scheduler/declare.js';
import { declareSchedules } from '../../src/scheduler/declare.js';
import { WEEKDAYS } from '../../src/scheduler/patterns.js';
import { Scheduler } from '../../src/scheduler/Scheduler.js';
import { testLogger, useTestSchema } from '../support/db.js';
import {
  errorOf,
  expectTypedError,
  fuzzParams,
  fuzzTimeout,
  hostileString,
  hostileValue,
  rowCounter,
} from './support.js';

const t = await useTestSchema();
const app = t.app({ queues: ['default', 'cron'] });
app.task({ name: 'tick', input: z.unknown(), handler: () => null });
app.task({ name: 'strict', input: z.object({ n: z.number() }), handler: () => null });
const counts = await rowCounter(t);

const maybe = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: 5, arbitrary: valid }, { weight: 1, arbitrary: hostileValue });

const amount = fc.oneof(
  fc.integer({ min: -1, max: 120 }),
  fc.constantFrom(0, 1, 59, 60, 86_400, 2 ** 31, 2 ** 53 - 1, 1e15, 1.5),
  fc.double(),
);
const at = fc.oneof(
  fc
    .tuple(
      fc.integer({ min: 0, max: 25 }),
      fc.integer({ min: 0, max: 61 }),
      fc.option(fc.integer({ min: 0, max: 61 })),
    )
    .map(([h, m, s]) => [h, m, ...(s === null ? [] : [s])].map((n) => String(n).padStart(2, '0')).join(':')),
  fc.constantFrom('24:00', '7:30', '07:30 ', '0730', '', '23:59:60', '12:00:00.5'),
  hostileString,
);
const cronField = fc.oneof(
  fc.constantFrom(
    '*',
    '?',
    'L',
    'W',
    '*/5',
    '*/0',
    '1-5',
    '5-1',
    '1,2,3',
    'MON',
    'mon-fri',
    'JAN',
    '1#2',
    '5L',
    'LW',
  ),
  fc.integer({ min: -2, max: 70 }).map(String),
  fc
    .tuple(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 60 }))
    .map(([a, b]) => `${a}-${b}/${b % 7}`),
  hostileString,
);
const cron = fc.oneof(
  fc.array(cronField, { minLength: 5, maxLength: 6 }).map((fields) => fields.join(' ')),
  fc.array(cronField, { minLength: 0, maxLength: 8 }).map((fields) => fields.join(' ')),
  fc.constantFrom('@daily', '@hourly', '0 0 30 2 *', '0 0 31 4 *', '59 59 23 31 12 *', '* * * * *'),
);
const pattern = fc.oneof(
  fc.record(
    {
      kind: fc.constant('interval'),
      seconds: maybe(amount),
      minutes: maybe(amount),
      hours: maybe(amount),
      days: maybe(amount),
    },
    { requiredKeys: ['kind'] },
  ),
  fc.record(
    {
      kind: fc.constant('hourly'),
      minute: maybe(fc.integer({ min: -1, max: 61 })),
      second: maybe(fc.integer({ min: -1, max: 61 })),
    },
    { requiredKeys: ['kind', 'minute'] },
  ),
  fc.record({ kind: fc.constant('daily'), at: maybe(at) }),
  fc.record({
    kind: fc.constant('weekly'),
    days: maybe(fc.array(fc.constantFrom(...WEEKDAYS, 'Monday', 'funday'), { maxLength: 8 })),
    at: maybe(at),
  }),
  fc.record({ kind: fc.constant('monthly'), day: maybe(fc.integer({ min: -1, max: 33 })), at: maybe(at) }),
  fc.record({ kind: fc.constant('cron'), expression: maybe(cron) }),
  hostileValue,
);
const zone = fc.oneof(
  fc.constantFrom(
    'UTC',
    'Europe/Berlin',
    'America/New_York',
    'Asia/Kolkata',
    'Australia/Lord_Howe',
    'Pacific/Chatham',
    'America/St_Johns',
    'Etc/GMT+12',
    'Etc/GMT-14',
    'Africa/Casablanca',
    'Mars/Olympus',
    'utc',
    '+05:00',
    '',
  ),
  hostileString,
);
const config = fc.record(
  {
    name: fc.oneof(fc.constantFrom('a', 'b', 'nightly'), hostileString),
    task: fc.oneof(fc.constantFrom('tick', 'tick', 'strict', 'missing'), hostileValue),
    input: fc.oneof(fc.jsonValue(), hostileValue),
    queue: maybe(fc.constantFrom('default', 'cron', 'other')),
    priority: maybe(fc.integer({ min: -1, max: 101 })),
    enabled: maybe(fc.boolean()),
    timezone: maybe(zone),
    pattern,
    catchUp: maybe(fc.boolean()),
    maxCatchUpRuns: maybe(fc.integer({ min: -1, max: 10_001 })),
  },
  { requiredKeys: ['name', 'task', 'pattern'] },
);
// Instants from 1900 to 2200, and the edges of a day.
const instant = fc.oneof(
  fc.date({
    min: new Date('1900-01-01T00:00:00Z'),
    max: new Date('2200-01-01T00:00:00Z'),
    noInvalidDate: true,
  }),
  fc.constantFrom(new Date('2026-03-29T01:30:00Z'), new Date('2026-10-25T00:59:59.999Z'), new Date(0)),
);

describe('schedules, generated', () => {
  it(
    'a declaration yields valid slots on the right side of any instant, or one ConfigError',
    async () => {
      await fc.assert(
        fc.property(fc.array(config, { minLength: 1, maxLength: 3 }), instant, (configs, reference) => {
          let schedules;
          try {
            schedules = declareSchedules(configs as ScheduleConfig[], {
              tasks: app.tasks,
              queues: app.config.queues,
            });
          } catch (error) {
            expectTypedError(error);
            expect(error).toBeInstanceOf(ConfigError);
            return;
          }
          for (const schedule of schedules) {
            const next = schedule.slots.next(reference);
            if (next !== null) {
              expect(Number.isNaN(next.getTime()), `next of ${JSON.stringify(schedule.pattern)}`).toBe(false);
              expect(next.getTime()).toBeGreaterThan(reference.getTime());
            }
            const previous = schedule.slots.previous(reference);
            if (previous !== null) {
              expect(
                Number.isNaN(previous.getTime()),
                `previous of ${JSON.stringify(schedule.pattern)}`,
              ).toBe(false);
              expect(previous.getTime()).toBeLessThanOrEqual(reference.getTime());
            }
          }
        }),
        fuzzParams<[unknown[], Date]>([
          // Each found a bug: an interval whose slots are past JavaScript's last date.
          [[{ name: 'a', task: 'tick', pattern: { kind: 'interval', days: 2 ** 53 - 1 } }], new Date(0)],
          [[{ name: 'a', task: 'tick', pattern: { kind: 'interval', hours: 1e15 } }], new Date(0)],
        ]),
      );
    },
    fuzzTimeout(1, 5),
  );

  it(
    'a scheduler refuses a bad schedule with a typed error and stores nothing, or runs a pass',
    async () => {
      await fc.assert(
        fc.asyncProperty(config, instant, async (cfg, now) => {
          const before = await counts();
          let scheduler: Scheduler | null = null;
          const refused = await errorOf(() => {
            scheduler = new Scheduler(app.db, {
              schedules: [cfg as ScheduleConfig],
              tasks: app.tasks,
              queues: app.config.queues,
              clock: new ManualClock(now),
              logger: testLogger,
            });
          });
          if (refused !== null) {
            expectTypedError(refused);
            expect(await counts()).toEqual(before);
            return;
          }
          const failed = await errorOf(() => (scheduler as unknown as Scheduler).runOnce());
          if (failed !== null) expectTypedError(failed);
        }),
        fuzzParams<[unknown, Date]>([
          [{ name: 'nul\u0000', task: 'tick', pattern: { kind: 'interval', minutes: 1 } }, new Date()],
          [{ name: '\ud800', task: 'tick', pattern: { kind: 'interval', minutes: 1 } }, new Date()],
        ]),
      );
    },
    fuzzTimeout(1, 30),
  );
});
