/**
 * Worker child processes (src/child.ts), for the scenarios that run workers outside the harness process: each is
 * started detached in its own process group, tracked until it exits, and killed with its group on exit.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CHILD_CONFIG_VARIABLE } from '../child-config.js';
import type { ChildConfig } from '../child-config.js';
import type { Subject } from '../peers/types.js';
import type { RunContext } from './types.js';

const CHILD_PATH = fileURLToPath(new URL('../child.ts', import.meta.url));

/** Child processes still alive, killed on exit whatever happens. */
const liveChildren = new Set<ChildProcess>();
process.on('exit', () => killLiveChildren());

export function killLiveChildren(): void {
  for (const child of liveChildren) killGroup(child);
}

/** SIGKILL to the child's whole process group (it was spawned detached). */
export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

export interface ChildHandle {
  child: ChildProcess;
  /** Resolves at the child's `ready` line; rejects if it exits first. */
  ready: Promise<void>;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  /** Called with every line the child prints on stdout. */
  onLine(listener: (line: string) => void): void;
  /** Writes one line to the child's stdin (drain mode). */
  send(line: string): void;
}

export function spawnChild(
  subject: Subject,
  ctx: RunContext,
  settings: Omit<ChildConfig, 'subject' | 'postgresUrl' | 'redis'>,
): ChildHandle {
  const config: ChildConfig = {
    subject: subject.id,
    postgresUrl: ctx.env.postgres.url,
    redis: ctx.env.redis && { host: ctx.env.redis.host, port: ctx.env.redis.port },
    ...settings,
  };
  const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), CHILD_PATH], {
    env: { ...process.env, [CHILD_CONFIG_VARIABLE]: JSON.stringify(config) },
    stdio: [settings.mode === 'drain' ? 'pipe' : 'ignore', 'pipe', 'inherit'],
    detached: true,
  });
  liveChildren.add(child);
  // A line written to a child that has just exited must not end the harness (EPIPE).
  child.stdin?.on('error', () => undefined);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      liveChildren.delete(child);
      resolve();
    }),
  );
  const listeners: ((line: string) => void)[] = [];
  const ready = new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    void exited.then(() => reject(new Error(`${subject.id}: worker child exited early`)));
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      if (line === 'ready') resolve();
      for (const listener of listeners) listener(line);
    });
  });
  ready.catch(() => undefined);
  return {
    child,
    ready,
    exited,
    onLine: (listener) => void listeners.push(listener),
    send(line) {
      child.stdin?.write(`${line}\n`);
    },
  };
}
