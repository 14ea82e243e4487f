/** Turns whatever a handler threw into a {@link TaskError}. */
import type { ErrorCodeMap } from '../client/policy.js';
import { TaskError } from '../errors.js';

const MAX_STACK_CHARS = 4000;

/**
 * A thrown value as a TaskError: a TaskError as it is; otherwise the code of the first matching class in the
 * task's map, then the app's map (`instanceof`, so subclasses match), then the task's default code, then
 * `UNHANDLED_ERROR`. The message and (trimmed) stack are kept in the error's data.
 */
export function toTaskError(
  thrown: unknown,
  maps: { task?: ErrorCodeMap; app?: ErrorCodeMap; defaultCode?: string },
): TaskError {
  if (thrown instanceof TaskError) return thrown;
  if (!(thrown instanceof Error))
    return new TaskError(maps.defaultCode ?? 'UNHANDLED_ERROR', `non-Error thrown: ${String(thrown)}`);
  const code =
    findCode(thrown, maps.task) ?? findCode(thrown, maps.app) ?? maps.defaultCode ?? 'UNHANDLED_ERROR';
  return new TaskError(
    code,
    `${thrown.name}: ${thrown.message}`,
    {
      name: thrown.name,
      stack: (thrown.stack ?? '').slice(0, MAX_STACK_CHARS),
    },
    { cause: thrown },
  );
}

function findCode(error: Error, map: ErrorCodeMap | undefined): string | undefined {
  for (const [errorClass, code] of map ?? []) if (error instanceof errorClass) return code;
  return undefined;
}
