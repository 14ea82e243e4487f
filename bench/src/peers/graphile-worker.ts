/**
 * graphile-worker. A job that succeeds is deleted from `_private_jobs`, so "finished" is the number of jobs
 * enqueued in the session minus the jobs still in the table.
 */
import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import type { WorkerUtils } from 'graphile-worker';
import { sleep } from '../time.js';
import { CONCURRENCY, chunks, runNoop } from './types.js';
import type { BenchEnv, NoopPayload, PeerSession, Subject, WorkerHooks } from './types.js';

export interface GraphileVariant {
  id: string;
  schema: string;
  /** `preset.worker` options on top of the defaults. */
  worker: GraphileConfig.WorkerOptions;
  settings: string;
}

export const GRAPHILE_VARIANTS: GraphileVariant[] = [
  {
    id: 'graphile-worker',
    schema: 'bench_graphile',
    worker: {},
    settings:
      'defaults at concurrency 10: each of the 10 workers fetches its own job, completes it with its own ' +
      'statement, LISTEN/NOTIFY wake-ups, 2 s poll.',
  },
  {
    id: 'graphile-worker-best',
    schema: 'bench_graphile_best',
    worker: {
      preparedStatements: true,
      localQueue: { size: 500 },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
    settings:
      'its documented batching options: localQueue.size 500 (jobs fetched and locked 500 at a time, so other ' +
      'instances cannot take them meanwhile), completeJobBatchDelay 0 and failJobBatchDelay 0 (completions ' +
      'written together, so a crash can re-run a few completed jobs), preparedStatements true.',
  },
];

// Only warnings and errors reach the console.
const quietLogger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') console.error(`graphile-worker ${level}: ${message}`);
});

export function graphileSubject(variant: GraphileVariant): Subject {
  return {
    id: variant.id,
    peer: 'graphile-worker',
    isHorsies: false,
    store: 'postgres',
    settings: variant.settings,
    finished: 'job row deleted from _private_jobs (graphile-worker deletes a job when it succeeds)',
    recoveryNote: {
      skip:
        'by design: a job locked by a worker that died is released only after 4 hours ' +
        '(its fixed stuck-job timeout); not waited for',
    },
    reset: (env) => env.postgres.dropSchema(variant.schema),
    open: (env) => openGraphile(env, variant),
  };
}

async function openGraphile(env: BenchEnv, variant: GraphileVariant): Promise<PeerSession> {
  const connectionString = env.postgres.url;
  const schema = variant.schema;
  const utils: WorkerUtils = await makeWorkerUtils({ connectionString, schema, logger: quietLogger });
  try {
    await utils.migrate();
  } catch (error) {
    await utils.release();
    throw error;
  }
  const admin = env.postgres.admin;
  let enqueued = 0;
  let hooks: WorkerHooks | null = null;
  const countRows = async (): Promise<number> => {
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema}"._private_jobs`,
    );
    return rows[0]?.n ?? 0;
  };
  const countLocked = async (): Promise<number> => {
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema}"._private_jobs WHERE locked_at IS NOT NULL`,
    );
    return rows[0]?.n ?? 0;
  };
  return {
    async enqueueBatch(first, count, chunk) {
      for (const seqs of chunks(first, count, chunk)) {
        await utils.addJobs(seqs.map((seq) => ({ identifier: 'noop', payload: { seq } })));
        enqueued += seqs.length;
      }
    },
    async sendOne(seq) {
      await utils.addJob('noop', { seq });
      enqueued += 1;
    },
    async startWorker(workerHooks, _recovery, concurrency = CONCURRENCY) {
      hooks = workerHooks;
      const runner = await run({
        connectionString,
        schema,
        concurrency,
        // graphile-worker warns when its pool (10 by default) is smaller than the concurrency.
        maxPoolSize: Math.max(10, concurrency),
        noHandleSignals: true,
        logger: quietLogger,
        taskList: {
          noop: async (payload) => {
            await runNoop(hooks, (payload as NoopPayload).seq);
          },
        },
        preset: { worker: variant.worker },
      });
      return {
        async stop() {
          await runner.stop();
          // With completeJobBatchDelay -1 a job's completion is sent without being awaited, so stop() can
          // return before the last completions land; wait (briefly) until no job is left locked.
          const deadline = performance.now() + 5_000;
          while ((await countLocked()) > 0 && performance.now() < deadline) await sleep(20);
        },
      };
    },
    countQueued: countRows,
    async countFinished() {
      return enqueued - (await countRows());
    },
    async close() {
      await utils.release();
    },
  };
}
