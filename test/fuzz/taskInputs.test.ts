/**
 * Task inputs, generated: any JavaScript value (BigInt, functions, symbols, cycles, sparse arrays, Dates, Maps,
 * objects without a prototype, strings with NUL or lone surrogates), inputs a schema refuses, and inputs around
 * the payload limit. An input is stored exactly as its JSON, or refused with a typed error that stores nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { useTestSchema } from '../support/db.js';
import { errorOf, expectTypedError, fuzzParams, fuzzTimeout, hostileString, rowCounter } from './support.js';

const MAX_PAYLOAD = 4096;
const t = await useTestSchema();
const app = t.app({ maxPayloadBytes: MAX_PAYLOAD });
const anyInput = app.task({ name: 'fuzz.any', input: z.unknown(), handler: () => null });
const shaped = app.task({
  name: 'fuzz.shaped',
  input: z.object({ name: z.string().min(1).max(20), tags: z.array(z.string()).max(3), n: z.number().int() }),
  handler: () => null,
});
const counts = await rowCounter(t);

type Send = (input: unknown) => Promise<{ id: string }>;
const sendAny = anyInput.send.bind(anyInput) as unknown as Send;
const sendShaped = shaped.send.bind(shaped) as unknown as Send;

// A cycle, which fc.anything cannot make.
const cyclic = fc.anything().map((v) => {
  const holder: Record<string, unknown> = { v };
  holder.self = [holder];
  return holder;
});

const hostileInput: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue(),
  fc.anything({
    withBigInt: true,
    withBoxedValues: true,
    withDate: true,
    withMap: true,
    withSet: true,
    withNullPrototype: true,
    withObjectString: true,
    withSparseArray: true,
    withTypedArray: true,
    withUnicodeString: true,
  }),
  fc.dictionary(hostileString, fc.oneof(hostileString, fc.double())),
  fc.array(
    fc.oneof(
      hostileString,
      fc.constantFrom(undefined, NaN, () => 1, Symbol('s')),
    ),
  ),
  cyclic,
  fc.integer({ min: MAX_PAYLOAD - 64, max: MAX_PAYLOAD + 64 }).map((n) => ({ s: 'x'.repeat(n) })),
  fc.integer({ min: 0, max: 3000 }).map((n) => ({ s: 'é'.repeat(n) })),
);

/** Sends `input` and checks the property: stored as its JSON, or a typed error and nothing stored. */
async function check(send: Send, input: unknown): Promise<void> {
  const before = await counts();
  let id: string | null = null;
  const error = await errorOf(async () => {
    id = (await send(input)).id;
  });
  if (error !== null) {
    expectTypedError(error);
    expect(await counts()).toEqual(before);
    return;
  }
  const [row] = await t.query<{ kwargs: unknown; bytes: number }>(
    'SELECT kwargs, octet_length(kwargs::text) AS bytes FROM {{schema}}.horsies_tasks WHERE id = $1',
    [id],
  );
  expect(row).toBeDefined();
  expect(row!.kwargs).toEqual(JSON.parse(JSON.stringify(input)));
}

describe('task inputs, generated', () => {
  it(
    'any value is stored as its JSON, or refused with a typed error that stores nothing',
    async () => {
      await fc.assert(
        fc.asyncProperty(hostileInput, (input) => check(sendAny, input)),
        // Lone surrogates, in a key and in a value, found a bug: jsonb refuses their escapes.
        fuzzParams<[unknown]>([[{ '\ud800': 0 }], [['ok', 'x\udc00']], [{ a: { b: '\ud83d' } }]]),
      );
    },
    fuzzTimeout(1, 20),
  );

  it(
    'an input the schema refuses is a typed error that stores nothing',
    async () => {
      const field = fc.oneof(
        hostileString,
        fc.integer(),
        fc.double(),
        fc.array(hostileString),
        fc.constant(undefined),
      );
      const input = fc.oneof(
        fc.record({ name: field, tags: field, n: field }, { requiredKeys: [] }),
        fc.anything({ withNullPrototype: true, withBigInt: true }),
      );
      await fc.assert(
        fc.asyncProperty(input, (value) => check(sendShaped, value)),
        fuzzParams(),
      );
    },
    fuzzTimeout(1, 20),
  );
});
