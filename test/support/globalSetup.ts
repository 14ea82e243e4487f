/**
 * Gives every test file a real PostgreSQL: `DATABASE_URL` when set, otherwise an embedded server in a temp folder,
 * started once for the run and removed at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedServer } from '../../src/dev/EmbeddedServer.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env.DATABASE_URL;
  if (external) {
    project.provide('databaseUrl', external);
    return async () => undefined;
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'horsies-test-pg-'));
  const server = await startEmbeddedServer({ dataDir, persistent: false });
  project.provide('databaseUrl', server.url);
  return async () => {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
}
