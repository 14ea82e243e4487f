/**
 * Turns task inputs and results into JSON text, refusing every value JSON would silently change or drop:
 * BigInt, functions, symbols, cycles, `undefined` in arrays, non-finite numbers, the NUL character (which jsonb
 * refuses), and objects that are not plain
 * (Date, Map, Set, class instances), which would come back as something else. Object keys are written in sorted
 * order, so equal payloads give equal text and equal digests (the `enqueue_sha` of idempotent sends).
 */
import { createHash } from 'node:crypto';
import { NotSerializableError } from '../errors.js';

/** Serializes `value` as canonical JSON, or throws {@link NotSerializableError} naming the offending path. */
export function toCanonicalJson(value: unknown, rootPath: string): string {
  return write(value, rootPath, new Set());
}

/** SHA-256 hex digest of a task's identity: its name and its canonical input. */
export function payloadDigest(taskName: string, canonicalInput: string): string {
  return createHash('sha256').update(taskName).update('\0[]\0').update(canonicalInput).digest('hex');
}

// PostgreSQL's jsonb cannot hold the NUL character (\u0000), in a value or a key.
function writeString(value: string, path: string): string {
  if (value.includes('\u0000'))
    throw new NotSerializableError(path, 'the NUL character (\\u0000) cannot be stored');
  return JSON.stringify(value);
}

function write(value: unknown, path: string, ancestors: Set<object>): string {
  switch (typeof value) {
    case 'string':
      return writeString(value, path);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new NotSerializableError(path, `${value} has no JSON form`);
      return JSON.stringify(value);
    case 'bigint':
      throw new NotSerializableError(path, 'a BigInt cannot be stored as JSON; send it as a string');
    case 'function':
      throw new NotSerializableError(path, 'a function cannot be stored as JSON');
    case 'symbol':
      throw new NotSerializableError(path, 'a symbol cannot be stored as JSON');
    case 'undefined':
      throw new NotSerializableError(path, 'undefined cannot be stored as JSON');
    case 'object':
      break;
  }
  if (value === null) return 'null';
  const object = value as object;
  if (ancestors.has(object)) throw new NotSerializableError(path, 'the value contains a cycle');
  ancestors.add(object);
  try {
    if (Array.isArray(object)) {
      return `[${object.map((item, i) => write(item, `${path}[${i}]`, ancestors)).join(',')}]`;
    }
    const proto = Object.getPrototypeOf(object) as object | null;
    if (proto !== Object.prototype && proto !== null) {
      const kind = (object as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      const hint = object instanceof Date ? '; send an ISO string (and parse it in the schema)' : '';
      throw new NotSerializableError(path, `a ${kind} would not come back as itself from JSON${hint}`);
    }
    const parts: string[] = [];
    for (const key of Object.keys(object).sort()) {
      const item = (object as Record<string, unknown>)[key];
      // A property holding undefined is the same as a missing property, as in JSON.stringify.
      if (item === undefined) continue;
      parts.push(
        `${writeString(key, `${path} (key ${JSON.stringify(key)})`)}:${write(item, `${path}.${key}`, ancestors)}`,
      );
    }
    return `{${parts.join(',')}}`;
  } finally {
    ancestors.delete(object);
  }
}
