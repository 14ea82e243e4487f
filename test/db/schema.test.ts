/**
 * A fresh migrate gives the schema the code expects: every column the statements read or write exists with the
 * expected type, the constraints hold, and migrating again changes nothing.
 */
import { describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/Migrator.js';
import { loadMigrations } from '../../src/db/migrationFiles.js';
import { useTestSchema } from '../support/db.js';

const t = await useTestSchema();

async function columns(table: string): Promise<Record<string, string>> {
  const rows = await t.query<{ column_name: string; data_type: string }>(
    `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`,
    [t.schema, table],
  );
  return Object.fromEntries(rows.map((r) => [r.column_name, r.data_type]));
}

describe('schema after a fresh migrate', () => {
  it('has every task column the code uses, with its type', async () => {
    const tz = 'timestamp with time zone';
    expect(await columns('horsies_tasks')).toEqual({
      id: 'character varying',
      task_name: 'character varying',
      queue_name: 'character varying',
      priority: 'integer',
      args: 'jsonb',
      kwargs: 'jsonb',
      status: 'character varying',
      sent_at: tz,
      enqueued_at: tz,
      claimed_at: tz,
      started_at: tz,
      completed_at: tz,
      failed_at: tz,
      finished_at: tz,
      result: 'jsonb',
      failed_reason: 'text',
      error_code: 'text',
      claimed: 'boolean',
      claimed_by_worker_id: 'character varying',
      claim_generation: 'integer',
      claim_token: 'uuid',
      claim_expires_at: tz,
      good_until: tz,
      attempt: 'integer',
      retry_count: 'integer',
      max_retries: 'integer',
      next_retry_at: tz,
      task_options: 'jsonb',
      worker_pid: 'integer',
      worker_hostname: 'character varying',
      worker_process_name: 'character varying',
      enqueue_sha: 'character varying',
      idempotency_key: 'character varying',
      cancel_requested_at: tz,
      resubmit_count: 'integer',
      resubmitted_at: tz,
      retention_ms: 'bigint',
      purge_after: tz,
      created_at: tz,
      updated_at: tz,
      workflow_id: 'character varying',
      workflow_node: 'integer',
      workflow_node_id: 'character varying',
      progress: 'jsonb',
      progress_at: tz,
      progress_attempt: 'integer',
      trace_context: 'jsonb',
      group_key: 'character varying',
      dedupe_key: 'character varying',
      dedupe_scope: 'character varying',
      dedupe_window_ms: 'bigint',
      dedupe_held: 'boolean',
    });
  });

  it('has the seed attempt, heartbeat, worker state and schedule columns', async () => {
    expect(Object.keys(await columns('horsies_task_attempts')).sort()).toEqual(
      [
        'id',
        'task_id',
        'attempt',
        'outcome',
        'will_retry',
        'started_at',
        'finished_at',
        'error_code',
        'error_message',
        'failed_reason',
        'worker_id',
        'worker_hostname',
        'worker_pid',
        'worker_process_name',
        'created_at',
      ].sort(),
    );
    expect(Object.keys(await columns('horsies_heartbeats')).sort()).toEqual(
      ['id', 'task_id', 'sender_id', 'role', 'sent_at', 'hostname', 'pid'].sort(),
    );
    expect(Object.keys(await columns('horsies_worker_states')).sort()).toEqual(
      [
        'id',
        'worker_id',
        'snapshot_at',
        'hostname',
        'pid',
        'processes',
        'queues',
        'tasks_running',
        'tasks_claimed',
        'memory_usage_mb',
        'cpu_percent',
        'memory_percent',
        'max_claim_batch',
        'max_claim_per_worker',
        'cluster_wide_cap',
        'queue_priorities',
        'queue_max_concurrency',
        'recovery_config',
        'worker_started_at',
        'task_names',
      ].sort(),
    );
    expect(Object.keys(await columns('horsies_schedule_state')).sort()).toEqual(
      [
        'schedule_name',
        'last_run_at',
        'next_run_at',
        'last_task_id',
        'run_count',
        'config_hash',
        'updated_at',
        // Migration 8: pause and the last failed send.
        'paused',
        'last_error',
        'last_error_at',
      ].sort(),
    );
  });

  it('refuses rows that break the lifecycle invariants', async () => {
    const insert = (columnsSql: string, values: string) =>
      t.query(
        `INSERT INTO {{schema}}.horsies_tasks (id, task_name, queue_name, ${columnsSql}) VALUES (gen_random_uuid()::text, 'x', 'default', ${values})`,
      );
    await expect(insert('status', `'DONE'`)).rejects.toThrow(/status_check/);
    await expect(insert('priority', '0')).rejects.toThrow(/priority_check/);
    await expect(insert('status', `'COMPLETED'`)).rejects.toThrow(/check/);
    await expect(insert('status, finished_at', `'FAILED', now()`)).rejects.toThrow(/failed_check/);
    await expect(insert('status', `'RUNNING'`)).rejects.toThrow(/claimed_check/);
    await expect(insert('args', `'{}'`)).rejects.toThrow(/args_check/);
  });

  it('is at the newest version, and migrating again applies nothing', async () => {
    const latest = Math.max(...loadMigrations().map((m) => m.version));
    const result = await migrate(t.app().db);
    expect(result).toEqual({ applied: [], version: latest, routines: [] });
  });
});
