import { describe, expect, it } from 'vitest';
import { payloadDigest, toCanonicalJson } from '../../src/json.js';
import { NotSerializableError } from '../../src/errors.js';

/** Runs `fn`, expects it to throw a NotSerializableError, and returns it. */
function refusal(fn: () => unknown): NotSerializableError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(NotSerializableError);
    const e = error as NotSerializableError;
    expect(e.code).toBe('PAYLOAD_NOT_SERIALIZABLE');
    return e;
  }
  throw new Error('expected a NotSerializableError, but nothing was thrown');
}

describe('toCanonicalJson', () => {
  it('refuses the NUL character, which jsonb cannot hold, in a value or a key', () => {
    expect(refusal(() => toCanonicalJson({ note: 'a\u0000b' }, 'input')).path).toBe('input.note');
    expect(refusal(() => toCanonicalJson({ ['k\u0000']: 1 }, 'input')).message).toContain('NUL');
  });

  it('sorts object keys at every depth', () => {
    const value = { b: 1, a: { d: [{ z: 1, y: 2 }], c: { f: true, e: null } } };
    expect(toCanonicalJson(value, 'input')).toBe('{"a":{"c":{"e":null,"f":true},"d":[{"y":2,"z":1}]},"b":1}');
  });

  it('keeps array order (only object keys are sorted)', () => {
    expect(toCanonicalJson([3, 1, 2], 'input')).toBe('[3,1,2]');
  });

  it.each([
    ['a string', 'héllo "quoted" \n line'],
    ['an empty string', ''],
    ['an integer', 42],
    ['a negative float', -3.25],
    ['zero', 0],
    ['a large number', 1e21],
    ['true', true],
    ['false', false],
    ['null', null],
    ['an empty array', []],
    ['an empty object', {}],
    ['a mixed array', [1, 'two', null, false, [3], { four: 4 }]],
    ['a nested object', { list: [{ a: 1 }, { b: [true, null] }], s: 'x', n: 1.5 }],
  ])('round-trips %s', (_label, value) => {
    const text = toCanonicalJson(value, 'input');
    expect(JSON.parse(text)).toEqual(value);
  });

  it('writes the same text as JSON.stringify for values whose keys are already sorted', () => {
    const value = { a: [1, 'x', { b: null, c: true }], d: -0.5 };
    expect(toCanonicalJson(value, 'input')).toBe(JSON.stringify(value));
  });

  it('refuses a BigInt, naming its path', () => {
    const e = refusal(() => toCanonicalJson({ items: [1, 2, 3n] }, 'input'));
    expect(e.path).toBe('input.items[2]');
    expect(e.message).toContain('input.items[2]');
    expect(e.message).toMatch(/BigInt/);
  });

  it('refuses a BigInt at the root', () => {
    expect(refusal(() => toCanonicalJson(5n, 'input')).path).toBe('input');
  });

  it('refuses a function, naming its path', () => {
    const e = refusal(() => toCanonicalJson({ a: { b: () => 1 } }, 'input'));
    expect(e.path).toBe('input.a.b');
    expect(e.message).toMatch(/function/);
  });

  it('refuses a symbol, naming its path', () => {
    const e = refusal(() => toCanonicalJson({ a: { b: Symbol('s') } }, 'input'));
    expect(e.path).toBe('input.a.b');
    expect(e.message).toMatch(/symbol/);
  });

  it('refuses an object cycle, naming where the cycle closes', () => {
    const node: Record<string, unknown> = { name: 'root', child: {} };
    (node.child as Record<string, unknown>).parent = node;
    const e = refusal(() => toCanonicalJson(node, 'input'));
    expect(e.path).toBe('input.child.parent');
    expect(e.message).toMatch(/cycle/);
  });

  it('refuses an array cycle, naming where the cycle closes', () => {
    const list: unknown[] = [1, 2];
    list.push(list);
    const e = refusal(() => toCanonicalJson({ list }, 'input'));
    expect(e.path).toBe('input.list[2]');
    expect(e.message).toMatch(/cycle/);
  });

  it('refuses undefined inside an array', () => {
    const e = refusal(() => toCanonicalJson({ items: [1, undefined, 3] }, 'input'));
    expect(e.path).toBe('input.items[1]');
    expect(e.message).toMatch(/undefined/);
  });

  it('refuses undefined at the root', () => {
    expect(refusal(() => toCanonicalJson(undefined, 'input')).path).toBe('input');
  });

  it.each([
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['-Infinity', Number.NEGATIVE_INFINITY],
  ])('refuses %s', (label, n) => {
    const e = refusal(() => toCanonicalJson({ a: { b: n } }, 'input'));
    expect(e.path).toBe('input.a.b');
    expect(e.message).toContain(label);
  });

  it('refuses a Date and hints at sending an ISO string', () => {
    const e = refusal(() => toCanonicalJson({ when: new Date('2024-01-01T00:00:00Z') }, 'input'));
    expect(e.path).toBe('input.when');
    expect(e.message).toMatch(/Date/);
    expect(e.message).toMatch(/ISO string/);
  });

  it('refuses a Map', () => {
    const e = refusal(() => toCanonicalJson({ a: [new Map([['k', 1]])] }, 'input'));
    expect(e.path).toBe('input.a[0]');
    expect(e.message).toMatch(/Map/);
  });

  it('refuses a Set', () => {
    const e = refusal(() => toCanonicalJson({ a: { b: new Set([1]) } }, 'input'));
    expect(e.path).toBe('input.a.b');
    expect(e.message).toMatch(/Set/);
  });

  it('refuses a class instance, naming the class', () => {
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
    }
    const e = refusal(() => toCanonicalJson({ shape: { origin: new Point(1, 2) } }, 'input'));
    expect(e.path).toBe('input.shape.origin');
    expect(e.message).toMatch(/Point/);
  });

  it('uses the given root path', () => {
    expect(refusal(() => toCanonicalJson({ x: 1n }, 'error.data')).path).toBe('error.data.x');
  });

  it('accepts an object with a null prototype', () => {
    const bare = Object.create(null) as Record<string, unknown>;
    bare.b = 2;
    bare.a = 1;
    expect(toCanonicalJson(bare, 'input')).toBe('{"a":1,"b":2}');
  });

  it('drops an object property holding undefined, as JSON.stringify does', () => {
    const value = { a: 1, gone: undefined, nested: { keep: 'x', drop: undefined } };
    const text = toCanonicalJson(value, 'input');
    expect(text).toBe('{"a":1,"nested":{"keep":"x"}}');
    expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it('accepts a shared object referenced twice (not a cycle)', () => {
    const shared = { id: 7 };
    const value = { first: shared, second: shared, list: [shared, shared] };
    expect(toCanonicalJson(value, 'input')).toBe(
      '{"first":{"id":7},"list":[{"id":7},{"id":7}],"second":{"id":7}}',
    );
  });
});

describe('payloadDigest', () => {
  it('is a 64-character hex SHA-256', () => {
    expect(payloadDigest('task', toCanonicalJson({ a: 1 }, 'input'))).toMatch(/^[0-9a-f]{64}$/);
  });

  it('gives the same digest for equal objects written with different key order', () => {
    const one = toCanonicalJson({ a: 1, b: { c: [1, 2], d: 'x' } }, 'input');
    const two = toCanonicalJson({ b: { d: 'x', c: [1, 2] }, a: 1 }, 'input');
    expect(one).toBe(two);
    expect(payloadDigest('task', one)).toBe(payloadDigest('task', two));
  });

  it('gives different digests for different inputs', () => {
    const one = toCanonicalJson({ a: 1 }, 'input');
    const two = toCanonicalJson({ a: 2 }, 'input');
    expect(payloadDigest('task', one)).not.toBe(payloadDigest('task', two));
  });

  it('gives different digests for different task names with the same input', () => {
    const input = toCanonicalJson({ a: 1 }, 'input');
    expect(payloadDigest('task-a', input)).not.toBe(payloadDigest('task-b', input));
  });

  it('does not let the task name and the input run together', () => {
    // ("ab", "c") and ("a", "bc") would collide if the two parts were simply concatenated.
    expect(payloadDigest('ab', 'c')).not.toBe(payloadDigest('a', 'bc'));
  });
});
