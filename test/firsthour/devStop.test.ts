/**
 * Ctrl-C on `horsies dev` with its embedded server: the terminal sends SIGINT to the whole foreground process group
 * (`horsies dev` and its worker child; under `npx`, npm forwards a second one). The server must not take it: the
 * worker drains, writes the outcomes of the tasks it was running, and only then does `horsies dev` stop the server,
 * saying so in a few plain lines.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { z } from 'zod';
import { startEmbeddedServer } from '../../src/dev/EmbeddedServer.js';
import { createApp } from '../../src/index.js';
import { testLogger } from '../support/db.js';
import { startProcess } from './support.js';

const ROOT = resolve(import.meta.dirname, '../..');
// The module sits inside the repository (so zod resolves) in a git-ignored folder; the server's data in /tmp.
const folder = join(ROOT, '.scratch', `dev-stop-${process.pid}`);
const dataDir = mkdtempSync(join(tmpdir(), 'horsies-dev-stop-'));
// Run as root, the server runs as the system user "postgres", which must enter the folder.
chmodSync(dataDir, 0o755);
afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
});

const TASKS = 4;

it('Ctrl-C drains the worker, then stops the embedded server, in a few plain lines', async () => {
  mkdirSync(folder, { recursive: true });
  writeFileSync(
    join(folder, 'app.ts'),
    `import { z } from 'zod';
import { createApp } from ${JSON.stringify(join(ROOT, 'src/index.ts'))};
export const app = createApp({ queues: ['default'] });
export const slow = app.task({
  name: 'dev.slow',
  input: z.object({ n: z.number() }),
  handler: async ({ n }) => {
    console.log('started ' + n);
    // Long enough to be running when the signal comes.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return n;
  },
});
`,
  );
  const dev = startProcess(
    ['dev', join(folder, 'app.ts'), '--data-dir', dataDir, '--no-dashboard', '--no-watch'],
    { DATABASE_URL: '', HORSIES_SCHEMA: '', HORSIES_LOG_LEVEL: 'warn' },
    { group: true },
  );
  const [, url] = await dev.waitFor(/DATABASE_URL=(postgres:\/\/\S+)\)/, 120_000);
  await dev.waitFor(/worker running 1 task\(s\) \(dev\.slow\)/, 60_000);

  const app = createApp({ databaseUrl: url, schema: 'horsies', logger: testLogger });
  const slow = app.task({ name: 'dev.slow', input: z.object({ n: z.number() }), handler: () => 0 });
  await slow.sendMany(Array.from({ length: TASKS }, (_, i) => ({ input: { n: i + 1 } })));
  await app.close();
  for (let n = 1; n <= TASKS; n += 1) await dev.waitFor(new RegExp(`started ${n}\\b`));

  const before = dev.output().length;
  const pid = dev.child.pid as number;
  process.kill(-pid, 'SIGINT'); // the terminal's Ctrl-C: the whole group
  process.kill(pid, 'SIGINT'); // npm's copy of it, under npx
  expect(await dev.exited, dev.output()).toBe(0);

  const after = dev
    .output()
    .slice(before)
    .split('\n')
    .filter((line) => line.trim() !== '');
  expect(after.length, after.join('\n')).toBeLessThanOrEqual(3);
  for (const line of after) expect(line, after.join('\n')).toMatch(/^horsies dev: /);
  expect(after.at(-1)).toMatch(
    /stopped: the worker wrote the outcomes of 4 task\(s\), then PostgreSQL stopped/,
  );

  // The tasks that ran at the signal finished, and their outcomes were written before the server stopped.
  const server = await startEmbeddedServer({ dataDir: join(dataDir, 'pg'), database: 'horsies_dev' });
  try {
    const check = new pg.Client(server.url);
    await check.connect();
    const { rows } = await check.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM horsies.horsies_tasks GROUP BY status`,
    );
    await check.end();
    expect(rows).toEqual([{ status: 'COMPLETED', n: TASKS }]);
  } finally {
    await server.stop();
  }
}, 240_000);
