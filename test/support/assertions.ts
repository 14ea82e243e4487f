/** Assertions on errors: the error itself, to check its fields, rather than only that something threw. */
import { expect } from 'vitest';

/** Calls `fn`, expects it to throw an instance of `type`, and returns the error. */
export function thrown<E>(fn: () => unknown, type: abstract new (...args: never[]) => E): E {
  let error: unknown = new Error('expected a throw, but the call returned');
  try {
    fn();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(type);
  return error as E;
}

/** Awaits `promise`, expects it to reject with an instance of `type`, and returns the error. */
export async function rejection<E>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  const error = await promise.then(
    () => new Error('expected a rejection, but the promise resolved'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(type);
  return error as E;
}
