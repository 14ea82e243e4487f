import { describe, expect, it } from 'vitest';
import { TaskError } from '../../src/errors.js';
import { toTaskError } from '../../src/worker/errorMapping.js';

class NetworkError extends Error {}
class TimeoutError extends NetworkError {}
class ParseError extends Error {}

describe('toTaskError', () => {
  it('keeps a TaskError as it is', () => {
    const e = new TaskError('OUT_OF_STOCK', 'none left');
    expect(toTaskError(e, { task: [[Error, 'ANY_ERROR']] })).toBe(e);
  });

  it('uses the task map before the app map', () => {
    const maps = {
      task: [[NetworkError, 'TASK_NETWORK']] as const,
      app: [[NetworkError, 'APP_NETWORK']] as const,
    };
    expect(toTaskError(new NetworkError('down'), maps).code).toBe('TASK_NETWORK');
  });

  it('falls back to the app map when the task map has no match', () => {
    const maps = {
      task: [[ParseError, 'BAD_PAYLOAD']] as const,
      app: [[NetworkError, 'APP_NETWORK']] as const,
    };
    expect(toTaskError(new NetworkError('down'), maps).code).toBe('APP_NETWORK');
  });

  it('matches subclasses with instanceof, first entry wins', () => {
    const maps = {
      task: [
        [NetworkError, 'NETWORK'],
        [TimeoutError, 'TIMEOUT_SPECIFIC'],
      ] as const,
    };
    expect(toTaskError(new TimeoutError('slow'), maps).code).toBe('NETWORK');
    const specificFirst = {
      task: [
        [TimeoutError, 'TIMEOUT_SPECIFIC'],
        [NetworkError, 'NETWORK'],
      ] as const,
    };
    expect(toTaskError(new TimeoutError('slow'), specificFirst).code).toBe('TIMEOUT_SPECIFIC');
  });

  it('then the task default code, then UNHANDLED_ERROR', () => {
    expect(toTaskError(new ParseError('x'), { defaultCode: 'JOB_FAILED' }).code).toBe('JOB_FAILED');
    expect(toTaskError(new ParseError('x'), {}).code).toBe('UNHANDLED_ERROR');
  });

  it('keeps the error name, message and stack', () => {
    const e = toTaskError(new RangeError('too big'), {});
    expect(e.message).toBe('RangeError: too big');
    expect(e.data).toMatchObject({ name: 'RangeError' });
    expect(String((e.data as { stack: string }).stack)).toContain('too big');
  });

  it('handles a thrown non-Error', () => {
    const e = toTaskError('just a string', {});
    expect(e.code).toBe('UNHANDLED_ERROR');
    expect(e.message).toContain('just a string');
  });
});
