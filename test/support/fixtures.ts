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
