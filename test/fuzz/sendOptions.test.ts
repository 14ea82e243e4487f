/**
 * Send options, generated: every option of `send` and `sendMany` drawn from well-formed values and from whatever
 * a JavaScript caller could pass instead (wrong types, NaN, dates PostgreSQL cannot hold, strings with NUL or lone
 * surrogates, delays past a 32-bit integer). A call either stores its tasks or throws a typed error and stores
 * nothing; it never fails in the database.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useTestSchema } from '../support/db.js';
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
const app = t.app({ queues: ['default', 'bulk'] });
const task = app.task({ name: 'fuzz.options', input: z.object({ n: z.number() }), handler: () => null });
const counts = await rowCounter(t);

const maybe = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: hostileValue });

// Dates across JavaScript's whole range (PostgreSQL's ends at 4713 BC) and near now.
const anyDate = fc.oneof(
  fc.date({ noInvalidDate: false }),
  fc.integer({ min: -1e12, max: 1e12 }).map((ms) => new Date(Date.now() + ms)),
);
const key = fc.oneof(hostileString, fc.uuid());
// Around the 32-bit bound of the stored delay, where rounding matters.
const edgeDelay = fc.constantFrom(2 ** 31 - 1, 2 ** 31 - 1.5, 2 ** 31 - 0.5, 2 ** 31, 2 ** 32, 0.4, 0.5);

const options = fc.record(
  {
    delayMs: maybe(
      fc.oneof(fc.integer({ min: 0, max: 10_000 }), fc.double({ min: -1, max: 1e13 }), edgeDelay),
    ),
    runAt: maybe(anyDate),
    goodUntil: maybe(anyDate),
    sentAt: maybe(anyDate),
    priority: maybe(fc.integer({ min: -2, max: 102 })),
    queue: maybe(fc.constantFrom('default', 'bulk', 'elsewhere')),
    id: maybe(key),
    idempotencyKey: maybe(key),
    group: maybe(key),
    dedupe: maybe(
      fc.record(
        {
          key: maybe(key),
          scope: maybe(fc.constantFrom('pending', 'running', 'finished')),
          windowMs: maybe(
            fc.oneof(fc.double({ min: -1, max: 1e13 }), fc.constantFrom(0.4, 0.5, 3.2e12, 3.16e12)),
          ),
        },
        { requiredKeys: ['key'] },
      ),
    ),
    debounce: maybe(
      fc.record(
        { key: maybe(key), delayMs: maybe(fc.oneof(fc.double({ min: -1, max: 2 ** 32 }), edgeDelay)) },
        { requiredKeys: [] },
      ),
    ),
  },
  { requiredKeys: [] },
);

// Most cases carry few options, as real calls do: combinations that are refused on sight would hide the rest.
const fewOptions = options.map((o) => {
  const entries = Object.entries(o);
  return Object.fromEntries(entries.slice(0, 1 + (entries.length % 3)));
});
const someOptions = fc.oneof(fewOptions, options);

type Send = (input: unknown, options: unknown) => Promise<{ id: string }>;
const send = task.send.bind(task) as unknown as Send;
const sendMany = task.sendMany.bind(task) as unknown as (items: unknown[]) => Promise<{ id: string }[]>;

describe('send options, generated', () => {
  it(
    'a send stores its task, or throws a typed error and stores nothing',
    async () => {
      await fc.assert(
        fc.asyncProperty(someOptions, fc.integer(), async (opts, n) => {
          const before = await counts();
          let handle: { id: string } | null = null;
          const error = await errorOf(async () => {
            handle = await send({ n }, opts);
          });
          if (error !== null) {
            expectTypedError(error);
            expect(await counts()).toEqual(before);
            return;
          }
          const [row] = await t.query<{ priority: number; queue_name: string }>(
            'SELECT priority, queue_name FROM {{schema}}.horsies_tasks WHERE id = $1',
            [(handle as unknown as { id: string }).id],
          );
          expect(row).toBeDefined();
          expect(row!.priority).toBeGreaterThanOrEqual(1);
          expect(row!.priority).toBeLessThanOrEqual(100);
          expect(['default', 'bulk']).toContain(row!.queue_name);
        }),
        fuzzParams<[unknown, number]>([
          // Each found a bug: a date before 4713 BC, a delay that rounds past 32 bits, NUL in a stored string,
          // a value without a prototype in a message.
          [{ sentAt: new Date('-004713-11-23T23:59:59.999Z') }, 0],
          [{ runAt: new Date('+010000-01-01T00:00:00.000Z') }, 0],
          [{ delayMs: 2147483647.5 }, 0],
          [{ idempotencyKey: '\u0000' }, 0],
          [{ group: 'a\ud800' }, 0],
          [{ dedupe: { key: '\udfff' } }, 0],
          [{ queue: Object.create(null) }, 0],
          [{ dedupe: { key: 0, windowMs: Object.assign(Object.create(null), { '': 0n }) } }, 0],
        ]),
      );
    },
    fuzzTimeout(1, 20),
  );

  it(
    'a bulk send stores every item, or throws a typed error and stores none',
    async () => {
      const item = fc.tuple(someOptions, fc.integer()).map(([o, n]) => ({ ...o, input: { n } }));
      await fc.assert(
        fc.asyncProperty(fc.array(item, { minLength: 1, maxLength: 4 }), async (items) => {
          const before = await counts();
          const error = await errorOf(() => sendMany(items));
          if (error !== null) {
            expectTypedError(error);
            expect(await counts()).toEqual(before);
          }
        }),
        fuzzParams<[unknown[]]>([
          [[{ delayMs: 2147483647.5, input: { n: 0 } }]],
          [
            [
              { id: 'x', input: { n: 0 } },
              { id: 'a\u0000', input: { n: 1 } },
            ],
          ],
          [[{ runAt: new Date(-8.64e15), input: { n: 0 } }]],
        ]),
      );
    },
    fuzzTimeout(1, 20),
  );
});
