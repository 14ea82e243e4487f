/** The database a measuring script runs against: DATABASE_URL, or an embedded PostgreSQL started for the run. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedServer } from '../src/index.js';

/** Runs `fn` with a connection string, then stops the embedded server if one was started. */
export async function withDatabase(fn: (url: string) => Promise<void>): Promise<void> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) return fn(fromEnv);
  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-script-'));
  const server = await startEmbeddedServer({ dataDir, persistent: false });
  try {
    await fn(server.url);
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Runs a script's main function and exits with its outcome (pools and timers may still hold the process). */
export function runScript(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
