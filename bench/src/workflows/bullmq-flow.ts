/**
 * BullMQ's flows (`FlowProducer`) on Redis: a parent job waits in the `waiting-children` state until every child
 * has completed, then runs. A flow is a tree, built children first, so:
 *
 * - chain: a tree of depth `chain`, each job the only child of the next (the deepest runs first); each job reads
 *   its child's result (`getChildrenValues`), as horsies' chain passes each node's result on;
 * - wide: a join job with `wide` children. No root ahead of them: a root that every middle node waits for, and a
 *   join that waits for all of them, is a diamond, not a tree;
 * - small: `small` flows of a join job with 9 children (10 jobs; the root is missing for the same reason), added
 *   with `addBulk` before the worker starts, timed from the worker's creation until every join has completed.
 *
 * Redis is Debian's `redis-server`, started for the run with persistence off (bench/src/env/redis.ts).
 */
import { readFileSync } from 'node:fs';
import { FlowProducer, Worker } from 'bullmq';
import type { FlowJob, Job } from 'bullmq';
import { startRedis } from '../env/redis.js';
import type { WorkflowPeer, WorkflowPeerEnv, WorkflowPeerOpen } from './types.js';

const QUEUE = 'bench_workflows';
const CONCURRENCY = 10;
const ADD_CHUNK = 100;

interface NodeData {
  i: number;
  /** Read the child's result before returning: the chain's steps. */
  readsChild?: boolean;
}

function version(): string {
  try {
    const path = new URL('../../node_modules/bullmq/package.json', import.meta.url);
    return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

async function processor(job: Job<NodeData>): Promise<number> {
  if (job.data.readsChild) {
    const values = Object.values(await job.getChildrenValues<number>());
    return (values[0] ?? 0) + 1;
  }
  return job.data.i;
}

function fanIn(width: number, base: number): FlowJob {
  return {
    name: 'join',
    queueName: QUEUE,
    data: { i: base },
    children: Array.from({ length: width }, (_, i) => ({
      name: 'node',
      queueName: QUEUE,
      data: { i: base + i },
    })),
  };
}

export async function open(env: WorkflowPeerEnv): Promise<WorkflowPeerOpen> {
  const { sizes } = env;
  const started = await startRedis();
  if (!started.ok) return { ok: false, reason: started.reason };
  const redis = started.redis;
  const connection = { host: redis.host, port: redis.port };
  const flows = new FlowProducer({ connection });
  const onError = (error: Error): void => console.error(`bullmq-flow error: ${error.message}`);
  flows.on('error', onError);

  /**
   * A worker at BullMQ's defaults, and a wait for `count` completed jobs named `name`, which resolves with the
   * last one's result.
   */
  const startWorker = (): {
    worker: Worker<NodeData, number>;
    completed: (name: string, count: number) => Promise<number>;
  } => {
    const worker = new Worker<NodeData, number>(QUEUE, processor, { connection, concurrency: CONCURRENCY });
    worker.on('error', onError);
    const completed = (name: string, count: number): Promise<number> =>
      new Promise((resolve, reject) => {
        let seen = 0;
        worker.on('completed', (job, result) => {
          if (job.name === name && ++seen >= count) resolve(result);
        });
        worker.on('failed', (job, error) =>
          reject(new Error(`bullmq-flow: job ${job?.id} failed: ${error.message}`)),
        );
      });
    return { worker, completed };
  };

  const peer: WorkflowPeer = {
    id: 'bullmq-flow',
    version: `bullmq ${version()} on Redis ${redis.version} (persistence off)`,
    settings: `a Worker at its defaults at concurrency ${CONCURRENCY}; FlowProducer at its defaults`,
    keeps:
      "every job's hash (data, return value, timestamps) in the completed set (no removeOnComplete), a parent's " +
      "children's results; in memory only: Redis runs without RDB or AOF, so a restart loses every flow",
    shapes: {
      chain: `a tree of depth ${sizes.chain}, each job the only child of the next, reading its child's result`,
      wide: `a join with ${sizes.wide} children (${sizes.wide + 1} jobs): no root, a diamond is not a tree`,
      small: `${sizes.small} flows of a join with 9 children (10 jobs, no root: not a tree) added before the worker`,
    },
    async chain() {
      await redis.flush();
      let tree: FlowJob = { name: 'step', queueName: QUEUE, data: { i: 0 } };
      for (let i = 1; i < sizes.chain; i += 1) {
        tree = { name: 'step', queueName: QUEUE, data: { i, readsChild: true }, children: [tree] };
      }
      const { worker, completed } = startWorker();
      try {
        await worker.waitUntilReady();
        const done = completed('last', 1);
        const t0 = performance.now();
        await flows.add({ ...tree, name: 'last' });
        const result = await done;
        const total = performance.now() - t0;
        if (result !== sizes.chain - 1) throw new Error(`bullmq-flow chain: result ${result}`);
        return { stepMs: total / sizes.chain };
      } finally {
        await worker.close();
      }
    },
    async wide() {
      await redis.flush();
      const { worker, completed } = startWorker();
      try {
        await worker.waitUntilReady();
        const done = completed('join', 1);
        const t0 = performance.now();
        await flows.add(fanIn(sizes.wide, 0));
        await done;
        const seconds = (performance.now() - t0) / 1000;
        const nodes = sizes.wide + 1;
        return { nodes, nodesPerS: nodes / seconds };
      } finally {
        await worker.close();
      }
    },
    async small() {
      await redis.flush();
      for (let first = 0; first < sizes.small; first += ADD_CHUNK) {
        const count = Math.min(ADD_CHUNK, sizes.small - first);
        await flows.addBulk(Array.from({ length: count }, (_, k) => fanIn(9, (first + k) * 10)));
      }
      const t0 = performance.now();
      const { worker, completed } = startWorker();
      try {
        await completed('join', sizes.small);
        const seconds = (performance.now() - t0) / 1000;
        return { workflowsPerS: sizes.small / seconds, nodesPerS: (sizes.small * 10) / seconds };
      } finally {
        await worker.close();
      }
    },
    async close() {
      await flows.close();
      await redis.stop();
    },
  };
  return { ok: true, peer };
}
