/**
 * Times the dashboard's page queries over a million tasks (npm run bench:dashboard): each query as the dashboard
 * runs it (unprepared, planned for its parameters), and each page's whole read, p50 and max over repeated runs,
 * beside the index its plan walks and the server's own execution time (EXPLAIN ANALYZE).
 *
 * DATABASE_URL, or an embedded PostgreSQL started for the run. The rows go into a schema of their own
 * (`dashboard_bench`, dropped first). Options: ROWS (default 1000000), RUNS (default 30).
 */
import pg from 'pg';
import { Database } from '../src/db/Database.js';
import { renderSql } from '../src/db/sql.js';
import { migrate } from '../src/db/Migrator.js';
import {
  readDeadLetterGroups,
  readOverview,
  readQueues,
  readTask,
  readTaskPage,
  readWorkers,
} from '../src/dashboard/reads.js';
import type { TaskListQuery } from '../src/dashboard/reads.js';
import { fillTasks, pageQueries } from './dashboard-data.js';
import { runScript, withDatabase } from './database.js';

const SCHEMA = 'dashboard_bench';
const ROWS = Number(process.env.ROWS ?? 1_000_000);
const RUNS = Number(process.env.RUNS ?? 30);

async function time(fn: () => Promise<unknown>): Promise<{ p50: number; max: number }> {
  for (let i = 0; i < 3; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = process.hrtime.bigint();
    await fn();
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  samples.sort((a, b) => a - b);
  return { p50: samples[Math.floor(samples.length / 2)]!, max: samples[samples.length - 1]! };
}

interface Plan {
  'Index Name'?: string;
  Plans?: Plan[];
}

function indexes(plan: Plan): string[] {
  return [...(plan['Index Name'] ? [plan['Index Name']] : []), ...(plan.Plans ?? []).flatMap(indexes)];
}

const ms = (n: number): string => n.toFixed(2).padStart(8);

runScript(() =>
  withDatabase(async (url) => {
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    const db = new Database({ pool, schema: SCHEMA, preparedStatements: false });
    await migrate(db);
    const started = Date.now();
    await fillTasks(async (sql, values) => (await pool.query(renderSql(sql, SCHEMA), values)).rows, ROWS);
    console.log(
      `${ROWS.toLocaleString('en-US')} tasks made in ${((Date.now() - started) / 1000).toFixed(0)} s`,
    );
    const { rows: versions } = await pool.query<{ server_version: string }>('SHOW server_version');
    console.log(
      `PostgreSQL ${versions[0]!.server_version}, ${RUNS} runs after 3 warm-up runs, times in ms\n`,
    );
    const [{ id }] = (
      await pool.query(`SELECT id FROM ${SCHEMA}.horsies_tasks WHERE status = 'FAILED' LIMIT 1`)
    ).rows as [{ id: string }];

    console.log('query'.padEnd(62), '     p50      max  server  index');
    for (const q of pageQueries(id)) {
      const values = q.statement.values(q.params as never);
      const t = await time(() => db.run(q.statement, q.params as never));
      const { rows } = await pool.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${renderSql(q.statement.sql, SCHEMA)}`,
        values,
      );
      const [
        {
          'QUERY PLAN': [result],
        },
      ] = rows as [{ 'QUERY PLAN': [{ Plan: Plan; 'Execution Time': number }] }];
      console.log(
        `${q.page} / ${q.what}`.padEnd(62),
        ms(t.p50),
        ms(t.max),
        ms(result['Execution Time']),
        ` ${[...new Set(indexes(result.Plan))].join(', ') || '(none)'}`,
      );
    }

    const list = (tab: TaskListQuery['tab'], extra: Partial<TaskListQuery> = {}): TaskListQuery => ({
      tab,
      queue: null,
      taskName: null,
      errorCode: null,
      from: null,
      to: null,
      cursor: null,
      limit: 50,
      ...extra,
    });
    const pages: [string, () => Promise<unknown>][] = [
      ['overview', () => readOverview(db)],
      ['queues', () => readQueues(db)],
      ['tasks: pending', () => readTaskPage(db, list('pending'))],
      ['tasks: scheduled', () => readTaskPage(db, list('scheduled'))],
      ['tasks: retrying', () => readTaskPage(db, list('retrying'))],
      ['tasks: running', () => readTaskPage(db, list('running'))],
      ['tasks: completed', () => readTaskPage(db, list('completed'))],
      ['tasks: completed, queue emails', () => readTaskPage(db, list('completed', { queue: 'emails' }))],
      ['tasks: finished, rare queue', () => readTaskPage(db, list('finished', { queue: 'rareq' }))],
      ['tasks: finished, task_3', () => readTaskPage(db, list('finished', { taskName: 'task_3' }))],
      [
        'tasks: finished, rare task name',
        () => readTaskPage(db, list('finished', { taskName: 'rare.task' })),
      ],
      ['tasks: failed', () => readTaskPage(db, list('failed'))],
      ['tasks: failed, error E_HTTP', () => readTaskPage(db, list('failed', { errorCode: 'E_HTTP' }))],
      ['tasks: failed, rare error code', () => readTaskPage(db, list('failed', { errorCode: 'E_RARE' }))],
      ['tasks: expired', () => readTaskPage(db, list('expired'))],
      ['tasks: dead letters', () => readTaskPage(db, list('dead'))],
      ['task detail', () => readTask(db, id, false)],
      ['dead letters', () => readDeadLetterGroups(db)],
      ['workers', () => readWorkers(db)],
    ];
    console.log(`\n${'page (all its queries)'.padEnd(62)}      p50      max`);
    for (const [name, fn] of pages) {
      const t = await time(fn);
      console.log(name.padEnd(62), ms(t.p50), ms(t.max));
    }
    await pool.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
    await pool.end();
  }),
);
