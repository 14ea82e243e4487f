/**
 * horsies, imported from the package this repository builds (`npm run build:lib`, which `npm run bench` runs
 * first), compiled as an application runs it. Completed tasks stay in `horsies_tasks` with status COMPLETED and one
 * COMPLETED row each in `horsies_task_attempts`; "finished" counts tasks that have both.
 */
import { pino } from 'pino';
import { z } from 'zod';
import { createApp, createWorker } from '../../../dist/index.js';
import type { WorkerConfig } from '../../../dist/index.js';
import { CONCURRENCY, chunks, runNoop } from './types.js';
import type { BenchEnv, PeerSession, RecoverySettings, Subject, WorkerHooks } from './types.js';

export interface HorsiesVariant {
  id: string;
  schema: string;
  worker: WorkerConfig;
  settings: string;
}

export const HORSIES_VARIANTS: HorsiesVariant[] = [
  {
    id: 'horsies',
    schema: 'bench_horsies',
    worker: { concurrency: CONCURRENCY },
    settings:
      'defaults: createWorker(app, { concurrency: 10 }) (claim batch = free slots, claimed and started in one round trip, ' +
      'LISTEN/NOTIFY wake-ups, 2 s poll, finishes written in batches of up to 500); claims and starts commit ' +
      'without waiting for the WAL flush, outcomes (with their attempt rows) wait for it.',
  },
  {
    id: 'horsies-high',
    schema: 'bench_horsies_high',
    worker: { concurrency: CONCURRENCY, throughput: 'high' },
    settings:
      "createWorker(app, { concurrency: 10, throughput: 'high' }): claims of up to 500 that start (RUNNING) as many " +
      'tasks ahead of the free slots as the worker expects to run within 20 ms at the rate its runs end (prefetch ' +
      "{ size: 'auto', startAhead: true }), each waiting in the worker for a handler slot, so a run follows the one before it " +
      'with no round trip. A crash counts those started ahead as crashed attempts (retried as the policy says); a ' +
      'graceful stop hands them back at once.',
  },
];

export function horsiesSubject(variant: HorsiesVariant): Subject {
  return {
    id: variant.id,
    peer: 'horsies',
    isHorsies: true,
    store: 'postgres',
    settings: variant.settings,
    finished:
      'task row in status COMPLETED and its COMPLETED row in horsies_task_attempts (both counted in SQL; outside ' +
      'the backlog scenario, after the clock stopped at the first poll that found no task row unclaimed and ' +
      'unfinished, or claimed)',
    // Measured: openHorsies maps the shared recovery settings onto the app's heartbeats and reaper.
    recoveryNote: null,
    reset: (env) => env.postgres.dropSchema(variant.schema),
    open: (env, recovery) => openHorsies(env, variant, recovery),
  };
}

async function openHorsies(
  env: BenchEnv,
  variant: HorsiesVariant,
  recovery?: RecoverySettings,
): Promise<PeerSession> {
  const schema = variant.schema;
  const app = createApp({
    databaseUrl: env.postgres.url,
    schema,
    logger: pino({ level: process.env.HORSIES_LOG_LEVEL ?? 'warn' }),
    // The shared thresholds: the lease is the stale threshold, heartbeats at half of it, the reaper's check as given.
    recovery: recovery && {
      claimerHeartbeatIntervalMs: recovery.leaseMs / 2,
      claimedStaleThresholdMs: recovery.leaseMs,
      runnerHeartbeatIntervalMs: recovery.leaseMs / 2,
      runningStaleThresholdMs: recovery.leaseMs,
      checkIntervalMs: recovery.checkIntervalMs,
    },
  });
  let hooks: WorkerHooks | null = null;
  try {
    await app.migrate();
  } catch (error) {
    await app.close();
    throw error;
  }
  const noop = app.task({
    name: 'bench.noop',
    input: z.object({ seq: z.number().int() }),
    // In the recovery scenario a run cut short by a crash is retried, so it runs again elsewhere.
    retry: recovery && { maxRetries: 3, retryOn: ['WORKER_CRASHED'], baseDelayMs: 0 },
    handler: ({ seq }) => runNoop(hooks, seq),
  });
  const admin = env.postgres.admin;
  return {
    async enqueueBatch(first, count, chunk) {
      for (const seqs of chunks(first, count, chunk)) {
        await noop.sendMany(seqs.map((seq) => ({ input: { seq } })));
      }
    },
    async sendOne(seq) {
      await noop.send({ seq });
    },
    async startWorker(workerHooks, workerRecovery, concurrency = CONCURRENCY) {
      hooks = workerHooks;
      const config: WorkerConfig = { ...variant.worker, concurrency };
      if (workerRecovery) config.pollIntervalMs = workerRecovery.pollIntervalMs;
      const worker = createWorker(app, config);
      worker.on('worker:error', (error) => console.error(`horsies worker error: ${String(error)}`));
      await worker.start();
      return { stop: () => worker.stop() };
    },
    async countQueued() {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".horsies_tasks WHERE status = 'PENDING'`,
      );
      return rows[0]?.n ?? 0;
    },
    async countFinished() {
      // finished_at IS NOT NULL lets PostgreSQL use the partial index on finished rows.
      const { rows } = await admin.query<{ tasks: number; attempts: number }>(
        `SELECT (SELECT count(*)::int FROM "${schema}".horsies_tasks
                  WHERE finished_at IS NOT NULL AND status = 'COMPLETED') AS tasks,
                (SELECT count(*)::int FROM "${schema}".horsies_task_attempts
                  WHERE outcome = 'COMPLETED') AS attempts`,
      );
      return Math.min(rows[0]?.tasks ?? 0, rows[0]?.attempts ?? 0);
    },
    async countLeft() {
      // Every unfinished row is either unclaimed (the claim index) or claimed (the in-flight index); both partial.
      const { rows } = await admin.query<{ n: number }>(
        `SELECT (SELECT count(*)::int FROM "${schema}".horsies_tasks WHERE NOT claimed AND finished_at IS NULL)
              + (SELECT count(*)::int FROM "${schema}".horsies_tasks WHERE claimed) AS n`,
      );
      return rows[0]?.n ?? 0;
    },
    close: () => app.close(),
  };
}
