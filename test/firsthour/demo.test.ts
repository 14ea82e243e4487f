/**
 * The README's first command, `npm run demo`, on a database the test setup gives it: it sends 2,000 tasks, runs
 * them with two workers and exits 0 with every outcome as the demo's tasks decide, also over a demo schema that
 * another version of horsies left. Against a database that refuses connections it says so in one line (no stack)
 * and exits 1.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/EmbeddedServer.js';
import { databaseUrl } from '../support/db.js';
import { startProcess } from './support.js';

afterAll(async () => {
  const admin = new pg.Client(databaseUrl());
  await admin.connect();
  await admin.query('DROP SCHEMA IF EXISTS horsies_demo CASCADE');
  await admin.end();
});

function demo(url: string): ReturnType<typeof startProcess> {
  return startProcess(
    ['--import', 'tsx', 'examples/demo.ts'],
    { DATABASE_URL: url, HORSIES_LOG_LEVEL: 'warn' },
    { raw: true },
  );
}

describe('npm run demo', () => {
  it('sends 2,000 tasks, runs every one and exits 0 with the outcomes its tasks decide', async () => {
    const run = demo(databaseUrl());
    expect(await run.exited, run.output()).toBe(0);
    const output = run.output();
    expect(output).toContain('sent 2000 tasks');
    expect(output).toContain('2000/2000 finished');
    // Charges over 90,000 cents fail with the task's own code: 49 of the 500.
    expect(output).toContain('by status:   {"COMPLETED":1951,"FAILED":49}');
    expect(output).toContain('attempts:    2000 rows');
    expect(output).toContain('"code":"LIMIT_EXCEEDED"');
  }, 120_000);

  it('drops a demo schema that another version of horsies left, and runs', async () => {
    const admin = new pg.Client(databaseUrl());
    await admin.connect();
    try {
      await admin.query('CREATE SCHEMA IF NOT EXISTS horsies_demo');
      await admin.query(
        `CREATE TABLE IF NOT EXISTS horsies_demo.horsies_schema_migrations
           (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      await admin.query(
        `INSERT INTO horsies_demo.horsies_schema_migrations (version, name) VALUES (9999, 'later')`,
      );
    } finally {
      await admin.end();
    }
    const run = demo(databaseUrl());
    expect(await run.exited, run.output()).toBe(0);
    expect(run.output()).toContain('by status:   {"COMPLETED":1951,"FAILED":49}');
  }, 120_000);

  it('says in one line that the database refuses connections, and exits 1', async () => {
    const port = await freePort();
    const run = demo(`postgres://app:s3cret-pw@127.0.0.1:${port}/app`);
    expect(await run.exited, run.output()).toBe(1);
    const output = run.output();
    expect(output).toContain(
      `demo: cannot connect to the database at 127.0.0.1:${port}/app: connection refused (ECONNREFUSED;`,
    );
    expect(output).not.toMatch(/^\s+at /m);
    expect(output).not.toContain('s3cret-pw');
  }, 60_000);
});
