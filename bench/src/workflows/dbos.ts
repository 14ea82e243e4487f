/**
 * DBOS Transact (`@dbos-inc/dbos-sdk`) on the PostgreSQL horsies uses in the run, in its own schema
 * (`bench_dbos`). DBOS runs a workflow as one function in the process that started or dequeued it and writes a
 * checkpoint for each step it completes, so:
 *
 * - chain: one workflow of `chain` steps in sequence (`DBOS.runStep`), started with `DBOS.startWorkflow`;
 * - wide: a workflow runs a root step, enqueues `wide` child workflows of one step each on a `WorkflowQueue`
 *   (worker concurrency 10), waits for them all (`DBOS.waitAll`) and runs a join step: the fan-out/fan-in of
 *   DBOS's queue tutorial;
 * - small: `small` workflows of a root step, 8 steps at once (`Promise.all`) and a join step, enqueued on the
 *   same queue with `DBOSClient` while DBOS is shut down, then timed from `DBOS.launch()` until all have
 *   succeeded.
 *
 * DBOS is one object per process: the workflows are registered once, before the first launch; the queue is a row
 * of its system database (`DBOS.registerQueue`), registered after it and seen by the dispatch loop from the next
 * launch on.
 */
import { readFileSync } from 'node:fs';
import { DBOS, DBOSClient } from '@dbos-inc/dbos-sdk';
import type { WorkflowHandle } from '@dbos-inc/dbos-sdk';
import pg from 'pg';
import { until } from './types.js';
import type { WorkflowPeer, WorkflowPeerEnv, WorkflowPeerOpen } from './types.js';

const SCHEMA = 'bench_dbos';
const QUEUE = 'bench_workflows';
const CONCURRENCY = 10;
/**
 * The queue's dispatch loop polls PostgreSQL (DBOS has no wake-up on enqueue); its default interval is 1 s, which
 * would cap a queue of short workflows at 10 starts a second. 10 ms keeps the poll out of the figures.
 */
const POLL_MS = Number(process.env.DBOS_POLL_MS ?? 10);

const noop = (i: number): Promise<number> => Promise.resolve(i);

async function chainWorkflow(steps: number): Promise<number> {
  let value = 0;
  for (let i = 0; i < steps; i += 1) {
    const input = value;
    value = await DBOS.runStep(() => noop(input + 1), { name: 'step' });
  }
  return value;
}

async function nodeWorkflow(i: number): Promise<number> {
  return DBOS.runStep(() => noop(i), { name: 'node' });
}

async function wideWorkflow(width: number): Promise<number> {
  await DBOS.runStep(() => noop(0), { name: 'root' });
  const handles: WorkflowHandle<number>[] = [];
  for (let i = 0; i < width; i += 1) {
    handles.push(await DBOS.startWorkflow(node, { queueName: QUEUE })(i));
  }
  await DBOS.waitAll(handles, { pollingIntervalMs: POLL_MS });
  return DBOS.runStep(() => noop(width), { name: 'join' });
}

async function smallWorkflow(): Promise<number> {
  const root = await DBOS.runStep(() => noop(0), { name: 'root' });
  const branches = await Promise.all(
    Array.from({ length: 8 }, (_, i) => DBOS.runStep(() => noop(root + i), { name: `b${i}` })),
  );
  return DBOS.runStep(() => noop(branches.length), { name: 'join' });
}

let registered = false;
let chain: (steps: number) => Promise<number>;
let node: (i: number) => Promise<number>;
let wide: (width: number) => Promise<number>;

function register(databaseUrl: string): void {
  if (registered) return;
  registered = true;
  DBOS.setConfig({
    name: 'horsies-bench',
    systemDatabaseUrl: databaseUrl,
    systemDatabaseSchemaName: SCHEMA,
    logLevel: 'error',
  });
  chain = DBOS.registerWorkflow(chainWorkflow, { name: 'chain' });
  node = DBOS.registerWorkflow(nodeWorkflow, { name: 'node' });
  wide = DBOS.registerWorkflow(wideWorkflow, { name: 'wide' });
  DBOS.registerWorkflow(smallWorkflow, { name: 'small' });
}

function version(): string {
  try {
    const path = new URL('../../node_modules/@dbos-inc/dbos-sdk/package.json', import.meta.url);
    return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

export async function open(env: WorkflowPeerEnv): Promise<WorkflowPeerOpen> {
  const { databaseUrl, sizes } = env;
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  // An idle client's connection closed by the server (its stop at the end of the run) is not a failure here.
  pool.on('error', () => undefined);
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  register(databaseUrl);
  await DBOS.launch();
  await DBOS.registerQueue(QUEUE, { workerConcurrency: CONCURRENCY, minPollingIntervalMs: POLL_MS });
  // DBOS runs only during its own shapes: launched, it polls its queue every POLL_MS, beside horsies' rounds too.
  await DBOS.shutdown();

  /** Empties DBOS's tables (its migrations and queue rows stay) and writes the dirty pages out. */
  const reset = async (): Promise<void> => {
    const { rows } = await pool.query<{ name: string }>(
      `SELECT quote_ident(tablename) AS name FROM pg_tables
        WHERE schemaname = $1 AND tablename NOT IN ('dbos_migrations', 'queues')`,
      [SCHEMA],
    );
    if (rows.length > 0) {
      await pool.query(`TRUNCATE ${rows.map((r) => `${SCHEMA}.${r.name}`).join(', ')} CASCADE`);
    }
    await pool.query('CHECKPOINT').catch(() => undefined);
  };
  const succeeded = async (name: string): Promise<number> => {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${SCHEMA}.workflow_status WHERE name = $1 AND status = 'SUCCESS'`,
      [name],
    );
    return rows[0]?.n ?? 0;
  };

  const peer: WorkflowPeer = {
    id: 'dbos',
    version: `@dbos-inc/dbos-sdk ${version()} on the same PostgreSQL (schema ${SCHEMA})`,
    settings:
      `one DBOS process at its defaults (system pool of 10) but for the queue: DBOS.registerQueue with ` +
      `workerConcurrency ${CONCURRENCY} and minPollingIntervalMs ${POLL_MS} (default 1,000); DBOS.waitAll ` +
      `polls every ${POLL_MS} ms`,
    keeps:
      'a workflow_status row per workflow (inputs, output, status, timestamps) and an operation_outputs row per ' +
      'step and per child started (its output), kept until deleted (no retention at the defaults)',
    shapes: {
      chain: `one workflow of ${sizes.chain} steps (DBOS.runStep) in sequence, in one process`,
      wide:
        `a root step, ${sizes.wide} child workflows of one step enqueued one by one on the queue, ` +
        `DBOS.waitAll, a join step`,
      small: `${sizes.small} workflows (root step, 8 steps at once, join step) queued before DBOS.launch()`,
    },
    async chain() {
      await DBOS.launch();
      await reset();
      const t0 = performance.now();
      const handle = await DBOS.startWorkflow(chain)(sizes.chain);
      const result = await handle.getResult();
      const total = performance.now() - t0;
      if (result !== sizes.chain) throw new Error(`dbos chain: result ${result}`);
      return { stepMs: total / sizes.chain };
    },
    async wide() {
      await reset();
      const t0 = performance.now();
      const handle = await DBOS.startWorkflow(wide)(sizes.wide);
      await handle.getResult();
      const seconds = (performance.now() - t0) / 1000;
      const nodes = sizes.wide + 2;
      return { nodes, nodesPerS: nodes / seconds };
    },
    async small() {
      await DBOS.shutdown();
      await reset();
      const client = await DBOSClient.create({
        systemDatabaseUrl: databaseUrl,
        systemDatabaseSchemaName: SCHEMA,
      });
      try {
        const pending = Array.from({ length: sizes.small }, (_, i) => i);
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            while (pending.shift() !== undefined) {
              await client.enqueue({ workflowName: 'small', queueName: QUEUE });
            }
          }),
        );
      } finally {
        await client.destroy();
      }
      await pool.query('CHECKPOINT').catch(() => undefined);
      const t0 = performance.now();
      await DBOS.launch();
      await until('dbos small workflows', async () => (await succeeded('small')) >= sizes.small);
      const seconds = (performance.now() - t0) / 1000;
      await DBOS.shutdown();
      return { workflowsPerS: sizes.small / seconds, nodesPerS: (sizes.small * 10) / seconds };
    },
    async close() {
      // Shut down after its last shape already, unless a shape failed on the way.
      await DBOS.shutdown().catch(() => undefined);
      await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      await pool.end();
    },
  };
  return { ok: true, peer };
}
