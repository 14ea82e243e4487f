/**
 * The library's statements read `timestamptz` with their own parser (src/db/typeParsers.ts): the same values as
 * `pg`'s, for every text PostgreSQL sends, under any session time zone; and the worker keeps reading Dates and
 * parsed JSON when the application has changed `pg`'s global parsers for its own queries.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isoTimestamptz, parseTimestamptz } from '../../src/db/typeParsers.js';
import { createWorker } from '../../src/index.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const pgParser = pg.types.getTypeParser(1184, 'text');
// timestamptz, jsonb and json: what the application below changes, and gets back after each test.
const globalParsers = [1184, 3802, 114].map((oid) => [oid, pg.types.getTypeParser(oid, 'text')] as const);

/** What each parser makes of `text`: a time in ms, or another value (Infinity, null) as it is. */
function both(text: string): { ours: unknown; pgs: unknown } {
  const read = (value: unknown): unknown => (value instanceof Date ? value.getTime() : value);
  return { ours: read(parseTimestamptz(text)), pgs: read(pgParser(text)) };
}

/** The texts PostgreSQL sends for `values` (SQL expressions of timestamptz) under the session time zone `zone`. */
async function textsIn(zone: string, values: string[]): Promise<string[]> {
  const client = await t.pool.connect();
  try {
    await client.query(`SET TIME ZONE '${zone}'`);
    const { rows } = await client.query<{ v: string }>(
      `SELECT v::text AS v FROM unnest(ARRAY[${values.join(', ')}]::timestamptz[]) AS v`,
    );
    return rows.map((r) => r.v);
  } finally {
    await client.query('RESET TIME ZONE');
    client.release();
  }
}

describe('parseTimestamptz', () => {
  it('reads what PostgreSQL sends as pg does, in zones with hour, minute and second offsets', async () => {
    const values = [
      `now()`,
      `'2026-11-25 06:13:07.189123+00'`,
      `'2026-11-25 06:13:07+00'`,
      `'2026-11-25 06:13:07.1+00'`,
      `'2026-11-25 06:13:07.000001+00'`,
      `'2026-11-25 06:13:07.999999+00'`,
      `'1999-12-31 23:59:59.9995+00'`,
      `'2024-02-29 12:00:00+00'`,
      `'1000-01-01 00:00:00+00'`,
      `'9999-12-31 23:59:59.999999+00'`,
      // Local mean time: offsets in seconds (Amsterdam +00:19:32 before 1937, Kolkata +05:53:28 before 1854).
      `'1850-06-01 12:00:00+00'`,
      `'1910-06-01 12:00:00.5+00'`,
      // Outside the fast path: pg's parser reads them.
      `'infinity'`,
      `'-infinity'`,
      `'0050-03-04 05:06:07+00'`,
      `'0999-03-04 05:06:07+00'`,
      `'0044-03-15 12:00:00+00 BC'`,
      `'12345-01-01 00:00:00+00'`,
    ];
    const random = Array.from(
      { length: 200 },
      (_, i) =>
        // From about 1150 to 2790, every day's time and fraction different.
        `'epoch'::timestamptz + ${(i - 100) * 2999 + 13} * interval '1 day 1 hour 7 minutes 11.123457 seconds'`,
    );
    const zones = [
      'UTC',
      'Asia/Kolkata',
      'America/St_Johns',
      'Asia/Kathmandu',
      'Europe/Amsterdam',
      'Pacific/Chatham',
      'America/Los_Angeles',
      '+14',
      '-12:45',
    ];
    let compared = 0;
    for (const zone of zones) {
      for (const text of await textsIn(zone, [...values, ...random])) {
        const { ours, pgs } = both(text);
        expect(ours, `${text} (${zone})`).toStrictEqual(pgs);
        compared += 1;
      }
    }
    expect(compared).toBe(zones.length * (values.length + random.length));
    // The fast path read every one of the random times, in every zone.
    for (const zone of zones) {
      for (const text of await textsIn(zone, random)) expect(isoTimestamptz(text), text).toBeInstanceOf(Date);
    }
    // Each zone sent some offsets other than whole hours, and the fast path read them.
    const texts = await textsIn('Asia/Kathmandu', [`'2026-11-25 06:13:07+00'`]);
    expect(texts[0]).toBe('2026-11-25 11:58:07+05:45');
    expect((parseTimestamptz(texts[0] as string) as Date).toISOString()).toBe('2026-11-25T06:13:07.000Z');
  });

  it('hands malformed and other texts to pg unchanged', () => {
    for (const text of [
      '',
      '2026-11-25',
      '2026-11-25 06:13:07',
      '2026-11-25 06:13:07.+00',
      '2026-11-25 06:13:07+0',
      '2026-11-25 06:13:07+00:3',
      '2026-11-25 06:13:07+00:30:1',
      '2026-11-25 06:13:07Z',
      '2026-1x-25 06:13:07+00',
      '2026-11-25T06:13:07+00',
      'Wed Nov 25 06:13:07.189123 2026 UTC',
      '11/25/2026 06:13:07.189123 UTC',
    ]) {
      const { ours, pgs } = both(text);
      expect(ours, text).toStrictEqual(pgs);
    }
  });
});

describe("statements read with pg's own parsers whatever the global ones", () => {
  afterEach(() => {
    for (const [oid, parser] of globalParsers) pg.types.setTypeParser(oid, parser);
  });

  it('a worker claims and runs tasks when the application reads timestamps and JSON as strings', async () => {
    // An application that wants timestamps and JSON as text for its own queries changes pg's global parsers.
    for (const oid of [1184, 3802, 114]) pg.types.setTypeParser(oid, (value: string) => value);
    const app = t.app();
    const task = app.task({
      name: 'parsers.strings',
      input: z.object({ i: z.number() }),
      handler: ({ i }) => ({ twice: i * 2 }),
    });
    const handles = [];
    for (let i = 0; i < 5; i++) handles.push(await task.send({ i }));
    // One claim takes all five, sorted in claim order by their enqueue times.
    const worker = createWorker(app, { concurrency: 5 });
    const errors: unknown[] = [];
    worker.on('worker:error', (error) => errors.push(error));
    await worker.start();
    try {
      const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
      expect(results).toStrictEqual([0, 1, 2, 3, 4].map((i) => ({ ok: true, value: { twice: i * 2 } })));
      expect(errors).toStrictEqual([]);
      const stored = await app.getTask(handles[1]!.id, { attempts: true });
      expect(stored?.startedAt).toBeInstanceOf(Date);
      expect(stored?.input).toStrictEqual({ i: 1 });
    } finally {
      await worker.stop();
    }
    // The application's own queries still read text.
    const { rows } = await t.pool.query<{ at: unknown; doc: unknown }>(
      `SELECT now() AS at, '{"a": 1}'::jsonb AS doc`,
    );
    expect(rows[0]).toStrictEqual({ at: expect.any(String), doc: '{"a": 1}' });
  });
});
