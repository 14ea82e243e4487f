/**
 * The fixture app modules (`test/fixtures/*.ts`) read DATABASE_URL, HORSIES_SCHEMA, HORSIES_TEST_RECOVERY and
 * HORSIES_LOG_LEVEL when first imported. These helpers import one configured for a test file's schema.
 */
import { databaseUrl } from './db.js';

/**
 * Runs `load` (a dynamic import of a fixture) with the environment set for `schema` and `recovery`. The schema and
 * recovery variables are removed afterwards unless `keep` is set (the threads of blocking tasks import the
 * module again, with the environment as it is when each thread starts).
 */
export async function importFixture<M>(
  env: { schema: string; recovery?: object; keep?: boolean },
  load: () => Promise<M>,
): Promise<M> {
  process.env.DATABASE_URL ??= databaseUrl();
  process.env.HORSIES_SCHEMA = env.schema;
  if (env.recovery) process.env.HORSIES_TEST_RECOVERY = JSON.stringify(env.recovery);
  process.env.HORSIES_LOG_LEVEL = 'silent';
  try {
    return await load();
  } finally {
    if (!env.keep) {
      delete process.env.HORSIES_SCHEMA;
      delete process.env.HORSIES_TEST_RECOVERY;
    }
  }
}

/** File URL of a fixture module, for a worker's `appModule`. */
export function fixtureModule(file: string): string {
  return new URL(`../fixtures/${file}`, import.meta.url).href;
}

/**
 * Recovery settings for tests that kill worker processes: heartbeats every 100 ms, a claim or run stale after
 * 800 ms, maintenance every 250 ms, workflows repaired after 500 ms untouched.
 */
export const fastRecovery = {
  claimerHeartbeatIntervalMs: 100,
  claimedStaleThresholdMs: 800,
  runnerHeartbeatIntervalMs: 100,
  runningStaleThresholdMs: 800,
  checkIntervalMs: 250,
  workflowRecoveryGraceMs: 500,
};

/** Creates the `test_runs` table the fixture app's handlers record their runs in. */
export async function createRunsTable(t: { query(sql: string): Promise<unknown> }): Promise<void> {
  await t.query('CREATE TABLE {{schema}}.test_runs (task_id text NOT NULL, worker_pid int NOT NULL)');
}
