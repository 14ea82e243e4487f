/**
 * A worker in its own process, for the recovery scenario: it runs the subject's worker with a handler that
 * never returns, prints `ready` once started and `started <seq>` for each task it runs, and waits to be killed.
 * It exits by itself if its parent goes away or after ten minutes.
 */
import { connectPostgres } from './env/postgres.js';
import { ALL_SUBJECTS } from './peers/index.js';
import type { BenchEnv } from './peers/types.js';
import { CHILD_CONFIG_VARIABLE } from './child-config.js';
import type { ChildConfig } from './child-config.js';

async function main(): Promise<void> {
  const config = JSON.parse(process.env[CHILD_CONFIG_VARIABLE] ?? 'null') as ChildConfig | null;
  if (!config) throw new Error(`${CHILD_CONFIG_VARIABLE} is not set`);
  const subject = ALL_SUBJECTS.find((s) => s.id === config.subject);
  if (!subject) throw new Error(`unknown subject ${config.subject}`);
  const parent = process.ppid;
  const watchdog = setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      process.exit(3);
    }
  }, 1000);
  setTimeout(() => process.exit(4), 600_000).unref();
  watchdog.unref();

  const env: BenchEnv = {
    postgres: await connectPostgres(config.postgresUrl, 'DATABASE_URL'),
    redis: config.redis && {
      ...config.redis,
      version: '',
      flush: () => Promise.reject(new Error('not in the child')),
      stop: async () => undefined,
      kill: () => undefined,
    },
  };
  const session = await subject.open(env, config.recovery);
  await session.startWorker(
    {
      onStart: (seq) => process.stdout.write(`started ${seq}\n`),
      hold: () => new Promise<void>(() => undefined),
    },
    config.recovery,
  );
  process.stdout.write('ready\n');
}

main().catch((error: unknown) => {
  console.error(`recovery child: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
