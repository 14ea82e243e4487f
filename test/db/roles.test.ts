/**
 * Least privilege: the roles of docs/security.md, created on the test server from `rolesSql`, each used through a
 * connection of its own. The migrator migrates; a producer sends tasks and starts a workflow, and reads their
 * results; a worker (with its maintenance leader, the scheduler and workflow stepping) drains them. Neither can
 * create a table, and the producer cannot change a task. Then the worker's statement and lock timeouts: a lock held
 * by another session fails the worker's statements with a timeout it reports, and it carries on once released.
 */
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { App } from '../../src/client/App.js';
import { checkDatabase } from '../../src/client/checks.js';
import { rolesSql } from '../../src/db/roles.js';
import { Vacuumer } from '../../src/recovery/Vacuumer.js';
import { createWorker } from '../../src/worker/Worker.js';
import { workflow } from '../../src/workflow/WorkflowDefinition.js';
import { runCli } from '../support/cli.js';
import { databaseUrl, eventually, freshSchemaName, testLogger } from '../support/db.js';
import { fastRecovery } from '../support/fixtures.js';

const schema = freshSchemaName();
const roles = { migrator: `${schema}_migrator`, worker: `${schema}_worker`, producer: `${schema}_producer` };
const admin = new pg.Pool({ connectionString: databaseUrl(), max: 4 });
const apps: App[] = [];
const pools: pg.Pool[] = [];

/** The test server's URL with another user (the roles log in with a password of the test's). */
function urlAs(user: string): string {
  const url = new URL(databaseUrl());
  url.username = user;
  url.password = 'horsies-test';
  return url.toString();
}

function appAs(role: keyof typeof roles, config: Record<string, unknown> = {}): App {
  const app = new App({ databaseUrl: urlAs(roles[role]), schema, logger: testLogger, ...config });
  apps.push(app);
  return app;
}

function poolAs(role: keyof typeof roles): pg.Pool {
  const pool = new pg.Pool({ connectionString: urlAs(roles[role]), max: 2 });
  pools.push(pool);
  return pool;
}

const errorCode = (promise: Promise<unknown>): Promise<string | undefined> =>
  promise.then(
    () => undefined,
    (e: { code?: string }) => e.code,
  );

beforeAll(async () => {
  const { setup, grants } = rolesSql(schema, roles);
  await admin.query(setup);
  // For the test, the group roles log in themselves (in production, login roles are given the groups).
  for (const name of Object.values(roles))
    await admin.query(`ALTER ROLE "${name}" LOGIN PASSWORD 'horsies-test'`);
  await appAs('migrator').migrate();
  await poolAs('migrator').query(grants);
});

afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
  await Promise.all(pools.map((p) => p.end()));
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  for (const name of Object.values(roles)) {
    await admin.query(`DROP OWNED BY "${name}"`);
    await admin.query(`DROP ROLE "${name}"`);
  }
  await admin.end();
});

/** The app's tasks, defined the same way on the producer's app and the worker's. */
function defineTasks(app: App) {
  const add = app.task({
    name: 'roles.add',
    input: z.object({ a: z.number(), b: z.number() }),
    retry: { maxRetries: 1, retryOn: ['FLAKY'], baseDelayMs: 0 },
    handler: ({ a, b }) => a + b,
  });
  const wf = workflow(app, 'roles.sum', { params: z.object({ a: z.number() }) });
  const first = wf.node(add, { input: { a: wf.params.a, b: 1 } });
  const second = wf.node(add, { input: { a: first.result, b: 10 } });
  return { add, sum: wf.build({ output: second }) };
}

describe('least-privilege roles', () => {
  it('a producer sends and reads, a worker drains (with its leader, schedules and workflows), neither changes the schema', async () => {
    const producer = appAs('producer');
    const sent = defineTasks(producer);
    // Every warning and error the worker logs, to find a statement its role may not run (maintenance and the
    // scheduler log their failures rather than emit them as worker errors).
    const logged: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) });
    const workerApp = appAs('worker', { recovery: fastRecovery, logger });
    const served = defineTasks(workerApp);
    workerApp.schedule({
      name: 'roles-tick',
      task: served.add,
      input: { a: 0, b: 0 },
      pattern: { kind: 'interval', seconds: 1 },
    });

    const handles = await Promise.all(Array.from({ length: 20 }, (_, i) => sent.add.send({ a: i, b: i })));
    const bulk = await sent.add.sendMany(Array.from({ length: 200 }, (_, i) => ({ input: { a: i, b: 1 } })));
    const run = await sent.sum.start({ a: 5 });

    const worker = createWorker(workerApp, { concurrency: 4, pollIntervalMs: 200 });
    const errors: unknown[] = [];
    worker.on('worker:error', (e) => errors.push(e));
    const maintained = new Set<string>();
    worker.on('maintenance:ran', (service) => maintained.add(service));
    await worker.start();
    try {
      for (const [i, handle] of handles.entries()) {
        expect(await handle.result({ timeoutMs: 20_000 })).toEqual({ ok: true, value: 2 * i });
      }
      for (const [i, handle] of bulk.entries()) {
        expect(await handle.result({ timeoutMs: 20_000 })).toEqual({ ok: true, value: i + 1 });
      }
      expect(await run.result({ timeoutMs: 20_000 })).toEqual({ ok: true, value: 16 });
      // The schedule fired (the maintenance leader runs the scheduler) and its task completed.
      await eventually(async () => {
        const rows = await admin.query(
          `SELECT status FROM "${schema}".horsies_tasks t
           JOIN "${schema}".horsies_schedule_state s ON s.last_task_id = t.id WHERE t.status = 'COMPLETED'`,
        );
        return rows.rowCount! > 0;
      });
      // The leader's maintenance ran under the worker role: every service, and the scheduler.
      await eventually(async () =>
        ['reaper', 'expirer', 'retainer', 'workflow-recovery', 'scheduler', 'vacuum'].every((name) =>
          maintained.has(name),
        ),
      );
    } finally {
      await worker.stop();
    }
    expect(errors).toEqual([]);
    expect(logged.filter((line) => /permission denied|42501/.test(line))).toEqual([]);

    // 42501: insufficient_privilege.
    const workerPool = poolAs('worker');
    const producerPool = poolAs('producer');
    expect(await errorCode(workerPool.query(`CREATE TABLE "${schema}".stray (id int)`))).toBe('42501');
    expect(await errorCode(workerPool.query(`DROP TABLE "${schema}".horsies_tasks`))).toBe('42501');
    expect(await errorCode(producerPool.query(`CREATE TABLE "${schema}".stray (id int)`))).toBe('42501');
    expect(
      await errorCode(
        producerPool.query(`UPDATE "${schema}".horsies_tasks SET status = 'CANCELLED' WHERE id = $1`, [
          handles[0]!.id,
        ]),
      ),
    ).toBe('42501');
    expect(await errorCode(producerPool.query(`DELETE FROM "${schema}".horsies_tasks`))).toBe('42501');
    // What the producer may do: read its tasks.
    const readable = await producerPool.query(`SELECT count(*)::int AS n FROM "${schema}".horsies_tasks`);
    expect(readable.rows[0].n).toBeGreaterThanOrEqual(222);
  });
});

describe('vacuum of the task table', () => {
  it('the worker role vacuums it (PostgreSQL 17 and later); a role that may not says so once and goes on', async () => {
    const version = Number((await admin.query('SHOW server_version_num')).rows[0].server_version_num);
    const always = { threshold: 0, scaleFactor: 0 };
    const byWorker = await new Vacuumer(appAs('worker').db, always, testLogger).runOnce();
    expect(byWorker.vacuumed).toBe(version >= 170_000);

    const logged: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) });
    const byProducer = new Vacuumer(appAs('producer').db, always, logger);
    expect((await byProducer.runOnce()).vacuumed).toBe(false);
    expect((await byProducer.runOnce()).vacuumed).toBe(false);
    expect(logged.filter((line) => line.includes('may not vacuum'))).toHaveLength(1);

    // horsies check --live says so for the role it connects as, when the app runs the vacuum check.
    const vacuumWarnings = async (role: 'worker' | 'producer', vacuumCheck: boolean) =>
      (await checkDatabase(appAs(role).db, { vacuumCheck })).problems.filter((p) =>
        p.message.includes('may not vacuum'),
      );
    expect(await vacuumWarnings('producer', true)).toEqual([
      { area: 'database', severity: 'warning', message: expect.stringContaining('MAINTAIN') },
    ]);
    expect(await vacuumWarnings('producer', false)).toEqual([]);
    expect(await vacuumWarnings('worker', true)).toHaveLength(version >= 170_000 ? 0 : 1);
  });
});

describe('horsies roles', () => {
  it('prints the same SQL, with the role names given', async () => {
    const result = await runCli(['roles', '--schema', 'jobs', '--worker', 'jobs_runner']);
    expect(result.code).toBe(0);
    const { setup, grants } = rolesSql('jobs', {
      migrator: 'jobs_migrator',
      worker: 'jobs_runner',
      producer: 'jobs_producer',
    });
    expect(result.stdout).toBe(`${setup}\n${grants}\n`);
  });
});

describe('statement and lock timeouts', () => {
  it('a lock held elsewhere fails the worker statements that need it with a timeout; nothing is lost or doubled, and the worker carries on', async () => {
    const app = appAs('worker', { lockTimeoutMs: 300, statementTimeoutMs: 5_000 });
    const gate = { open: (): void => undefined };
    const opened = new Promise<void>((resolve) => (gate.open = resolve));
    const gated = app.task({
      name: 'timeouts.gated',
      input: z.object({}),
      handler: async () => {
        await opened;
        return 'done';
      },
    });
    const plain = app.task({
      name: 'timeouts.plain',
      input: z.object({ n: z.number() }),
      handler: ({ n }) => n,
    });
    const worker = createWorker(app, { concurrency: 4, pollIntervalMs: 200 });
    const errors: { code?: string }[] = [];
    worker.on('worker:error', (e) => errors.push(e as { code?: string }));
    await worker.start();
    const holder = await admin.connect();
    try {
      const shown = await app.db.pool.query('SELECT current_setting($1) AS s, current_setting($2) AS l', [
        'statement_timeout',
        'lock_timeout',
      ]);
      expect(shown.rows[0]).toEqual({ s: '5s', l: '300ms' });
      const task = await gated.send({});
      await eventually(async () => (await task.info())?.status === 'RUNNING');

      // A row lock on the running task: its finish must wait for it.
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${schema}".horsies_tasks WHERE id = $1 FOR UPDATE`, [task.id]);
      gate.open();
      await eventually(async () => errors.some((e) => e.code === '55P03'));
      expect((await task.info())?.status).toBe('RUNNING');
      await holder.query('ROLLBACK');
      expect(await task.result({ timeoutMs: 15_000 })).toEqual({ ok: true, value: 'done' });

      // The whole table locked: claims and heartbeats time out; tasks sent meanwhile wait, then run once.
      const before = errors.length;
      await holder.query('BEGIN');
      await holder.query(`LOCK TABLE "${schema}".horsies_tasks IN ACCESS EXCLUSIVE MODE`);
      const sends = appAs('producer').task({
        name: 'timeouts.plain',
        input: z.object({ n: z.number() }),
        handler: ({ n }) => n,
      });
      // Held until the worker's polling claim has timed out on it (a send would wait on the lock too).
      await eventually(async () => errors.slice(before).some((e) => e.code === '55P03'));
      await holder.query('ROLLBACK');
      const after = await Promise.all(Array.from({ length: 10 }, (_, n) => sends.send({ n })));
      for (const [n, handle] of after.entries()) {
        expect(await handle.result({ timeoutMs: 15_000 })).toEqual({ ok: true, value: n });
      }
      void plain;

      const attempts = await admin.query<{ task_id: string; n: number }>(
        `SELECT task_id, count(*)::int AS n FROM "${schema}".horsies_task_attempts
         WHERE task_id = ANY($1::text[]) GROUP BY task_id`,
        [[task.id, ...after.map((h) => h.id)]],
      );
      expect(attempts.rows.map((r) => r.n)).toEqual(Array(11).fill(1));
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      await worker.stop();
    }
  });
});
