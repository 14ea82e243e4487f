-- Identifiers and codes compare byte by byte (COLLATE "C"), whatever the database's collation.
--
-- Every key of the hot path is text: a task's id, its queue, its name, the worker that holds it. A btree index
-- orders its keys, and its searches and inserts compare them, under the column's collation, which is the
-- database's unless the column names one. Under a linguistic collation each such comparison is a call into the C
-- library's (or ICU's) collation: sampled with perf (docs/benchmarks.md, fifteenth pass), text comparisons took 6%
-- of the server's CPU in a drain on a C.UTF-8 database, and on an en_US.UTF-8 database, the default of most
-- Linux installations, the same drain cost the server 111 to 120 us per task against 70 to 88 (11,637 to 12,514
-- tasks/s against 14,288 to 17,627). Under "C" a comparison is a memcmp.
--
-- What changes for a user: an ORDER BY on one of these columns sorts by byte (uppercase before lowercase, 'Z'
-- before 'a'); ids, which are lowercase hex, sort as before. Equality is unchanged: a database's collation is
-- deterministic, as "C" is. Free text (error messages, failure reasons) keeps the database's collation, and so do
-- the status columns, which only ever compare with constants (and a trigger's condition reads horsies_tasks.status,
-- which PostgreSQL would not let this change).
--
-- The columns keep their types (the seeds' VARCHAR lengths); only their collation changes, so no table is
-- rewritten (but horsies_workflow_tasks, below). Every index on them is rebuilt, under the migration's lock: 7.5 s for
-- a million tasks and half a million attempts on the machine of docs/benchmarks.md, during which nothing claims or
-- sends.
--
-- Workers that run across the migration hold statements their connections prepared before it; PostgreSQL refuses,
-- on that connection, every one that returns a column whose collation changed ("cached plan must not change result
-- type"). Database.run then renames every statement, so that each connection prepares it anew, and runs it again
-- when it was on the pool; in a transaction, that transaction fails once (src/db/Database.ts, isStalePlanError):
-- running workers go on without a restart.

ALTER TABLE {{schema}}.horsies_group_limits
  ALTER COLUMN queue_name TYPE varchar(100) COLLATE "C",
  ALTER COLUMN group_cursor TYPE varchar(255) COLLATE "C";

ALTER TABLE {{schema}}.horsies_heartbeats
  ALTER COLUMN task_id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN sender_id TYPE varchar(255) COLLATE "C",
  ALTER COLUMN role TYPE varchar(20) COLLATE "C",
  ALTER COLUMN hostname TYPE varchar(255) COLLATE "C";

ALTER TABLE {{schema}}.horsies_leaders
  ALTER COLUMN name TYPE varchar(100) COLLATE "C",
  ALTER COLUMN leader_id TYPE varchar(255) COLLATE "C";

ALTER TABLE {{schema}}.horsies_queue_state
  ALTER COLUMN queue_name TYPE varchar(100) COLLATE "C";

ALTER TABLE {{schema}}.horsies_rate_limiters
  ALTER COLUMN limiter_key TYPE varchar(300) COLLATE "C";

ALTER TABLE {{schema}}.horsies_schedule_state
  ALTER COLUMN schedule_name TYPE varchar(255) COLLATE "C",
  ALTER COLUMN last_task_id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN config_hash TYPE varchar(64) COLLATE "C";

ALTER TABLE {{schema}}.horsies_task_attempts
  ALTER COLUMN task_id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN outcome TYPE varchar(32) COLLATE "C",
  ALTER COLUMN error_code TYPE text COLLATE "C",
  ALTER COLUMN worker_id TYPE varchar(255) COLLATE "C",
  ALTER COLUMN worker_hostname TYPE varchar(255) COLLATE "C",
  ALTER COLUMN worker_process_name TYPE varchar(255) COLLATE "C";

ALTER TABLE {{schema}}.horsies_tasks
  ALTER COLUMN id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN task_name TYPE varchar(255) COLLATE "C",
  ALTER COLUMN queue_name TYPE varchar(100) COLLATE "C",
  ALTER COLUMN error_code TYPE text COLLATE "C",
  ALTER COLUMN claimed_by_worker_id TYPE varchar(255) COLLATE "C",
  ALTER COLUMN worker_hostname TYPE varchar(255) COLLATE "C",
  ALTER COLUMN worker_process_name TYPE varchar(255) COLLATE "C",
  ALTER COLUMN enqueue_sha TYPE varchar(64) COLLATE "C",
  ALTER COLUMN idempotency_key TYPE varchar(255) COLLATE "C",
  ALTER COLUMN workflow_id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN workflow_node_id TYPE varchar(255) COLLATE "C",
  ALTER COLUMN group_key TYPE varchar(255) COLLATE "C",
  ALTER COLUMN dedupe_key TYPE varchar(255) COLLATE "C",
  ALTER COLUMN dedupe_scope TYPE varchar(16) COLLATE "C";

ALTER TABLE {{schema}}.horsies_worker_states
  ALTER COLUMN worker_id TYPE varchar(255) COLLATE "C",
  ALTER COLUMN hostname TYPE varchar(255) COLLATE "C";

-- node_key is generated from workflow_id, and PostgreSQL changes no column a generated column reads: the key is
-- dropped (with its index) and generated again from the changed column (the table is rewritten once).
ALTER TABLE {{schema}}.horsies_workflow_tasks DROP COLUMN node_key;

ALTER TABLE {{schema}}.horsies_workflow_tasks
  ALTER COLUMN workflow_id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN node_id TYPE varchar(255) COLLATE "C",
  ALTER COLUMN task_name TYPE varchar(255) COLLATE "C",
  ALTER COLUMN queue_name TYPE varchar(100) COLLATE "C",
  ALTER COLUMN join_rule TYPE varchar(8) COLLATE "C",
  ALTER COLUMN task_id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN child_workflow_id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN error_code TYPE varchar(100) COLLATE "C",
  ALTER COLUMN subworkflow TYPE varchar(255) COLLATE "C";
ALTER TABLE {{schema}}.horsies_workflow_tasks
  ADD COLUMN node_key text COLLATE "C" GENERATED ALWAYS AS (workflow_id || ':' || node_index) STORED;
CREATE UNIQUE INDEX horsies_workflow_tasks_node_key_idx ON {{schema}}.horsies_workflow_tasks (node_key);

ALTER TABLE {{schema}}.horsies_workflows
  ALTER COLUMN id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN name TYPE varchar(255) COLLATE "C",
  ALTER COLUMN on_error TYPE varchar(8) COLLATE "C",
  ALTER COLUMN definition_sha TYPE varchar(64) COLLATE "C",
  ALTER COLUMN error_code TYPE varchar(100) COLLATE "C",
  ALTER COLUMN parent_workflow_id TYPE varchar(36) COLLATE "C",
  ALTER COLUMN root_workflow_id TYPE varchar(36) COLLATE "C";
