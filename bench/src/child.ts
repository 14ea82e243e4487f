/**
 * A worker in its own process (see ChildConfig for the two modes): the recovery scenario's worker that is
 * killed, and the multi-process scenario's draining workers. It exits by itself if its parent goes away or
 * after its configured lifetime.
 */
import { createInterface } from 'node:readline';
import { connectPostgres } from './env/postgres.js';
import { ALL_SUBJECTS } from './peers/index.js';
import type { BenchEnv, PeerSession, Subject } from './peers/types.js';
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
  setTimeout(() => process.exit(4), config.lifetimeMs).unref();
  watchdog.unref();

  const env: BenchEnv = {
    postgres: await connectPostgres(config.postgresUrl, 'DATABASE_URL'),
    redis: config.redis && {
      ...config.redis,
      pid: null,
      version: '',
      flush: () => Promise.reject(new Error('not in the child')),
      stop: async () => undefined,
      kill: () => undefined,
    },
  };
  const session = await subject.open(env, config.recovery);
  if (config.mode === 'hold') {
    await session.startWorker(
      {
        onStart: (seq) => process.stdout.write(`started ${seq}\n`),
        hold: () => new Promise<void>(() => undefined),
      },
      config.recovery,
      config.concurrency,
    );
    process.stdout.write('ready\n');
    return;
  }
  await drain(subject, session, env, config);
}

/** The `drain` mode: ready, then start on `start`, report handler runs, stop on `stop`. */
async function drain(
  subject: Subject,
  session: PeerSession,
  env: BenchEnv,
  config: ChildConfig,
): Promise<void> {
  let runs = 0;
  let reported = 0;
  let stopWorker: (() => Promise<void>) | null = null;
  const reporter = setInterval(() => {
    if (runs !== reported) {
      reported = runs;
      process.stdout.write(`runs ${runs}\n`);
    }
  }, 50);
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line === 'start' && !stopWorker) {
      stopWorker = () => Promise.resolve();
      session
        .startWorker({ onStart: () => void runs++ }, undefined, config.concurrency)
        .then((worker) => {
          stopWorker = () => worker.stop();
          process.stdout.write('started\n');
        })
        .catch(fail);
    } else if (line === 'stop') {
      lines.close();
      clearInterval(reporter);
      void (async () => {
        await (stopWorker ?? (() => Promise.resolve()))();
        process.stdout.write(`runs ${runs}\n`);
        await session.close();
        await env.postgres.stop();
        process.stdout.write('stopped\n');
        process.exit(0);
      })().catch(fail);
    }
  });
  process.stdout.write('ready\n');
}

function fail(error: unknown): never {
  console.error(`bench child: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
}

main().catch(fail);
