/**
 * Every dashboard page query walks an index on a table of a million tasks (in a schema of its own, beside 201
 * workflows of 25,000 nodes in all): EXPLAIN of each with the page's parameters (the dashboard runs its statements unprepared, so this is the plan it gets)
 * shows the expected index and no sequential scan of a task-sized table. Without parameters (a generic plan)
 * there is still no sequential scan, so the statements stay safe if they are ever prepared.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { renderSql } from '../../src/db/sql.js';
import { fillTasks, pageQueries } from '../../scripts/dashboard-data.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();
const BIG_TABLES = [
  'horsies_tasks',
  'horsies_worker_states',
  'horsies_heartbeats',
  'horsies_task_attempts',
  'horsies_workflow_tasks',
];

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

async function explain(sql: string, values: unknown[] | null): Promise<PlanNode[]> {
  const client = await t.pool.connect();
  try {
    const text = renderSql(sql, t.schema);
    const result = values
      ? await client.query(`EXPLAIN (FORMAT JSON) ${text}`, values)
      : await client.query(`EXPLAIN (FORMAT JSON, GENERIC_PLAN) ${text}`);
    const [
      {
        'QUERY PLAN': [root],
      },
    ] = result.rows as [{ 'QUERY PLAN': [{ Plan: PlanNode }] }];
    return nodes(root.Plan);
  } finally {
    client.release();
  }
}

let taskId = '';
beforeAll(async () => {
  await fillTasks(async (sql, values) => t.query(sql, values));
  const [row] = await t.query<{ id: string }>(
    `SELECT id FROM {{schema}}.horsies_tasks WHERE status = 'FAILED' LIMIT 1`,
  );
  taskId = row!.id;
}, 600_000);

describe('dashboard queries over a million tasks', () => {
  it('holds the million rows', async () => {
    const [row] = await t.query<{ n: number }>('SELECT count(*)::int AS n FROM {{schema}}.horsies_tasks');
    expect(row!.n).toBe(1_000_000);
  });

  for (const plan of ['custom', 'generic'] as const) {
    it(`each page query uses its index (${plan} plan)`, async () => {
      let checked = 0;
      const problems: string[] = [];
      for (const query of pageQueries(taskId)) {
        const values = plan === 'custom' ? query.statement.values(query.params as never) : null;
        const found = await explain(query.statement.sql, values);
        const seqScans = found.filter(
          (n) => n['Node Type'] === 'Seq Scan' && BIG_TABLES.includes(n['Relation Name'] ?? ''),
        );
        const indexes = found.map((n) => n['Index Name']).filter(Boolean);
        if (seqScans.length > 0)
          problems.push(`${query.page} / ${query.what}: sequential scan of ${seqScans[0]!['Relation Name']}`);
        // The generic plan is only checked for sequential scans: the dashboard never runs it.
        if (plan === 'custom' && query.indexes.length > 0 && !indexes.some((i) => query.indexes.includes(i!)))
          problems.push(
            `${query.page} / ${query.what}: expected ${query.indexes.join(' or ')}, plan used [${indexes.join(', ')}]`,
          );
        checked += 1;
      }
      expect(checked).toBe(pageQueries(taskId).length);
      expect(problems).toEqual([]);
    });
  }
});
