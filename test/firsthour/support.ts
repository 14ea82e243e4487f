/** Long-running `horsies` processes for the first-hour tests: start, wait for a line, stop. */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const running = new Set<ChildProcess>();

const groups = new Set<number>();

afterAll(() => {
  for (const child of running) child.kill('SIGKILL');
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // the group is gone
    }
  }
});

/** A running process and what it printed so far. */
export interface RunningProcess {
  child: ChildProcess;
  /** stdout and stderr so far, interleaved. */
  output(): string;
  /** Resolves with the match once the output matches `pattern`; rejects if the process exits first or on timeout. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Resolves with the exit code (or signal name). */
  exited: Promise<number | string>;
}

/**
 * Starts `command args` (default: the `horsies` CLI from source through tsx) in `cwd`. With `group`, the process
 * leads a process group of its own, as a command started from a terminal does: `process.kill(-child.pid, signal)`
 * then signals it and every process it started in its group, as Ctrl-C does.
 */
export function startProcess(
  args: string[],
  env: Record<string, string | undefined>,
  options: { cwd?: string; command?: string; raw?: boolean; group?: boolean } = {},
): RunningProcess {
  const command = options.command ?? process.execPath;
  const argv = options.raw ? args : ['--import', 'tsx', resolve(ROOT, 'src/cli/main.ts'), ...args];
  const child = spawn(command, argv, {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.group ?? false,
  });
  running.add(child);
  if (options.group && child.pid !== undefined) groups.add(child.pid);
  let output = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer): void => {
    output += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<number | string>((res) => {
    child.once('exit', (code, signal) => {
      running.delete(child);
      res(code ?? signal ?? -1);
      for (const listener of listeners) listener();
    });
  });
  const waitFor = (pattern: RegExp, timeoutMs = 30_000): Promise<RegExpExecArray> =>
    new Promise((res, rej) => {
      const check = (): void => {
        const match = pattern.exec(output);
        if (match) {
          done();
          res(match);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          done();
          rej(new Error(`process exited before printing ${pattern}:\n${output}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        rej(new Error(`timed out after ${timeoutMs} ms waiting for ${pattern}:\n${output}`));
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      listeners.add(check);
      check();
    });
  return { child, output: () => output, waitFor, exited };
}
