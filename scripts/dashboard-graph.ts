/**
 * Times a 5,000-node workflow's page in headless Chromium and its API beside a million task rows:
 *
 * - the page: from navigation to the graph drawn (the UI loaded, `api/config` and `api/workflows/<id>` read, the
 *   graph laid out and its SVG in the document), median of RUNS loads;
 * - the API: `GET api/workflows/<id>` (every node with its dependencies, and the layers), its timeline and one
 *   node's detail, p50 and max over RUNS requests over HTTP, with a million rows in the task table.
 *
 * DATABASE_URL, or an embedded PostgreSQL started for the run; a schema of its own (`dashboard_graph`, dropped
 * first and after). Needs the built UI (npm run build:dashboard) and /usr/bin/chromium. Options: NODES (default
 * 5000), ROWS (default 1000000), RUNS (default 20).
 *
 *     npx tsx scripts/dashboard-graph.ts
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import pino from 'pino';
import { z } from 'zod';
import { createApp } from '../src/client/App.js';
import { createDashboard } from '../src/dashboard/Dashboard.js';
import { Database } from '../src/db/Database.js';
import { migrate } from '../src/db/Migrator.js';
import { renderSql } from '../src/db/sql.js';
import { workflow } from '../src/workflow/WorkflowDefinition.js';
import { launchBrowser } from '../test/dashboard/browser.js';
import { fillTasks } from './dashboard-data.js';
import { stagedGraph } from './dashboard-layout.js';
import { runScript, withDatabase } from './database.js';

const SCHEMA = 'dashboard_graph';
const NODES = Number(process.env.NODES ?? 5000);
const ROWS = Number(process.env.ROWS ?? 1_000_000);
const RUNS = Number(process.env.RUNS ?? 20);

function stats(samples: number[]): { p50: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: sorted[Math.floor(sorted.length / 2)]!, max: sorted[sorted.length - 1]! };
}

runScript(() =>
  withDatabase(async (url) => {
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await migrate(new Database({ pool, schema: SCHEMA }));
    let started = Date.now();
    await fillTasks(async (sql, values) => (await pool.query(renderSql(sql, SCHEMA), values)).rows, ROWS);
    console.log(
      `${ROWS.toLocaleString('en-US')} tasks made in ${((Date.now() - started) / 1000).toFixed(0)} s`,
    );

    const app = createApp({ databaseUrl: url, schema: SCHEMA, logger: pino({ level: 'silent' }) });
    const step = app.task({ name: 'graph.step', input: z.object({ n: z.number() }), handler: () => null });
    const wf = workflow(app, 'graph.large');
    const made: ReturnType<typeof wf.node>[] = [];
    for (const [i, spec] of stagedGraph(NODES, Math.round(Math.sqrt(NODES))).entries()) {
      made.push(wf.node(step, { id: `n${i}`, input: { n: i }, waitsFor: spec.deps.map((d) => made[d]!) }));
    }
    started = Date.now();
    const run = await wf.build().start();
    console.log(`a workflow of ${NODES} nodes started in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const dashboard = createDashboard(app);
    const server = createServer((req, res) => dashboard.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

    const timeApi = async (path: string): Promise<{ p50: number; max: number; bytes: number }> => {
      let bytes = 0;
      for (let i = 0; i < 3; i++) await (await fetch(`${base}${path}`)).arrayBuffer();
      const samples: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const t0 = performance.now();
        const response = await fetch(`${base}${path}`);
        bytes = (await response.arrayBuffer()).byteLength;
        samples.push(performance.now() - t0);
        if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
      }
      return { ...stats(samples), bytes };
    };
    console.log(`\nAPI over HTTP, ${RUNS} requests after 3 warm-up ones, ms`);
    for (const path of [
      `api/workflows/${run.id}`,
      `api/workflows/${run.id}/timeline`,
      `api/workflows/${run.id}/nodes/${NODES - 1}`,
    ]) {
      const t = await timeApi(path);
      console.log(
        `${path.replace(run.id, '<id>').padEnd(40)} p50 ${t.p50.toFixed(1).padStart(7)}  max ${t.max
          .toFixed(1)
          .padStart(7)}  ${(t.bytes / 1024).toFixed(0)} kB`,
      );
    }

    const { context, close } = await launchBrowser();
    const samples: number[] = [];
    let engine = '';
    let drawn = 0;
    for (let i = 0; i < Math.min(RUNS, 10) + 1; i++) {
      const page = await context.newPage();
      await page.goto(`${base}#/workflow/${encodeURIComponent(run.id)}`);
      await page.getByTestId('graph-svg').locator('[data-node]').first().waitFor({ timeout: 60_000 });
      const ms = await page.evaluate(() => performance.now());
      const entries = await page.evaluate(() =>
        performance
          .getEntriesByType('resource')
          .map((e) => [
            e.name.replace(/^.*\//, ''),
            Math.round((e as unknown as { responseEnd: number }).responseEnd),
          ]),
      );
      if (process.env.VERBOSE)
        console.log(`load ${i}: drawn at ${ms.toFixed(0)} ms; ${JSON.stringify(entries)}`);
      engine = (await page.getByTestId('graph').getAttribute('data-engine')) ?? '';
      drawn = await page.getByTestId('graph-svg').locator('[data-node]').count();
      if (i > 0) samples.push(ms); // the first load warms the browser's caches
      await page.close();
    }
    const page = stats(samples);
    console.log(
      `\npage of a ${NODES}-node workflow, navigation to graph drawn (${engine} layout, ${drawn} nodes in view): ` +
        `median ${page.p50.toFixed(0)} ms, max ${page.max.toFixed(0)} ms over ${samples.length} loads`,
    );

    await close();
    await dashboard.close();
    server.closeAllConnections();
    server.close();
    await app.close();
    await pool.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
    await pool.end();
  }),
);
