/**
 * Misconfiguration caught early and explained: no database, an unparsable URL, a server that refuses, a schema
 * not migrated (or behind). Each case in the library (typed errors) and on the command line (`horsies: <message>`
 * on stderr, exit code 1, the stack only with --verbose).
 */
import { createServer, connect } from 'node:net';
import type { Server, Socket } from 'node:net';
import { existsSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createApp, createWorker } from '../../src/index.js';
import {
  DatabaseNotConfiguredError,
  DatabaseUnavailableError,
  DatabaseUrlError,
  SchemaNotMigratedError,
} from '../../src/errors.js';
import { freePort } from '../../src/dev/EmbeddedServer.js';
import { Database } from '../../src/db/Database.js';
import { migrate } from '../../src/db/Migrator.js';
import { loadMigrations } from '../../src/db/migrationFiles.js';
import { latestMigrationVersion } from '../../src/db/schemaVersion.js';
import { runCli } from '../support/cli.js';
import { databaseUrl, freshSchemaName, testLogger } from '../support/db.js';
import { startProcess } from './support.js';

const TINY_APP = 'test/firsthour/fixtures/tinyApp.ts';
const LATEST = latestMigrationVersion();
const admin = new pg.Pool({ connectionString: databaseUrl(), max: 2 });
const schemas: string[] = [];
afterAll(async () => {
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

function schemaName(): string {
  const schema = freshSchemaName();
  schemas.push(schema);
  return schema;
}

/** A URL on a loopback port nothing listens on. */
async function refusedUrl(): Promise<{ url: string; port: number }> {
  const port = await freePort();
  return { url: `postgres://app:s3cret-pw@127.0.0.1:${port}/app`, port };
}

function expectOurWords(run: { code: number | null; stderr: string; stdout: string }, message: string): void {
  expect(run.code, run.stderr + run.stdout).toBe(1);
  expect(run.stderr).toContain(`horsies: ${message}`);
  expect(run.stderr).not.toMatch(/^\s+at /m); // no stack without --verbose
  expect(run.stderr + run.stdout).not.toContain('"level"'); // no pino line
}

describe('no database configured', () => {
  const message = 'no database configured: set DATABASE_URL, pass --database-url';

  it.each([
    [['tasks', 'list']],
    [['queues', 'list']],
    [['tasks', 'show', 'some-id']],
    [['migrate']],
    [['worker', TINY_APP]],
  ])('horsies %j names DATABASE_URL and --database-url and exits 1', async (args) => {
    const run = await runCli(args, { DATABASE_URL: '' });
    expectOurWords(run, message);
    expect(run.stderr).not.toContain('ECONNREFUSED');
  });

  it('send() rejects with DatabaseNotConfiguredError instead of trying localhost', async () => {
    vi.stubEnv('DATABASE_URL', '');
    try {
      const app = createApp({ logger: testLogger });
      const task = app.task({ name: 'x', input: z.object({}), handler: () => 1 });
      const error = await task.send({}).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DatabaseNotConfiguredError);
      expect((error as DatabaseNotConfiguredError).code).toBe('DATABASE_NOT_CONFIGURED');
      expect((error as Error).message).toContain('DATABASE_URL');
      expect((error as Error).message).toContain('--database-url');
      // A worker of such an app fails at creation: it cannot even listen.
      expect(() => createWorker(app)).toThrow(DatabaseNotConfiguredError);
      await app.close();
    } finally {
      vi.unstubAllEnvs();
    }
  });
});

describe('an unparsable database URL', () => {
  it('is refused by createApp, with the password masked', () => {
    const error = (() => {
      try {
        createApp({ databaseUrl: 'postgres://app:s3cret-pw@db:port/app' });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(DatabaseUrlError);
    expect((error as DatabaseUrlError).code).toBe('DATABASE_URL_INVALID');
    expect((error as Error).message).toContain('"postgres://app:****@db:port/app"');
    expect((error as Error).message).not.toContain('s3cret-pw');
  });

  it('plain text is said to be no URL (pg would read it as the host "base")', async () => {
    const run = await runCli(['queues', 'list'], { DATABASE_URL: 'my database' });
    expectOurWords(
      run,
      'cannot parse the database URL "my database": it does not start with postgres:// or postgresql://',
    );
    expect(run.stderr).not.toContain('ENOTFOUND');
  });

  it('a bad port is reported with the password masked', async () => {
    const run = await runCli(['migrate', '--database-url', 'postgres://app:s3cret-pw@db:99x/app']);
    expectOurWords(run, 'cannot parse the database URL "postgres://app:****@db:99x/app"');
    expect(run.stderr).not.toContain('s3cret-pw');
  });
});

describe('a Unix-socket connection string', () => {
  it('is taken in the forms libpq and pg read, and the messages name the socket', async () => {
    const forms = {
      'postgres://app@/app?host=/run/postgresql': '/run/postgresql:5432/app',
      'postgres://app:pw@%2Frun%2Fpostgresql:5433/app': '/run/postgresql:5433/app',
      'postgresql:///app?host=/run/postgresql': '/run/postgresql:5432/app',
    };
    for (const [url, target] of Object.entries(forms)) {
      const app = createApp({ databaseUrl: url, logger: testLogger });
      expect(app.db.target, url).toBe(target);
      await app.close();
    }
  });

  it("connects through the test server's socket, with a user and no host", async (ctx) => {
    const [setting] = (
      await admin.query<{ dirs: string }>(`SELECT current_setting('unix_socket_directories') AS dirs`)
    ).rows;
    const dir = setting!.dirs.split(',')[0]!.trim();
    const server = new URL(databaseUrl());
    const port = server.port || '5432';
    // A server elsewhere (DATABASE_URL) has no socket on this machine.
    if (!dir || !existsSync(`${dir}/.s.PGSQL.${port}`)) ctx.skip();
    const credentials = server.password ? `${server.username}:${server.password}` : server.username;
    const url = `postgres://${credentials}@${server.pathname}?host=${encodeURIComponent(dir)}&port=${port}`;
    const app = createApp({ databaseUrl: url, schema: schemaName(), logger: testLogger });
    try {
      await app.migrate();
      const { rows } = await app.db.pool.query<{ socket: boolean }>(
        'SELECT inet_server_addr() IS NULL AS socket',
      );
      expect(rows).toEqual([{ socket: true }]);
    } finally {
      await app.close();
    }
  });
});

describe('a database that refuses connections', () => {
  it('an operator command says where it tried, in our words', async () => {
    const { url, port } = await refusedUrl();
    const run = await runCli(['tasks', 'list', '--database-url', url]);
    expectOurWords(run, `cannot connect to the database at 127.0.0.1:${port}/app: connection refused`);
    expect(run.stderr).not.toContain('s3cret-pw');
  });

  it('--verbose adds the stack and the cause', async () => {
    const { url } = await refusedUrl();
    const run = await runCli(['queues', 'list', '--database-url', url, '--verbose']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('horsies: cannot connect to the database');
    expect(run.stderr).toMatch(/^\s+at /m);
    expect(run.stderr).toContain('caused by: Error: connect ECONNREFUSED');
  });

  it('a worker retries with backoff for --startup-timeout, then exits 1', async () => {
    const { url, port } = await refusedUrl();
    const worker = startProcess(['worker', TINY_APP, '--startup-timeout', '1500'], {
      DATABASE_URL: url,
      HORSIES_SCHEMA: schemaName(),
    });
    expect(await worker.exited).toBe(1);
    const output = worker.output();
    expect(output).toContain(
      'connection refused (ECONNREFUSED; is PostgreSQL running on this host and port?); retrying',
    );
    expect(output.match(/retrying/g)?.length ?? 0).toBeGreaterThan(1);
    expect(output).toContain(
      `horsies: cannot connect to the database at 127.0.0.1:${port}/app: connection refused (ECONNREFUSED;`,
    );
    expect(output).toMatch(/gave up after 1\.\d s of retries \(startupTimeoutMs 1500\)/);
    expect(output).not.toContain('worker started');
  });

  it('a worker that starts while the server is still down runs once it comes up within the window', async () => {
    const schema = schemaName();
    const migrated = new Database({ connectionString: databaseUrl(), schema, poolSize: 1 });
    await migrate(migrated);
    await migrated.end();
    const port = await freePort();
    const real = new URL(databaseUrl());
    const url = new URL(databaseUrl());
    url.hostname = '127.0.0.1';
    url.port = String(port);
    const worker = startProcess(['worker', TINY_APP, '--startup-timeout', '60000'], {
      DATABASE_URL: url.href,
      HORSIES_SCHEMA: schema,
    });
    await worker.waitFor(/retrying/);
    // The "server" comes up: a proxy to the real one on the port the worker keeps trying.
    const proxy = await startProxy(port, real.hostname, Number(real.port || 5432));
    try {
      await worker.waitFor(/"worker started"/);
      const app = createApp({ databaseUrl: databaseUrl(), schema, logger: testLogger });
      const double = app.task({ name: 'tiny.double', input: z.object({ n: z.number() }), handler: () => 0 });
      const result = await (await double.send({ n: 21 })).result({ timeoutMs: 20_000 });
      expect(result).toEqual({ ok: true, value: 42 });
      await app.close();
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toBe(0);
    } finally {
      await proxy.close();
    }
  });
});

describe('a wrong password', () => {
  it('reaches code as the DatabaseUnavailableError the CLI names, from sends, reads and transactions', async () => {
    const url = new URL(databaseUrl());
    url.password = 'not-the-password';
    const { host, pathname } = url;
    const app = createApp({ databaseUrl: url.href, logger: testLogger });
    const task = app.task({ name: 'pw.task', input: z.object({}), handler: () => 1 });
    try {
      const failures = [
        await task.send({}).catch((e: unknown) => e),
        await app.listTasks().catch((e: unknown) => e),
        await task.sendMany([{ input: {} }, { input: {} }]).catch((e: unknown) => e),
      ];
      for (const error of failures) {
        expect(error).toBeInstanceOf(DatabaseUnavailableError);
        expect(error).toMatchObject({ reason: '28P01', target: `${host}${pathname}` });
        expect((error as Error).message).toContain('password authentication failed');
        expect((error as Error).message).not.toContain('not-the-password');
      }
    } finally {
      await app.close();
    }
  });
});

describe('a schema not migrated', () => {
  it('send() says to run horsies migrate', async () => {
    const schema = schemaName();
    const app = createApp({ databaseUrl: databaseUrl(), schema, logger: testLogger });
    const task = app.task({ name: 'x', input: z.object({}), handler: () => 1 });
    const error = await task.send({}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SchemaNotMigratedError);
    expect(error).toMatchObject({ code: 'SCHEMA_NOT_MIGRATED', schema, version: 0, required: LATEST });
    expect((error as Error).message).toBe(
      `schema "${schema}" has no horsies tables: run \`horsies migrate\` (or start the worker with --migrate, or call app.migrate())`,
    );
    const many = await task.sendMany([{ input: {} }]).catch((e: unknown) => e);
    expect(many).toBeInstanceOf(SchemaNotMigratedError);
    await app.close();
  });

  it('operator commands and the worker exit 1 with the same advice; the worker does not wait', async () => {
    const schema = schemaName();
    const env = { DATABASE_URL: databaseUrl() };
    const advice = `schema "${schema}" has no horsies tables: run \`horsies migrate\``;
    expectOurWords(await runCli(['tasks', 'list', '--schema', schema], env), advice);
    expectOurWords(await runCli(['queues', 'list', '--schema', schema], env), advice);
    const started = Date.now();
    const worker = await runCli(['worker', TINY_APP, '--startup-timeout', '60000'], {
      ...env,
      HORSIES_SCHEMA: schema,
    });
    expect(worker.code).toBe(1);
    expect(worker.stderr).toContain(`horsies: ${advice}`);
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it('a schema behind the library is named with both versions', async () => {
    const schema = schemaName();
    const db = new Database({ connectionString: databaseUrl(), schema, poolSize: 1 });
    await migrate(db, loadMigrations().slice(0, -1));
    await db.end();
    const run = await runCli(['tasks', 'list', '--schema', schema], { DATABASE_URL: databaseUrl() });
    expectOurWords(
      run,
      `schema "${schema}" is at migration version ${LATEST - 1}, this library needs ${LATEST}: run \`horsies migrate\``,
    );
    const app = createApp({ databaseUrl: databaseUrl(), schema, logger: testLogger });
    const worker = createWorker(app, { startupTimeoutMs: 0 });
    await expect(worker.start()).rejects.toMatchObject({
      code: 'SCHEMA_NOT_MIGRATED',
      version: LATEST - 1,
      required: LATEST,
    });
    await app.close();
  });

  it('horsies worker --migrate migrates and starts', async () => {
    const schema = schemaName();
    const worker = startProcess(['worker', TINY_APP, '--migrate'], {
      DATABASE_URL: databaseUrl(),
      HORSIES_SCHEMA: schema,
    });
    await worker.waitFor(/"worker started"/);
    const { rows } = await admin.query(`SELECT max(version) AS v FROM "${schema}".horsies_schema_migrations`);
    expect(rows[0].v).toBe(LATEST);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });
});

describe('declared error codes', () => {
  const app = createApp({ databaseUrl: 'postgres://unused@127.0.0.1/unused', logger: testLogger });

  it('refuses codes that are not UPPER_SNAKE_CASE, built in, or repeated', () => {
    const define = (errors: string[]) => () =>
      app.task({ name: `codes.${errors.join('.')}`, input: z.object({}), errors, handler: () => 1 });
    expect(define(['lower_case'])).toThrow(/errors\.0: must be an UPPER_SNAKE_CASE code/);
    expect(define(['WAIT_TIMEOUT'])).toThrow(/errors\.0: is a built-in code, reserved for the library/);
    expect(define(['TWICE', 'TWICE'])).toThrow(/errors: must not repeat a code/);
  });

  it('refuses an errorCodes entry or a defaultErrorCode the task does not declare (code built in JavaScript)', () => {
    const untyped = app as unknown as { task(config: Record<string, unknown>): unknown };
    expect(() =>
      untyped.task({
        name: 'codes.mapped',
        input: z.object({}),
        errors: ['DECLARED'],
        errorCodes: [[RangeError, 'OTHER']],
        defaultErrorCode: 'ALSO_OTHER',
        handler: () => 1,
      }),
    ).toThrow(
      /errorCodes\.0: is not one of the task's errors \(got "OTHER"\)\n {2}- defaultErrorCode: is not one of the task's errors \(got "ALSO_OTHER"\)/,
    );
  });
});

describe('small things', () => {
  it('--version prints the package version', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    const run = await runCli(['--version']);
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(version);
  });

  it('app.migrate() rejects with DatabaseUnavailableError, saying where it tried', async () => {
    const { url, port } = await refusedUrl();
    const app = createApp({ databaseUrl: url, logger: testLogger });
    const error = await app.migrate().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseUnavailableError);
    expect(error).toMatchObject({ target: `127.0.0.1:${port}/app`, reason: 'ECONNREFUSED' });
    expect((error as Error).message).not.toContain('s3cret-pw');
    await app.close();
  });

  it('DatabaseUnavailableError carries the target and the reason', async () => {
    const { url, port } = await refusedUrl();
    const app = createApp({ databaseUrl: url, logger: testLogger });
    const worker = createWorker(app, { startupTimeoutMs: 0 });
    const error = await worker.start().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseUnavailableError);
    expect(error).toMatchObject({ target: `127.0.0.1:${port}/app`, reason: 'ECONNREFUSED' });
    await app.close();
  });
});

async function startProxy(
  port: number,
  host: string,
  targetPort: number,
): Promise<{ close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, host);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((res) => server.listen(port, '127.0.0.1', res));
  return {
    close: () =>
      new Promise<void>((res) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => res());
      }),
  };
}
