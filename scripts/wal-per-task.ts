/**
 * What one task costs the database beyond CPU: WAL, table churn, connections and storage. `npm run bench:wal` (uses
 * DATABASE_URL, or starts an embedded PostgreSQL) runs, for the default worker and for prefetch (490, claims of up
 * to 500), each phase on its own app (its connections closed at the end of the phase, so the server's statistics
 * are flushed before they are read):
 *
 *   send, bulk      sendMany of TASKS no-op tasks (default 20,000) in calls of 10,000 (the COPY path)
 *   send, single    SINGLE sends one at a time (default 1,000)
 *   drain           a worker (concurrency 10, snapshots and maintenance off) drains every pending task
 *   drain after a checkpoint
 *                   the same with TASKS new tasks and a CHECKPOINT just before the drain: the first change to each
 *                   page after a checkpoint writes the whole page to the WAL (full-page writes), which a server
 *                   pays for every page it touches once per checkpoint interval
 *   purge           the retainer's statement for finished tasks (TaskPruneFinished, retention 0) in batches of 1,000
 *                   until none is left (the attempts go with their tasks, by cascade)
 *
 * Per phase: WAL bytes per task from pg_current_wal_lsn() before and after, and WAL records and full-page images
 * per task from pg_stat_wal (both server-wide: autovacuum and the checkpointer count too); and, for horsies_tasks
 * and horsies_task_attempts, the rows inserted, updated (of which HOT), deleted per task and the dead rows left, from
 * pg_stat_user_tables. During the drains, the most connections the worker's process held at once (pg_stat_activity,
 * sampled every 20 ms). After the drain, the tables' size (with indexes and TOAST) per task kept.
 */
import pg from 'pg';
import { pino } from 'pino';
import { z } from 'zod';
import { TaskPruneFinished } from '../src/db/maintenance.js';
import { createApp, createWorker } from '../src/index.js';
import type { WorkerConfig } from '../src/index.js';
import { runScript, withDatabase } from './database.js';

const TASKS = Number(process.env.TASKS ?? 20_000);
const SINGLE = Number(process.env.SINGLE ?? 1_000);
const SCHEMA = 'wal_per_task';
const OWN = 'horsies-wal-per-task';
const TABLES = ['horsies_tasks', 'horsies_task_attempts'] as const;

const VARIANTS: { name: string; worker: WorkerConfig }[] = [
  { name: 'default', worker: { concurrency: 10 } },
  { name: 'prefetch 490', worker: { concurrency: 10, prefetch: { size: 490 }, claims: { batchSize: 500 } } },
];

interface TableStats {
  ins: number;
  upd: number;
  hot: number;
  del: number;
  dead: number;
  autovacuums: number;
}

interface Snapshot {
  lsn: string;
  records: number;
  fpi: number;
  tables: Record<string, TableStats>;
}

async function snapshot(admin: pg.Client): Promise<Snapshot> {
  await admin.query('SELECT pg_stat_clear_snapshot()');
  const wal = await admin.query<{ lsn: string; records: string; fpi: string }>(
    'SELECT pg_current_wal_lsn()::text AS lsn, wal_records AS records, wal_fpi AS fpi FROM pg_stat_wal',
  );
  const stats = await admin.query<TableStats & { relname: string }>(
    `SELECT relname, n_tup_ins::float8 AS ins, n_tup_upd::float8 AS upd, n_tup_hot_upd::float8 AS hot,
            n_tup_del::float8 AS del, n_dead_tup::float8 AS dead, autovacuum_count::float8 AS autovacuums
       FROM pg_stat_user_tables WHERE schemaname = $1`,
    [SCHEMA],
  );
  const tables: Record<string, TableStats> = {};
  for (const row of stats.rows) tables[row.relname] = row;
  const w = wal.rows[0]!;
  return { lsn: w.lsn, records: Number(w.records), fpi: Number(w.fpi), tables };
}

/** Lets the closed backends' statistics reach the shared counters. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 500));

async function walBytes(admin: pg.Client, from: string, to: string): Promise<number> {
  const { rows } = await admin.query<{ d: string }>('SELECT pg_wal_lsn_diff($1, $2)::float8 AS d', [
    to,
    from,
  ]);
  return Number(rows[0]!.d);
}

function makeApp(databaseUrl: string) {
  const app = createApp({ databaseUrl, schema: SCHEMA, logger: pino({ level: 'warn' }) });
  const noop = app.task({ name: 'noop', input: z.object({ i: z.number() }), handler: () => null });
  return { app, noop };
}

/** Runs one phase on its own app and prints what it cost per task. */
async function phase(
  databaseUrl: string,
  admin: pg.Client,
  label: string,
  tasks: number,
  body: (made: ReturnType<typeof makeApp>) => Promise<string>,
): Promise<void> {
  const before = await snapshot(admin);
  const made = makeApp(databaseUrl);
  let extra: string;
  try {
    extra = await body(made);
  } finally {
    await made.app.close();
  }
  await settle();
  const after = await snapshot(admin);
  const bytes = await walBytes(admin, before.lsn, after.lsn);
  const per = (n: number): string => (n / tasks).toFixed(2);
  const churn = TABLES.map((t) => {
    const a = after.tables[t];
    const b = before.tables[t];
    if (!a || !b) return `${t}: no statistics`;
    const upd = a.upd - b.upd;
    const hot = a.hot - b.hot;
    return (
      `${t.replace('horsies_', '')}: ins ${per(a.ins - b.ins)} upd ${per(upd)} ` +
      `(HOT ${upd > 0 ? Math.round((hot / upd) * 100) : 0}%) del ${per(a.del - b.del)}, ` +
      `dead rows left ${Math.round(a.dead)}, autovacuums ${a.autovacuums - b.autovacuums}`
    );
  });
  console.log(
    `  ${label.padEnd(26)} ${String(Math.round(bytes / tasks)).padStart(6)} B/task  ` +
      `${per(after.records - before.records).padStart(6)} records  ${per(after.fpi - before.fpi).padStart(5)} FPI` +
      `${extra ? `  ${extra}` : ''}`,
  );
  for (const line of churn) console.log(`      ${line}`);
}

/** Drains every pending task with a worker; returns the most connections the process held and the rate. */
async function drain(
  made: ReturnType<typeof makeApp>,
  worker: WorkerConfig,
  total: number,
  admin: pg.Client,
): Promise<string> {
  const w = createWorker(made.app, { ...worker, snapshotIntervalMs: 0, maintenance: false });
  let finished = 0;
  const done = new Promise<void>((resolve) =>
    w.on('task:finished', (rows) => {
      finished += rows.length;
      if (finished >= total) resolve();
    }),
  );
  let most = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      );
      most = Math.max(most, rows[0]?.n ?? 0);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const started = performance.now();
  await w.start();
  await done;
  const seconds = (performance.now() - started) / 1000;
  sampling = false;
  await sampler;
  await w.stop();
  return `${Math.round(total / seconds)} tasks/s, at most ${most} connections`;
}

async function send(made: ReturnType<typeof makeApp>, count: number): Promise<void> {
  for (let i = 0; i < count; i += 10_000) {
    const n = Math.min(10_000, count - i);
    await made.noop.sendMany(Array.from({ length: n }, (_, k) => ({ input: { i: i + k } })));
  }
}

async function measure(databaseUrl: string): Promise<void> {
  const admin = new pg.Client({ connectionString: databaseUrl, application_name: OWN });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ v: string; fpw: string; sc: string }>(
      `SELECT current_setting('server_version') AS v, current_setting('full_page_writes') AS fpw,
              current_setting('synchronous_commit') AS sc`,
    );
    console.log(
      `PostgreSQL ${rows[0]!.v} (full_page_writes ${rows[0]!.fpw}, synchronous_commit ${rows[0]!.sc}); ` +
        `${TASKS} tasks per drain, ${SINGLE} single sends`,
    );
    for (const variant of VARIANTS) {
      await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      const setup = makeApp(databaseUrl);
      await setup.app.migrate();
      await setup.app.close();
      await admin.query('CHECKPOINT');
      console.log(`\n${variant.name} (${JSON.stringify(variant.worker)}):`);
      await phase(databaseUrl, admin, 'send, bulk (sendMany)', TASKS, async (made) => {
        await send(made, TASKS);
        return '';
      });
      await phase(databaseUrl, admin, 'send, single (send)', SINGLE, async (made) => {
        for (let i = 0; i < SINGLE; i++) await made.noop.send({ i });
        return '';
      });
      await phase(databaseUrl, admin, 'drain', TASKS + SINGLE, (made) =>
        drain(made, variant.worker, TASKS + SINGLE, admin),
      );
      const size = await admin.query<{ bytes: string }>(
        `SELECT sum(pg_total_relation_size(format('%I.%I', $1::text, t)))::float8 AS bytes
           FROM unnest($2::text[]) AS t`,
        [SCHEMA, TABLES],
      );
      console.log(
        `  tables with indexes after the drain: ${Math.round(Number(size.rows[0]!.bytes) / (TASKS + SINGLE))} B per finished task`,
      );
      await phase(databaseUrl, admin, 'send, bulk (again)', TASKS, async (made) => {
        await send(made, TASKS);
        return '';
      });
      await admin.query('CHECKPOINT');
      await phase(databaseUrl, admin, 'drain after a checkpoint', TASKS, (made) =>
        drain(made, variant.worker, TASKS, admin),
      );
      await phase(databaseUrl, admin, 'purge (retainer)', 2 * TASKS + SINGLE, async (made) => {
        let deleted = 0;
        for (;;) {
          const [row] = await made.app.db.run(TaskPruneFinished, { olderThanMs: 0, limit: 1000, now: null });
          deleted += row?.deleted ?? 0;
          if ((row?.deleted ?? 0) < 1000) break;
        }
        return `${deleted} tasks deleted`;
      });
    }
    await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  } finally {
    await admin.end();
  }
}

runScript(() => withDatabase(measure));
