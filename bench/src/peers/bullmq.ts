/**
 * BullMQ 6, on Redis and on its PostgreSQL backend. Same API, same settings on both: its defaults at
 * concurrency 10. A completed job is kept in the queue's completed set (no removeOnComplete), so "finished"
 * is `getJobCounts('completed')`.
 */
import { Queue, Worker, createPostgresBackend, runMigrations } from 'bullmq';
import type { Job } from 'bullmq';
import pg from 'pg';
import { CONCURRENCY, chunks, runNoop } from './types.js';
import type { BenchEnv, NoopPayload, PeerSession, RecoverySettings, Subject, WorkerHooks } from './types.js';

const QUEUE = 'noop';
const PG_SCHEMA = 'bench_bullmq';

type Backend = 'redis' | 'postgres';

export function bullmqSubject(backend: Backend): Subject {
  return {
    id: backend === 'redis' ? 'bullmq-redis' : 'bullmq-pg',
    peer: 'bullmq',
    isHorsies: false,
    store: backend === 'redis' ? 'redis' : 'postgres',
    settings:
      backend === 'redis'
        ? 'defaults at concurrency 10 on a Redis with persistence off (no RDB, no AOF: a Redis restart loses ' +
          'every job); completed jobs kept; stalled-job check every 30 s with a 30 s lock.'
        : 'createPostgresBackend with its defaults (pool of 10, LISTEN/NOTIFY, schema bench_bullmq) at ' +
          'concurrency 10; completed jobs kept.',
    finished: "job in the queue's completed state (getJobCounts('completed'))",
    recoveryNote: null,
    async reset(env) {
      if (backend === 'postgres') await env.postgres.dropSchema(PG_SCHEMA);
      else await env.redis?.flush();
    },
    open: (env) => openBullmq(env, backend),
  };
}

/** What the harness uses of a queue; both backends' Queue classes fit it. */
interface QueueLike {
  add(name: string, data: NoopPayload): Promise<unknown>;
  addBulk(jobs: { name: string; data: NoopPayload }[]): Promise<unknown>;
  getJobCounts(...types: ('completed' | 'wait')[]): Promise<Record<string, number>>;
  close(): Promise<void>;
}

/** The worker options the harness sets. */
interface WorkerSettings {
  concurrency: number;
  lockDuration?: number;
  stalledInterval?: number;
}

interface WorkerLike {
  close(): Promise<void>;
}

async function openBullmq(env: BenchEnv, backend: Backend): Promise<PeerSession> {
  let hooks: WorkerHooks | null = null;
  const processor = async (job: Job): Promise<null> => runNoop(hooks, (job.data as NoopPayload).seq);
  let queue: QueueLike;
  let makeWorker: (options: WorkerSettings) => WorkerLike;
  const onError = (error: Error): void => console.error(`bullmq (${backend}) error: ${error.message}`);
  if (backend === 'redis') {
    const redis = env.redis;
    if (!redis) throw new Error('bullmq-redis needs Redis');
    const connection = { host: redis.host, port: redis.port };
    const q = new Queue(QUEUE, { connection });
    q.on('error', onError);
    queue = q;
    makeWorker = (options) => {
      const w = new Worker(QUEUE, processor, { ...options, connection });
      w.on('error', onError);
      return w;
    };
  } else {
    await migratePostgres(env.postgres.url);
    const connection = { connectionString: env.postgres.url, schema: PG_SCHEMA };
    const q = new Queue(QUEUE, { connection }, createPostgresBackend);
    q.on('error', onError);
    queue = q;
    makeWorker = (options) => {
      const w = new Worker(QUEUE, processor, { ...options, connection }, createPostgresBackend);
      w.on('error', onError);
      return w;
    };
  }
  return {
    async enqueueBatch(first, count, chunk) {
      for (const seqs of chunks(first, count, chunk)) {
        await queue.addBulk(seqs.map((seq) => ({ name: QUEUE, data: { seq } })));
      }
    },
    async sendOne(seq) {
      await queue.add(QUEUE, { seq });
    },
    async startWorker(workerHooks, recovery?: RecoverySettings, concurrency = CONCURRENCY) {
      hooks = workerHooks;
      const options: WorkerSettings = { concurrency };
      if (recovery) {
        options.lockDuration = recovery.leaseMs;
        options.stalledInterval = recovery.checkIntervalMs;
      }
      const worker = makeWorker(options);
      return { stop: () => worker.close() };
    },
    async countQueued() {
      return (await queue.getJobCounts('wait')).wait ?? 0;
    },
    async countFinished() {
      return (await queue.getJobCounts('completed')).completed ?? 0;
    },
    close: () => queue.close(),
  };
}

async function migratePostgres(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await runMigrations(client, PG_SCHEMA);
  } finally {
    await client.end();
  }
}
