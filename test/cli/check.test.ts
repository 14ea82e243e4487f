/**
 * `horsies check <module> [--live]`: every problem at once, exit code 0 or 1; the live checks against the test
 * database (a schema behind its migrations, a NOTIFY that never reaches its LISTEN); the same checks at a
 * worker's start.
 */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { z } from 'zod';
import { checkDatabase, notifyProblems } from '../../src/client/checks.js';
import { createWorker } from '../../src/worker/Worker.js';
import { runCli } from '../support/cli.js';
import { databaseUrl, freshSchemaName, useTestSchema } from '../support/db.js';

const t = await useTestSchema();

const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  HORSIES_SCHEMA: t.schema,
  HORSIES_LOG_LEVEL: 'silent',
  ...extra,
});

describe('horsies check', () => {
  it('passes a sound app, live: database, migrations, routines and NOTIFY checked, no worker a warning', async () => {
    const result = await runCli(['check', 'test/fixtures/app.ts', '--live'], env());
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^tasks\s+ok\s+\d+ tasks$/m);
    // The fixture's exported workflow definitions are found among its exports.
    expect(result.stdout).toMatch(/^workflows\s+ok\s+.*fixture-parent/m);
    expect(result.stdout).toMatch(
      /^database\s+ok\s+horsies \d+\.\d+\.\d+, schema t_\w+ at migration \d+, routines as defined/m,
    );
    expect(result.stdout).toMatch(/^notify\s+ok\s+a NOTIFY reached a LISTEN$/m);
    expect(result.stdout).toMatch(/^workers\s+warning\s+no live worker serves record \(queue default\)/m);
    expect(result.stdout).toMatch(/^0 errors, 1 warning$/m);
  });

  it('lists every problem of the schedules and tasks at once, and exits 1', async () => {
    const result = await runCli(['check', 'test/fixtures/checkApps.ts', '--json'], env());
    expect(result.code).toBe(1);
    const report = JSON.parse(result.stdout) as {
      problems: { area: string; severity: string; message: string }[];
    };
    expect(report.problems.map((p) => [p.area, p.severity])).toEqual([
      ['tasks', 'warning'],
      ['schedules', 'error'],
      ['schedules', 'error'],
    ]);
    expect(report.problems[0]!.message).toContain('task "slow" may run 120000 ms');
    expect(report.problems[1]!.message).toContain('schedules.0.task: is not a task of the app');
    expect(report.problems[2]!.message).toContain('schedules.1.pattern.at');
  });

  it('lists every bad field of an app config the module could not build', async () => {
    const result = await runCli(
      ['check', 'test/fixtures/checkApps.ts'],
      env({ HORSIES_TEST_CHECK: 'config' }),
    );
    expect(result.code).toBe(1);
    const lines = result.stdout.split('\n').filter((l) => l.startsWith('config'));
    expect(lines).toHaveLength(3);
    expect(lines.join('\n')).toMatch(/poolSize[\s\S]*queues\.0[\s\S]*capMode/);
    expect(result.stdout).toMatch(/^3 errors, 0 warnings$/m);
  });

  it('says a missing database is a config error, and an unreachable one a database error', async () => {
    const none = await runCli(['check', 'test/fixtures/checkApps.ts'], env({ DATABASE_URL: undefined }));
    expect(none.code).toBe(1);
    expect(none.stdout).toMatch(/^config\s+error\s+no database: set DATABASE_URL/m);
    const down = await runCli(
      ['check', 'test/fixtures/app.ts', '--live'],
      env({ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }),
    );
    expect(down.code).toBe(1);
    expect(down.stdout).toMatch(/^database\s+error\s+cannot query the database/m);
    // Nothing past the database was checked, so nothing there is reported as passed.
    expect(down.stdout).not.toMatch(/^notify/m);
  });
});

describe('live checks', () => {
  it('reports a schema behind its migrations, naming horsies migrate', async () => {
    const schema = freshSchemaName();
    const app = t.app({ schema });
    try {
      const { problems } = await checkDatabase(app.db);
      expect(problems).toEqual([
        expect.objectContaining({
          area: 'database',
          severity: 'error',
          message: expect.stringMatching(/is at migration 0, this library needs \d+: run horsies migrate/),
        }),
      ]);
    } finally {
      await t.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
  });

  it('says so when a NOTIFY does not reach the LISTEN connection (as behind a transaction-mode pooler)', async () => {
    // Notifications stay within one database: a LISTEN on another one never hears the pool's NOTIFY, which is
    // what a transaction-mode pooler does to a LISTEN (its session is gone once the statement's transaction ends).
    const other = 'horsies_check_elsewhere';
    await t.pool.query(`CREATE DATABASE ${other}`).catch((error: { code?: string }) => {
      if (error.code !== '42P04') throw error;
    });
    const url = new URL(databaseUrl());
    url.pathname = `/${other}`;
    const app = t.app();
    const lost = await notifyProblems(app.db, 300, { connectionString: url.toString() });
    expect(lost).toEqual([
      expect.objectContaining({
        area: 'notify',
        severity: 'error',
        message: expect.stringContaining('transaction-mode pooler (PgBouncer pool_mode=transaction)'),
      }),
    ]);
    expect(await notifyProblems(app.db, 3_000)).toEqual([]);
    const unreachable = await notifyProblems(app.db, 300, {
      connectionString: 'postgres://nobody@127.0.0.1:1/x',
    });
    expect(unreachable[0]?.message).toBe('could not open a LISTEN connection to the database');
  });
});

describe('at a worker start', () => {
  it('logs what horsies check warns about, and starts', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const app = t.app({ logger });
    app.task({ name: 'w.slow', input: z.object({}), timeoutMs: 60_000, handler: () => null });
    const worker = createWorker(app, { shutdown: { drainTimeoutMs: 1_000 } });
    await worker.start();
    await worker.stop();
    const warnings = lines.map((l) => JSON.parse(l) as { level: number; check?: string; msg: string });
    expect(warnings).toContainEqual(
      expect.objectContaining({
        level: 40,
        check: 'tasks',
        msg: expect.stringContaining(
          'task "w.slow" may run 60000 ms but a worker lets runs finish for 1000 ms',
        ),
      }),
    );
  });
});
