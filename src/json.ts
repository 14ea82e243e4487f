/**
 * Turns task inputs and results into JSON text, refusing every value JSON would silently change or drop:
 * BigInt, functions, symbols, cycles, `undefined` in arrays, non-finite numbers, the NUL character and lone
 * surrogates (which jsonb refuses), and objects that are not plain
 * (Date, Map, Set, class instances), which would come back as something else. Object keys are written in sorted
 * order, so equal payloads give equal text and equal digests (the `enqueue_sha` of idempotent sends).
 */
import { createHash } from 'node:crypto';
import { NotSerializableError } from './errors.js';
import { isStorableText } from './types.js';

/** Serializes `value` as canonical JSON, or throws {@link NotSerializableError} naming the offending path. */
export function toCanonicalJson(value: unknown, rootPath: string): string {
  return new CanonicalWriter(rootPath).write(value);
}

/** SHA-256 hex digest of a task's identity: its name and its canonical input. */
export function payloadDigest(taskName: string, canonicalInput: string): string {
  return createHash('sha256').update(taskName).update('\0[]\0').update(canonicalInput).digest('hex');
}

const NUL_REFUSAL = 'the NUL character (\\u0000) cannot be stored';
const SURROGATE_REFUSAL = 'a lone surrogate (half of a UTF-16 pair) cannot be stored';

/**
 * Writes one value. The path to the value being written is kept as a stack of keys and indexes and put into
 * words only when a value is refused: a bulk send writes every input, and building a path string for every
 * member cost more than writing the JSON itself.
 */
class CanonicalWriter {
  private readonly segments: (string | number)[] = [];
  // The objects being written, outermost first: a cycle is an object met again inside itself. A list, not a Set:
  // payloads are shallow, and a Set cost more than the JSON of a small input.
  private readonly ancestors: object[] = [];

  constructor(private readonly rootPath: string) {}

  write(value: unknown): string {
    switch (typeof value) {
      case 'string':
        return this.string(value);
      case 'boolean':
        return value ? 'true' : 'false';
      case 'number':
        if (!Number.isFinite(value)) return this.refuse(`${value} has no JSON form`);
        return JSON.stringify(value);
      case 'bigint':
        return this.refuse('a BigInt cannot be stored as JSON; send it as a string');
      case 'function':
        return this.refuse('a function cannot be stored as JSON');
      case 'symbol':
        return this.refuse('a symbol cannot be stored as JSON');
      case 'undefined':
        return this.refuse('undefined cannot be stored as JSON');
      case 'object':
        break;
    }
    if (value === null) return 'null';
    const object = value as object;
    if (this.ancestors.includes(object)) return this.refuse('the value contains a cycle');
    this.ancestors.push(object);
    const text = Array.isArray(object) ? this.array(object) : this.plainObject(object);
    this.ancestors.pop();
    return text;
  }

  // A hole in a sparse array reads as undefined and is refused like one.
  private array(list: readonly unknown[]): string {
    let text = '[';
    for (let i = 0; i < list.length; i++) {
      this.segments.push(i);
      text += (i === 0 ? '' : ',') + this.write(list[i]);
      this.segments.pop();
    }
    return `${text}]`;
  }

  private plainObject(object: object): string {
    const proto = Object.getPrototypeOf(object) as object | null;
    if (proto !== Object.prototype && proto !== null) {
      const kind = (object as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      const hint = object instanceof Date ? '; send an ISO string (and parse it in the schema)' : '';
      return this.refuse(`a ${kind} would not come back as itself from JSON${hint}`);
    }
    const keys = Object.keys(object);
    if (keys.length > 1) keys.sort();
    let text = '{';
    for (const key of keys) {
      const item = (object as Record<string, unknown>)[key];
      // A property holding undefined is the same as a missing property, as in JSON.stringify.
      if (item === undefined) continue;
      const name = this.key(key);
      this.segments.push(key);
      text += `${text.length === 1 ? '' : ','}${name}:${this.write(item)}`;
      this.segments.pop();
    }
    return `${text}}`;
  }

  // PostgreSQL's jsonb cannot hold the NUL character (\u0000), in a value or a key, nor a lone surrogate, which
  // JSON.stringify writes as an escape (\udXXX) that jsonb refuses. The escape is looked for in the JSON text, so
  // only a string that may hold one pays for the exact test.
  private string(value: string): string {
    const text = JSON.stringify(value);
    if (!value.includes('\u0000') && !(text.includes('\\ud') && !isStorableText(value))) return text;
    return this.refuse(value.includes('\u0000') ? NUL_REFUSAL : SURROGATE_REFUSAL);
  }

  private key(name: string): string {
    const text = JSON.stringify(name);
    if (!name.includes('\u0000') && !(text.includes('\\ud') && !isStorableText(name))) return text;
    return this.refuse(name.includes('\u0000') ? NUL_REFUSAL : SURROGATE_REFUSAL, ` (key ${text})`);
  }

  private refuse(reason: string, pathSuffix = ''): never {
    let path = this.rootPath;
    for (const segment of this.segments) path += typeof segment === 'number' ? `[${segment}]` : `.${segment}`;
    throw new NotSerializableError(path + pathSuffix, reason);
  }
}
