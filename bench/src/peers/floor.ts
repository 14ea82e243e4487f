/**
 * The floor of send-to-start on the benchmark's PostgreSQL: no queue at all, one INSERT of a two-column row and a
 * NOTIFY in one statement, heard by a client that LISTENs. What any PostgreSQL queue that stores a task and wakes
 * a worker pays at least, on this machine, in the same run: the round trip, the commit (with its WAL flush in
 * `postgres-floor`, without it in `postgres-floor-nosync`) and the notification's delivery. A baseline, measured
 * in the latency scenario only and never counted as the best peer.
 */
import pg from 'pg';
import { SkipError } from '../scenarios/types.js';
import type { BenchEnv, PeerSession, Subject, WorkerHooks } from './types.js';

const SCHEMA = 'bench_floor';
const CHANNEL = 'bench_floor';

export const FLOOR_VARIANTS = ['durable', 'nosync'] as const;
export type FloorVariant = (typeof FLOOR_VARIANTS)[number];

export function floorSubject(variant: FloorVariant): Subject {
  const durable = variant === 'durable';
  return {
    id: durable ? 'postgres-floor' : 'postgres-floor-nosync',
    peer: 'pg',
    isHorsies: false,
    baseline: true,
    store: 'postgres',
    settings: durable
      ? 'a baseline, not a queue: one INSERT of a two-column row and pg_notify in one statement (prepared), heard ' +
        'by a LISTEN connection; synchronous_commit on, as for every PostgreSQL subject (latency only)'
      : 'the same baseline with synchronous_commit off on the sending connection: the commit does not wait for ' +
        'the WAL flush (latency only)',
    finished: 'not applicable (a baseline of the latency scenario)',
    recoveryNote: { skip: 'a baseline of the latency scenario only' },
    reset: (env) => env.postgres.dropSchema(SCHEMA),
    open: (env) => openFloor(env, durable),
  };
}

async function openFloor(env: BenchEnv, durable: boolean): Promise<PeerSession> {
  const sender = new pg.Client({ connectionString: env.postgres.url });
  const listener = new pg.Client({ connectionString: env.postgres.url });
  const clients = [sender, listener];
  try {
    for (const client of clients) await client.connect();
    await sender.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
    await sender.query(`CREATE TABLE IF NOT EXISTS ${SCHEMA}.sends (seq integer, payload jsonb)`);
    if (!durable) await sender.query('SET synchronous_commit = off');
  } catch (error) {
    await Promise.allSettled(clients.map((c) => c.end()));
    throw error;
  }
  const onlyLatency = (): never => {
    throw new SkipError('a baseline of the latency scenario only');
  };
  let hooks: WorkerHooks | null = null;
  listener.on('notification', (message) => hooks?.onStart(Number(message.payload)));
  return {
    enqueueBatch: async () => onlyLatency(),
    async sendOne(seq) {
      await sender.query({
        name: 'floor_send',
        text:
          `WITH sent AS (INSERT INTO ${SCHEMA}.sends (seq, payload) VALUES ($1, $2) RETURNING seq) ` +
          `SELECT pg_notify('${CHANNEL}', seq::text) FROM sent`,
        values: [seq, JSON.stringify({ seq })],
      });
    },
    async startWorker(workerHooks) {
      hooks = workerHooks;
      await listener.query(`LISTEN ${CHANNEL}`);
      return {
        async stop() {
          await listener.query(`UNLISTEN ${CHANNEL}`);
          hooks = null;
        },
      };
    },
    countQueued: async () => onlyLatency(),
    countFinished: async () => onlyLatency(),
    async close() {
      await Promise.allSettled(clients.map((c) => c.end()));
    },
  };
}
