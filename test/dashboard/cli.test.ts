/** `horsies dashboard`, run as a real process: it serves the dashboard, and refuses a non-loopback host without a token. */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { databaseUrl, useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const ROOT = resolve(import.meta.dirname, '../..');

describe('horsies dashboard', () => {
  it('refuses to listen beyond loopback without a token', async () => {
    const run = await runCli(['dashboard', '--host', '0.0.0.0', '--schema', t.schema], {
      DATABASE_URL: databaseUrl(),
      HORSIES_DASHBOARD_TOKEN: '',
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('requires a token');
  });

  it('serves the UI and the API of the schema, read-only without a token', async () => {
    await withDashboard(['--schema', t.schema], async (url) => {
      expect(await (await fetch(url)).text()).toContain('<div id="app">');
      expect(await (await fetch(`${url}api/config`)).json()).toEqual({
        actions: false,
        hideData: false,
        readToken: false,
      });
      const overview = (await (await fetch(`${url}api/overview`)).json()) as { queues: unknown[] };
      expect(overview.queues).toEqual([]);
    });
  });

  it('from a module, serves the app: its declared schedules with their pattern and zone', async () => {
    await withDashboard(['test/fixtures/scheduleApp.ts'], async (url) => {
      const { fromApp, schedules } = (await (await fetch(`${url}api/schedules`)).json()) as {
        fromApp: boolean;
        schedules: { name: string; task: string | null; pattern: string | null; timezone: string | null }[];
      };
      expect(fromApp).toBe(true);
      expect(schedules.find((s) => s.name === 'nightly')).toMatchObject({
        task: 'tick',
        pattern: 'daily at 02:30',
        timezone: 'Europe/Berlin',
      });
    });
  });
});

/** Runs `horsies dashboard <args> --port 0` on the test schema, calls `fn` with its address, then stops it. */
async function withDashboard(args: string[], fn: (url: string) => Promise<void>): Promise<void> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'dashboard', ...args, '--port', '0'],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl(),
        HORSIES_SCHEMA: t.schema,
        HORSIES_DASHBOARD_TOKEN: '',
        HORSIES_LOG_LEVEL: 'warn',
      },
    },
  );
  try {
    const url = await new Promise<string>((resolvePromise, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`no address printed:\n${out}`)), 20_000);
      const onData = (chunk: Buffer): void => {
        out += chunk.toString();
        const match = /on (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
        if (match) {
          clearTimeout(timer);
          resolvePromise(match[1]!);
        }
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.once('exit', (code) => reject(new Error(`exited ${code}:\n${out}`)));
    });
    await fn(url);
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
}
