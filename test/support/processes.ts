/** Runs real worker processes (`horsies worker <module>` through tsx) for multi-process and signal tests. */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

export interface WorkerProcess {
  child: ChildProcess;
  /** Everything the process wrote so far. */
  output(): string;
  /** Resolves once the process logged that its worker started. */
  ready: Promise<void>;
  /** Resolves with the exit code (or signal name) when the process ends. */
  exited: Promise<number | string>;
}

const running = new Set<ChildProcess>();
afterAll(() => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Starts `horsies worker <module>` (default `test/fixtures/app.ts`) with the given extra arguments. `cli` is the
 * CLI's entry file (default this checkout's `src/cli/main.ts`; another release's `dist/cli/main.js`); `variables`
 * are added to the environment.
 */
export function startWorkerProcess(
  env: {
    databaseUrl: string;
    schema: string;
    recovery?: object;
    appConfig?: object;
    module?: string;
    cli?: string;
    variables?: Record<string, string>;
  },
  args: string[] = [],
): WorkerProcess {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      env.cli ?? 'src/cli/main.ts',
      'worker',
      env.module ?? 'test/fixtures/app.ts',
      ...args,
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: env.databaseUrl,
        HORSIES_SCHEMA: env.schema,
        HORSIES_LOG_LEVEL: 'info',
        ...(env.recovery ? { HORSIES_TEST_RECOVERY: JSON.stringify(env.recovery) } : {}),
        ...(env.appConfig ? { HORSIES_TEST_APP: JSON.stringify(env.appConfig) } : {}),
        ...env.variables,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  running.add(child);
  let output = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((res, rej) => {
    markReady = res;
    child.once('exit', (code) => rej(new Error(`worker exited (${code}) before it started:\n${output}`)));
  });
  ready.catch(() => undefined);
  const onData = (chunk: Buffer): void => {
    output += chunk.toString();
    if (output.includes('"worker started"')) markReady();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<number | string>((res) => {
    child.once('exit', (code, signal) => {
      running.delete(child);
      res(code ?? signal ?? -1);
    });
  });
  return { child, output: () => output, ready, exited };
}
