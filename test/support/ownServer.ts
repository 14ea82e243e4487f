/**
 * A PostgreSQL server of one test's own, for faults that would hit every other test: the server restarting or
 * crashing. The test's app and worker connect to `url`; `side` is a pool for the test's own queries (the handlers'
 * records, the checks), which drops the connections the server closes and opens new ones on the next query.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { isTransientDatabaseError } from '../../src/db/Database.js';
import { freePort, startEmbeddedServer } from '../../src/dev/EmbeddedServer.js';
import type { EmbeddedServer } from '../../src/dev/EmbeddedServer.js';

export interface OwnServer {
  readonly url: string;
  readonly side: pg.Pool;
  /** Stops the server: cleanly, or the way a crash would (an immediate shutdown, see EmbeddedServer.crash). */
  stop(how: 'clean' | 'crash'): Promise<void>;
  /** Starts the server again on the same data directory and port. */
  start(): Promise<void>;
  /** Ends the side pool, stops the server if it runs, and deletes the data directory. */
  close(): Promise<void>;
}

export async function startOwnServer(): Promise<OwnServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-own-pg-'));
  const port = await freePort();
  let server: EmbeddedServer | null = await startEmbeddedServer({ dataDir, port, persistent: true });
  const url = server.url;
  const side = new pg.Pool({ connectionString: url, max: 4 });
  side.on('error', () => undefined);
  return {
    url,
    side,
    async stop(how) {
      const running = server;
      server = null;
      await (how === 'crash' ? running?.crash() : running?.stop());
    },
    async start() {
      server = await startEmbeddedServer({ dataDir, port, persistent: true });
    },
    async close() {
      await side.end();
      await server?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Runs a query, again and again while the server is away (a transient error), unless `signal` aborts: a handler's
 * record of its run outlives an outage instead of failing the run.
 */
export async function queryThroughOutage(
  pool: pg.Pool,
  text: string,
  values: unknown[],
  signal: AbortSignal,
): Promise<void> {
  for (;;) {
    try {
      await pool.query(text, values);
      return;
    } catch (error) {
      if (!isTransientDatabaseError(error) || signal.aborted) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** Counts rows with a query, or -1 while the server cannot answer (the pool reconnects on the next try). */
export async function countOrMinusOne(pool: pg.Pool, text: string): Promise<number> {
  try {
    const { rows } = await pool.query<{ n: number }>(text);
    return rows[0]!.n;
  } catch {
    return -1;
  }
}
