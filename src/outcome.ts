/**
 * Reading stored outcomes back. The `result` column holds an envelope, `{"ok": value}` or
 * `{"err": {"code", "message", "data"}}`. Rows may have been written by hand or by an older version, so every
 * shape is checked and anything unexpected becomes a `RESULT_NOT_AVAILABLE` error rather than a throw.
 */
import { TaskError, isValidErrorCode } from './errors.js';
import type { TaskResult } from './errors.js';
import type { JsonValue, TaskStatus } from './types.js';
import { toCanonicalJson } from './json.js';

/** Builds the stored envelope of a successful result. */
export function okEnvelope(canonicalValue: string): string {
  return `{"ok":${canonicalValue}}`;
}

/** Builds the stored envelope of a failure. Data JSON cannot carry is dropped, with a note in the message. */
export function errorEnvelope(error: TaskError): string {
  const head = `{"code":${JSON.stringify(error.code)},"message":`;
  if (error.data === undefined) return `{"err":${head}${JSON.stringify(error.message)}}}`;
  try {
    return `{"err":${head}${JSON.stringify(error.message)},"data":${toCanonicalJson(error.data, 'error.data')}}}`;
  } catch (e) {
    const note = e instanceof Error ? e.message : String(e);
    return `{"err":${head}${JSON.stringify(`${error.message} (data dropped: ${note})`)}}}`;
  }
}

/** Decodes a terminal row's outcome. Returns null while the task is not terminal. */
export function decodeOutcome<T>(row: {
  status: string;
  result: unknown;
  error_code: string | null;
  failed_reason: string | null;
}): TaskResult<T> | null {
  const status = row.status as TaskStatus;
  switch (status) {
    case 'PENDING':
    case 'CLAIMED':
    case 'RUNNING':
      return null;
    case 'COMPLETED': {
      const result = row.result;
      if (isObject(result) && 'ok' in result) return { ok: true, value: result.ok as T };
      return {
        ok: false,
        error: new TaskError('RESULT_NOT_AVAILABLE', 'the task completed but no result is stored'),
      };
    }
    case 'FAILED':
    case 'CANCELLED':
    case 'EXPIRED': {
      const fallbackCode =
        status === 'CANCELLED'
          ? 'TASK_CANCELLED'
          : status === 'EXPIRED'
            ? 'TASK_EXPIRED'
            : 'RESULT_NOT_AVAILABLE';
      return { ok: false, error: decodeError(row.result, row.error_code ?? fallbackCode, row.failed_reason) };
    }
    default:
      return {
        ok: false,
        error: new TaskError(
          'RESULT_NOT_AVAILABLE',
          `the task row has an unknown status ${JSON.stringify(row.status)}`,
        ),
      };
  }
}

function decodeError(result: unknown, fallbackCode: string, failedReason: string | null): TaskError {
  const stored = isObject(result) && isObject(result.err) ? result.err : null;
  const code =
    stored && typeof stored.code === 'string' && isValidErrorCode(stored.code) ? stored.code : null;
  const message =
    stored && typeof stored.message === 'string'
      ? stored.message
      : (failedReason ?? 'the task did not succeed');
  const data = stored && 'data' in stored ? (stored.data as JsonValue) : undefined;
  const safeFallback = isValidErrorCode(fallbackCode) ? fallbackCode : 'RESULT_NOT_AVAILABLE';
  return new TaskError(code ?? safeFallback, message, data);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
