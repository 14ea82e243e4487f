/**
 * What the property tests over hostile input share: how many cases each property runs, what counts as a typed
 * rejection, and a count of every table's rows in a test schema (a rejected call must store nothing).
 *
 * `HORSIES_FUZZ_RUNS` sets the cases per property: a few hundred by default, so the files stay fast in the main
 * suite; `npm run fuzz` runs 10,000 per surface. A failing property prints fast-check's seed and path; give them
 * back through `HORSIES_FUZZ_SEED` and `HORSIES_FUZZ_PATH` to replay it.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import { HorsiesError } from '../../src/errors.js';
import type { TestSchema } from '../support/db.js';

/** Cases per property. */
export const RUNS = Number(process.env.HORSIES_FUZZ_RUNS ?? 200);

/** A test's timeout for `properties` properties of {@link RUNS} cases each, at up to `msPerCase` a case. */
export function fuzzTimeout(properties = 1, msPerCase = 10): number {
  return 60_000 + properties * RUNS * msPerCase;
}

/**
 * fast-check's parameters for one property: {@link RUNS} cases, and a replay when a seed is given. `examples` run
 * first, every time: the cases that found a bug, so that its fix stays tested whatever the seed.
 */
export function fuzzParams<T>(examples: T[] = []): fc.Parameters<T> {
  const seed = process.env.HORSIES_FUZZ_SEED;
  const path = process.env.HORSIES_FUZZ_PATH;
  return {
    numRuns: RUNS,
    examples,
    ...(seed === undefined ? {} : { seed: Number(seed) }),
    ...(path === undefined ? {} : { path }),
  };
}

/**
 * Expects `error` to be one of the library's typed errors: a {@link HorsiesError} (which `ConfigError`,
 * `WorkflowDefinitionError` and the others extend) with a non-empty `code` and message, and a `problems` list when
 * the error carries one. Anything else (a TypeError from deep inside, a PostgreSQL error) fails the property.
 */
export function expectTypedError(error: unknown): asserts error is HorsiesError {
  if (!(error instanceof HorsiesError)) {
    const shown = error instanceof Error ? `${error.constructor.name}: ${error.message}` : String(error);
    expect.fail(`expected a HorsiesError, got ${shown}`);
  }
  expect(typeof error.code).toBe('string');
  expect(error.code.length).toBeGreaterThan(0);
  expect(error.message.length).toBeGreaterThan(0);
  const problems = (error as { problems?: unknown }).problems;
  if (problems !== undefined) {
    expect(Array.isArray(problems) && problems.length > 0, 'a typed error lists its problems').toBe(true);
  }
}

/** The rows of every table of the test schema, by table: a call that stored nothing leaves it unchanged. */
export async function rowCounter(t: TestSchema): Promise<() => Promise<Record<string, number>>> {
  const tables = await t.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY 1`,
    [t.schema],
  );
  expect(tables.length).toBeGreaterThan(0);
  const sql = `SELECT ${tables
    .map((r, i) => `(SELECT count(*)::int FROM {{schema}}."${r.name}") AS c${i}`)
    .join(', ')}`;
  return async () => {
    const [row] = await t.query<Record<string, number>>(sql);
    return Object.fromEntries(tables.map((r, i) => [r.name, (row as Record<string, number>)[`c${i}`] ?? 0]));
  };
}

/** Runs `call`; returns its error, or null when it returned. */
export async function errorOf(call: () => unknown): Promise<unknown> {
  try {
    await call();
    return null;
  } catch (error) {
    return error;
  }
}

/** Strings as hostile callers send them: any code units (lone surrogates too), NUL, very long ones. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('\u0000', '\ud800', '\udfff', 'a', '.', '/', '%', '\\') }),
  fc.string({ unit: 'grapheme', maxLength: 4 }),
  fc.integer({ min: 0, max: 2000 }).map((n) => 'x'.repeat(n)),
  fc.constantFrom('', ' ', '\u0000', 'a\u0000b', '\ud800', 'default', 'bulk'),
);

/** Any value a JavaScript caller could pass where a typed option is expected. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.anything({ withBigInt: true, withDate: true, withNullPrototype: true, withSparseArray: true }),
  hostileString,
  fc.double(),
  fc.integer(),
  fc.date({ noInvalidDate: false }),
  fc.constantFrom(
    undefined,
    null,
    Number.NaN,
    Infinity,
    -Infinity,
    -0,
    2 ** 31,
    2 ** 53,
    () => 1,
    Symbol('s'),
  ),
);
