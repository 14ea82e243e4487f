/**
 * Per-task policies, set on the task definition (with app-wide defaults): retries and backoff, the execution
 * timeout, the mapping of error classes to codes, and how long a completed task is kept.
 */
import { z } from 'zod';
import { errorCodeSchema, retryPolicySchema } from '../retry.js';

/** An error class, matched with `instanceof` (so subclasses match too). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ErrorClass = abstract new (...args: any[]) => Error;

/**
 * Ordered pairs of error class and code; the first class the thrown error is an instance of wins. `C` is the
 * codes' type (a task that declares its `errors` may only map to those).
 */
export type ErrorCodeMap<C extends string = string> = ReadonlyArray<readonly [ErrorClass, C]>;

const errorCodeMapSchema = z.array(
  z.tuple([
    z.custom<ErrorClass>(
      (v) => (typeof v === 'function' && v.prototype instanceof Error) || v === Error,
      'must be an Error class',
    ),
    errorCodeSchema(true),
  ]),
);

/** The policy fields shared by task definitions and the app's defaults. */
export const policyFields = {
  retry: retryPolicySchema.optional(),
  timeoutMs: z.number().int().min(1).optional(),
  errorCodes: errorCodeMapSchema.optional(),
  defaultErrorCode: errorCodeSchema(true).optional(),
};
