/** Building blocks shared by the scenarios: a fresh store per sample, and the drain measurement. */
import type { PeerSession, RecoverySettings, RunningWorker, Subject, WorkerHooks } from '../peers/types.js';
import { acquireWithTimeout, closeQuietly, waitUntil, withTimeout } from '../time.js';
import type { RunContext } from './types.js';

/** The batch size used whenever a scenario pre-queues tasks (not measured). */
export const SETUP_CHUNK = 10_000;

/** Wipes the subject's store, opens a session, runs `fn`, closes the session and wipes the store again. */
export async function withSession<T>(
  subject: Subject,
  ctx: RunContext,
  fn: (session: PeerSession) => Promise<T>,
  recovery?: RecoverySettings,
): Promise<T> {
  await subject.reset(ctx.env);
  const session = await acquireWithTimeout(
    subject.open(ctx.env, recovery),
    120_000,
    `${subject.id}: open`,
    (s) => s.close(),
  );
  try {
    return await fn(session);
  } finally {
    await closeQuietly(`${subject.id} session`, () => session.close());
    await closeQuietly(`${subject.id} store reset`, () => subject.reset(ctx.env), 120_000);
  }
}

/** Starts a worker, runs `fn`, and stops the worker whatever happens. */
export async function withWorker<T>(
  session: PeerSession,
  subject: Subject,
  hooks: WorkerHooks,
  fn: (worker: RunningWorker) => Promise<T>,
  recovery?: RecoverySettings,
): Promise<T> {
  const worker = await acquireWithTimeout(
    session.startWorker(hooks, recovery),
    60_000,
    `${subject.id}: worker start`,
    (w) => w.stop(),
  );
  try {
    return await fn(worker);
  } finally {
    await closeQuietly(`${subject.id} worker`, () => worker.stop());
  }
}

export interface DrainResult {
  /** Tasks finished in the store per second, from the worker's start to the poll that saw the target. */
  rate: number;
  elapsedMs: number;
  /** Finished tasks counted by that poll (the target, or slightly more when tasks remain). */
  finished: number;
  /** Handler runs seen in process by then. */
  handlerRuns: number;
}

/**
 * Starts a worker on a pre-queued store and times it until at least `target` tasks are finished in the store.
 * The handler count is watched in process (no load on the store); the store is polled only once the handlers
 * have run `target` times, every 20 ms, until its count reaches the target.
 */
export async function measureDrain(
  session: PeerSession,
  subject: Subject,
  ctx: RunContext,
  target: number,
  timeoutMs: number,
): Promise<DrainResult> {
  let runs = 0;
  await ctx.env.postgres.checkpoint();
  const started = performance.now();
  return withWorker(session, subject, { onStart: () => void runs++ }, async () => {
    await waitUntil(() => runs >= target, {
      timeoutMs,
      intervalMs: 5,
      what: `${subject.id}: ${target} handler runs`,
    });
    let finished = 0;
    await waitUntil(async () => (finished = await session.countFinished()) >= target, {
      timeoutMs: Math.max(10_000, timeoutMs - (performance.now() - started)),
      intervalMs: 20,
      what: `${subject.id}: ${target} tasks finished in the store`,
    });
    const elapsedMs = performance.now() - started;
    return { rate: (finished / elapsedMs) * 1000, elapsedMs, finished, handlerRuns: runs };
  });
}

/** Pre-queues `count` tasks with the batch API (setup, not measured) and checks the store holds them. */
export async function prequeue(
  session: PeerSession,
  subject: Subject,
  count: number,
  timeoutMs: number,
): Promise<number> {
  const started = performance.now();
  await withTimeout(
    session.enqueueBatch(0, count, SETUP_CHUNK),
    timeoutMs,
    `${subject.id}: pre-queue ${count} tasks`,
  );
  const queued = await session.countQueued();
  if (queued !== count)
    throw new Error(`${subject.id}: pre-queued ${count} tasks but the store has ${queued}`);
  return performance.now() - started;
}

export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}
