/**
 * Test database helpers. Each test file gets a fresh schema (migrated), dropped after the file unless a test
 * failed, in which case it is kept and its name printed so the rows can be inspected.
 */
import { randomBytes } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, afterEach, expect, inject } from 'vitest';
import type { AppConfig } from '../../src/client/config.js';
import { App } from '../../src/client/App.js';
import type { TaskDefinition } from '../../src/client/TaskDefinition.js';
import type { Database } from '../../src/db/Database.js';
import { migrate } from '../../src/db/Migrator.js';
import type { Statement } from '../../src/db/sql.js';
import { loadMigrations } from '../../src/db/migrationFiles.js';
import type { Worker } from '../../src/worker/Worker.js';

/** Connection string of the test server. */
export function databaseUrl(): string {
  return inject('databaseUrl');
}

/** A fresh schema name, short enough for channel names. */
export function freshSchemaName(): string {
  return `t_${randomBytes(6).toString('hex')}`;
}

/** A quiet logger for tests (set HORSIES_TEST_LOG=debug to see worker logs). */
export const testLogger = pino({ level: process.env.HORSIES_TEST_LOG ?? 'silent' });

export interface TestSchema {
  schema: string;
  /** Connection string of the database the schema is in. */
  url: string;
  pool: pg.Pool;
  /** Creates an app on this schema (closed after the file). */
  app(config?: AppConfig): App;
  /** Runs SQL with `{{schema}}` replaced by the quoted schema name. */
  query<R extends pg.QueryResultRow = Record<string, unknown>>(sql: string, values?: unknown[]): Promise<R[]>;
  /** How many of these tasks are in each status (statuses none is in are left out). */
  statusCounts(ids: string[]): Promise<Record<string, number>>;
}

/**
 * Creates and migrates a schema for the current test file, with cleanup hooks registered. With `ownDatabase`, the
 * schema is in a database of its own, created for the file and dropped after it: what vacuum may remove depends on
 * the oldest snapshot of any session in the same database, and the other test files' transactions would hold it.
 * With `migratedTo`, the schema is migrated up to that version only (a test of a later migration applies the rest).
 * With `unmigrated`, nothing is created: the test migrates (another release's migrator, for one).
 */
export async function useTestSchema(
  options: { ownDatabase?: boolean; migratedTo?: number; unmigrated?: boolean } = {},
): Promise<TestSchema> {
  const schema = freshSchemaName();
  let url = databaseUrl();
  let dropDatabase = async (): Promise<void> => {};
  if (options.ownDatabase) {
    const database = schema;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${database}"`).finally(() => admin.end());
    const own = new URL(url);
    own.pathname = `/${database}`;
    url = own.toString();
    dropDatabase = async () => {
      const dropper = new pg.Client({ connectionString: databaseUrl() });
      await dropper.connect();
      await dropper.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`).finally(() => dropper.end());
    };
  }
  const pool = new pg.Pool({ connectionString: url, max: 20 });
  const apps: App[] = [];
  let failed = false;
  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail') failed = true;
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    if (failed) {
      console.error(
        `test schema kept for inspection: ${schema}${options.ownDatabase ? ` (database ${schema})` : ''}`,
      );
    } else if (!options.ownDatabase) {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
    await pool.end();
    // The file's own database goes with its schema.
    if (!failed) await dropDatabase();
  });
  const makeApp = (config: AppConfig = {}): App => {
    const app = new App({ databaseUrl: url, schema, logger: testLogger, ...config });
    apps.push(app);
    return app;
  };
  const { migratedTo } = options;
  if (migratedTo !== undefined)
    // As a release of that version left it: its numbered migrations, without the routine files of this one.
    await migrate(
      makeApp().db,
      loadMigrations().filter((m) => m.version <= migratedTo),
      [],
    );
  else if (!options.unmigrated) await makeApp().migrate();
  const query = async <R extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<R[]> =>
    (await pool.query<R>(sql.replaceAll('{{schema}}', `"${schema}"`), values)).rows;
  return {
    schema,
    url,
    pool,
    app: makeApp,
    query,
    statusCounts: async (ids) => {
      const rows = await query<{ status: string; n: number }>(
        'SELECT status, count(*)::int AS n FROM {{schema}}.horsies_tasks WHERE id = ANY ($1) GROUP BY status',
        [ids],
      );
      return Object.fromEntries(rows.map((r) => [r.status, r.n]));
    },
  };
}

/** Resolves on the first `event` of `emitter` whose args satisfy `match`; rejects after `timeoutMs`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function waitForEvent<T extends Record<keyof T, any[]>, K extends keyof T & string>(
  emitter: EventEmitter<T>,
  event: K,
  match: (...args: T[K]) => boolean = () => true,
  timeoutMs = 10_000,
): Promise<T[K]> {
  // The typed overloads of EventEmitter<T> do not accept a generic key; use the untyped view.
  const untyped = emitter as unknown as EventEmitter;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      untyped.off(event, handler);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${event}`));
    }, timeoutMs);
    function handler(...args: unknown[]): void {
      if (!match(...(args as T[K]))) return;
      clearTimeout(timer);
      untyped.off(event, handler);
      resolve(args as T[K]);
    }
    untyped.on(event, handler);
  });
}

/** Polls `check` until it returns a value other than undefined/false; for conditions that have no event. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Records every task `worker` starts from now on. The returned function resolves once the given task has
 * started (also when it started before the call), so a test can send first and wait after without a race.
 */
export function trackStarts(worker: {
  on(event: 'task:started', fn: (id: string) => void): unknown;
}): (id: string, timeoutMs?: number) => Promise<void> {
  const started = new Set<string>();
  const waiters = new Map<string, () => void>();
  worker.on('task:started', (id) => {
    started.add(id);
    waiters.get(id)?.();
  });
  return (id, timeoutMs = 10_000) =>
    new Promise<void>((resolve, reject) => {
      if (started.has(id)) return resolve();
      const timer = setTimeout(
        () => reject(new Error(`task ${id} did not start within ${timeoutMs} ms`)),
        timeoutMs,
      );
      waiters.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
    });
}

/** Sends `count` tasks of `task` with inputs `{ i }`, runs `worker` until each has succeeded, and stops it. */
export async function drainWith<S extends StandardSchemaV1<{ i: number }>, R>(
  worker: Worker,
  task: TaskDefinition<S, R>,
  count: number,
): Promise<void> {
  const handles = await task.sendMany(Array.from({ length: count }, (_, i) => ({ input: { i } })));
  await worker.start();
  try {
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 30_000 })));
    expect(results.every((r) => r.ok)).toBe(true);
  } finally {
    await worker.stop();
  }
}

/** Counts the statements `db` runs from now on, by name. */
export function countStatements(db: Database): Map<string, number> {
  const sent = new Map<string, number>();
  const run = db.run.bind(db);
  db.run = (<P, R>(stmt: Statement<P, R>, params: P, on?: Parameters<typeof run>[2]) => {
    sent.set(stmt.name, (sent.get(stmt.name) ?? 0) + 1);
    return run(stmt, params, on);
  }) as typeof db.run;
  return sent;
}
