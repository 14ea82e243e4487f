/**
 * The row rules of the workflow tables, one function per table (migration 34): a row that breaks a rule is refused
 * with SQLSTATE 23514 and that rule's name as the constraint name, as the separate CHECK constraints did, and a
 * rule that is NULL passes.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();

/** A running workflow of two nodes, 0 → 1, both PENDING. */
async function workflow(): Promise<string> {
  const id = randomUUID();
  await t.query(
    `INSERT INTO {{schema}}.horsies_workflows (id, name, status, definition_sha, nodes_total, root_workflow_id)
     VALUES ($1, 'rules', 'RUNNING', 'x', 2, $1)`,
    [id],
  );
  await t.query(
    `INSERT INTO {{schema}}.horsies_workflow_tasks
       (workflow_id, node_index, node_id, task_name, queue_name, priority, dependencies, dependents, input_template,
        status, allow_failed_deps)
     VALUES ($1, 0, 'a', 'a', 'default', 100, '{}', '{1}', '{"static":null,"refs":[]}', 'PENDING', false),
            ($1, 1, 'b', 'b', 'default', 100, '{0}', '{}', '{"static":null,"refs":[]}', 'PENDING', false)`,
    [id],
  );
  return id;
}

/** The constraint an update broke, or null when it was accepted. */
async function broken(sql: string, values: unknown[]): Promise<string | null> {
  try {
    await t.query(sql, values);
    return null;
  } catch (error) {
    const e = error as { code?: string; constraint?: string; table?: string; schema?: string };
    expect(e.code).toBe('23514');
    expect(e.schema).toBe(t.schema);
    return `${e.table}.${e.constraint}`;
  }
}

const node = (set: string) =>
  `UPDATE {{schema}}.horsies_workflow_tasks SET ${set} WHERE workflow_id = $1 AND node_index = 1`;
const run = (set: string) => `UPDATE {{schema}}.horsies_workflows SET ${set} WHERE id = $1`;

describe('workflow row rules', () => {
  it('refuse a node row that breaks one, naming the rule', async () => {
    const id = await workflow();
    const cases: [string, string][] = [
      ["status = 'DONE'", 'status'],
      ['priority = 0', 'priority'],
      ["join_rule = 'most'", 'join'],
      ["join_rule = 'quorum'", 'quorum'],
      ["join_rule = 'quorum', min_success = 2", 'quorum'],
      ['deps_completed = 2', 'counts'],
      ['deps_failed = -1', 'counts'],
      ["status = 'COMPLETED'", 'completed'],
      ['completed_at = now()', 'completed'],
      ["status = 'ENQUEUED'", 'linked'],
      ["child_workflow_id = 'c'", 'subworkflow'],
      ["wait_kind = 'signal'", 'wait'],
      ["wait_kind = 'nap'", 'wait'],
      ["wait_kind = 'sleep', task_id = 't'", 'wait'],
      ['wait_timeout_ms = -1', 'wait'],
    ];
    for (const [set, rule] of cases) {
      expect([set, await broken(node(set), [id])]).toEqual([
        set,
        `horsies_workflow_tasks.horsies_workflow_tasks_${rule}_check`,
      ]);
    }
    // The row is as it was, and rows that keep the rules (a NULL rule passes) are written.
    expect(await broken(node("status = 'ENQUEUED', task_id = 't-1'"), [id])).toBeNull();
    expect(await broken(node("join_rule = 'quorum', min_success = 1"), [id])).toBeNull();
    expect(await broken(node("wait_kind = 'signal', wait_name = 'go', task_id = NULL"), [id])).toBeNull();
  });

  it('refuse a workflow row that breaks one, naming the rule', async () => {
    const id = await workflow();
    const cases: [string, string][] = [
      ["status = 'DONE'", 'status'],
      ["on_error = 'retry'", 'on_error'],
      ['nodes_terminal = 3', 'counts'],
      ['depth = -1', 'counts'],
      ["status = 'COMPLETED'", 'completed'],
      ['parent_workflow_id = $1', 'parent'],
    ];
    for (const [set, rule] of cases) {
      expect([set, await broken(run(set), [id])]).toEqual([
        set,
        `horsies_workflows.horsies_workflows_${rule}_check`,
      ]);
    }
    expect(
      await broken(run("status = 'COMPLETED', completed_at = now(), nodes_terminal = 2"), [id]),
    ).toBeNull();
  });
});
