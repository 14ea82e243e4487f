/**
 * The hot path's server-side routines match the migrations that define them, and a hand edit of one in a live
 * database is reported.
 */
import { describe, expect, it } from 'vitest';
import { HOT_ROUTINES, routineBodies, routineDrift } from '../../src/db/routines.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();

describe('routineDrift', () => {
  it('finds every hot routine defined by a migration, and installed as defined after a fresh migrate', async () => {
    const bodies = routineBodies(HOT_ROUTINES);
    expect([...bodies.keys()].sort()).toEqual([...HOT_ROUTINES].sort());
    // Migration 12 defined the claim and the start last; migration 15 made claim-and-start one function, and
    // migration 25 redefined it; migration 22 counts the room under a cap.
    expect(Object.fromEntries([...bodies].map(([name, { migration }]) => [name, migration]))).toEqual({
      horsies_claim_tasks: 'paused_workflow_check',
      horsies_start_tasks: 'paused_workflow_check',
      horsies_claim_and_start: 'claim_start_order',
      horsies_cap_room: 'cap_room',
    });
    expect(await routineDrift(t.app().db)).toEqual([]);
    // Replaced, claim-and-start kept the settings of migration 20 (one generic plan, index lookups only).
    const [config] = await t.query<{ proconfig: string[] }>(
      `SELECT p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 AND p.proname = 'horsies_claim_and_start'`,
      [t.schema],
    );
    expect([...config!.proconfig].sort()).toEqual([
      'enable_hashjoin=off',
      'enable_mergejoin=off',
      'enable_seqscan=off',
      'plan_cache_mode=force_generic_plan',
    ]);
  });

  it('reports a routine replaced by hand, and one dropped', async () => {
    const app = t.app();
    const start = routineBodies(['horsies_start_tasks']).get('horsies_start_tasks')!;
    const [signature] = await t.query<{ args: string; result: string }>(
      `SELECT pg_get_function_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 AND p.proname = 'horsies_start_tasks'`,
      [t.schema],
    );
    // The same routine with one extra comment line: it behaves the same, yet it is not the migration's.
    await t.query(
      `CREATE OR REPLACE FUNCTION {{schema}}.horsies_start_tasks(${signature!.args}) RETURNS ${signature!.result}
       LANGUAGE plpgsql AS $body$-- edited by hand${start.body}$body$`,
    );
    await t.query('DROP FUNCTION {{schema}}.horsies_claim_and_start');
    expect(await routineDrift(app.db)).toEqual([
      { name: 'horsies_start_tasks', problem: 'changed', migration: 'paused_workflow_check' },
      { name: 'horsies_claim_and_start', problem: 'missing', migration: 'claim_start_order' },
    ]);
    expect(await routineDrift(app.db, ['horsies_no_such_routine'])).toEqual([
      { name: 'horsies_no_such_routine', problem: 'undefined', migration: null },
    ]);
  });
});
