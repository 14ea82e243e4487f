/**
 * A busy worker's outcomes wait a moment (`outcomes.delayMs`) for more to join their write; an idle worker's, a
 * full batch and a stopping worker's do not.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { PoolClient } from 'pg';
import { z } from 'zod';
import { createWorker } from '../../src/worker/Worker.js';
import type { Worker } from '../../src/worker/Worker.js';
import type { WorkerConfig } from '../../src/worker/config.js';
import type { AppConfig } from '../../src/index.js';
import { eventually, useTestSchema, waitForEvent } from '../support/db.js';
import { gate } from '../support/gate.js';

const t = await useTestSchema();

let worker: Worker | null = null;
let blocker: PoolClient | null = null;
/** Opens the gates of the running test's tasks, so that its worker stops without leaving a task behind. */
let openGates: () => void = () => undefined;

afterEach(async () => {
  openGates();
  await blocker?.query('ROLLBACK').catch(() => undefined);
  blocker?.release();
  blocker = null;
  await worker?.stop();
  worker = null;
});

/**
 * Three tasks a, b and c on a worker with `config`: a returns at once, b and c when the test opens their gates.
 * Every write of outcomes is recorded as the ids it wrote. The attempts table is locked until `unlock()`, so the
 * first write (a's) waits for it.
 */
async function busyWorker(config: WorkerConfig, appConfig: Partial<AppConfig> = {}, group?: string) {
  const app = t.app(appConfig);
  const gates = { a: null, b: gate(), c: gate() };
  openGates = () => {
    gates.b.open();
    gates.c.open();
  };
  const task = app.task({
    name: 'delay.task',
    input: z.object({ k: z.enum(['a', 'b', 'c']) }),
    handler: async ({ k }) => {
      await gates[k]?.wait;
      return k;
    },
  });
  blocker = await t.pool.connect();
  await blocker.query('BEGIN');
  await blocker.query(`LOCK TABLE "${t.schema}".horsies_task_attempts IN SHARE MODE`);
  const w = createWorker(app, { concurrency: 3, ...config });
  worker = w;
  const writes: string[][] = [];
  w.on('task:finished', (rows) => writes.push(rows.map((r) => r.id)));
  const ran: string[] = [];
  w.on('task:ran', (id) => ran.push(id));
  await w.start();
  const [a, b, c] = await task.sendMany(
    (['a', 'b', 'c'] as const).map((k) => ({ input: { k }, ...(group === undefined ? {} : { group }) })),
  );
  // a's outcome is being written, held by the lock (its statement waits for it on the server: not still waiting
  // for a connection, when b's outcome could join it); b ends while it is.
  await eventually(async () => ran.includes(a!.id));
  await eventually(async () => {
    const [row] = await t.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks
       WHERE NOT granted AND relation = '{{schema}}.horsies_task_attempts'::regclass`,
    );
    return row!.n > 0;
  });
  gates.b.open();
  await eventually(async () => ran.includes(b!.id));
  const unlock = async (): Promise<void> => {
    await blocker!.query('COMMIT');
    await eventually(async () => writes.length > 0);
  };
  return { worker: w, writes, ids: { a: a!.id, b: b!.id, c: c!.id }, openC: gates.c.open, unlock };
}

describe('outcomes.delayMs', () => {
  it("writes an idle worker's outcome at once", async () => {
    const app = t.app();
    const task = app.task({ name: 'delay.idle', input: z.object({}), handler: () => 'done' });
    worker = createWorker(app, { outcomes: { delayMs: 30_000 } });
    await worker.start();
    for (let i = 0; i < 3; i += 1) {
      const handle = await task.send({});
      expect(await handle.result({ timeoutMs: 5_000 })).toEqual({ ok: true, value: 'done' });
    }
  });

  it('lets outcomes that ended during a write wait for more to join the next one', async () => {
    const { writes, ids, openC, unlock } = await busyWorker({ outcomes: { delayMs: 2_000 } });
    await unlock();
    expect(writes).toEqual([[ids.a]]);
    // b waits for company; c ends meanwhile and goes out with it.
    openC();
    await eventually(async () => writes.length > 1);
    expect(writes.map((w) => [...w].sort())).toEqual([[ids.a], [ids.b, ids.c].sort()]);
  });

  it('writes at once when a full batch waits', async () => {
    const { writes, ids, openC, unlock } = await busyWorker({
      outcomes: { delayMs: 30_000, batchSize: 2 },
      claims: { maxHeld: 3 },
    });
    await unlock();
    openC();
    // b and c make a batch of two: written long before the delay's 30 s.
    await eventually(async () => writes.length > 1, 10_000);
    expect(writes.map((w) => [...w].sort())).toEqual([[ids.a], [ids.b, ids.c].sort()]);
  });

  it.each([
    ['a cluster-wide cap', { clusterWideCap: 3 }, undefined],
    ['a per-group limit', { queues: [{ name: 'default', maxConcurrencyPerGroup: 3 }] }, 'g'],
  ] as const)(
    'writes at once the outcome of a task under %s, which frees room',
    async (_, appConfig, group) => {
      const { writes, ids, unlock } = await busyWorker({ outcomes: { delayMs: 30_000 } }, appConfig, group);
      await unlock();
      // b's outcome ended during a's write, but it holds room that other claims wait for: no 30 s wait.
      await eventually(async () => writes.length > 1, 10_000);
      expect(writes).toEqual([[ids.a], [ids.b]]);
    },
  );

  it('does not hold the outcomes of a stopping worker', async () => {
    const { worker: w, writes, ids, openC, unlock } = await busyWorker({ outcomes: { delayMs: 30_000 } });
    await unlock();
    expect(writes).toEqual([[ids.a]]);
    // c still runs, and stop() waits for it; b's outcome, waiting for company, goes out as the stop begins.
    const written = waitForEvent(
      w,
      'task:finished',
      (rows: { id: string }[]) => rows.some((r) => r.id === ids.b),
      10_000,
    );
    const stopping = w.stop();
    await written;
    const [row] = await t.query<{ status: string }>(
      'SELECT status FROM {{schema}}.horsies_tasks WHERE id = $1',
      [ids.b],
    );
    expect(row!.status).toBe('COMPLETED');
    openC();
    await stopping;
    expect(writes.flat().sort()).toEqual([ids.a, ids.b, ids.c].sort());
  });
});
