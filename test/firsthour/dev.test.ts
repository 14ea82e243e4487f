/**
 * `horsies dev` on a user's module (against the test server with --database-url; the embedded server is covered by
 * pack.test.ts and devStop.test.ts): it migrates, runs the tasks, serves the dashboard on the app (its schedules,
 * with actions), restarts the worker when a file the app imports changes (and only then), survives a module that
 * fails to load until the next change, and stops cleanly on SIGINT.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../src/index.js';
import { databaseUrl, freshSchemaName, testLogger } from '../support/db.js';
import { startProcess } from './support.js';

const ROOT = resolve(import.meta.dirname, '../..');
// Inside the repository (so zod resolves) but in a git-ignored folder that no tsconfig or lint covers.
const folder = join(ROOT, '.scratch', `dev-${process.pid}`);
const schema = freshSchemaName();
afterAll(async () => {
  rmSync(folder, { recursive: true, force: true });
  const app = createApp({ databaseUrl: databaseUrl(), schema, logger: testLogger });
  await app.db.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await app.close();
});

function writeLib(greeting: string): void {
  writeFileSync(join(folder, 'lib.ts'), `export const greeting = ${JSON.stringify(greeting)};\n`);
}

function writeModule(): void {
  writeFileSync(
    join(folder, 'app.ts'),
    `import { z } from 'zod';
import { createApp } from ${JSON.stringify(join(ROOT, 'src/index.ts'))};
import { greeting } from './lib.js';
export const app = createApp({ queues: ['default'] });
export const greet = app.task({
  name: 'dev.greet',
  input: z.object({ name: z.string() }),
  handler: ({ name }) => greeting + ' ' + name,
});
app.schedule({
  name: 'dev.nightly',
  task: 'dev.greet',
  input: { name: 'at night' },
  timezone: 'Europe/Berlin',
  pattern: { kind: 'daily', at: '02:30' },
});
`,
  );
}

it('runs the module, serves its dashboard with actions, reloads on a change to what it imports, waits out a broken edit, and stops on SIGINT', async () => {
  mkdirSync(folder, { recursive: true });
  writeLib('hello');
  writeModule();
  const dev = startProcess(
    ['--verbose', 'dev', join(folder, 'app.ts'), '--database-url', databaseUrl(), '--port', '0'],
    { HORSIES_SCHEMA: schema, HORSIES_LOG_LEVEL: 'warn', HORSIES_DASHBOARD_TOKEN: '' },
  );
  await dev.waitFor(
    /worker running 1 task\(s\) \(dev\.greet\) on queue\(s\) default; schema (\w+) at version \d+/,
  );
  const [, dashboard, token] = await dev.waitFor(/dashboard on (http:\/\/127\.0\.0\.1:\d+\/)#token=(\S+)/);
  expect((await fetch(`${dashboard}api/overview`)).status).toBe(200);
  expect(await (await fetch(`${dashboard}api/config`)).json()).toMatchObject({
    actions: true,
    hideData: false,
  });

  const app = createApp({ databaseUrl: databaseUrl(), schema, logger: testLogger });
  const greet = app.task({ name: 'dev.greet', input: z.object({ name: z.string() }), handler: () => '' });
  try {
    // The dashboard knows the app: its declared schedule, with pattern and zone, and a trigger that runs it.
    const listed = (await (await fetch(`${dashboard}api/schedules`)).json()) as {
      fromApp: boolean;
      schedules: { name: string; pattern: string | null; timezone: string | null }[];
    };
    expect(listed.fromApp).toBe(true);
    expect(listed.schedules).toContainEqual(
      expect.objectContaining({ name: 'dev.nightly', pattern: 'daily at 02:30', timezone: 'Europe/Berlin' }),
    );
    const triggered = await fetch(`${dashboard}api/schedules/dev.nightly/trigger`, {
      method: 'POST',
      headers: { 'x-horsies-token': decodeURIComponent(token as string) },
    });
    expect(triggered.status).toBe(200);
    const { taskId } = (await triggered.json()) as { taskId: string };
    expect(await app.handle(taskId).result({ timeoutMs: 30_000 })).toEqual({
      ok: true,
      value: 'hello at night',
    });

    const first = await (await greet.send({ name: 'Ada' })).result({ timeoutMs: 30_000 });
    expect(first).toEqual({ ok: true, value: 'hello Ada' });

    // Files the app does not import change nothing.
    writeFileSync(join(folder, 'other.ts'), 'export const unused = 1;\n');
    writeFileSync(join(folder, 'tsconfig.json'), '{}\n');
    await dev.waitFor(/other\.ts changed; the app does not import it: the worker keeps running/);
    await dev.waitFor(/tsconfig\.json changed; the app does not import it: the worker keeps running/);
    expect(dev.output()).not.toContain('restarting the worker');

    writeLib('bonjour');
    await dev.waitFor(/lib\.ts changed: restarting the worker/);
    await waitForNth(dev, /worker running 1 task/g, 2);
    const second = await (await greet.send({ name: 'Ada' })).result({ timeoutMs: 30_000 });
    expect(second).toEqual({ ok: true, value: 'bonjour Ada' });

    writeFileSync(join(folder, 'app.ts'), 'export const app = ;\n');
    await dev.waitFor(/the worker exited \(code 1\); waiting for a change to start it again/);
    writeModule();
    await waitForNth(dev, /worker running 1 task/g, 3);
    const third = await (await greet.send({ name: 'Ada' })).result({ timeoutMs: 30_000 });
    expect(third).toEqual({ ok: true, value: 'bonjour Ada' });
  } finally {
    await app.close();
  }
  dev.child.kill('SIGINT');
  expect(await dev.exited, dev.output()).toBe(0);
  expect(dev.output()).toContain('horsies dev: stopping');
  expect(dev.output()).toMatch(/horsies dev: stopped: the worker stopped, no task running\n/);
}, 180_000);

async function waitForNth(proc: ReturnType<typeof startProcess>, pattern: RegExp, n: number): Promise<void> {
  await proc.waitFor(new RegExp(`(?:[\\s\\S]*?${pattern.source}){${n}}`));
}
