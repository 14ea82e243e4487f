-- The task-side tables of the seed schema, with the differences listed in docs/schema.md.
-- {{schema}} is replaced by the quoted schema name; nothing else is templated.

CREATE TABLE {{schema}}.horsies_tasks (
  id varchar(36) PRIMARY KEY,
  task_name varchar(255) NOT NULL,
  queue_name varchar(100) NOT NULL,
  priority integer NOT NULL DEFAULT 100,
  args jsonb NOT NULL DEFAULT '[]'::jsonb,
  kwargs jsonb NOT NULL DEFAULT '{}'::jsonb,
  status varchar(16) NOT NULL DEFAULT 'PENDING',
  sent_at timestamptz NOT NULL DEFAULT now(),
  enqueued_at timestamptz NOT NULL DEFAULT now(),
  claimed_at timestamptz,
  started_at timestamptz,
  completed_at timestamptz,
  failed_at timestamptz,
  finished_at timestamptz,
  result jsonb,
  failed_reason text,
  error_code text,
  claimed boolean NOT NULL DEFAULT false,
  claimed_by_worker_id varchar(255),
  claim_generation integer NOT NULL DEFAULT 0,
  claim_expires_at timestamptz,
  good_until timestamptz,
  attempt integer NOT NULL DEFAULT 0,
  retry_count integer NOT NULL DEFAULT 0,
  max_retries integer NOT NULL DEFAULT 0,
  next_retry_at timestamptz,
  task_options jsonb,
  worker_pid integer,
  worker_hostname varchar(255),
  worker_process_name varchar(255),
  enqueue_sha varchar(64),
  idempotency_key varchar(255),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT horsies_tasks_status_check
    CHECK (status IN ('PENDING', 'CLAIMED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')),
  CONSTRAINT horsies_tasks_priority_check CHECK (priority BETWEEN 1 AND 100),
  CONSTRAINT horsies_tasks_args_check CHECK (jsonb_typeof(args) = 'array'),
  CONSTRAINT horsies_tasks_counts_check
    CHECK (attempt >= 0 AND retry_count >= 0 AND max_retries >= 0 AND claim_generation >= 0),
  -- A terminal status always has its terminal timestamp, and only a terminal status has one.
  CONSTRAINT horsies_tasks_finished_check
    CHECK ((status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')) = (finished_at IS NOT NULL)),
  CONSTRAINT horsies_tasks_completed_check CHECK ((status = 'COMPLETED') = (completed_at IS NOT NULL)),
  CONSTRAINT horsies_tasks_failed_check CHECK ((status = 'FAILED') = (failed_at IS NOT NULL)),
  -- The claim flag mirrors the statuses that hold a claim, and a claim always names its worker.
  CONSTRAINT horsies_tasks_claimed_check
    CHECK (claimed = (status IN ('CLAIMED', 'RUNNING'))
      AND (NOT claimed OR (claimed_by_worker_id IS NOT NULL AND claimed_at IS NOT NULL))),
  CONSTRAINT horsies_tasks_running_check CHECK (status <> 'RUNNING' OR started_at IS NOT NULL)
);

-- The claim query: PENDING rows of a queue in priority, then enqueue order; the id (time-ordered for generated
-- ids) orders the tasks of one bulk send, which share their enqueued_at.
CREATE INDEX horsies_tasks_claim_idx
  ON {{schema}}.horsies_tasks (queue_name, priority, enqueued_at, id)
  WHERE status = 'PENDING';

-- Tasks held by a worker (reaper, fencing checks, worker snapshots).
CREATE INDEX horsies_tasks_in_flight_idx
  ON {{schema}}.horsies_tasks (claimed_by_worker_id)
  WHERE status IN ('CLAIMED', 'RUNNING');

-- Expiry of PENDING tasks whose deadline passed.
CREATE INDEX horsies_tasks_good_until_idx
  ON {{schema}}.horsies_tasks (good_until)
  WHERE status = 'PENDING' AND good_until IS NOT NULL;

-- Retention and dead-letter listing walk terminal rows by age.
CREATE INDEX horsies_tasks_finished_idx
  ON {{schema}}.horsies_tasks (finished_at)
  WHERE finished_at IS NOT NULL;

CREATE INDEX horsies_tasks_error_code_idx
  ON {{schema}}.horsies_tasks (error_code)
  WHERE error_code IS NOT NULL;

CREATE UNIQUE INDEX horsies_tasks_idempotency_key_idx
  ON {{schema}}.horsies_tasks (idempotency_key)
  WHERE idempotency_key IS NOT NULL;

CREATE TABLE {{schema}}.horsies_task_attempts (
  id bigserial PRIMARY KEY,
  task_id varchar(36) NOT NULL REFERENCES {{schema}}.horsies_tasks (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  outcome varchar(32) NOT NULL,
  will_retry boolean NOT NULL DEFAULT false,
  started_at timestamptz,
  finished_at timestamptz NOT NULL,
  error_code text,
  error_message text,
  failed_reason text,
  worker_id varchar(255),
  worker_hostname varchar(255),
  worker_pid integer,
  worker_process_name varchar(255),
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT horsies_task_attempts_task_attempt_key UNIQUE (task_id, attempt),
  CONSTRAINT horsies_task_attempts_outcome_check CHECK (outcome IN ('COMPLETED', 'FAILED', 'WORKER_FAILURE')),
  CONSTRAINT horsies_task_attempts_attempt_check CHECK (attempt >= 1),
  CONSTRAINT horsies_task_attempts_error_check CHECK ((outcome = 'COMPLETED') = (error_code IS NULL))
);

CREATE INDEX horsies_task_attempts_error_code_idx
  ON {{schema}}.horsies_task_attempts (error_code)
  WHERE error_code IS NOT NULL;

CREATE INDEX horsies_task_attempts_finished_at_idx
  ON {{schema}}.horsies_task_attempts (finished_at DESC);

CREATE TABLE {{schema}}.horsies_heartbeats (
  id bigserial PRIMARY KEY,
  task_id varchar(36) NOT NULL,
  sender_id varchar(255) NOT NULL,
  role varchar(20) NOT NULL,
  sent_at timestamptz NOT NULL DEFAULT now(),
  hostname varchar(255),
  pid integer,
  CONSTRAINT horsies_heartbeats_role_check CHECK (role IN ('claimer', 'runner'))
);

CREATE INDEX horsies_heartbeats_task_role_sent_idx
  ON {{schema}}.horsies_heartbeats (task_id, role, sent_at DESC);

CREATE INDEX horsies_heartbeats_sent_at_idx
  ON {{schema}}.horsies_heartbeats (sent_at);

CREATE TABLE {{schema}}.horsies_worker_states (
  id bigserial PRIMARY KEY,
  worker_id varchar(255) NOT NULL,
  snapshot_at timestamptz NOT NULL DEFAULT now(),
  hostname varchar(255),
  pid integer,
  processes integer,
  queues varchar(100)[],
  tasks_running integer,
  tasks_claimed integer,
  memory_usage_mb double precision,
  cpu_percent double precision,
  memory_percent double precision,
  max_claim_batch integer,
  max_claim_per_worker integer,
  cluster_wide_cap integer,
  queue_priorities jsonb,
  queue_max_concurrency jsonb,
  recovery_config jsonb,
  worker_started_at timestamptz
);

CREATE INDEX horsies_worker_states_worker_snapshot_idx
  ON {{schema}}.horsies_worker_states (worker_id, snapshot_at DESC);

CREATE INDEX horsies_worker_states_snapshot_at_idx
  ON {{schema}}.horsies_worker_states (snapshot_at);

CREATE TABLE {{schema}}.horsies_schedule_state (
  schedule_name varchar(255) PRIMARY KEY,
  last_run_at timestamptz,
  next_run_at timestamptz,
  last_task_id varchar(36),
  run_count integer NOT NULL DEFAULT 0,
  config_hash varchar(64),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Notifications. Statement-level triggers with transition tables, so a statement that inserts or finishes
-- thousands of rows sends one notification per queue (inserts) or per 200 finished ids (task_done), not one per
-- row. Channels carry the schema name so that several apps (and test schemas) can share one database.

CREATE FUNCTION {{schema}}.horsies_notify_task_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  q text;
BEGIN
  FOR q IN SELECT DISTINCT queue_name FROM new_rows WHERE status = 'PENDING' LOOP
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_new', q);
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_queue_' || q, '');
  END LOOP;
  RETURN NULL;
END;
$$;

CREATE FUNCTION {{schema}}.horsies_notify_task_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  q text;
  ids text;
BEGIN
  -- Tasks that became claimable again (retry, requeue, resubmit) wake the workers of their queue.
  FOR q IN
    SELECT DISTINCT n.queue_name
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.status = 'PENDING' AND o.status <> 'PENDING'
  LOOP
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_new', q);
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_queue_' || q, '');
  END LOOP;
  -- Tasks that reached a terminal status wake result waiters; ids are coalesced, 200 to a payload
  -- (a payload must stay under 8000 bytes).
  FOR ids IN
    SELECT string_agg(d.id, ',')
    FROM (
      SELECT n.id, (row_number() OVER () - 1) / 200 AS chunk
      FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE n.status <> o.status AND n.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
    ) d
    GROUP BY d.chunk
  LOOP
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_done', ids);
  END LOOP;
  RETURN NULL;
END;
$$;

CREATE TRIGGER horsies_tasks_notify_insert
  AFTER INSERT ON {{schema}}.horsies_tasks
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.horsies_notify_task_insert();

CREATE TRIGGER horsies_tasks_notify_update
  AFTER UPDATE ON {{schema}}.horsies_tasks
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.horsies_notify_task_update();
