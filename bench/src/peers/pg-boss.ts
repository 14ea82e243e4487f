/**
 * pg-boss. A completed job stays in the `job` table (state `completed`) until its retention deletes it, so
 * "finished" counts those rows.
 */
import { PgBoss } from 'pg-boss';
import type { ConstructorOptions, Queue, WorkOptions } from 'pg-boss';
import { CONCURRENCY, chunks, runNoop } from './types.js';
import type { BenchEnv, NoopPayload, PeerSession, RecoverySettings, Subject, WorkerHooks } from './types.js';

const QUEUE = 'noop';
const SCHEMA = 'bench_pgboss';

// pg-boss's own defaults poll once every 2 s per worker and take one job per poll; a worker that finds a job
// still waits for the next poll. Concurrency 10 with a drain rate above 20 jobs/s therefore needs its batch
// options: fetch up to 10 jobs at once, run them concurrently, and fetch again at once while batches come
// back full. LISTEN/NOTIFY (opt-in in pg-boss) wakes an idle worker when a job is sent.
const WORK: WorkOptions = {
  batchSize: CONCURRENCY,
  burstWhenBatchFull: true,
  pollingIntervalSeconds: 2,
  notifyPollingIntervalSeconds: 2,
};

export function pgBossSubject(): Subject {
  return {
    id: 'pg-boss',
    peer: 'pg-boss',
    isHorsies: false,
    store: 'postgres',
    settings:
      'work() with batchSize 10 (one fetch of up to 10 jobs, run concurrently, completed in one statement) ' +
      'and burstWhenBatchFull (fetch again at once while batches are full); useListenNotify with queue ' +
      'notify, 2 s poll backstop; other options at their defaults (retries, maintenance every 60 s). ' +
      'A batch occupies all 10 slots until its slowest job ends.',
    finished:
      "job row in state 'completed' in its job table (outside the backlog scenario, counted after the clock " +
      "stopped at the first poll that found no job of the queue in a state before 'completed')",
    recoveryNote: null,
    reset: (env) => env.postgres.dropSchema(SCHEMA),
    open: (env, recovery) => openPgBoss(env, recovery),
  };
}

async function openPgBoss(env: BenchEnv, recovery?: RecoverySettings): Promise<PeerSession> {
  const options: ConstructorOptions = {
    connectionString: env.postgres.url,
    schema: SCHEMA,
    useListenNotify: true,
  };
  if (recovery) {
    // The monitor pass fails jobs whose heartbeat is older than heartbeatSeconds; failed jobs are retried.
    options.superviseIntervalSeconds = Math.max(1, Math.round(recovery.checkIntervalMs / 1000));
    options.monitorIntervalSeconds = Math.max(1, Math.round(recovery.checkIntervalMs / 1000));
  }
  const boss = new PgBoss(options);
  boss.on('error', (error) => console.error(`pg-boss error: ${error.message}`));
  await boss.start();
  try {
    const queue: Omit<Queue, 'name'> = { notify: true };
    if (recovery) queue.heartbeatSeconds = Math.round(recovery.leaseMs / 1000);
    if (!(await boss.getQueue(QUEUE))) await boss.createQueue(QUEUE, queue);
  } catch (error) {
    await boss.stop({ graceful: false, timeout: 1000 });
    throw error;
  }
  let hooks: WorkerHooks | null = null;
  const admin = env.postgres.admin;
  const count = async (state: string): Promise<number> => {
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${SCHEMA}".job WHERE name = $1 AND state = $2`,
      [QUEUE, state],
    );
    return rows[0]?.n ?? 0;
  };
  return {
    async enqueueBatch(first, count, chunk) {
      for (const seqs of chunks(first, count, chunk)) {
        await boss.insert(
          QUEUE,
          seqs.map((seq) => ({ data: { seq } })),
        );
      }
    },
    async sendOne(seq) {
      await boss.send(QUEUE, { seq });
    },
    async startWorker(workerHooks, workerRecovery, concurrency = CONCURRENCY) {
      hooks = workerHooks;
      // Concurrency N is one batch of up to N jobs at a time (see WORK above).
      const work: WorkOptions = { ...WORK, batchSize: concurrency };
      if (workerRecovery) {
        work.pollingIntervalSeconds = Math.max(0.5, workerRecovery.pollIntervalMs / 1000);
        work.notifyPollingIntervalSeconds = work.pollingIntervalSeconds;
      }
      const id = await boss.work<NoopPayload>(QUEUE, work, async (jobs) => {
        await Promise.all(jobs.map((job) => runNoop(hooks, job.data.seq)));
        return null;
      });
      return { stop: () => boss.offWork(QUEUE, { id, wait: true }) };
    },
    countQueued: () => count('created'),
    countFinished: () => count('completed'),
    async countLeft() {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${SCHEMA}".job WHERE name = $1 AND state < 'completed'`,
        [QUEUE],
      );
      return rows[0]?.n ?? 0;
    },
    close: () => boss.stop({ graceful: true, timeout: 10_000 }),
  };
}
