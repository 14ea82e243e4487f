/**
 * Config validation shared by every config type: a zod schema per config, and one function that reports every
 * problem at once, naming each field and the value given.
 */
import type { z } from 'zod';
import { ConfigError } from './errors.js';
import type { ConfigProblem } from './errors.js';

/** Parses `input` with `schema`, or throws a {@link ConfigError} listing every problem. */
export function parseConfig<S extends z.ZodType>(what: string, schema: S, input: unknown): z.output<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  throw new ConfigError(what, toProblems(parsed.error.issues, input));
}

/** Maps zod issues to {@link ConfigProblem}s, reading each offending value from the input. */
export function toProblems(issues: readonly z.core.$ZodIssue[], input: unknown): ConfigProblem[] {
  return issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({
        field: [...issue.path, key].join('.'),
        value: valueAt(input, [...issue.path, key]),
        message: 'is not a known option',
      }));
    }
    return [
      { field: issue.path.join('.') || '(root)', value: valueAt(input, issue.path), message: issue.message },
    ];
  });
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current = input;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** Queue names become NOTIFY channel names (`<schema>:task_queue_<queue>`), which PostgreSQL caps at 63 bytes. */
export const QUEUE_NAME_PATTERN = /^[a-z][a-z0-9_-]{0,25}$/;
