/** Timing helpers: every wait in the harness is bounded, so a stuck peer ends as a timeout, not a hang. */

/** A wait that ran out of time. Reported as "timeout" in the tables. */
export class TimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`timeout: ${what} did not finish within ${formatMs(ms)}`);
    this.name = 'TimeoutError';
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves or rejects like `promise`, or rejects with a TimeoutError after `ms`. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Like {@link withTimeout} for a promise that yields a resource: when the timeout wins, the resource is still
 * disposed of once (if ever) it arrives, so a slow start does not leak pools or workers.
 */
export async function acquireWithTimeout<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
  dispose: (value: T) => Promise<unknown>,
): Promise<T> {
  try {
    return await withTimeout(promise, ms, what);
  } catch (error) {
    if (error instanceof TimeoutError) {
      promise.then(dispose).catch(() => undefined);
    }
    throw error;
  }
}

/** Calls `check` every `intervalMs` until it returns true; throws a TimeoutError after `timeoutMs`. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  options: { timeoutMs: number; intervalMs: number; what: string },
): Promise<void> {
  const deadline = performance.now() + options.timeoutMs;
  for (;;) {
    if (await check()) return;
    if (performance.now() >= deadline) throw new TimeoutError(options.what, options.timeoutMs);
    await sleep(options.intervalMs);
  }
}

/** Runs `close` but gives up after `ms` (logging the problem), so cleanup always moves on. */
export async function closeQuietly(what: string, close: () => Promise<unknown>, ms = 30_000): Promise<void> {
  try {
    await withTimeout(Promise.resolve().then(close), ms, `closing ${what}`);
  } catch (error) {
    console.error(`warning: ${errorMessage(error)}`);
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function formatMs(ms: number): string {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms)} ms`;
}
