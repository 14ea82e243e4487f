/**
 * A throwaway Redis for BullMQ's Redis backend: Debian's `redis-server` when it is installed (the harness
 * never installs it), on a free loopback port, with persistence off, stopped at the end.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../../src/dev/EmbeddedServer.js';
import { errorMessage, sleep, withTimeout } from '../time.js';

export const REDIS_SERVER_PATH = '/usr/bin/redis-server';

export interface RedisEnv {
  host: string;
  port: number;
  /** The server's process id, to read its CPU time from /proc (null where the harness did not start it). */
  pid: number | null;
  version: string;
  /** Deletes every key. */
  flush(): Promise<void>;
  stop(): Promise<void>;
  /** Kills the server at once (synchronous; for signals). */
  kill(): void;
}

export type RedisStart = { ok: true; redis: RedisEnv } | { ok: false; reason: string };

export async function startRedis(): Promise<RedisStart> {
  if (!existsSync(REDIS_SERVER_PATH)) {
    return { ok: false, reason: `redis-server not installed (${REDIS_SERVER_PATH} not found)` };
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'horsies-bench-redis-'));
  const child = spawn(
    REDIS_SERVER_PATH,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  let exited = false;
  // Never outlive the harness, even when it ends without cleaning up (a signal, a crash).
  const killNow = (): void => {
    if (!exited) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', killNow);
  child.once('exit', () => (exited = true));
  child.once('error', () => (exited = true));
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  const stop = async (): Promise<void> => {
    client.disconnect();
    await stopChild(child, () => exited);
    rmSync(dir, { recursive: true, force: true });
    process.off('exit', killNow);
  };
  try {
    const version = await withTimeout(
      waitReady(client, () => exited),
      15_000,
      'redis-server start',
    );
    return {
      ok: true,
      redis: {
        host: '127.0.0.1',
        port,
        pid: child.pid ?? null,
        version,
        async flush() {
          await client.flushall();
        },
        stop,
        kill: killNow,
      },
    };
  } catch (error) {
    await stop();
    return { ok: false, reason: `redis-server did not start: ${errorMessage(error)}` };
  }
}

async function waitReady(client: Redis, exited: () => boolean): Promise<string> {
  for (;;) {
    if (exited()) throw new Error('redis-server exited');
    try {
      if (client.status === 'wait' || client.status === 'end') await client.connect();
      const info = await client.info('server');
      return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
    } catch {
      await sleep(100);
    }
  }
}

async function stopChild(child: ChildProcess, exited: () => boolean): Promise<void> {
  if (exited()) return;
  const done = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  try {
    await withTimeout(done, 10_000, 'redis-server stop');
  } catch {
    child.kill('SIGKILL');
    await withTimeout(done, 5_000, 'redis-server kill').catch(() => undefined);
  }
}
