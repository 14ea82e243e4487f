/**
 * One run of a handler, the same on the event loop and on a blocking task's thread: the stored input validated
 * again against the task's schema, the handler called, and whatever it returns or throws turned into an outcome.
 */
import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { TaskContext, TaskDefinition } from '../client/TaskDefinition.js';
import { toCanonicalJson } from '../json.js';
import type { ErrorCodeMap } from '../client/policy.js';
import { NotSerializableError, TaskError } from '../errors.js';
import { isPromiseLike } from '../types.js';
import { toTaskError } from './errorMapping.js';

/** A run's outcome: the result as canonical JSON text, or the error. */
export type Outcome = { value: string } | TaskError;

/** Runs `definition`'s handler on `input` (as stored); never throws. */
export async function runHandler(
  definition: TaskDefinition<StandardSchemaV1, unknown>,
  input: unknown,
  ctx: TaskContext,
  appErrorCodes: ErrorCodeMap | undefined,
): Promise<Outcome> {
  try {
    // A schema or handler that answers at once is not awaited: each await is a turn of the microtask queue and
    // its promise, per run.
    const checking = definition.input['~standard'].validate(input);
    const validated = isPromiseLike(checking) ? await checking : checking;
    if (validated.issues) {
      const detail = validated.issues.map((i) => i.message).join('; ');
      return new TaskError(
        'VALIDATION_FAILED',
        `stored input no longer matches the task's schema: ${detail}`,
      );
    }
    const returned = definition.handler(validated.value, ctx);
    const value = isPromiseLike(returned) ? await returned : returned;
    if (value instanceof TaskError) return value;
    return { value: toCanonicalJson(value === undefined ? null : value, 'result') };
  } catch (error) {
    if (error instanceof NotSerializableError && error.path.startsWith('result')) {
      return new TaskError('RESULT_NOT_SERIALIZABLE', error.message);
    }
    return toTaskError(error, {
      task: definition.policies.errorCodes,
      app: appErrorCodes,
      defaultCode: definition.policies.defaultErrorCode,
    });
  }
}
