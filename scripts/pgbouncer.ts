/**
 * Runs Debian's PgBouncer in transaction mode in front of a PostgreSQL server, for the tests and the fault run:
 * writes a config (every database of the server, `pool_mode = transaction`) into a folder of its own, starts
 * `pgbouncer` on a free loopback port, waits until it answers, and stops it (and removes the folder) on `stop()`.
 *
 * PgBouncer refuses to run as root; started as root it is told to switch to the `postgres` system user (the one
 * the embedded server runs as). `scripts/ensure-pgbouncer.sh` installs the package.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../src/dev/EmbeddedServer.js';

/** Where Debian installs it. */
export const PGBOUNCER_BINARY = '/usr/sbin/pgbouncer';

/** A running PgBouncer. */
export interface PgBouncer {
  /** The server URL with PgBouncer's host and port in place of the server's. */
  readonly url: string;
  readonly port: number;
  /** Stops PgBouncer and removes its folder. Idempotent. */
  stop(): Promise<void>;
}

/** Settings of {@link startPgBouncer}. */
export interface PgBouncerOptions {
  /** Server connections per database and user. Default 20. */
  poolSize?: number;
}

/** True when the PgBouncer binary is installed. */
export function hasPgBouncer(): boolean {
  return existsSync(PGBOUNCER_BINARY);
}

/** Starts PgBouncer in transaction mode in front of the server `serverUrl` points at. */
export async function startPgBouncer(serverUrl: string, options: PgBouncerOptions = {}): Promise<PgBouncer> {
  if (!hasPgBouncer()) {
    throw new Error(
      `${PGBOUNCER_BINARY} is missing: run sh scripts/ensure-pgbouncer.sh (Debian's pgbouncer package)`,
    );
  }
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username);
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'horsies-pgbouncer-'));
  // Read by PgBouncer after it switched user.
  chmodSync(dir, 0o755);
  const quote = (s: string): string => `"${s.replace(/"/g, '""')}"`;
  writeFileSync(join(dir, 'users.txt'), `${quote(user)} ${quote(password)}\n`, { mode: 0o644 });
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = md5',
      `auth_file = ${join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${options.poolSize ?? 20}`,
      'max_client_conn = 1000',
      // pg sends none of these by default; a client that does must not be refused.
      'ignore_startup_parameters = extra_float_digits,options,statement_timeout',
      // A restarted server is reached again at once rather than after the default 15 s.
      'server_login_retry = 1',
      'server_connect_timeout = 5',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const args = [join(dir, 'pgbouncer.ini')];
  if (process.getuid?.() === 0) args.unshift('-u', 'postgres');
  const child: ChildProcess = spawn(PGBOUNCER_BINARY, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  // Its log (no log file: the folder belongs to another user), kept for the error of a failed start.
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  server.hostname = '127.0.0.1';
  server.port = String(port);
  const url = server.toString();
  const stop = async (): Promise<void> => {
    if (!gone) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 15_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      break;
    } catch (error) {
      await client.end().catch(() => undefined);
      if (gone || Date.now() > deadline) {
        await stop();
        throw new Error(`PgBouncer did not start: ${(error as Error).message}\n${stderr}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return { url, port, stop };
}
