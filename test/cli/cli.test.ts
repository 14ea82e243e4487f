/** The `horsies` command line, run as real processes. */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadMigrations } from '../../src/db/migrationFiles.js';
import { runCli } from '../support/cli.js';
import { databaseUrl, eventually, freshSchemaName, useTestSchema } from '../support/db.js';
import { startWorkerProcess } from '../support/processes.js';

const ROOT = resolve(import.meta.dirname, '../..');
const t = await useTestSchema();
await t.query('CREATE TABLE {{schema}}.test_runs (task_id text NOT NULL, worker_pid int NOT NULL)');

describe('horsies migrate', () => {
  const schema = freshSchemaName();
  const pool = new pg.Pool({ connectionString: databaseUrl(), max: 2 });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  });

  it('applies the migrations once when many processes start together', async () => {
    const runs = await Promise.all(
      Array.from({ length: 6 }, () =>
        runCli(['migrate', '--schema', schema], { DATABASE_URL: databaseUrl() }),
      ),
    );
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    const versions = loadMigrations().map((m) => m.version);
    const latest = Math.max(...versions);
    const appliedBy = runs.filter((r) => r.stdout.includes(`applied ${versions.join(', ')}`));
    expect(appliedBy).toHaveLength(1);
    expect(runs.filter((r) => r.stdout.includes(`already at version ${latest}`))).toHaveLength(5);
    const { rows } = await pool.query(
      `SELECT version FROM "${schema}".horsies_schema_migrations ORDER BY version`,
    );
    expect(rows).toEqual(versions.map((version) => ({ version })));
    const { rows: tables } = await pool.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`,
      [schema],
    );
    expect(tables.map((r) => r.table_name)).toEqual([
      'horsies_group_limits',
      'horsies_heartbeats',
      'horsies_idle_slots',
      'horsies_leaders',
      'horsies_queue_state',
      'horsies_rate_limiters',
      'horsies_schedule_state',
      'horsies_schema_migrations',
      'horsies_schema_routines',
      'horsies_task_attempts',
      'horsies_task_steps',
      'horsies_tasks',
      'horsies_worker_states',
      'horsies_worker_stops',
      'horsies_workflow_signals',
      'horsies_workflow_tasks',
      'horsies_workflows',
    ]);
  });

  it('says what is wrong without a database', async () => {
    const run = await runCli(['migrate'], { DATABASE_URL: '' });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('set DATABASE_URL');
  });

  it('rejects a bad schema name', async () => {
    const run = await runCli(['migrate', '--schema', 'Bad-Name'], { DATABASE_URL: databaseUrl() });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('schema');
  });
});

describe('horsies worker', () => {
  it('on SIGTERM stops claiming, finishes the running task and exits 0', async () => {
    const worker = startWorkerProcess({ databaseUrl: databaseUrl(), schema: t.schema }, [
      '--concurrency',
      '1',
    ]);
    await worker.ready;
    const app = t.app();
    const sleepy = app.task({
      name: 'sleepy',
      input: (await import('zod')).z.object({ ms: (await import('zod')).z.number() }),
      handler: () => 'unused',
    });
    const running = await sleepy.send({ ms: 1500 });
    await eventually(async () => (await app.getTask(running.id))?.status === 'RUNNING');
    const waiting = await sleepy.send({ ms: 0 });
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect((await app.getTask(running.id))?.status).toBe('COMPLETED');
    expect((await app.getTask(waiting.id))?.status).toBe('PENDING');
    const runs = await t.query('SELECT task_id FROM {{schema}}.test_runs WHERE task_id = $1', [running.id]);
    expect(runs).toHaveLength(1);
    expect(worker.output()).toContain('worker stopped');
  });

  it('says it runs in a plain line on stderr, also with its logs silent', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'worker', 'test/fixtures/app.ts'],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          DATABASE_URL: databaseUrl(),
          HORSIES_SCHEMA: t.schema,
          HORSIES_LOG_LEVEL: 'silent',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
    const line = await new Promise<string>((res, rej) => {
      child.stderr.on('data', (c: Buffer) => {
        stderr += c.toString();
        const match = /^horsies worker: running .*$/m.exec(stderr);
        if (match) res(match[0]);
      });
      void exited.then((code) => rej(new Error(`exited ${code} first:\n${stderr}`)));
    });
    expect(line).toMatch(
      new RegExp(
        `^horsies worker: running \\d+ task\\(s\\) \\(.+\\) on queue\\(s\\) .+; schema ${t.schema} \\(SIGINT or SIGTERM stops it\\)$`,
      ),
    );
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stdout).toBe('');
  });

  it('takes a SIGINT doubled by npx as one: it drains and exits 0', async () => {
    const worker = startWorkerProcess({ databaseUrl: databaseUrl(), schema: t.schema });
    await worker.ready;
    // The terminal's Ctrl-C, and npm's copy of it under npx.
    worker.child.kill('SIGINT');
    worker.child.kill('SIGINT');
    expect(await worker.exited, worker.output()).toBe(0);
    expect(worker.output()).toContain('worker stopped');
  });

  it('fails clearly when the module does not exist', async () => {
    const run = await runCli(['worker', 'no/such/module.ts'], { DATABASE_URL: databaseUrl() });
    expect(run.code).toBe(1);
    expect(run.stderr + run.stdout).toContain('module not found');
  });

  it('rejects a bad option before connecting', async () => {
    const run = await runCli(['worker', 'test/fixtures/app.ts', '--concurrency', '0'], {
      DATABASE_URL: databaseUrl(),
    });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('must be a positive integer');
  });
});
