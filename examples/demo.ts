/**
 * `npm run demo`: the whole path on a real PostgreSQL. Without DATABASE_URL it starts an embedded server whose
 * data lives in `.horsies-dev/` (git-ignored). It defines a few tasks, sends 2,000 of them in bulk, runs two
 * workers until every task is finished while printing progress, then prints a summary and exits 0.
 */
import { join } from 'node:path';
import { pino } from 'pino';
import { z } from 'zod';
import {
  HorsiesError,
  SchemaNotMigratedError,
  TaskError,
  createApp,
  createWorker,
  startEmbeddedServer,
} from '../src/index.js';
import type { EmbeddedServer } from '../src/index.js';

const TOTAL = 2_000;
const SCHEMA = 'horsies_demo';

async function main(): Promise<void> {
  let server: EmbeddedServer | null = null;
  let databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    process.stdout.write('no DATABASE_URL: starting an embedded PostgreSQL in .horsies-dev/ ... ');
    server = await startEmbeddedServer({
      dataDir: join(process.cwd(), '.horsies-dev', 'pg'),
      database: 'horsies_dev',
    });
    databaseUrl = server.url;
    console.log('ready');
  }
  const app = createApp({
    databaseUrl,
    schema: SCHEMA,
    queues: ['default', 'emails'],
    logger: pino({ level: process.env.HORSIES_LOG_LEVEL ?? 'warn' }),
  });
  try {
    // The first statement is horsies' own, so a database that cannot be reached fails with its one-line reason. A
    // demo schema left by another version of horsies is the demo's own: it is dropped below like any other.
    await app.migrate().catch((error: unknown) => {
      if (!(error instanceof SchemaNotMigratedError)) throw error;
    });
    await app.db.pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await app.migrate();

    const resize = app.task({
      name: 'images.resize',
      input: z.object({ imageId: z.number().int(), width: z.number().int().positive() }),
      handler: ({ imageId, width }) => ({ imageId, width, height: Math.round(width * 0.75) }),
    });
    const welcome = app.task({
      name: 'emails.welcome',
      queue: 'emails',
      priority: 10,
      input: z.object({ to: z.email() }),
      handler: async ({ to }) => {
        await new Promise((resolve) => setTimeout(resolve, 2));
        return { delivered: to };
      },
    });
    const charge = app.task({
      name: 'billing.charge',
      input: z.object({ accountId: z.number().int(), cents: z.number().int() }),
      handler: ({ accountId, cents }) =>
        cents > 90_000
          ? new TaskError('LIMIT_EXCEEDED', `charge of ${cents} cents is over the account limit`, {
              accountId,
            })
          : { accountId, charged: cents },
    });

    const started = Date.now();
    const [images, emails, charges] = await Promise.all([
      resize.sendMany(
        Array.from({ length: TOTAL / 2 }, (_, i) => ({ input: { imageId: i, width: 100 + (i % 900) } })),
      ),
      welcome.sendMany(
        Array.from({ length: TOTAL / 4 }, (_, i) => ({ input: { to: `user${i}@example.com` } })),
      ),
      charge.sendMany(
        Array.from({ length: TOTAL / 4 }, (_, i) => ({ input: { accountId: i, cents: i * 200 } })),
      ),
    ]);
    const sentMs = Date.now() - started;
    console.log(`sent ${TOTAL} tasks in ${sentMs} ms`);

    const workers = [createWorker(app, { concurrency: 20 }), createWorker(app, { concurrency: 20 })];
    await Promise.all(workers.map((w) => w.start()));
    const runStarted = Date.now();
    const counts = async (): Promise<Record<string, number>> => {
      const { rows } = await app.db.pool.query<{ status: string; n: number }>(
        `SELECT status, count(*)::int AS n FROM ${SCHEMA}.horsies_tasks GROUP BY status ORDER BY status`,
      );
      return Object.fromEntries(rows.map((r) => [r.status, r.n]));
    };
    for (;;) {
      const c = await counts();
      const finished = (c.COMPLETED ?? 0) + (c.FAILED ?? 0);
      const bar = '#'.repeat(Math.round((finished / TOTAL) * 40)).padEnd(40, '.');
      process.stdout.write(`\r[${bar}] ${finished}/${TOTAL} finished  ${JSON.stringify(c)}   `);
      if (finished === TOTAL) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const runMs = Date.now() - runStarted;
    process.stdout.write('\n');
    await Promise.all(workers.map((w) => w.stop()));

    const summary = await counts();
    const [img] = await Promise.all([images[7]!.result(), emails[3]!.result()]);
    const okCharge = await charges[10]!.result();
    const failedCharge = await charges[charges.length - 1]!.result();
    const { rows: attemptRows } = await app.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${SCHEMA}.horsies_task_attempts`,
    );
    console.log('\nsummary');
    console.log(`  by status:   ${JSON.stringify(summary)}`);
    console.log(`  attempts:    ${attemptRows[0]?.n} rows`);
    console.log(
      `  throughput:  ${Math.round((TOTAL / runMs) * 1000)} tasks/s (${TOTAL} tasks in ${runMs} ms, 2 workers x 20)`,
    );
    console.log(`  send:        ${Math.round((TOTAL / sentMs) * 1000)} tasks/s (sendMany)`);
    console.log('  a few results:');
    console.log(`    images.resize  -> ${JSON.stringify(img)}`);
    console.log(`    billing.charge -> ${JSON.stringify(okCharge)}`);
    console.log(
      `    billing.charge -> ${JSON.stringify(failedCharge.ok ? failedCharge : { ok: false, error: failedCharge.error.toJSON() })}`,
    );
    const expectedFailed = charges.length - Math.floor(90_000 / 200) - 1;
    if ((summary.COMPLETED ?? 0) + (summary.FAILED ?? 0) !== TOTAL || summary.FAILED !== expectedFailed) {
      throw new Error(`unexpected outcome: ${JSON.stringify(summary)}`);
    }
  } finally {
    await app.close();
    await server?.stop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    // horsies' own faults say what is wrong in one line; anything else comes with its stack.
    console.error(error instanceof HorsiesError ? `demo: ${error.message}` : error);
    process.exit(1);
  },
);
