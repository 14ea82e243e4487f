-- Generated: do not edit. The schema a fresh migrate creates, read back from the catalog by
-- src/db/schemaDump.ts; {{schema}} stands for the schema name. Update it with `npm run schema:write`;
-- `npm run schema:check` (part of `npm run check`) and test/db/schemaDump.test.ts compare it with a migrate.

-- applied migrations (the versions only; the rest of the rows is data):
--   0001 task_tables
--   0002 failure_semantics
--   0003 liveness
--   0004 capacity
--   0005 row_update_trigger
--   0006 hot_transitions
--   0007 workflows
--   0008 schedule_control
--   0009 dashboard_indexes
--   0010 workflow_control
--   0011 observability
--   0012 paused_workflow_check
--   0013 flow_keys
--   0014 flow_limits
--   0015 direct_start
--   0016 row_bounds
--   0017 flow_claims
--   0018 row_check_function
--   0019 generic_finish
--   0020 fixed_plans
--   0021 keyed_insert_plan
--   0022 cap_room
--   0023 rate_order
--   0024 room_notice
--   0025 claim_start_order
--   0026 byte_order_keys
--   0027 send_handoff
--   0028 handoff_queues
--   0029 cancelled_unsettled
--   0030 waits
--   0031 worker_stops
--   0032 claim_token
--   0033 eager_steps
--   0034 workflow_row_checks
--   0035 workflow_step_sets

-- sequence horsies_heartbeats_id_seq
CREATE SEQUENCE {{schema}}.horsies_heartbeats_id_seq AS bigint
  START WITH 1 INCREMENT BY 1
  MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1
  OWNED BY {{schema}}.horsies_heartbeats.id;

-- sequence horsies_task_attempts_id_seq
CREATE SEQUENCE {{schema}}.horsies_task_attempts_id_seq AS bigint
  START WITH 1 INCREMENT BY 1
  MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1
  OWNED BY {{schema}}.horsies_task_attempts.id;

-- sequence horsies_worker_states_id_seq
CREATE SEQUENCE {{schema}}.horsies_worker_states_id_seq AS bigint
  START WITH 1 INCREMENT BY 1
  MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1
  OWNED BY {{schema}}.horsies_worker_states.id;

-- sequence horsies_workflow_signals_seq_seq
CREATE SEQUENCE {{schema}}.horsies_workflow_signals_seq_seq AS bigint
  START WITH 1 INCREMENT BY 1
  MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1
  OWNED BY {{schema}}.horsies_workflow_signals.seq;

-- table horsies_group_limits
CREATE TABLE {{schema}}.horsies_group_limits (
  queue_name character varying(100) COLLATE "C" NOT NULL,
  group_limit integer NOT NULL,
  group_cursor character varying(255) COLLATE "C",
  updated_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_heartbeats
CREATE TABLE {{schema}}.horsies_heartbeats (
  id bigint DEFAULT nextval('{{schema}}.horsies_heartbeats_id_seq'::regclass) NOT NULL,
  task_id character varying(36) COLLATE "C" NOT NULL,
  sender_id character varying(255) COLLATE "C" NOT NULL,
  role character varying(20) COLLATE "C" NOT NULL,
  sent_at timestamp with time zone DEFAULT now() NOT NULL,
  hostname character varying(255) COLLATE "C",
  pid integer
);

-- table horsies_idle_slots
CREATE TABLE {{schema}}.horsies_idle_slots (
  queue_name character varying(100) COLLATE "C" NOT NULL,
  worker_id character varying(255) COLLATE "C" NOT NULL,
  task_names text[] COLLATE "C" NOT NULL,
  free integer NOT NULL,
  lock_key bigint NOT NULL,
  channel text COLLATE "C" NOT NULL,
  token bigint NOT NULL,
  lease_ms integer NOT NULL,
  worker_hostname character varying(255),
  worker_pid integer,
  worker_process_name character varying(255),
  handed text[] COLLATE "C" DEFAULT '{}'::text[] NOT NULL,
  registered_at timestamp with time zone DEFAULT now() NOT NULL,
  queue_names text[] COLLATE "C"
);

-- table horsies_leaders
CREATE TABLE {{schema}}.horsies_leaders (
  name character varying(100) COLLATE "C" NOT NULL,
  leader_id character varying(255) COLLATE "C" NOT NULL,
  elected_at timestamp with time zone DEFAULT now() NOT NULL,
  renewed_at timestamp with time zone DEFAULT now() NOT NULL,
  expires_at timestamp with time zone NOT NULL
);

-- table horsies_queue_state
CREATE TABLE {{schema}}.horsies_queue_state (
  queue_name character varying(100) COLLATE "C" NOT NULL,
  paused boolean DEFAULT false NOT NULL,
  paused_at timestamp with time zone,
  updated_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_rate_limiters
CREATE TABLE {{schema}}.horsies_rate_limiters (
  limiter_key character varying(300) COLLATE "C" NOT NULL,
  max_starts integer NOT NULL,
  interval_ms integer NOT NULL,
  window_at timestamp with time zone[] DEFAULT '{}'::timestamp with time zone[] NOT NULL,
  window_count integer[] DEFAULT '{}'::integer[] NOT NULL,
  paused_until timestamp with time zone,
  updated_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_schedule_state
CREATE TABLE {{schema}}.horsies_schedule_state (
  schedule_name character varying(255) COLLATE "C" NOT NULL,
  last_run_at timestamp with time zone,
  next_run_at timestamp with time zone,
  last_task_id character varying(36) COLLATE "C",
  run_count integer DEFAULT 0 NOT NULL,
  config_hash character varying(64) COLLATE "C",
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  paused boolean DEFAULT false NOT NULL,
  last_error text,
  last_error_at timestamp with time zone
);

-- table horsies_schema_migrations
CREATE TABLE {{schema}}.horsies_schema_migrations (
  version integer NOT NULL,
  name text NOT NULL,
  applied_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_schema_routines
CREATE TABLE {{schema}}.horsies_schema_routines (
  name text NOT NULL,
  hash text NOT NULL,
  applied_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_task_attempts
CREATE TABLE {{schema}}.horsies_task_attempts (
  id bigint DEFAULT nextval('{{schema}}.horsies_task_attempts_id_seq'::regclass) NOT NULL,
  task_id character varying(36) COLLATE "C" NOT NULL,
  attempt integer NOT NULL,
  outcome character varying(32) COLLATE "C" NOT NULL,
  will_retry boolean DEFAULT false NOT NULL,
  started_at timestamp with time zone,
  finished_at timestamp with time zone NOT NULL,
  error_code text COLLATE "C",
  error_message text,
  failed_reason text,
  worker_id character varying(255) COLLATE "C",
  worker_hostname character varying(255) COLLATE "C",
  worker_pid integer,
  worker_process_name character varying(255) COLLATE "C",
  created_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_task_steps
CREATE TABLE {{schema}}.horsies_task_steps (
  task_id character varying(36) NOT NULL,
  name character varying(255) NOT NULL,
  seq integer NOT NULL,
  result jsonb NOT NULL,
  attempt integer NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_tasks
CREATE TABLE {{schema}}.horsies_tasks (
  id character varying(36) COLLATE "C" NOT NULL,
  task_name character varying(255) COLLATE "C" NOT NULL,
  queue_name character varying(100) COLLATE "C" NOT NULL,
  priority integer DEFAULT 100 NOT NULL,
  args jsonb DEFAULT '[]'::jsonb NOT NULL,
  kwargs jsonb DEFAULT '{}'::jsonb NOT NULL,
  status character varying(16) DEFAULT 'PENDING'::character varying NOT NULL,
  sent_at timestamp with time zone DEFAULT now() NOT NULL,
  enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
  claimed_at timestamp with time zone,
  started_at timestamp with time zone,
  completed_at timestamp with time zone,
  failed_at timestamp with time zone,
  finished_at timestamp with time zone,
  result jsonb,
  failed_reason text,
  error_code text COLLATE "C",
  claimed boolean DEFAULT false NOT NULL,
  claimed_by_worker_id character varying(255) COLLATE "C",
  claim_generation integer DEFAULT 0 NOT NULL,
  claim_expires_at timestamp with time zone,
  good_until timestamp with time zone,
  attempt integer DEFAULT 0 NOT NULL,
  retry_count integer DEFAULT 0 NOT NULL,
  max_retries integer DEFAULT 0 NOT NULL,
  next_retry_at timestamp with time zone,
  task_options jsonb,
  worker_pid integer,
  worker_hostname character varying(255) COLLATE "C",
  worker_process_name character varying(255) COLLATE "C",
  enqueue_sha character varying(64) COLLATE "C",
  idempotency_key character varying(255) COLLATE "C",
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  cancel_requested_at timestamp with time zone,
  resubmit_count integer DEFAULT 0 NOT NULL,
  resubmitted_at timestamp with time zone,
  retention_ms bigint,
  purge_after timestamp with time zone,
  workflow_id character varying(36) COLLATE "C",
  workflow_node integer,
  progress jsonb,
  progress_at timestamp with time zone,
  progress_attempt integer,
  trace_context jsonb,
  workflow_node_id character varying(255) COLLATE "C",
  group_key character varying(255) COLLATE "C",
  dedupe_key character varying(255) COLLATE "C",
  dedupe_scope character varying(16) COLLATE "C",
  dedupe_window_ms bigint,
  dedupe_held boolean,
  claim_token uuid
)
WITH (fillfactor=85);

-- table horsies_worker_states
CREATE TABLE {{schema}}.horsies_worker_states (
  id bigint DEFAULT nextval('{{schema}}.horsies_worker_states_id_seq'::regclass) NOT NULL,
  worker_id character varying(255) COLLATE "C" NOT NULL,
  snapshot_at timestamp with time zone DEFAULT now() NOT NULL,
  hostname character varying(255) COLLATE "C",
  pid integer,
  processes integer,
  queues character varying(100)[],
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
  worker_started_at timestamp with time zone,
  task_names character varying(255)[]
);

-- table horsies_worker_stops
CREATE TABLE {{schema}}.horsies_worker_stops (
  worker_id character varying(255) COLLATE "C" NOT NULL,
  hostname character varying(255) COLLATE "C",
  pid integer,
  queues character varying(100)[],
  worker_started_at timestamp with time zone,
  stopped_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_workflow_signals
CREATE TABLE {{schema}}.horsies_workflow_signals (
  workflow_id character varying(36) NOT NULL,
  delivery_id character varying(255) NOT NULL,
  node_index integer NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  payload jsonb NOT NULL,
  received_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table horsies_workflow_tasks
CREATE TABLE {{schema}}.horsies_workflow_tasks (
  workflow_id character varying(36) COLLATE "C" NOT NULL,
  node_index integer NOT NULL,
  node_id character varying(255) COLLATE "C" NOT NULL,
  task_name character varying(255) COLLATE "C" NOT NULL,
  queue_name character varying(100) COLLATE "C" NOT NULL,
  priority integer NOT NULL,
  dependencies integer[] DEFAULT '{}'::integer[] NOT NULL,
  dependents integer[] DEFAULT '{}'::integer[] NOT NULL,
  join_rule character varying(8) COLLATE "C" DEFAULT 'all'::character varying NOT NULL,
  min_success integer,
  allow_failed_deps boolean DEFAULT false NOT NULL,
  input_template jsonb NOT NULL,
  max_retries integer DEFAULT 0 NOT NULL,
  task_options jsonb,
  good_until timestamp with time zone,
  status character varying(16) NOT NULL,
  deps_completed integer DEFAULT 0 NOT NULL,
  deps_failed integer DEFAULT 0 NOT NULL,
  deps_skipped integer DEFAULT 0 NOT NULL,
  task_id character varying(36) COLLATE "C",
  child_workflow_id character varying(36) COLLATE "C",
  result jsonb,
  error_code character varying(100) COLLATE "C",
  enqueued_at timestamp with time zone,
  completed_at timestamp with time zone,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  subworkflow character varying(255) COLLATE "C",
  node_key text COLLATE "C" GENERATED ALWAYS AS ((workflow_id::text || ':'::text) || node_index) STORED,
  wait_kind character varying(8),
  wait_name character varying(255),
  wait_key text,
  wait_timeout_ms bigint,
  wait_until timestamp with time zone,
  wait_due_at timestamp with time zone
);

-- table horsies_workflows
CREATE TABLE {{schema}}.horsies_workflows (
  id character varying(36) COLLATE "C" NOT NULL,
  name character varying(255) COLLATE "C" NOT NULL,
  status character varying(16) NOT NULL,
  on_error character varying(8) COLLATE "C" DEFAULT 'fail'::character varying NOT NULL,
  output_index integer,
  success_policy jsonb,
  definition_sha character varying(64) COLLATE "C" NOT NULL,
  params jsonb,
  result jsonb,
  error_code character varying(100) COLLATE "C",
  nodes_total integer NOT NULL,
  nodes_terminal integer DEFAULT 0 NOT NULL,
  parent_workflow_id character varying(36) COLLATE "C",
  parent_node_index integer,
  root_workflow_id character varying(36) COLLATE "C" NOT NULL,
  depth integer DEFAULT 0 NOT NULL,
  sent_at timestamp with time zone DEFAULT now() NOT NULL,
  started_at timestamp with time zone,
  completed_at timestamp with time zone,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  trace_context jsonb
);

-- constraint horsies_group_limits.horsies_group_limits_limit_check
ALTER TABLE {{schema}}.horsies_group_limits ADD CONSTRAINT horsies_group_limits_limit_check CHECK (group_limit > 0);

-- constraint horsies_group_limits.horsies_group_limits_pkey
ALTER TABLE {{schema}}.horsies_group_limits ADD CONSTRAINT horsies_group_limits_pkey PRIMARY KEY (queue_name);

-- constraint horsies_heartbeats.horsies_heartbeats_pkey
ALTER TABLE {{schema}}.horsies_heartbeats ADD CONSTRAINT horsies_heartbeats_pkey PRIMARY KEY (id);

-- constraint horsies_heartbeats.horsies_heartbeats_role_check
ALTER TABLE {{schema}}.horsies_heartbeats ADD CONSTRAINT horsies_heartbeats_role_check CHECK (role::text = ANY (ARRAY['claimer'::character varying::text, 'runner'::character varying::text]));

-- constraint horsies_idle_slots.horsies_idle_slots_free_check
ALTER TABLE {{schema}}.horsies_idle_slots ADD CONSTRAINT horsies_idle_slots_free_check CHECK (free >= 0);

-- constraint horsies_idle_slots.horsies_idle_slots_lease_check
ALTER TABLE {{schema}}.horsies_idle_slots ADD CONSTRAINT horsies_idle_slots_lease_check CHECK (lease_ms > 0);

-- constraint horsies_idle_slots.horsies_idle_slots_pkey
ALTER TABLE {{schema}}.horsies_idle_slots ADD CONSTRAINT horsies_idle_slots_pkey PRIMARY KEY (queue_name, worker_id);

-- constraint horsies_leaders.horsies_leaders_expiry_check
ALTER TABLE {{schema}}.horsies_leaders ADD CONSTRAINT horsies_leaders_expiry_check CHECK (expires_at > elected_at);

-- constraint horsies_leaders.horsies_leaders_pkey
ALTER TABLE {{schema}}.horsies_leaders ADD CONSTRAINT horsies_leaders_pkey PRIMARY KEY (name);

-- constraint horsies_queue_state.horsies_queue_state_paused_check
ALTER TABLE {{schema}}.horsies_queue_state ADD CONSTRAINT horsies_queue_state_paused_check CHECK (paused = (paused_at IS NOT NULL));

-- constraint horsies_queue_state.horsies_queue_state_pkey
ALTER TABLE {{schema}}.horsies_queue_state ADD CONSTRAINT horsies_queue_state_pkey PRIMARY KEY (queue_name);

-- constraint horsies_rate_limiters.horsies_rate_limiters_pkey
ALTER TABLE {{schema}}.horsies_rate_limiters ADD CONSTRAINT horsies_rate_limiters_pkey PRIMARY KEY (limiter_key);

-- constraint horsies_rate_limiters.horsies_rate_limiters_settings_check
ALTER TABLE {{schema}}.horsies_rate_limiters ADD CONSTRAINT horsies_rate_limiters_settings_check CHECK (max_starts > 0 AND interval_ms > 0);

-- constraint horsies_rate_limiters.horsies_rate_limiters_window_check
ALTER TABLE {{schema}}.horsies_rate_limiters ADD CONSTRAINT horsies_rate_limiters_window_check CHECK (cardinality(window_at) = cardinality(window_count));

-- constraint horsies_schedule_state.horsies_schedule_state_pkey
ALTER TABLE {{schema}}.horsies_schedule_state ADD CONSTRAINT horsies_schedule_state_pkey PRIMARY KEY (schedule_name);

-- constraint horsies_schedule_state.horsies_schedule_state_run_count_check
ALTER TABLE {{schema}}.horsies_schedule_state ADD CONSTRAINT horsies_schedule_state_run_count_check CHECK (run_count >= 0);

-- constraint horsies_schema_migrations.horsies_schema_migrations_pkey
ALTER TABLE {{schema}}.horsies_schema_migrations ADD CONSTRAINT horsies_schema_migrations_pkey PRIMARY KEY (version);

-- constraint horsies_schema_routines.horsies_schema_routines_pkey
ALTER TABLE {{schema}}.horsies_schema_routines ADD CONSTRAINT horsies_schema_routines_pkey PRIMARY KEY (name);

-- constraint horsies_task_attempts.horsies_task_attempts_attempt_check
ALTER TABLE {{schema}}.horsies_task_attempts ADD CONSTRAINT horsies_task_attempts_attempt_check CHECK (attempt >= 1);

-- constraint horsies_task_attempts.horsies_task_attempts_error_check
ALTER TABLE {{schema}}.horsies_task_attempts ADD CONSTRAINT horsies_task_attempts_error_check CHECK ((outcome::text = 'COMPLETED'::text) = (error_code IS NULL));

-- constraint horsies_task_attempts.horsies_task_attempts_outcome_check
ALTER TABLE {{schema}}.horsies_task_attempts ADD CONSTRAINT horsies_task_attempts_outcome_check CHECK (outcome::text = ANY (ARRAY['COMPLETED'::character varying::text, 'FAILED'::character varying::text, 'WORKER_FAILURE'::character varying::text]));

-- constraint horsies_task_attempts.horsies_task_attempts_pkey
ALTER TABLE {{schema}}.horsies_task_attempts ADD CONSTRAINT horsies_task_attempts_pkey PRIMARY KEY (id);

-- constraint horsies_task_attempts.horsies_task_attempts_task_attempt_key
ALTER TABLE {{schema}}.horsies_task_attempts ADD CONSTRAINT horsies_task_attempts_task_attempt_key UNIQUE (task_id, attempt);

-- constraint horsies_task_attempts.horsies_task_attempts_task_id_fkey
ALTER TABLE {{schema}}.horsies_task_attempts ADD CONSTRAINT horsies_task_attempts_task_id_fkey FOREIGN KEY (task_id) REFERENCES {{schema}}.horsies_tasks(id) ON DELETE CASCADE;

-- constraint horsies_task_steps.horsies_task_steps_pkey
ALTER TABLE {{schema}}.horsies_task_steps ADD CONSTRAINT horsies_task_steps_pkey PRIMARY KEY (task_id, name);

-- constraint horsies_task_steps.horsies_task_steps_task_id_fkey
ALTER TABLE {{schema}}.horsies_task_steps ADD CONSTRAINT horsies_task_steps_task_id_fkey FOREIGN KEY (task_id) REFERENCES {{schema}}.horsies_tasks(id) ON DELETE CASCADE;

-- constraint horsies_tasks.horsies_tasks_pkey
ALTER TABLE {{schema}}.horsies_tasks ADD CONSTRAINT horsies_tasks_pkey PRIMARY KEY (id);

-- constraint horsies_tasks.horsies_tasks_row_check
ALTER TABLE {{schema}}.horsies_tasks ADD CONSTRAINT horsies_tasks_row_check CHECK ({{schema}}.horsies_task_row_check(horsies_tasks.*)) NOT VALID;

-- constraint horsies_worker_states.horsies_worker_states_pkey
ALTER TABLE {{schema}}.horsies_worker_states ADD CONSTRAINT horsies_worker_states_pkey PRIMARY KEY (id);

-- constraint horsies_worker_stops.horsies_worker_stops_pkey
ALTER TABLE {{schema}}.horsies_worker_stops ADD CONSTRAINT horsies_worker_stops_pkey PRIMARY KEY (worker_id);

-- constraint horsies_workflow_signals.horsies_workflow_signals_pkey
ALTER TABLE {{schema}}.horsies_workflow_signals ADD CONSTRAINT horsies_workflow_signals_pkey PRIMARY KEY (workflow_id, node_index, delivery_id);

-- constraint horsies_workflow_signals.horsies_workflow_signals_workflow_id_fkey
ALTER TABLE {{schema}}.horsies_workflow_signals ADD CONSTRAINT horsies_workflow_signals_workflow_id_fkey FOREIGN KEY (workflow_id) REFERENCES {{schema}}.horsies_workflows(id) ON DELETE CASCADE;

-- constraint horsies_workflow_tasks.horsies_workflow_tasks_node_id_key
ALTER TABLE {{schema}}.horsies_workflow_tasks ADD CONSTRAINT horsies_workflow_tasks_node_id_key UNIQUE (workflow_id, node_id);

-- constraint horsies_workflow_tasks.horsies_workflow_tasks_pkey
ALTER TABLE {{schema}}.horsies_workflow_tasks ADD CONSTRAINT horsies_workflow_tasks_pkey PRIMARY KEY (workflow_id, node_index);

-- constraint horsies_workflow_tasks.horsies_workflow_tasks_row_check
ALTER TABLE {{schema}}.horsies_workflow_tasks ADD CONSTRAINT horsies_workflow_tasks_row_check CHECK ({{schema}}.horsies_workflow_node_row_check(horsies_workflow_tasks.*)) NOT VALID;

-- constraint horsies_workflow_tasks.horsies_workflow_tasks_workflow_id_fkey
ALTER TABLE {{schema}}.horsies_workflow_tasks ADD CONSTRAINT horsies_workflow_tasks_workflow_id_fkey FOREIGN KEY (workflow_id) REFERENCES {{schema}}.horsies_workflows(id) ON DELETE CASCADE;

-- constraint horsies_workflows.horsies_workflows_parent_workflow_id_fkey
ALTER TABLE {{schema}}.horsies_workflows ADD CONSTRAINT horsies_workflows_parent_workflow_id_fkey FOREIGN KEY (parent_workflow_id) REFERENCES {{schema}}.horsies_workflows(id) ON DELETE CASCADE;

-- constraint horsies_workflows.horsies_workflows_pkey
ALTER TABLE {{schema}}.horsies_workflows ADD CONSTRAINT horsies_workflows_pkey PRIMARY KEY (id);

-- constraint horsies_workflows.horsies_workflows_row_check
ALTER TABLE {{schema}}.horsies_workflows ADD CONSTRAINT horsies_workflows_row_check CHECK ({{schema}}.horsies_workflow_row_check(horsies_workflows.*)) NOT VALID;

-- index horsies_group_limits_pkey
CREATE UNIQUE INDEX horsies_group_limits_pkey ON {{schema}}.horsies_group_limits USING btree (queue_name);

-- index horsies_heartbeats_pkey
CREATE UNIQUE INDEX horsies_heartbeats_pkey ON {{schema}}.horsies_heartbeats USING btree (id);

-- index horsies_heartbeats_sent_at_idx
CREATE INDEX horsies_heartbeats_sent_at_idx ON {{schema}}.horsies_heartbeats USING btree (sent_at);

-- index horsies_heartbeats_task_role_sent_idx
CREATE INDEX horsies_heartbeats_task_role_sent_idx ON {{schema}}.horsies_heartbeats USING btree (task_id, role, sent_at DESC);

-- index horsies_idle_slots_pkey
CREATE UNIQUE INDEX horsies_idle_slots_pkey ON {{schema}}.horsies_idle_slots USING btree (queue_name, worker_id);

-- index horsies_idle_slots_worker_idx
CREATE INDEX horsies_idle_slots_worker_idx ON {{schema}}.horsies_idle_slots USING btree (worker_id);

-- index horsies_leaders_pkey
CREATE UNIQUE INDEX horsies_leaders_pkey ON {{schema}}.horsies_leaders USING btree (name);

-- index horsies_queue_state_pkey
CREATE UNIQUE INDEX horsies_queue_state_pkey ON {{schema}}.horsies_queue_state USING btree (queue_name);

-- index horsies_rate_limiters_pkey
CREATE UNIQUE INDEX horsies_rate_limiters_pkey ON {{schema}}.horsies_rate_limiters USING btree (limiter_key);

-- index horsies_schedule_state_pkey
CREATE UNIQUE INDEX horsies_schedule_state_pkey ON {{schema}}.horsies_schedule_state USING btree (schedule_name);

-- index horsies_schema_migrations_pkey
CREATE UNIQUE INDEX horsies_schema_migrations_pkey ON {{schema}}.horsies_schema_migrations USING btree (version);

-- index horsies_schema_routines_pkey
CREATE UNIQUE INDEX horsies_schema_routines_pkey ON {{schema}}.horsies_schema_routines USING btree (name);

-- index horsies_task_attempts_error_code_idx
CREATE INDEX horsies_task_attempts_error_code_idx ON {{schema}}.horsies_task_attempts USING btree (error_code) WHERE (error_code IS NOT NULL);

-- index horsies_task_attempts_pkey
CREATE UNIQUE INDEX horsies_task_attempts_pkey ON {{schema}}.horsies_task_attempts USING btree (id);

-- index horsies_task_attempts_task_attempt_key
CREATE UNIQUE INDEX horsies_task_attempts_task_attempt_key ON {{schema}}.horsies_task_attempts USING btree (task_id, attempt);

-- index horsies_task_steps_pkey
CREATE UNIQUE INDEX horsies_task_steps_pkey ON {{schema}}.horsies_task_steps USING btree (task_id, name);

-- index horsies_tasks_cancel_requested_idx
CREATE INDEX horsies_tasks_cancel_requested_idx ON {{schema}}.horsies_tasks USING btree (claimed_by_worker_id) WHERE ((cancel_requested_at IS NOT NULL) AND claimed);

-- index horsies_tasks_claim_idx
CREATE INDEX horsies_tasks_claim_idx ON {{schema}}.horsies_tasks USING btree (queue_name, priority, enqueued_at, id) WHERE ((NOT claimed) AND (finished_at IS NULL));

-- index horsies_tasks_dead_letter_error_idx
CREATE INDEX horsies_tasks_dead_letter_error_idx ON {{schema}}.horsies_tasks USING btree (error_code, finished_at, id) WHERE ((finished_at IS NOT NULL) AND (completed_at IS NULL));

-- index horsies_tasks_dead_letter_idx
CREATE INDEX horsies_tasks_dead_letter_idx ON {{schema}}.horsies_tasks USING btree (finished_at, id) INCLUDE (task_name, queue_name, error_code) WHERE ((finished_at IS NOT NULL) AND (completed_at IS NULL));

-- index horsies_tasks_dedupe_key_idx
CREATE UNIQUE INDEX horsies_tasks_dedupe_key_idx ON {{schema}}.horsies_tasks USING btree (task_name, dedupe_key) WHERE dedupe_held;

-- index horsies_tasks_error_code_idx
CREATE INDEX horsies_tasks_error_code_idx ON {{schema}}.horsies_tasks USING btree (error_code) WHERE (error_code IS NOT NULL);

-- index horsies_tasks_finished_idx
CREATE INDEX horsies_tasks_finished_idx ON {{schema}}.horsies_tasks USING btree (finished_at) WHERE (finished_at IS NOT NULL);

-- index horsies_tasks_finished_name_idx
CREATE INDEX horsies_tasks_finished_name_idx ON {{schema}}.horsies_tasks USING btree (task_name, finished_at, id) WHERE (finished_at IS NOT NULL);

-- index horsies_tasks_finished_queue_idx
CREATE INDEX horsies_tasks_finished_queue_idx ON {{schema}}.horsies_tasks USING btree (queue_name, finished_at, id) WHERE (finished_at IS NOT NULL);

-- index horsies_tasks_good_until_idx
CREATE INDEX horsies_tasks_good_until_idx ON {{schema}}.horsies_tasks USING btree (good_until) WHERE ((good_until IS NOT NULL) AND (NOT claimed) AND (finished_at IS NULL));

-- index horsies_tasks_group_in_flight_idx
CREATE INDEX horsies_tasks_group_in_flight_idx ON {{schema}}.horsies_tasks USING btree (queue_name, group_key) WHERE (claimed AND (group_key IS NOT NULL));

-- index horsies_tasks_group_pending_idx
CREATE INDEX horsies_tasks_group_pending_idx ON {{schema}}.horsies_tasks USING btree (queue_name, group_key, priority, enqueued_at, id) WHERE ((NOT claimed) AND (finished_at IS NULL) AND (group_key IS NOT NULL));

-- index horsies_tasks_idempotency_key_idx
CREATE UNIQUE INDEX horsies_tasks_idempotency_key_idx ON {{schema}}.horsies_tasks USING btree (idempotency_key) WHERE (idempotency_key IS NOT NULL);

-- index horsies_tasks_in_flight_idx
CREATE INDEX horsies_tasks_in_flight_idx ON {{schema}}.horsies_tasks USING btree (claimed_by_worker_id) WHERE claimed;

-- index horsies_tasks_pkey
CREATE UNIQUE INDEX horsies_tasks_pkey ON {{schema}}.horsies_tasks USING btree (id);

-- index horsies_tasks_purge_after_idx
CREATE INDEX horsies_tasks_purge_after_idx ON {{schema}}.horsies_tasks USING btree (purge_after) WHERE (purge_after IS NOT NULL);

-- index horsies_tasks_retrying_idx
CREATE INDEX horsies_tasks_retrying_idx ON {{schema}}.horsies_tasks USING btree (enqueued_at, id) WHERE ((retry_count > 0) AND (NOT claimed) AND (finished_at IS NULL));

-- index horsies_worker_states_pkey
CREATE UNIQUE INDEX horsies_worker_states_pkey ON {{schema}}.horsies_worker_states USING btree (id);

-- index horsies_worker_states_snapshot_at_idx
CREATE INDEX horsies_worker_states_snapshot_at_idx ON {{schema}}.horsies_worker_states USING btree (snapshot_at);

-- index horsies_worker_states_worker_snapshot_idx
CREATE INDEX horsies_worker_states_worker_snapshot_idx ON {{schema}}.horsies_worker_states USING btree (worker_id, snapshot_at DESC);

-- index horsies_worker_stops_pkey
CREATE UNIQUE INDEX horsies_worker_stops_pkey ON {{schema}}.horsies_worker_stops USING btree (worker_id);

-- index horsies_worker_stops_stopped_at_idx
CREATE INDEX horsies_worker_stops_stopped_at_idx ON {{schema}}.horsies_worker_stops USING btree (stopped_at);

-- index horsies_workflow_signals_pkey
CREATE UNIQUE INDEX horsies_workflow_signals_pkey ON {{schema}}.horsies_workflow_signals USING btree (workflow_id, node_index, delivery_id);

-- index horsies_workflow_tasks_node_id_key
CREATE UNIQUE INDEX horsies_workflow_tasks_node_id_key ON {{schema}}.horsies_workflow_tasks USING btree (workflow_id, node_id);

-- index horsies_workflow_tasks_node_key_idx
CREATE UNIQUE INDEX horsies_workflow_tasks_node_key_idx ON {{schema}}.horsies_workflow_tasks USING btree (node_key);

-- index horsies_workflow_tasks_open_idx
CREATE INDEX horsies_workflow_tasks_open_idx ON {{schema}}.horsies_workflow_tasks USING btree (workflow_id, status) WHERE ((status)::text = ANY (ARRAY[('PENDING'::character varying)::text, ('READY'::character varying)::text, ('ENQUEUED'::character varying)::text, ('RUNNING'::character varying)::text]));

-- index horsies_workflow_tasks_pkey
CREATE UNIQUE INDEX horsies_workflow_tasks_pkey ON {{schema}}.horsies_workflow_tasks USING btree (workflow_id, node_index);

-- index horsies_workflow_tasks_task_idx
CREATE INDEX horsies_workflow_tasks_task_idx ON {{schema}}.horsies_workflow_tasks USING btree (task_id) WHERE (task_id IS NOT NULL);

-- index horsies_workflow_tasks_wait_due_idx
CREATE INDEX horsies_workflow_tasks_wait_due_idx ON {{schema}}.horsies_workflow_tasks USING btree (wait_due_at) WHERE (((status)::text = 'RUNNING'::text) AND (wait_due_at IS NOT NULL));

-- index horsies_workflow_tasks_wait_name_idx
CREATE INDEX horsies_workflow_tasks_wait_name_idx ON {{schema}}.horsies_workflow_tasks USING btree (wait_name, wait_key) WHERE (((status)::text = 'RUNNING'::text) AND ((wait_kind)::text = 'signal'::text));

-- index horsies_workflows_cancelled_open_idx
CREATE INDEX horsies_workflows_cancelled_open_idx ON {{schema}}.horsies_workflows USING btree (updated_at) WHERE (((status)::text = 'CANCELLED'::text) AND (nodes_terminal < nodes_total));

-- index horsies_workflows_completed_at_idx
CREATE INDEX horsies_workflows_completed_at_idx ON {{schema}}.horsies_workflows USING btree (completed_at) WHERE (completed_at IS NOT NULL);

-- index horsies_workflows_live_idx
CREATE INDEX horsies_workflows_live_idx ON {{schema}}.horsies_workflows USING btree (updated_at) WHERE ((status)::text = ANY ((ARRAY['PENDING'::character varying, 'RUNNING'::character varying, 'PAUSED'::character varying])::text[]));

-- index horsies_workflows_parent_idx
CREATE INDEX horsies_workflows_parent_idx ON {{schema}}.horsies_workflows USING btree (parent_workflow_id) WHERE (parent_workflow_id IS NOT NULL);

-- index horsies_workflows_paused_idx
CREATE INDEX horsies_workflows_paused_idx ON {{schema}}.horsies_workflows USING btree (id) WHERE ((status)::text = 'PAUSED'::text);

-- index horsies_workflows_pkey
CREATE UNIQUE INDEX horsies_workflows_pkey ON {{schema}}.horsies_workflows USING btree (id);

-- index horsies_workflows_sent_at_idx
CREATE INDEX horsies_workflows_sent_at_idx ON {{schema}}.horsies_workflows USING btree (sent_at DESC, id DESC);

-- statistics horsies_tasks_status_error_stats
CREATE STATISTICS {{schema}}.horsies_tasks_status_error_stats (mcv) ON status, error_code FROM {{schema}}.horsies_tasks;

-- function horsies_cap_room(p_key text, p_queue text, p_cluster_cap integer, p_queue_cap integer, p_extra integer, p_running boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_cap_room(p_key text, p_queue text, p_cluster_cap integer, p_queue_cap integer, p_extra integer, p_running boolean)
 RETURNS integer
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
DECLARE
  cluster_used integer;
  queue_used integer;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
  SELECT count(*) FILTER (WHERE t.status = 'RUNNING' OR (NOT p_running AND t.claim_expires_at > now())),
         count(*) FILTER (WHERE t.queue_name = p_queue
                            AND (t.status = 'RUNNING' OR (NOT p_running AND t.claim_expires_at > now())))
  INTO cluster_used, queue_used
  FROM {{schema}}.horsies_tasks t
  WHERE t.claimed;
  RETURN GREATEST(0, LEAST(p_cluster_cap + p_extra - cluster_used, p_queue_cap + p_extra - queue_used));
END;
$function$;

-- function horsies_claim_and_start(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_start integer, p_wait_for_flush boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_and_start(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_start integer, p_wait_for_flush boolean)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, status character varying, started_at timestamp with time zone, claim_token uuid)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
  picked varchar[];
BEGIN
  IF p_start <= 0 OR NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  -- PENDING, in the terms of horsies_tasks_claim_idx's predicate, in claim order. The paused workflows are read
  -- once per claim (an init plan over a small partial index), not looked up per task: a running workflow's row is
  -- updated at every step, and reading it for each claimed task walked its chain of row versions.
  picked := ARRAY(
    SELECT n.id FROM {{schema}}.horsies_tasks n
    WHERE NOT n.claimed AND n.finished_at IS NULL
      AND n.queue_name = p_queue
      AND n.task_name = ANY (p_task_names)
      AND n.enqueued_at <= now()
      AND (n.good_until IS NULL OR n.good_until > now())
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused)
      AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (ARRAY(
        SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED')))
    ORDER BY n.priority, n.enqueued_at, n.id
    LIMIT p_limit
    FOR UPDATE OF n SKIP LOCKED);
  IF cardinality(picked) = 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT * FROM {{schema}}.horsies_start_rows(picked, NULL, p_start, p_lease_ms, p_worker_id, p_hostname, p_pid,
                                              p_process_name);
END;
$function$;

-- function horsies_claim_and_start_retired(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_start integer, p_wait_for_flush boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_and_start_retired(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_start integer, p_wait_for_flush boolean)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, status character varying, started_at timestamp with time zone)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
  picked varchar[];
BEGIN
  IF p_start <= 0 OR NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  -- The selection of horsies_claim_tasks (migration 12), kept in claim order in an array.
  picked := ARRAY(
    SELECT n.id FROM {{schema}}.horsies_tasks n
    WHERE NOT n.claimed AND n.finished_at IS NULL
      AND n.queue_name = p_queue
      AND n.task_name = ANY (p_task_names)
      AND n.enqueued_at <= now()
      AND (n.good_until IS NULL OR n.good_until > now())
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused)
      AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (ARRAY(
        SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED')))
    ORDER BY n.priority, n.enqueued_at, n.id
    LIMIT p_limit
    FOR UPDATE OF n SKIP LOCKED);
  IF cardinality(picked) = 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN p.n <= p_start THEN 'RUNNING' ELSE 'CLAIMED' END,
      claimed = true,
      claimed_at = now(),
      claimed_by_worker_id = p_worker_id,
      claim_generation = t.claim_generation + 1,
      claim_expires_at = now() + p_lease_ms * interval '1 millisecond',
      started_at = CASE WHEN p.n <= p_start THEN now() ELSE t.started_at END,
      attempt = CASE WHEN p.n <= p_start THEN t.attempt + 1 ELSE t.attempt END,
      worker_hostname = p_hostname,
      worker_pid = p_pid,
      worker_process_name = p_process_name,
      updated_at = now()
  FROM unnest(picked) WITH ORDINALITY AS p(id, n)
  WHERE t.id = p.id
  RETURNING t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count,
            t.max_retries, t.attempt, t.enqueued_at, t.workflow_id, t.workflow_node,
            CASE WHEN t.workflow_id IS NOT NULL AND t.workflow_node_id IS NULL THEN (
              SELECT wt.node_id FROM {{schema}}.horsies_workflow_tasks wt
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) ELSE t.workflow_node_id END,
            t.trace_context, t.status, t.started_at;
END;
$function$;

-- function horsies_claim_limited(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_keys text[], p_max integer[], p_interval_ms integer[], p_group_limit integer, p_start integer, p_wait_for_flush boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_limited(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_keys text[], p_max integer[], p_interval_ms integer[], p_group_limit integer, p_start integer, p_wait_for_flush boolean)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, status character varying, started_at timestamp with time zone, claim_token uuid)
 LANGUAGE plpgsql
AS $function$
#variable_conflict use_column
DECLARE
  wanted integer := p_limit;
  limited boolean := cardinality(p_keys) > 0;
  starts integer := GREATEST(p_start, 0);
  claimed_count integer;
  cursor_key varchar;
  probe varchar;
  next_key varchar;
  wrapped boolean;
  room integer;
  groups varchar[] := '{}';
  rooms integer[] := '{}';
  ids text[];
  last_group varchar;
  paused_workflows varchar[];
BEGIN
  IF wanted <= 0 OR EXISTS (
      SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused) THEN
    RETURN;
  END IF;
  IF limited AND starts > 0 THEN
    wanted := LEAST(wanted, (SELECT a.room FROM {{schema}}.horsies_rate_acquire(
      p_keys, p_max, p_interval_ms, now(), wanted) a));
  ELSIF limited THEN
    wanted := LEAST(wanted, {{schema}}.horsies_rate_room(p_keys, p_max, p_interval_ms));
  END IF;
  IF wanted <= 0 THEN
    RETURN;
  END IF;
  starts := LEAST(starts, wanted);

  IF p_group_limit IS NULL THEN
    -- Rate limits alone: the plain claim, which starts the first `starts`.
    RETURN QUERY SELECT * FROM {{schema}}.horsies_claim_and_start(
      p_queue, p_task_names, wanted, p_lease_ms, p_worker_id, p_hostname, p_pid, p_process_name, starts,
      p_wait_for_flush);
    IF limited THEN
      -- Every task it returns it locked and wrote, the first `starts` of them RUNNING.
      GET DIAGNOSTICS claimed_count = ROW_COUNT;
      PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(), LEAST(starts, claimed_count));
    END IF;
    RETURN;
  END IF;

  IF starts = 0 OR NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('horsies.group.{{schema}}.' || p_queue, 0));
  INSERT INTO {{schema}}.horsies_group_limits AS g (queue_name, group_limit)
  VALUES (p_queue, p_group_limit)
  ON CONFLICT (queue_name) DO UPDATE SET group_limit = EXCLUDED.group_limit, updated_at = now()
    WHERE g.group_limit <> EXCLUDED.group_limit;
  SELECT g.group_cursor INTO cursor_key FROM {{schema}}.horsies_group_limits g WHERE g.queue_name = p_queue;
  paused_workflows := ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED');

  -- The turn: groups with PENDING tasks after the cursor, then from the first up to the cursor itself.
  probe := cursor_key;
  wrapped := cursor_key IS NULL;
  LOOP
    -- Two statements, not one with "probe IS NULL OR ...", whose plan could not use the bound.
    IF probe IS NULL THEN
      SELECT min(n.group_key) INTO next_key FROM {{schema}}.horsies_tasks n
      WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL AND n.queue_name = p_queue;
    ELSE
      SELECT min(n.group_key) INTO next_key FROM {{schema}}.horsies_tasks n
      WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL AND n.queue_name = p_queue
        AND n.group_key > probe;
    END IF;
    IF next_key IS NULL THEN
      EXIT WHEN wrapped;
      wrapped := true;
      probe := NULL;
      CONTINUE;
    END IF;
    EXIT WHEN wrapped AND cursor_key IS NOT NULL AND next_key > cursor_key;
    probe := next_key;
    SELECT p_group_limit - count(*)::integer INTO room FROM {{schema}}.horsies_tasks b
    WHERE b.claimed AND b.group_key IS NOT NULL AND b.queue_name = p_queue AND b.group_key = next_key
      AND (b.status = 'RUNNING' OR b.claim_expires_at > now());
    IF room > 0 THEN
      groups := groups || next_key;
      rooms := rooms || room;
      EXIT WHEN cardinality(groups) >= wanted;
    END IF;
  END LOOP;

  IF cardinality(groups) > 0 THEN
    SELECT array_agg(c.id ORDER BY c.rank, c.ord), (array_agg(c.group_key ORDER BY c.rank DESC, c.ord DESC))[1]
    INTO ids, last_group
    FROM (
      SELECT c.id, c.group_key, c.rank, g.ord
      FROM unnest(groups, rooms) WITH ORDINALITY AS g(key, room, ord)
      CROSS JOIN LATERAL (
        SELECT x.id, x.group_key, row_number() OVER (ORDER BY x.priority, x.enqueued_at, x.id) AS rank
        FROM (
          SELECT n.id, n.group_key, n.priority, n.enqueued_at FROM {{schema}}.horsies_tasks n
          WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL
            -- A range rather than group_key = g.key on purpose, with group_key leading the ORDER BY: only
            -- horsies_tasks_group_pending_idx gives that order, so the planner walks one group's tasks there, also
            -- for a group that held most tasks when the table was analyzed.
            AND n.queue_name = p_queue AND n.group_key >= g.key AND n.group_key <= g.key
            AND n.task_name = ANY (p_task_names)
            AND n.enqueued_at <= now()
            AND (n.good_until IS NULL OR n.good_until > now())
            AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (paused_workflows))
          ORDER BY n.group_key, n.priority, n.enqueued_at, n.id
          LIMIT LEAST(g.room, GREATEST(1, ceil(wanted::numeric / cardinality(groups))))
          FOR UPDATE OF n SKIP LOCKED
        ) x
      ) c
      ORDER BY c.rank, g.ord
      LIMIT wanted
    ) c;
  END IF;

  IF cardinality(ids) IS NULL OR cardinality(ids) < wanted THEN
    -- The tasks without a group: one more turn, from the front of the queue.
    ids := COALESCE(ids, '{}') || ARRAY(
      SELECT u.id FROM {{schema}}.horsies_tasks u
      WHERE u.id = ANY (ARRAY(
        SELECT f.id FROM (
          SELECT n.id, n.group_key FROM {{schema}}.horsies_tasks n
          WHERE NOT n.claimed AND n.finished_at IS NULL
            AND n.queue_name = p_queue
            AND n.task_name = ANY (p_task_names)
            AND n.enqueued_at <= now()
            AND (n.good_until IS NULL OR n.good_until > now())
            AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (paused_workflows))
          ORDER BY n.priority, n.enqueued_at, n.id
          LIMIT 500
        ) f
        WHERE f.group_key IS NULL))
        AND NOT u.claimed AND u.finished_at IS NULL
      LIMIT wanted - COALESCE(cardinality(ids), 0)
      FOR UPDATE SKIP LOCKED);
  END IF;
  IF last_group IS NOT NULL THEN
    UPDATE {{schema}}.horsies_group_limits g SET group_cursor = last_group WHERE g.queue_name = p_queue;
  END IF;

  -- The first `starts` tasks of the turn start at once, in the same row update, as horsies_claim_and_start does.
  RETURN QUERY
  SELECT * FROM {{schema}}.horsies_start_rows(ids::varchar[], NULL, starts, p_lease_ms, p_worker_id, p_hostname, p_pid,
                                              p_process_name);
  IF limited THEN
    -- Rate limits and a group limit: the update started the first `starts` of the tasks it locked.
    PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(),
                                           LEAST(starts, COALESCE(cardinality(ids), 0)));
  END IF;
END;
$function$;

-- function horsies_claim_limited_retired(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_keys text[], p_max integer[], p_interval_ms integer[], p_group_limit integer, p_start integer, p_wait_for_flush boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_limited_retired(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_keys text[], p_max integer[], p_interval_ms integer[], p_group_limit integer, p_start integer, p_wait_for_flush boolean)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, status character varying, started_at timestamp with time zone)
 LANGUAGE plpgsql
AS $function$
#variable_conflict use_column
DECLARE
  wanted integer := p_limit;
  limited boolean := cardinality(p_keys) > 0;
  starts integer := GREATEST(p_start, 0);
  claimed_count integer;
  cursor_key varchar;
  probe varchar;
  next_key varchar;
  wrapped boolean;
  room integer;
  groups varchar[] := '{}';
  rooms integer[] := '{}';
  ids text[];
  last_group varchar;
  paused_workflows varchar[];
BEGIN
  IF wanted <= 0 OR EXISTS (
      SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused) THEN
    RETURN;
  END IF;
  IF limited AND starts > 0 THEN
    wanted := LEAST(wanted, (SELECT a.room FROM {{schema}}.horsies_rate_acquire(
      p_keys, p_max, p_interval_ms, now(), wanted) a));
  ELSIF limited THEN
    wanted := LEAST(wanted, {{schema}}.horsies_rate_room(p_keys, p_max, p_interval_ms));
  END IF;
  IF wanted <= 0 THEN
    RETURN;
  END IF;
  starts := LEAST(starts, wanted);

  IF p_group_limit IS NULL THEN
    -- Rate limits alone: the plain claim, which starts the first `starts`.
    RETURN QUERY SELECT * FROM {{schema}}.horsies_claim_and_start(
      p_queue, p_task_names, wanted, p_lease_ms, p_worker_id, p_hostname, p_pid, p_process_name, starts,
      p_wait_for_flush);
    IF limited THEN
      -- Every task it returns it locked and wrote, the first `starts` of them RUNNING.
      GET DIAGNOSTICS claimed_count = ROW_COUNT;
      PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(), LEAST(starts, claimed_count));
    END IF;
    RETURN;
  END IF;

  IF starts = 0 OR NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('horsies.group.{{schema}}.' || p_queue, 0));
  INSERT INTO {{schema}}.horsies_group_limits AS g (queue_name, group_limit)
  VALUES (p_queue, p_group_limit)
  ON CONFLICT (queue_name) DO UPDATE SET group_limit = EXCLUDED.group_limit, updated_at = now()
    WHERE g.group_limit <> EXCLUDED.group_limit;
  SELECT g.group_cursor INTO cursor_key FROM {{schema}}.horsies_group_limits g WHERE g.queue_name = p_queue;
  paused_workflows := ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED');

  -- The turn: groups with PENDING tasks after the cursor, then from the first up to the cursor itself.
  probe := cursor_key;
  wrapped := cursor_key IS NULL;
  LOOP
    -- Two statements, not one with "probe IS NULL OR ...", whose plan could not use the bound.
    IF probe IS NULL THEN
      SELECT min(n.group_key) INTO next_key FROM {{schema}}.horsies_tasks n
      WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL AND n.queue_name = p_queue;
    ELSE
      SELECT min(n.group_key) INTO next_key FROM {{schema}}.horsies_tasks n
      WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL AND n.queue_name = p_queue
        AND n.group_key > probe;
    END IF;
    IF next_key IS NULL THEN
      EXIT WHEN wrapped;
      wrapped := true;
      probe := NULL;
      CONTINUE;
    END IF;
    EXIT WHEN wrapped AND cursor_key IS NOT NULL AND next_key > cursor_key;
    probe := next_key;
    SELECT p_group_limit - count(*)::integer INTO room FROM {{schema}}.horsies_tasks b
    WHERE b.claimed AND b.group_key IS NOT NULL AND b.queue_name = p_queue AND b.group_key = next_key
      AND (b.status = 'RUNNING' OR b.claim_expires_at > now());
    IF room > 0 THEN
      groups := groups || next_key;
      rooms := rooms || room;
      EXIT WHEN cardinality(groups) >= wanted;
    END IF;
  END LOOP;

  IF cardinality(groups) > 0 THEN
    SELECT array_agg(c.id ORDER BY c.rank, c.ord), (array_agg(c.group_key ORDER BY c.rank DESC, c.ord DESC))[1]
    INTO ids, last_group
    FROM (
      SELECT c.id, c.group_key, c.rank, g.ord
      FROM unnest(groups, rooms) WITH ORDINALITY AS g(key, room, ord)
      CROSS JOIN LATERAL (
        SELECT x.id, x.group_key, row_number() OVER (ORDER BY x.priority, x.enqueued_at, x.id) AS rank
        FROM (
          SELECT n.id, n.group_key, n.priority, n.enqueued_at FROM {{schema}}.horsies_tasks n
          WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL
            -- A range rather than group_key = g.key on purpose, with group_key leading the ORDER BY: only
            -- horsies_tasks_group_pending_idx gives that order, so the planner walks one group's tasks there, also
            -- for a group that held most tasks when the table was analyzed.
            AND n.queue_name = p_queue AND n.group_key >= g.key AND n.group_key <= g.key
            AND n.task_name = ANY (p_task_names)
            AND n.enqueued_at <= now()
            AND (n.good_until IS NULL OR n.good_until > now())
            AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (paused_workflows))
          ORDER BY n.group_key, n.priority, n.enqueued_at, n.id
          LIMIT LEAST(g.room, GREATEST(1, ceil(wanted::numeric / cardinality(groups))))
          FOR UPDATE OF n SKIP LOCKED
        ) x
      ) c
      ORDER BY c.rank, g.ord
      LIMIT wanted
    ) c;
  END IF;

  IF cardinality(ids) IS NULL OR cardinality(ids) < wanted THEN
    -- The tasks without a group: one more turn, from the front of the queue.
    ids := COALESCE(ids, '{}') || ARRAY(
      SELECT u.id FROM {{schema}}.horsies_tasks u
      WHERE u.id = ANY (ARRAY(
        SELECT f.id FROM (
          SELECT n.id, n.group_key FROM {{schema}}.horsies_tasks n
          WHERE NOT n.claimed AND n.finished_at IS NULL
            AND n.queue_name = p_queue
            AND n.task_name = ANY (p_task_names)
            AND n.enqueued_at <= now()
            AND (n.good_until IS NULL OR n.good_until > now())
            AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (paused_workflows))
          ORDER BY n.priority, n.enqueued_at, n.id
          LIMIT 500
        ) f
        WHERE f.group_key IS NULL))
        AND NOT u.claimed AND u.finished_at IS NULL
      LIMIT wanted - COALESCE(cardinality(ids), 0)
      FOR UPDATE SKIP LOCKED);
  END IF;
  IF last_group IS NOT NULL THEN
    UPDATE {{schema}}.horsies_group_limits g SET group_cursor = last_group WHERE g.queue_name = p_queue;
  END IF;

  -- The first `starts` tasks of the turn start at once, in the same row update, as horsies_claim_and_start does.
  RETURN QUERY
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN t.id = ANY (ids[1:starts]) THEN 'RUNNING' ELSE 'CLAIMED' END,
      claimed = true,
      claimed_at = now(),
      claimed_by_worker_id = p_worker_id,
      claim_generation = t.claim_generation + 1,
      claim_expires_at = now() + p_lease_ms * interval '1 millisecond',
      started_at = CASE WHEN t.id = ANY (ids[1:starts]) THEN now() ELSE t.started_at END,
      attempt = CASE WHEN t.id = ANY (ids[1:starts]) THEN t.attempt + 1 ELSE t.attempt END,
      worker_hostname = p_hostname,
      worker_pid = p_pid,
      worker_process_name = p_process_name,
      updated_at = now()
  WHERE t.id = ANY (ids)
  RETURNING t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count,
            t.max_retries, t.attempt, t.enqueued_at, t.workflow_id, t.workflow_node,
            CASE WHEN t.workflow_id IS NOT NULL AND t.workflow_node_id IS NULL THEN (
              SELECT wt.node_id FROM {{schema}}.horsies_workflow_tasks wt
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) ELSE t.workflow_node_id END,
            t.trace_context, t.status, t.started_at;
  IF limited THEN
    -- Rate limits and a group limit: the update started the first `starts` of the tasks it locked.
    PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(),
                                           LEAST(starts, COALESCE(cardinality(ids), 0)));
  END IF;
END;
$function$;

-- function horsies_claim_rows(p_ids character varying[], p_start integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_rows(p_ids character varying[], p_start integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, status character varying, started_at timestamp with time zone, claim_token uuid)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
BEGIN
  RETURN QUERY
  SELECT * FROM {{schema}}.horsies_start_rows(p_ids, NULL, p_start, p_lease_ms, p_worker_id, p_hostname, p_pid,
                                              p_process_name);
END;
$function$;

-- function horsies_claim_tasks(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_tasks(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, claim_token uuid)
 LANGUAGE plpgsql
AS $function$
BEGIN
  RETURN QUERY
  SELECT c.id, c.task_name, c.queue_name, c.priority, c.kwargs, c.claim_generation, c.retry_count, c.max_retries,
         c.attempt, c.enqueued_at, c.workflow_id, c.workflow_node, c.workflow_node_id, c.trace_context,
         c.claim_token
  FROM {{schema}}.horsies_claim_and_start(p_queue, p_task_names, p_limit, p_lease_ms, p_worker_id, p_hostname, p_pid,
                                          p_process_name, 0, false) c;
END;
$function$;

-- function horsies_claim_tasks_retired(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_tasks_retired(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb)
 LANGUAGE plpgsql
AS $function$
#variable_conflict use_column
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN QUERY
  WITH next AS (
    SELECT n.id FROM {{schema}}.horsies_tasks n
    -- PENDING, in the terms of horsies_tasks_claim_idx's predicate.
    WHERE NOT n.claimed AND n.finished_at IS NULL
      AND n.queue_name = p_queue
      AND n.task_name = ANY (p_task_names)
      AND n.enqueued_at <= now()
      AND (n.good_until IS NULL OR n.good_until > now())
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused)
      -- The paused workflows are read once per claim (an init plan over a small partial index), not looked up
      -- per task: a running workflow's row is updated at every step of it, and reading it for each claimed task
      -- walked its chain of row versions.
      AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (ARRAY(
        SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED')))
    ORDER BY n.priority, n.enqueued_at, n.id
    LIMIT p_limit
    FOR UPDATE OF n SKIP LOCKED
  )
  UPDATE {{schema}}.horsies_tasks t
  SET status = 'CLAIMED',
      claimed = true,
      claimed_at = now(),
      claimed_by_worker_id = p_worker_id,
      claim_generation = t.claim_generation + 1,
      claim_expires_at = now() + p_lease_ms * interval '1 millisecond',
      worker_hostname = p_hostname,
      worker_pid = p_pid,
      worker_process_name = p_process_name,
      updated_at = now()
  -- The ids go through an array so the planner looks each row up by primary key; joining the CTE instead
  -- turns into a hash join over a sequential scan of the whole table once the batch is large.
  WHERE t.id = ANY (ARRAY(SELECT next.id FROM next))
  RETURNING t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count,
            t.max_retries, t.attempt, t.enqueued_at, t.workflow_id, t.workflow_node,
            CASE WHEN t.workflow_id IS NOT NULL AND t.workflow_node_id IS NULL THEN (
              SELECT wt.node_id FROM {{schema}}.horsies_workflow_tasks wt
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) ELSE t.workflow_node_id END,
            t.trace_context;
END;
$function$;

-- function horsies_finish_and_step(p_ids text[], p_worker_ids text[], p_statuses text[], p_results jsonb[], p_error_codes text[], p_error_messages text[], p_failed_reasons text[], p_retry_delays_ms integer[], p_crashed boolean[], p_tokens uuid[], p_channel text, p_eager jsonb)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_finish_and_step(p_ids text[], p_worker_ids text[], p_statuses text[], p_results jsonb[], p_error_codes text[], p_error_messages text[], p_failed_reasons text[], p_retry_delays_ms integer[], p_crashed boolean[], p_tokens uuid[], p_channel text, p_eager jsonb)
 RETURNS TABLE(id character varying, status character varying, workflow_id character varying, workflow_node integer, stepped boolean, step jsonb)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
  -- The outcomes written (parallel: task, status, workflow, node, and whether its node is stepped here).
  v_ids text[];
  v_status text[];
  v_wid text[];
  v_node integer[];
  v_stepped boolean[];
  v_locked text[];
BEGIN
  v_locked := ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w
                    WHERE w.id = ANY (ARRAY(SELECT t.workflow_id FROM {{schema}}.horsies_tasks t
                                            WHERE t.id = ANY (p_ids) AND t.workflow_id IS NOT NULL))
                    ORDER BY w.id
                    FOR UPDATE SKIP LOCKED);
  -- A node is stepped here when its task ended (a retry leaves it PENDING) and its workflow is locked.
  SELECT coalesce(array_agg(f.id), '{}'), coalesce(array_agg(f.status), '{}'),
         coalesce(array_agg(f.workflow_id), '{}'), coalesce(array_agg(f.workflow_node), '{}'),
         coalesce(array_agg(coalesce(f.workflow_id = ANY (v_locked), false) AND f.status <> 'PENDING'), '{}')
  INTO v_ids, v_status, v_wid, v_node, v_stepped
  FROM {{schema}}.horsies_finish_tasks(p_ids, p_worker_ids, NULL, p_statuses, p_results, p_error_codes,
         p_error_messages, p_failed_reasons, p_retry_delays_ms, p_crashed, false, true, p_tokens) f;
  RETURN QUERY
  SELECT f.id::varchar, f.status::varchar, f.wid::varchar, f.node, f.stepped, NULL::jsonb
  FROM unnest(v_ids, v_status, v_wid, v_node, v_stepped) AS f(id, status, wid, node, stepped);
  IF true = ANY (v_stepped) THEN
    RETURN QUERY
    SELECT NULL::varchar, NULL::varchar, NULL::varchar, NULL::integer, NULL::boolean, to_jsonb(s)
    FROM {{schema}}.horsies_workflow_step(
      ARRAY(SELECT e.wid FROM unnest(v_wid, v_stepped) AS e(wid, stepped) WHERE e.stepped),
      ARRAY(SELECT e.node FROM unnest(v_node, v_stepped) AS e(node, stepped) WHERE e.stepped),
      p_channel, true, p_eager) s;
  END IF;
END;
$function$;

-- function horsies_finish_found(p_found boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_finish_found(p_found boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF NOT p_found THEN
    RAISE EXCEPTION 'the task is no longer this run''s (reaped, claimed again or cancelled)'
      USING ERRCODE = 'HR001';
  END IF;
  RETURN false;
END;
$function$;

-- function horsies_finish_tasks(p_ids text[], p_worker_ids text[], p_generations integer[], p_statuses text[], p_results jsonb[], p_error_codes text[], p_error_messages text[], p_failed_reasons text[], p_retry_delays_ms integer[], p_crashed boolean[], p_unless_cancel_requested boolean, p_notify_later boolean, p_tokens uuid[])
CREATE OR REPLACE FUNCTION {{schema}}.horsies_finish_tasks(p_ids text[], p_worker_ids text[], p_generations integer[], p_statuses text[], p_results jsonb[], p_error_codes text[], p_error_messages text[], p_failed_reasons text[], p_retry_delays_ms integer[], p_crashed boolean[], p_unless_cancel_requested boolean, p_notify_later boolean, p_tokens uuid[] DEFAULT NULL::uuid[])
 RETURNS TABLE(id character varying, status character varying, workflow_id character varying, workflow_node integer)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  -- With p_notify_later, the update trigger leaves the task_done notifications to the caller (migration 15).
  PERFORM set_config('horsies.notify_done_later', CASE WHEN p_notify_later THEN 'on' ELSE 'off' END, true);
  RETURN QUERY
  WITH input AS (
    SELECT i.*
    FROM unnest(p_ids, p_worker_ids, p_generations, p_tokens, p_statuses, p_results, p_error_codes,
                p_error_messages, p_failed_reasons, p_retry_delays_ms, p_crashed)
      AS i(id, worker_id, generation, token, status, result, error_code, error_message, failed_reason,
           retry_delay_ms, crashed)
  ), target AS (
    -- Driven from the input, one primary-key lookup per task: a join the other way round can turn into a
    -- nested loop over every in-flight row of the worker times every input row. Locked, so that a retry's
    -- outcome is decided on the latest row (a cancel request turns it into CANCELLED).
    SELECT i.*, t.*
    FROM input i
    CROSS JOIN LATERAL (
      SELECT t.attempt, t.started_at, t.worker_hostname, t.worker_pid, t.worker_process_name,
             t.cancel_requested_at, t.good_until
      FROM {{schema}}.horsies_tasks t
      -- Written so that no index can serve it (status || ''): a generic plan would otherwise prefer the
      -- in-flight index and scan all of the worker's rows for each input row, instead of one primary-key lookup.
      WHERE t.id = i.id AND t.status || '' = 'RUNNING' AND t.claimed_by_worker_id || '' = i.worker_id
        -- The claim token (none on a claim made before migration 32, which the reaper may still write off). The
        -- workers of 0.1 pass no tokens, and are fenced on the generation until they are gone.
        AND (t.claim_token IS NOT DISTINCT FROM i.token OR (p_tokens IS NULL AND t.claim_generation = i.generation))
        AND (p_unless_cancel_requested IS NOT TRUE OR t.cancel_requested_at IS NULL)
      FOR UPDATE
    ) t
  ), decided AS (
    SELECT g.*,
           CASE
             WHEN g.status NOT IN ('RETRY', 'THROTTLED') THEN g.status
             WHEN g.cancel_requested_at IS NOT NULL THEN 'CANCELLED'
             WHEN g.good_until IS NOT NULL
                  AND now() + g.retry_delay_ms * interval '1 millisecond' >= g.good_until THEN 'FAILED'
             ELSE g.status
           END AS final
    FROM target g
  ), finished AS (
    UPDATE {{schema}}.horsies_tasks t
    SET status = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN 'PENDING' ELSE d.final END,
        completed_at = CASE WHEN d.final = 'COMPLETED' THEN now() END,
        failed_at = CASE WHEN d.final = 'FAILED' THEN now() END,
        finished_at = CASE WHEN d.final NOT IN ('RETRY', 'RELEASE', 'THROTTLED') THEN now() END,
        result = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                      WHEN d.final = 'CANCELLED' AND d.status IN ('RETRY', 'THROTTLED') THEN jsonb_build_object('err',
                        jsonb_build_object('code', 'TASK_CANCELLED', 'message', 'cancelled instead of retried'))
                      ELSE d.result END,
        error_code = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                          WHEN d.final = 'CANCELLED' AND d.status IN ('RETRY', 'THROTTLED') THEN 'TASK_CANCELLED'
                          ELSE d.error_code END,
        failed_reason = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE d.failed_reason END,
        claimed = false,
        claim_expires_at = NULL,
        claimed_at = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE t.claimed_at END,
        claimed_by_worker_id = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                                    ELSE t.claimed_by_worker_id END,
        started_at = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE t.started_at END,
        attempt = t.attempt - CASE WHEN d.final = 'RELEASE' THEN 1 ELSE 0 END,
        retry_count = t.retry_count + CASE WHEN d.final = 'RETRY' THEN 1 ELSE 0 END,
        next_retry_at = CASE WHEN d.final IN ('RETRY', 'THROTTLED')
                             THEN now() + d.retry_delay_ms * interval '1 millisecond'
                             WHEN d.final = 'RELEASE' THEN t.next_retry_at END,
        enqueued_at = CASE WHEN d.final IN ('RETRY', 'THROTTLED')
                           THEN now() + d.retry_delay_ms * interval '1 millisecond'
                           ELSE t.enqueued_at END,
        -- At least 10 s, so that a caller awaiting the result can still read it (retention 0).
        purge_after = CASE WHEN d.final = 'COMPLETED' AND t.retention_ms IS NOT NULL
                           THEN now() + GREATEST(t.retention_ms, 10000) * interval '1 millisecond' END,
        updated_at = now()
    FROM decided d
    -- Rows are locked and fenced in target, so nothing changed them since.
    WHERE t.id = d.id
    -- Everything the attempt row needs comes back with the changed rows: no join of decided with finished.
    RETURNING t.id, t.status, t.workflow_id, t.workflow_node, d.final, d.status AS requested, d.attempt,
              d.started_at, d.crashed, d.error_code, d.error_message, d.failed_reason, d.worker_id,
              d.worker_hostname, d.worker_pid, d.worker_process_name
  ), recorded AS (
    INSERT INTO {{schema}}.horsies_task_attempts
      (task_id, attempt, outcome, will_retry, started_at, finished_at, error_code, error_message, failed_reason,
       worker_id, worker_hostname, worker_pid, worker_process_name)
    SELECT f.id, f.attempt,
           CASE WHEN f.crashed THEN 'WORKER_FAILURE' WHEN f.final = 'COMPLETED' THEN 'COMPLETED' ELSE 'FAILED' END,
           f.final IN ('RETRY', 'THROTTLED'), f.started_at, now(),
           CASE WHEN f.final = 'CANCELLED' AND f.requested IN ('RETRY', 'THROTTLED') THEN 'TASK_CANCELLED'
                ELSE f.error_code END,
           f.error_message, f.failed_reason, f.worker_id, f.worker_hostname, f.worker_pid, f.worker_process_name
    FROM finished f
    WHERE f.final <> 'RELEASE'
  )
  SELECT f.id, f.status, f.workflow_id, f.workflow_node FROM finished f;
END;
$function$;

-- function horsies_finish_tasks_retired(p_ids text[], p_worker_ids text[], p_generations integer[], p_statuses text[], p_results jsonb[], p_error_codes text[], p_error_messages text[], p_failed_reasons text[], p_retry_delays_ms integer[], p_crashed boolean[], p_unless_cancel_requested boolean, p_notify_later boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_finish_tasks_retired(p_ids text[], p_worker_ids text[], p_generations integer[], p_statuses text[], p_results jsonb[], p_error_codes text[], p_error_messages text[], p_failed_reasons text[], p_retry_delays_ms integer[], p_crashed boolean[], p_unless_cancel_requested boolean, p_notify_later boolean)
 RETURNS TABLE(id character varying, status character varying, workflow_id character varying, workflow_node integer)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  -- With p_notify_later, the update trigger leaves the task_done notifications to the caller (migration 15).
  PERFORM set_config('horsies.notify_done_later', CASE WHEN p_notify_later THEN 'on' ELSE 'off' END, true);
  RETURN QUERY
  WITH input AS (
    SELECT i.*
    FROM unnest(p_ids, p_worker_ids, p_generations, p_statuses, p_results, p_error_codes, p_error_messages,
                p_failed_reasons, p_retry_delays_ms, p_crashed)
      AS i(id, worker_id, generation, status, result, error_code, error_message, failed_reason, retry_delay_ms,
           crashed)
  ), target AS (
    -- Driven from the input, one primary-key lookup per task: a join the other way round can turn into a
    -- nested loop over every in-flight row of the worker times every input row. Locked, so that a retry's
    -- outcome is decided on the latest row (a cancel request turns it into CANCELLED).
    SELECT i.*, t.*
    FROM input i
    CROSS JOIN LATERAL (
      SELECT t.attempt, t.started_at, t.worker_hostname, t.worker_pid, t.worker_process_name,
             t.cancel_requested_at, t.good_until
      FROM {{schema}}.horsies_tasks t
      -- Written so that no index can serve it (status || ''): a generic plan would otherwise prefer the
      -- in-flight index and scan all of the worker's rows for each input row, instead of one primary-key lookup.
      WHERE t.id = i.id AND t.status || '' = 'RUNNING' AND t.claimed_by_worker_id || '' = i.worker_id
        AND t.claim_generation = i.generation AND (p_unless_cancel_requested IS NOT TRUE OR t.cancel_requested_at IS NULL)
      FOR UPDATE
    ) t
  ), decided AS (
    SELECT g.*,
           CASE
             WHEN g.status NOT IN ('RETRY', 'THROTTLED') THEN g.status
             WHEN g.cancel_requested_at IS NOT NULL THEN 'CANCELLED'
             WHEN g.good_until IS NOT NULL
                  AND now() + g.retry_delay_ms * interval '1 millisecond' >= g.good_until THEN 'FAILED'
             ELSE g.status
           END AS final
    FROM target g
  ), finished AS (
    UPDATE {{schema}}.horsies_tasks t
    SET status = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN 'PENDING' ELSE d.final END,
        completed_at = CASE WHEN d.final = 'COMPLETED' THEN now() END,
        failed_at = CASE WHEN d.final = 'FAILED' THEN now() END,
        finished_at = CASE WHEN d.final NOT IN ('RETRY', 'RELEASE', 'THROTTLED') THEN now() END,
        result = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                      WHEN d.final = 'CANCELLED' AND d.status IN ('RETRY', 'THROTTLED') THEN jsonb_build_object('err',
                        jsonb_build_object('code', 'TASK_CANCELLED', 'message', 'cancelled instead of retried'))
                      ELSE d.result END,
        error_code = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                          WHEN d.final = 'CANCELLED' AND d.status IN ('RETRY', 'THROTTLED') THEN 'TASK_CANCELLED'
                          ELSE d.error_code END,
        failed_reason = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE d.failed_reason END,
        claimed = false,
        claim_expires_at = NULL,
        claimed_at = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE t.claimed_at END,
        claimed_by_worker_id = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                                    ELSE t.claimed_by_worker_id END,
        started_at = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE t.started_at END,
        attempt = t.attempt - CASE WHEN d.final = 'RELEASE' THEN 1 ELSE 0 END,
        retry_count = t.retry_count + CASE WHEN d.final = 'RETRY' THEN 1 ELSE 0 END,
        next_retry_at = CASE WHEN d.final IN ('RETRY', 'THROTTLED')
                             THEN now() + d.retry_delay_ms * interval '1 millisecond'
                             WHEN d.final = 'RELEASE' THEN t.next_retry_at END,
        enqueued_at = CASE WHEN d.final IN ('RETRY', 'THROTTLED')
                           THEN now() + d.retry_delay_ms * interval '1 millisecond'
                           ELSE t.enqueued_at END,
        -- At least 10 s, so that a caller awaiting the result can still read it (retention 0).
        purge_after = CASE WHEN d.final = 'COMPLETED' AND t.retention_ms IS NOT NULL
                           THEN now() + GREATEST(t.retention_ms, 10000) * interval '1 millisecond' END,
        updated_at = now()
    FROM decided d
    -- Rows are locked and fenced in target, so nothing changed them since.
    WHERE t.id = d.id
    -- Everything the attempt row needs comes back with the changed rows: no join of decided with finished.
    RETURNING t.id, t.status, t.workflow_id, t.workflow_node, d.final, d.status AS requested, d.attempt,
              d.started_at, d.crashed, d.error_code, d.error_message, d.failed_reason, d.worker_id,
              d.worker_hostname, d.worker_pid, d.worker_process_name
  ), recorded AS (
    INSERT INTO {{schema}}.horsies_task_attempts
      (task_id, attempt, outcome, will_retry, started_at, finished_at, error_code, error_message, failed_reason,
       worker_id, worker_hostname, worker_pid, worker_process_name)
    SELECT f.id, f.attempt,
           CASE WHEN f.crashed THEN 'WORKER_FAILURE' WHEN f.final = 'COMPLETED' THEN 'COMPLETED' ELSE 'FAILED' END,
           f.final IN ('RETRY', 'THROTTLED'), f.started_at, now(),
           CASE WHEN f.final = 'CANCELLED' AND f.requested IN ('RETRY', 'THROTTLED') THEN 'TASK_CANCELLED'
                ELSE f.error_code END,
           f.error_message, f.failed_reason, f.worker_id, f.worker_hostname, f.worker_pid, f.worker_process_name
    FROM finished f
    WHERE f.final <> 'RELEASE'
  )
  SELECT f.id, f.status, f.workflow_id, f.workflow_node FROM finished f;
END;
$function$;

-- function horsies_insert_tasks(p_tasks json)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_insert_tasks(p_tasks json)
 RETURNS TABLE(requested_id text, id character varying, enqueue_sha character varying)
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH input AS (
    SELECT * FROM json_to_recordset(p_tasks)
      AS i(id text, task_name text, queue_name text, priority int, kwargs jsonb, delay_ms int, run_at timestamptz,
           good_until timestamptz, enqueue_sha text, idempotency_key text, max_retries int, retention_ms bigint,
           task_options jsonb, sent_at timestamptz, trace_context jsonb, group_key text)
  ), inserted AS (
    INSERT INTO {{schema}}.horsies_tasks
      (id, task_name, queue_name, priority, kwargs, status, sent_at, enqueued_at, good_until, enqueue_sha,
       idempotency_key, max_retries, retention_ms, task_options, trace_context, group_key)
    -- json_to_recordset reads a JSON null as SQL NULL: an input of null is the JSON value.
    SELECT id, task_name, queue_name, priority, COALESCE(kwargs, 'null'::jsonb), 'PENDING', COALESCE(sent_at, now()),
           COALESCE(run_at, now() + delay_ms * interval '1 millisecond'), good_until, enqueue_sha,
           idempotency_key, max_retries, retention_ms, task_options, trace_context, group_key
    FROM input
    ON CONFLICT DO NOTHING
    RETURNING id
  )
  SELECT i.id, t.id, t.enqueue_sha
  FROM input i
  LEFT JOIN inserted n ON n.id = i.id
  LEFT JOIN LATERAL (
    -- Looked up only for the rows the insert skipped (n.id IS NULL), not for every row sent.
    SELECT e.id, e.enqueue_sha FROM {{schema}}.horsies_tasks e
    WHERE n.id IS NULL
      AND (e.id = i.id OR (i.idempotency_key IS NOT NULL AND e.idempotency_key = i.idempotency_key))
    LIMIT 1
  ) t ON true
  WHERE n.id IS NULL;
END;
$function$;

-- function horsies_notify_task_change()
CREATE OR REPLACE FUNCTION {{schema}}.horsies_notify_task_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF NEW.status = 'PENDING' AND OLD.status <> 'PENDING' THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_new', NEW.queue_name);
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_queue_' || NEW.queue_name, '');
    IF OLD.claimed THEN
      PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_done', NEW.id);
    END IF;
  ELSIF NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') AND OLD.status <> NEW.status THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_done', NEW.id);
  ELSIF NEW.status = 'RUNNING' AND NEW.cancel_requested_at IS NOT NULL AND OLD.cancel_requested_at IS NULL THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_cancel', NEW.id);
  END IF;
  RETURN NULL;
END;
$function$;

-- function horsies_notify_task_insert()
CREATE OR REPLACE FUNCTION {{schema}}.horsies_notify_task_insert()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
  q text;
BEGIN
  FOR q IN SELECT DISTINCT queue_name FROM new_rows WHERE status = 'PENDING' LOOP
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_new', q);
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_queue_' || q, '');
  END LOOP;
  RETURN NULL;
END;
$function$;

-- function horsies_rate_acquire(p_keys text[], p_max integer[], p_interval_ms integer[], p_at timestamp with time zone, p_want integer, OUT room integer, OUT free_at timestamp with time zone)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_acquire(p_keys text[], p_max integer[], p_interval_ms integer[], p_at timestamp with time zone, p_want integer, OUT room integer, OUT free_at timestamp with time zone)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
  i integer;
  r {{schema}}.horsies_rate_limiters%ROWTYPE;
  used integer;
  room_at timestamptz;
BEGIN
  room := p_want;
  free_at := p_at;
  FOR i IN 1 .. cardinality(p_keys) LOOP
    -- One statement when the row exists with these settings (every start but a limiter's first).
    SELECT * INTO r FROM {{schema}}.horsies_rate_limiters l WHERE l.limiter_key = p_keys[i] FOR UPDATE;
    IF NOT FOUND THEN
      INSERT INTO {{schema}}.horsies_rate_limiters (limiter_key, max_starts, interval_ms)
      VALUES (p_keys[i], p_max[i], p_interval_ms[i])
      ON CONFLICT (limiter_key) DO NOTHING;
      SELECT * INTO r FROM {{schema}}.horsies_rate_limiters l WHERE l.limiter_key = p_keys[i] FOR UPDATE;
    END IF;
    IF r.max_starts <> p_max[i] OR r.interval_ms <> p_interval_ms[i] THEN
      UPDATE {{schema}}.horsies_rate_limiters l SET max_starts = p_max[i], interval_ms = p_interval_ms[i]
      WHERE l.limiter_key = p_keys[i];
    END IF;
    IF r.paused_until > p_at THEN
      room := 0;
      free_at := GREATEST(free_at, r.paused_until);
      CONTINUE;
    END IF;
    -- Starts recorded after p_at (by statements with a later now() that took the lock first) count too.
    SELECT COALESCE(sum(w.n), 0) INTO used FROM unnest(r.window_at, r.window_count) AS w(at, n)
    WHERE w.at > p_at - p_interval_ms[i] * interval '1 millisecond';
    room := LEAST(room, GREATEST(0, p_max[i] - used));
    IF used >= p_max[i] THEN
      -- Room comes back when enough of the oldest starts leave the window for one more.
      SELECT min(x.at) + p_interval_ms[i] * interval '1 millisecond' INTO STRICT room_at
      FROM (SELECT w.at, sum(w.n) OVER (ORDER BY w.at DESC) AS newer
            FROM unnest(r.window_at, r.window_count) AS w(at, n)
            WHERE w.at > p_at - p_interval_ms[i] * interval '1 millisecond') x
      WHERE x.newer >= p_max[i];
      free_at := GREATEST(free_at, room_at);
    END IF;
  END LOOP;
END;
$function$;

-- function horsies_rate_pause(p_keys text[], p_max integer[], p_interval_ms integer[], p_after_ms integer)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_pause(p_keys text[], p_max integer[], p_interval_ms integer[], p_after_ms integer)
 RETURNS void
 LANGUAGE sql
AS $function$
  INSERT INTO {{schema}}.horsies_rate_limiters AS l (limiter_key, max_starts, interval_ms, paused_until)
  SELECT k.key, k.max, k.interval_ms, now() + p_after_ms * interval '1 millisecond'
  FROM unnest(p_keys, p_max, p_interval_ms) AS k(key, max, interval_ms)
  ORDER BY k.key
  ON CONFLICT (limiter_key) DO UPDATE
    SET paused_until = GREATEST(l.paused_until, EXCLUDED.paused_until), updated_at = now();
$function$;

-- function horsies_rate_record(p_keys text[], p_interval_ms integer[], p_at timestamp with time zone, p_ran integer)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_record(p_keys text[], p_interval_ms integer[], p_at timestamp with time zone, p_ran integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
  i integer;
  v_at timestamptz;
BEGIN
  IF p_ran <= 0 THEN
    RETURN;
  END IF;
  FOR i IN 1 .. cardinality(p_keys) LOOP
    SELECT GREATEST(p_at, r.window_at[cardinality(r.window_at)]) INTO v_at
    FROM {{schema}}.horsies_rate_limiters r WHERE r.limiter_key = p_keys[i];
    UPDATE {{schema}}.horsies_rate_limiters l
    SET window_at = k.kept_at || v_at,
        window_count = k.kept_count || (p_ran + k.joined),
        updated_at = now()
    FROM (
      SELECT COALESCE(array_agg(w.at ORDER BY w.ord) FILTER (WHERE NOT w.joins), '{}') AS kept_at,
             COALESCE(array_agg(w.n ORDER BY w.ord) FILTER (WHERE NOT w.joins), '{}') AS kept_count,
             COALESCE(sum(w.n) FILTER (WHERE w.joins), 0)::integer AS joined
      FROM {{schema}}.horsies_rate_limiters r,
           LATERAL (
             SELECT u.at, u.n, u.ord,
                    u.ord = cardinality(r.window_at)
                      AND u.at > v_at - p_interval_ms[i] * interval '1 millisecond' / 32 AS joins
             FROM unnest(r.window_at, r.window_count) WITH ORDINALITY AS u(at, n, ord)
             WHERE u.at > v_at - p_interval_ms[i] * interval '1 millisecond'
           ) w
      WHERE r.limiter_key = p_keys[i]
    ) k
    WHERE l.limiter_key = p_keys[i];
  END LOOP;
END;
$function$;

-- function horsies_rate_room(p_keys text[], p_max integer[], p_interval_ms integer[])
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_room(p_keys text[], p_max integer[], p_interval_ms integer[])
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $function$
  SELECT COALESCE(min(CASE
           WHEN r.paused_until > now() THEN 0
           ELSE GREATEST(0, k.max - COALESCE((
             SELECT sum(w.n) FROM unnest(r.window_at, r.window_count) AS w(at, n)
             WHERE w.at > now() - k.interval_ms * interval '1 millisecond'), 0))::integer
         END), 2147483647)
  FROM unnest(p_keys, p_max, p_interval_ms) AS k(key, max, interval_ms)
  LEFT JOIN {{schema}}.horsies_rate_limiters r ON r.limiter_key = k.key
$function$;

-- function horsies_refuse_row(p_table regclass, p_rule text)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_refuse_row(p_table regclass, p_rule text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_table text;
  v_schema text;
BEGIN
  SELECT c.relname, s.nspname INTO v_table, v_schema
  FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
  WHERE c.oid = p_table;
  RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', v_table, p_rule
    USING ERRCODE = 'check_violation', CONSTRAINT = p_rule, TABLE = v_table, SCHEMA = v_schema;
END;
$function$;

-- function horsies_release_dedupe_key()
CREATE OR REPLACE FUNCTION {{schema}}.horsies_release_dedupe_key()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF (NEW.claimed AND NEW.dedupe_scope IN ('pending', 'debounce'))
     OR (NEW.finished_at IS NOT NULL AND NEW.dedupe_scope <> 'finished') THEN
    NEW.dedupe_held := false;
  END IF;
  RETURN NEW;
END;
$function$;

-- function horsies_send_one(p_id text, p_task_name text, p_queue text, p_priority integer, p_kwargs jsonb, p_sent_at timestamp with time zone, p_run_at timestamp with time zone, p_delay_ms integer, p_good_until timestamp with time zone, p_max_retries integer, p_retention_ms bigint, p_task_options jsonb, p_trace_context jsonb, p_group_key text, p_handoff boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_send_one(p_id text, p_task_name text, p_queue text, p_priority integer, p_kwargs jsonb, p_sent_at timestamp with time zone, p_run_at timestamp with time zone, p_delay_ms integer, p_good_until timestamp with time zone, p_max_retries integer, p_retention_ms bigint, p_task_options jsonb, p_trace_context jsonb, p_group_key text, p_handoff boolean)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_enqueued timestamptz := COALESCE(p_run_at, now() + p_delay_ms * interval '1 millisecond');
  v_payload text;
  v_token uuid;
  s record;
BEGIN
  IF p_handoff AND p_group_key IS NULL AND v_enqueued <= now() AND (p_good_until IS NULL OR p_good_until > now())
     -- A producer role granted before migration 27 lacks these: its sends keep the old way.
     AND has_table_privilege('{{schema}}.horsies_idle_slots', 'UPDATE')
     AND has_table_privilege('{{schema}}.horsies_idle_slots', 'DELETE') THEN
    FOR s IN
      SELECT * FROM {{schema}}.horsies_idle_slots i
      WHERE i.queue_names @> ARRAY[p_queue]::text[] AND i.free > 0 AND p_task_name = ANY (i.task_names)
      ORDER BY i.registered_at
      FOR UPDATE SKIP LOCKED
    LOOP
      -- A paused queue's tasks wait PENDING (read only when a registration is found: most sends find none).
      EXIT WHEN EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused);
      IF pg_try_advisory_xact_lock(s.lock_key) THEN
        -- Its worker no longer holds the lock: it is gone.
        DELETE FROM {{schema}}.horsies_idle_slots i WHERE i.queue_name = s.queue_name AND i.worker_id = s.worker_id;
        CONTINUE;
      END IF;
      v_token := gen_random_uuid();
      v_payload := json_build_object(
        'id', p_id, 'task_name', p_task_name, 'queue_name', p_queue, 'priority', p_priority, 'kwargs', p_kwargs,
        'claim_generation', 1, 'claim_token', v_token, 'retry_count', 0, 'max_retries', p_max_retries,
        'attempt', 1, 'enqueued_at', v_enqueued, 'trace_context', p_trace_context, 'started_at', now(),
        'token', s.token)::text;
      EXIT WHEN octet_length(v_payload) > 7900;
      INSERT INTO {{schema}}.horsies_tasks
        (id, task_name, queue_name, priority, kwargs, status, sent_at, enqueued_at, good_until, max_retries,
         retention_ms, task_options, trace_context, claimed, claimed_at, claimed_by_worker_id, claim_generation,
         claim_token, claim_expires_at, started_at, attempt, worker_hostname, worker_pid, worker_process_name)
      VALUES (p_id, p_task_name, p_queue, p_priority, p_kwargs, 'RUNNING', COALESCE(p_sent_at, now()), v_enqueued,
              p_good_until, p_max_retries, p_retention_ms, p_task_options, p_trace_context, true, now(), s.worker_id,
              1, v_token, now() + s.lease_ms * interval '1 millisecond', now(), 1, s.worker_hostname, s.worker_pid,
              s.worker_process_name);
      UPDATE {{schema}}.horsies_idle_slots i SET free = i.free - 1, handed = i.handed || p_id
      WHERE i.queue_name = s.queue_name AND i.worker_id = s.worker_id;
      PERFORM pg_notify(s.channel, v_payload);
      -- The dashboard's live feed hears of new tasks here; no worker listens to it.
      PERFORM pg_notify((parse_ident('{{schema}}'))[1] || ':task_new', p_queue);
      RETURN s.worker_id;
    END LOOP;
  END IF;
  INSERT INTO {{schema}}.horsies_tasks
    (id, task_name, queue_name, priority, kwargs, status, sent_at, enqueued_at, good_until, max_retries,
     retention_ms, task_options, trace_context, group_key)
  VALUES (p_id, p_task_name, p_queue, p_priority, p_kwargs, 'PENDING', COALESCE(p_sent_at, now()), v_enqueued,
          p_good_until, p_max_retries, p_retention_ms, p_task_options, p_trace_context, p_group_key);
  RETURN NULL;
END;
$function$;

-- function horsies_start_limited(p_keys text[], p_max integer[], p_interval_ms integer[], p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
CREATE OR REPLACE FUNCTION {{schema}}.horsies_start_limited(p_keys text[], p_max integer[], p_interval_ms integer[], p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
 RETURNS TABLE(id character varying, status character varying, attempt integer, started_at timestamp with time zone)
 LANGUAGE plpgsql
AS $function$
#variable_conflict use_column
DECLARE
  granted integer;
  free_at timestamptz;
  ran integer := 0;
  started record;
BEGIN
  SELECT a.room, a.free_at INTO granted, free_at
  FROM {{schema}}.horsies_rate_acquire(p_keys, p_max, p_interval_ms, now(), cardinality(p_ids)) a;
  IF granted > 0 THEN
    FOR started IN SELECT * FROM {{schema}}.horsies_start_tasks(
        p_worker_id, p_ids[1:granted], p_id_generations[1:granted], p_wait_for_flush,
        ARRAY(SELECT w FROM unnest(p_workflow_ids) w WHERE w = ANY (p_ids[1:granted]))) LOOP
      -- Only the tasks that now run count (not the expired, nor those handed back for a paused workflow).
      IF started.status = 'RUNNING' THEN
        ran := ran + 1;
      END IF;
      id := started.id;
      status := started.status;
      attempt := started.attempt;
      started_at := started.started_at;
      RETURN NEXT;
    END LOOP;
    PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(), ran);
  END IF;
  IF granted < cardinality(p_ids) THEN
    RETURN QUERY SELECT d.id::varchar, 'DEFERRED'::varchar, NULL::integer, free_at
    FROM unnest(p_ids[granted + 1:]) AS d(id);
  END IF;
END;
$function$;

-- function horsies_start_rows(p_ids character varying[], p_fences text[], p_start integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_start_rows(p_ids character varying[], p_fences text[], p_start integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, status character varying, started_at timestamp with time zone, claim_token uuid)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
  v_claim boolean := p_fences IS NULL;
  v_token uuid := CASE WHEN p_fences IS NULL THEN gen_random_uuid() END;
BEGIN
  -- Each column reads: still CLAIMED (past p_start), then EXPIRED, then RUNNING.
  RETURN QUERY
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN p.n > p_start THEN 'CLAIMED' WHEN t.good_until <= now() THEN 'EXPIRED' ELSE 'RUNNING' END,
      claimed = p.n > p_start OR NOT COALESCE(t.good_until <= now(), false),
      claimed_at = CASE WHEN v_claim THEN now() ELSE t.claimed_at END,
      claimed_by_worker_id = p_worker_id,
      claim_generation = CASE WHEN v_claim THEN t.claim_generation + 1 ELSE t.claim_generation END,
      claim_token = CASE WHEN v_claim THEN v_token ELSE t.claim_token END,
      claim_expires_at = CASE WHEN p.n <= p_start AND t.good_until <= now() THEN NULL
                              WHEN v_claim THEN now() + p_lease_ms * interval '1 millisecond'
                              ELSE t.claim_expires_at END,
      started_at = CASE WHEN p.n > p_start THEN t.started_at WHEN t.good_until <= now() THEN NULL ELSE now() END,
      attempt = CASE WHEN p.n > p_start OR t.good_until <= now() THEN t.attempt ELSE t.attempt + 1 END,
      finished_at = CASE WHEN p.n <= p_start AND t.good_until <= now() THEN now() ELSE t.finished_at END,
      error_code = CASE WHEN p.n <= p_start AND t.good_until <= now() THEN 'TASK_EXPIRED' ELSE t.error_code END,
      failed_reason = CASE WHEN p.n <= p_start AND t.good_until <= now()
                           THEN 'good_until passed before the task started' ELSE t.failed_reason END,
      result = CASE WHEN p.n <= p_start AND t.good_until <= now() THEN jsonb_build_object('err', jsonb_build_object(
                 'code', 'TASK_EXPIRED', 'message', 'good_until passed before the task started'))
               ELSE t.result END,
      worker_hostname = CASE WHEN v_claim THEN p_hostname ELSE t.worker_hostname END,
      worker_pid = CASE WHEN v_claim THEN p_pid ELSE t.worker_pid END,
      worker_process_name = CASE WHEN v_claim THEN p_process_name ELSE t.worker_process_name END,
      updated_at = now()
  FROM unnest(p_ids, p_fences) WITH ORDINALITY AS p(id, fence, n)
  WHERE t.id = p.id
    AND (v_claim
         -- Not indexable on purpose (|| ''): the rows must be found by primary key, not through the in-flight index.
         OR (t.status || '' = 'CLAIMED' AND t.claimed_by_worker_id || '' = p_worker_id
             AND ((t.id || ':' || t.claim_token) = p.fence OR (t.id || ':' || t.claim_generation) = p.fence)))
  RETURNING t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count,
            t.max_retries, t.attempt, t.enqueued_at, t.workflow_id, t.workflow_node,
            CASE WHEN t.workflow_id IS NOT NULL AND t.workflow_node_id IS NULL THEN (
              SELECT wt.node_id FROM {{schema}}.horsies_workflow_tasks wt
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) ELSE t.workflow_node_id END,
            t.trace_context, t.status, t.started_at, t.claim_token;
END;
$function$;

-- function horsies_start_tasks(p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
CREATE OR REPLACE FUNCTION {{schema}}.horsies_start_tasks(p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
 RETURNS TABLE(id character varying, status character varying, attempt integer, started_at timestamp with time zone)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  IF NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  -- Nothing to hand back unless some workflow is paused (the partial index is empty most of the time).
  IF cardinality(p_workflow_ids) > 0
     AND EXISTS (SELECT 1 FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED') THEN
    RETURN QUERY
    UPDATE {{schema}}.horsies_tasks t
    SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL,
        claim_expires_at = NULL, updated_at = now()
    WHERE t.id = ANY (p_workflow_ids)
      AND ((t.id || ':' || t.claim_token) = ANY (p_id_generations)
           OR (t.id || ':' || t.claim_generation) = ANY (p_id_generations))
      AND t.status || '' = 'CLAIMED' AND t.claimed_by_worker_id || '' = p_worker_id
      AND t.workflow_id = ANY (ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED'))
    RETURNING t.id, 'STOPPED'::varchar, t.attempt, NULL::timestamptz;
  END IF;
  -- The start itself: horsies_start_rows, each task fenced on its 'id:fence'.
  RETURN QUERY
  SELECT s.id, s.status, s.attempt, s.started_at
  FROM {{schema}}.horsies_start_rows(p_ids::varchar[], p_id_generations, cardinality(p_ids), NULL, p_worker_id,
                                     NULL, NULL, NULL) s;
END;
$function$;

-- function horsies_task_row_check(t {{schema}}.horsies_tasks)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_task_row_check(t {{schema}}.horsies_tasks)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  broken text;
BEGIN
  -- The first rule the row breaks (a rule that is NULL passes, as a CHECK's does), or none.
  broken := CASE
    WHEN (t.status IN ('PENDING', 'CLAIMED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')) IS FALSE
      THEN 'horsies_tasks_status_check'
    WHEN (t.priority BETWEEN 1 AND 100) IS FALSE THEN 'horsies_tasks_priority_check'
    WHEN (jsonb_typeof(t.args) = 'array') IS FALSE THEN 'horsies_tasks_args_check'
    WHEN (t.attempt >= 0 AND t.retry_count >= 0 AND t.max_retries >= 0 AND t.claim_generation >= 0) IS FALSE
      THEN 'horsies_tasks_counts_check'
    WHEN ((t.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')) = (t.finished_at IS NOT NULL)) IS FALSE
      THEN 'horsies_tasks_finished_check'
    WHEN ((t.status = 'COMPLETED') = (t.completed_at IS NOT NULL)) IS FALSE THEN 'horsies_tasks_completed_check'
    WHEN ((t.status = 'FAILED') = (t.failed_at IS NOT NULL)) IS FALSE THEN 'horsies_tasks_failed_check'
    WHEN (t.claimed = (t.status IN ('CLAIMED', 'RUNNING'))
          AND (NOT t.claimed OR (t.claimed_by_worker_id IS NOT NULL AND t.claimed_at IS NOT NULL))) IS FALSE
      THEN 'horsies_tasks_claimed_check'
    WHEN (t.status <> 'RUNNING' OR t.started_at IS NOT NULL) IS FALSE THEN 'horsies_tasks_running_check'
    WHEN (t.resubmit_count >= 0) IS FALSE THEN 'horsies_tasks_resubmit_count_check'
    WHEN (t.retention_ms IS NULL OR t.retention_ms >= 0) IS FALSE THEN 'horsies_tasks_retention_check'
    WHEN (t.purge_after IS NULL OR t.status = 'COMPLETED') IS FALSE THEN 'horsies_tasks_purge_after_check'
    WHEN ((t.workflow_id IS NULL) = (t.workflow_node IS NULL)) IS FALSE THEN 'horsies_tasks_workflow_check'
    WHEN ((t.progress_at IS NULL) = (t.progress_attempt IS NULL)) IS FALSE THEN 'horsies_tasks_progress_check'
    WHEN (t.attempt <= 1000000000 AND t.claim_generation <= 1000000000 AND t.resubmit_count <= 1000000000) IS FALSE
      THEN 'horsies_tasks_counter_bounds_check'
    WHEN (isfinite(t.sent_at) AND isfinite(t.enqueued_at) AND isfinite(t.claimed_at) AND isfinite(t.started_at)
          AND isfinite(t.completed_at) AND isfinite(t.failed_at) AND isfinite(t.finished_at)
          AND isfinite(t.claim_expires_at) AND isfinite(t.good_until) AND isfinite(t.next_retry_at)
          AND isfinite(t.created_at) AND isfinite(t.updated_at) AND isfinite(t.cancel_requested_at)
          AND isfinite(t.resubmitted_at) AND isfinite(t.purge_after) AND isfinite(t.progress_at)) IS FALSE
      THEN 'horsies_tasks_finite_times_check'
    WHEN ((t.dedupe_scope IS NULL OR t.dedupe_scope IN ('pending', 'debounce', 'running', 'finished'))
          AND (t.dedupe_key IS NULL) = (t.dedupe_scope IS NULL)
          AND (t.dedupe_key IS NULL) = (t.dedupe_held IS NULL)
          AND (t.dedupe_scope IS NOT DISTINCT FROM 'finished') = (t.dedupe_window_ms IS NOT NULL)
          AND (t.dedupe_window_ms IS NULL OR t.dedupe_window_ms > 0)) IS FALSE
      THEN 'horsies_tasks_dedupe_check'
  END;
  IF broken IS NOT NULL THEN
    PERFORM {{schema}}.horsies_refuse_row('{{schema}}.horsies_tasks'::regclass, broken);
  END IF;
  RETURN true;
END;
$function$;

-- function horsies_workflow_evaluate(p_keys text[], p_completed integer[], p_failed integer[], p_skipped integer[], p_evaluate boolean, p_enqueue boolean)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_evaluate(p_keys text[], p_completed integer[], p_failed integer[], p_skipped integer[], p_evaluate boolean, p_enqueue boolean)
 RETURNS TABLE(node_index integer, status character varying, changed boolean, dependents integer[], subworkflow character varying, wait_kind character varying, input_template jsonb, workflow_id character varying, task_id character varying)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH bump AS (
    SELECT * FROM unnest(p_keys, p_completed, p_failed, p_skipped) AS b(node_key, completed, failed, skipped)
  ), counted AS (
    SELECT n.node_key, n.workflow_id, n.node_index, n.status AS old_status, n.join_rule, n.min_success,
           n.allow_failed_deps, n.subworkflow IS NULL AND n.wait_kind IS NULL AS runs_task,
           cardinality(n.dependencies) AS total,
           n.deps_completed + b.completed AS c, n.deps_failed + b.failed AS f, n.deps_skipped + b.skipped AS s
    FROM bump b JOIN {{schema}}.horsies_workflow_tasks n ON n.node_key = b.node_key
  ), decided AS (
    SELECT k.*,
           CASE
             WHEN k.old_status <> 'PENDING' OR NOT p_evaluate THEN k.old_status
             WHEN k.join_rule = 'all' THEN
               CASE WHEN k.c + k.f + k.s < k.total THEN 'PENDING'
                    WHEN k.f + k.s > 0 AND NOT k.allow_failed_deps THEN 'SKIPPED'
                    ELSE 'READY' END
             WHEN k.join_rule = 'any' THEN
               CASE WHEN k.c >= 1 THEN 'READY' WHEN k.c + k.f + k.s = k.total THEN 'SKIPPED' ELSE 'PENDING' END
             ELSE
               CASE WHEN k.c >= k.min_success THEN 'READY'
                    WHEN k.total - k.f - k.s < k.min_success THEN 'SKIPPED'
                    ELSE 'PENDING' END
           END AS new_status
    FROM counted k
  ), linked AS (
    -- A version 7 UUID for each task node enqueued here: the time in ms, a counter, then random bits.
    SELECT d.*,
           CASE WHEN p_enqueue AND d.new_status = 'READY' AND d.old_status = 'PENDING' AND d.runs_task THEN
             substr(c.hex, 1, 8) || '-' || substr(c.hex, 9, 4) || '-7' || lpad(to_hex(d.k % 4096), 3, '0') || '-'
             || substr(d.rand, 17, 4) || '-' || substr(d.rand, 21, 12)
           END AS new_task_id
    FROM (SELECT e.*, row_number() OVER (ORDER BY e.workflow_id, e.node_index) AS k,
                 replace(gen_random_uuid()::text, '-', '') AS rand
          FROM decided e) d,
         (SELECT lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') AS hex) c
  )
  UPDATE {{schema}}.horsies_workflow_tasks n
  SET deps_completed = d.c, deps_failed = d.f, deps_skipped = d.s,
      status = CASE WHEN d.new_task_id IS NOT NULL THEN 'ENQUEUED' ELSE d.new_status END,
      task_id = coalesce(d.new_task_id, n.task_id),
      enqueued_at = CASE WHEN d.new_task_id IS NOT NULL THEN now() ELSE n.enqueued_at END,
      completed_at = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED' THEN now()
                          ELSE n.completed_at END,
      result = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED'
                    THEN jsonb_build_object('err', jsonb_build_object(
                      'code', 'UPSTREAM_SKIPPED', 'message', 'its dependencies did not meet its join rule'))
                    ELSE n.result END,
      error_code = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED' THEN 'UPSTREAM_SKIPPED'
                        ELSE n.error_code END,
      updated_at = now()
  FROM linked d
  WHERE n.node_key = d.node_key
  RETURNING n.node_index, n.status, n.status <> d.old_status, n.dependents, n.subworkflow, n.wait_kind,
            CASE WHEN n.status <> d.old_status AND n.status IN ('READY', 'ENQUEUED') THEN n.input_template END,
            n.workflow_id, d.new_task_id::varchar;
END;
$function$;

-- function horsies_workflow_node_row_check(n {{schema}}.horsies_workflow_tasks)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_node_row_check(n {{schema}}.horsies_workflow_tasks)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  broken text;
BEGIN
  -- The first rule the row breaks (a rule that is NULL passes, as a CHECK's does), or none.
  broken := CASE
    WHEN (n.status IN ('PENDING', 'READY', 'ENQUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'SKIPPED')) IS FALSE
      THEN 'horsies_workflow_tasks_status_check'
    WHEN (n.priority BETWEEN 1 AND 100) IS FALSE THEN 'horsies_workflow_tasks_priority_check'
    WHEN (n.join_rule IN ('all', 'any', 'quorum')) IS FALSE THEN 'horsies_workflow_tasks_join_check'
    WHEN ((n.join_rule = 'quorum') = (n.min_success IS NOT NULL)
          AND (n.min_success IS NULL OR (n.min_success >= 1 AND n.min_success <= cardinality(n.dependencies)))) IS FALSE
      THEN 'horsies_workflow_tasks_quorum_check'
    WHEN (n.deps_completed >= 0 AND n.deps_failed >= 0 AND n.deps_skipped >= 0
          AND n.deps_completed + n.deps_failed + n.deps_skipped <= cardinality(n.dependencies)) IS FALSE
      THEN 'horsies_workflow_tasks_counts_check'
    WHEN ((n.status IN ('COMPLETED', 'FAILED', 'SKIPPED')) = (n.completed_at IS NOT NULL)) IS FALSE
      THEN 'horsies_workflow_tasks_completed_check'
    WHEN (n.status NOT IN ('ENQUEUED', 'RUNNING') OR n.task_id IS NOT NULL OR n.child_workflow_id IS NOT NULL
          OR n.wait_kind IS NOT NULL) IS FALSE
      THEN 'horsies_workflow_tasks_linked_check'
    WHEN (n.subworkflow IS NOT NULL OR n.child_workflow_id IS NULL) IS FALSE
      THEN 'horsies_workflow_tasks_subworkflow_check'
    WHEN ((n.wait_kind IS NULL OR (n.wait_kind IN ('signal', 'sleep') AND n.subworkflow IS NULL AND n.task_id IS NULL))
          AND (n.wait_kind = 'signal') = (n.wait_name IS NOT NULL)
          AND (n.wait_timeout_ms IS NULL OR n.wait_timeout_ms >= 0)) IS FALSE
      THEN 'horsies_workflow_tasks_wait_check'
  END;
  IF broken IS NOT NULL THEN
    PERFORM {{schema}}.horsies_refuse_row('{{schema}}.horsies_workflow_tasks'::regclass, broken);
  END IF;
  RETURN true;
END;
$function$;

-- function horsies_workflow_row_check(w {{schema}}.horsies_workflows)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_row_check(w {{schema}}.horsies_workflows)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  broken text;
BEGIN
  -- The first rule the row breaks (a rule that is NULL passes, as a CHECK's does), or none.
  broken := CASE
    WHEN (w.status IN ('PENDING', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED')) IS FALSE
      THEN 'horsies_workflows_status_check'
    WHEN (w.on_error IN ('fail', 'pause')) IS FALSE THEN 'horsies_workflows_on_error_check'
    WHEN (w.nodes_total >= 1 AND w.nodes_terminal >= 0 AND w.nodes_terminal <= w.nodes_total AND w.depth >= 0) IS FALSE
      THEN 'horsies_workflows_counts_check'
    WHEN ((w.status IN ('COMPLETED', 'FAILED', 'CANCELLED')) = (w.completed_at IS NOT NULL)) IS FALSE
      THEN 'horsies_workflows_completed_check'
    WHEN ((w.parent_workflow_id IS NULL) = (w.parent_node_index IS NULL)) IS FALSE
      THEN 'horsies_workflows_parent_check'
  END;
  IF broken IS NOT NULL THEN
    PERFORM {{schema}}.horsies_refuse_row('{{schema}}.horsies_workflows'::regclass, broken);
  END IF;
  RETURN true;
END;
$function$;

-- function horsies_workflow_settle(p_keys text[])
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_settle(p_keys text[])
 RETURNS TABLE(node_index integer, status character varying, dependents integer[], workflow_id character varying)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH source AS (
    SELECT n.node_key, n.subworkflow IS NOT NULL AS nested, t.id AS task_found, t.status AS task_status,
           t.result AS task_result, c.id AS child_found, c.status AS child_status, c.result AS child_result,
           n.wait_kind, n.wait_name, n.wait_timeout_ms, g.payload AS signal_payload
    FROM {{schema}}.horsies_workflow_tasks n
    LEFT JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
    LEFT JOIN {{schema}}.horsies_workflows c ON c.id = n.child_workflow_id
    LEFT JOIN LATERAL (
      SELECT sg.payload FROM {{schema}}.horsies_workflow_signals sg
      WHERE n.wait_kind = 'signal' AND n.status = 'RUNNING'
        AND sg.workflow_id = n.workflow_id AND sg.node_index = n.node_index
      ORDER BY sg.seq LIMIT 1) g ON true
    -- Nodes found by their keys only: a status test the open-nodes index could serve (status || '' cannot) may
    -- make a generic plan scan every open node of a wide workflow once per named node.
    WHERE n.node_key = ANY (p_keys)
      AND n.status || '' IN ('ENQUEUED', 'RUNNING')
      AND CASE WHEN n.wait_kind IS NOT NULL
               THEN n.status = 'RUNNING' AND (g.payload IS NOT NULL OR n.wait_due_at <= now())
               WHEN n.subworkflow IS NULL
               THEN t.id IS NULL OR t.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
               ELSE c.id IS NULL OR c.status IN ('COMPLETED', 'FAILED', 'CANCELLED') END
  ), decided AS (
    SELECT s.node_key,
           CASE
             WHEN s.wait_kind = 'signal' AND s.signal_payload IS NOT NULL
               THEN jsonb_build_object('ok', s.signal_payload)
             WHEN s.wait_kind = 'signal' THEN jsonb_build_object('err', jsonb_build_object(
               'code', 'WAIT_TIMEOUT',
               'message', 'no signal "' || s.wait_name || '" came within ' || s.wait_timeout_ms || ' ms'))
             WHEN s.wait_kind = 'sleep' THEN jsonb_build_object('ok', 'null'::jsonb)
             WHEN s.nested AND s.child_status = 'COMPLETED' AND s.child_result ? 'ok' THEN s.child_result
             WHEN s.nested THEN jsonb_build_object('err', jsonb_build_object(
               'code', 'SUBWORKFLOW_FAILED',
               'message', CASE WHEN s.child_found IS NULL THEN 'the child workflow of this node no longer exists'
                               ELSE 'child workflow ' || s.child_found || ' ended ' || s.child_status END,
               'data', jsonb_build_object(
                 'workflowId', s.child_found,
                 'status', s.child_status,
                 'nodes', (SELECT jsonb_object_agg(k.status, k.count) FROM (
                             SELECT cn.status, count(*) AS count FROM {{schema}}.horsies_workflow_tasks cn
                             WHERE cn.workflow_id = s.child_found GROUP BY cn.status) k),
                 'error', s.child_result -> 'err')))
             WHEN s.task_found IS NULL THEN jsonb_build_object('err', jsonb_build_object(
               'code', 'TASK_NOT_FOUND', 'message', 'the task of this node no longer exists'))
             WHEN s.task_status = 'COMPLETED' AND s.task_result ? 'ok' THEN s.task_result
             WHEN s.task_status = 'COMPLETED' THEN jsonb_build_object('err', jsonb_build_object(
               'code', 'RESULT_NOT_AVAILABLE', 'message', 'the task completed but no result is stored'))
             WHEN s.task_result ? 'err' THEN s.task_result
             ELSE jsonb_build_object('err', jsonb_build_object(
               'code', CASE s.task_status WHEN 'CANCELLED' THEN 'TASK_CANCELLED'
                                          WHEN 'EXPIRED' THEN 'TASK_EXPIRED' ELSE 'WORKER_CRASHED' END,
               'message', 'the task ended ' || s.task_status || ' without a stored error'))
           END AS result
    FROM source s
  )
  UPDATE {{schema}}.horsies_workflow_tasks n
  SET status = CASE WHEN d.result ? 'ok' THEN 'COMPLETED' ELSE 'FAILED' END,
      result = d.result,
      error_code = d.result -> 'err' ->> 'code',
      completed_at = now(),
      updated_at = now()
  FROM decided d
  WHERE n.node_key = d.node_key
  RETURNING n.node_index, n.status, n.dependents, n.workflow_id;
END;
$function$;

-- function horsies_workflow_step(p_workflow_ids text[], p_nodes integer[], p_channel text, p_wait_for_flush boolean, p_eager jsonb)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_step(p_workflow_ids text[], p_nodes integer[], p_channel text, p_wait_for_flush boolean, p_eager jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(workflow_id character varying, status character varying, settled integer, enqueued integer, fallback boolean, ready integer[], parent_id character varying, parent_node integer, started jsonb)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
  -- The batch: its workflows in id order, each one's status (null: no such workflow) and whether it falls back.
  v_ids text[];
  v_status text[];
  v_fallback boolean[];
  -- The cancelled workflows of the batch (settled, never evaluated), and the node keys to settle.
  v_cancelled text[];
  v_keys text[];
  -- One entry per node that turned terminal in this step: its workflow.
  v_terminal text[];
  v_skipped text[];
  -- Bumps of the join rules: node keys with their completed, failed and skipped counts.
  v_b_keys text[];
  v_b_c integer[];
  v_b_f integer[];
  v_b_s integer[];
  -- Task nodes enqueued by the join rules (workflow, index, task id, input template), and subworkflow and wait
  -- nodes that became READY (workflow, index).
  v_new_t_wid text[];
  v_new_t_idx integer[];
  v_new_t_id text[];
  v_new_t_tpl jsonb[];
  v_t_wid text[];
  v_t_idx integer[];
  v_t_id text[];
  v_t_tpl jsonb[];
  v_new_other_w text[];
  v_new_other_i integer[];
  v_ready_other_w text[];
  v_ready_other_i integer[];
  -- The enqueue: each task's input, then per workflow its count and starts.
  v_e_kwargs jsonb[];
  v_enq_wid text[];
  v_enq_n integer[];
  v_enq_started jsonb[];
  -- The workflows that finish, with their final status and parent node.
  v_finishing text[];
  v_fin_id text[];
  v_fin_status text[];
  v_fin_parent text[];
  v_fin_parent_node integer[];
  v_id text;
  w {{schema}}.horsies_workflows%ROWTYPE;
  v_n integer;
  v_tpl jsonb;
  v_ref jsonb;
  v_value jsonb;
  v_resolved jsonb;
  v_up_status text;
  v_up_result jsonb;
  v_path jsonb;
  v_step jsonb;
  v_len integer;
  v_chain jsonb[];
  v_cont jsonb;
  v_i integer;
  v_policy jsonb;
  v_success boolean;
  v_culprit_id text;
  v_culprit_status text;
  v_culprit_result jsonb;
  v_culprit_found boolean;
  v_output_id text;
  v_output_status text;
  v_output_result jsonb;
  v_output_found boolean;
  v_outcome jsonb;
  v_final text;
  v_slots integer := coalesce((p_eager ->> 'slots')::int, 0);
  v_eager_queues text[];
  v_eager_names text[];
  v_token uuid;
BEGIN
  IF NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  IF v_slots > 0 THEN
    v_eager_queues := ARRAY(SELECT jsonb_array_elements_text(p_eager -> 'queues'));
    v_eager_names := ARRAY(SELECT jsonb_array_elements_text(p_eager -> 'task_names'));
    -- One claim token for every task this call starts, as one claim statement draws one.
    v_token := gen_random_uuid();
  END IF;
  -- Every workflow of the batch, locked in id order (as a cancel or a pause locks a tree's children).
  PERFORM 1 FROM {{schema}}.horsies_workflows x WHERE x.id = ANY (p_workflow_ids) ORDER BY x.id FOR UPDATE;
  -- A PAUSED workflow gives back tasks that never ran, and one that pauses on error pauses its tree: the caller's.
  -- A COMPLETED or FAILED one takes no step; a CANCELLED one only records the outcomes of runs that still ended.
  WITH batch AS (
    SELECT b.wid, x.status,
           x.status IS NOT NULL AND x.status NOT IN ('COMPLETED', 'FAILED')
             AND (x.status NOT IN ('RUNNING', 'CANCELLED') OR (x.status = 'RUNNING' AND x.on_error = 'pause'))
             AS fallback
    FROM (SELECT DISTINCT i.wid FROM unnest(p_workflow_ids) AS i(wid)) b
    LEFT JOIN {{schema}}.horsies_workflows x ON x.id = b.wid
  )
  SELECT coalesce(array_agg(b.wid ORDER BY b.wid), '{}'),
         coalesce(array_agg(b.status ORDER BY b.wid), '{}'),
         coalesce(array_agg(b.fallback ORDER BY b.wid), '{}'),
         coalesce(array_agg(b.wid ORDER BY b.wid) FILTER (WHERE b.status = 'CANCELLED'), '{}'),
         ARRAY(SELECT DISTINCT i.wid || ':' || i.node FROM unnest(p_workflow_ids, p_nodes) AS i(wid, node)
               WHERE i.node IS NOT NULL AND i.wid = ANY (
                 ARRAY(SELECT c.wid FROM batch c WHERE c.status IN ('RUNNING', 'CANCELLED') AND NOT c.fallback)))
  INTO v_ids, v_status, v_fallback, v_cancelled, v_keys
  FROM batch b;

  -- Settles the named nodes whose task (child workflow, wait) ended; the dependents of those of running
  -- workflows learn the outcomes.
  WITH settled_nodes AS (
    SELECT * FROM {{schema}}.horsies_workflow_settle(v_keys)
  ), bumps AS (
    SELECT s.workflow_id || ':' || e.dep AS node_key,
           count(*) FILTER (WHERE s.status = 'COMPLETED')::int AS c,
           count(*) FILTER (WHERE s.status = 'FAILED')::int AS f
    FROM settled_nodes s, unnest(s.dependents) AS e(dep)
    WHERE s.workflow_id <> ALL (v_cancelled)
    GROUP BY 1
  )
  SELECT (SELECT coalesce(array_agg(s.workflow_id), '{}') FROM settled_nodes s),
         coalesce(array_agg(b.node_key ORDER BY b.node_key), '{}'),
         coalesce(array_agg(b.c ORDER BY b.node_key), '{}'),
         coalesce(array_agg(b.f ORDER BY b.node_key), '{}')
  INTO v_terminal, v_b_keys, v_b_c, v_b_f
  FROM bumps b;
  v_b_s := array_fill(0, ARRAY[cardinality(v_b_keys)]);

  -- The dependents' join rules decide (horsies_workflow_evaluate), and enqueue the task nodes they make READY;
  -- skips cascade.
  v_t_wid := '{}';
  v_t_idx := '{}';
  v_t_id := '{}';
  v_t_tpl := '{}';
  v_ready_other_w := '{}';
  v_ready_other_i := '{}';
  WHILE cardinality(v_b_keys) > 0 LOOP
    WITH evaluated AS (
      SELECT v.workflow_id, v.node_index, v.status, v.changed, v.dependents, v.task_id, v.input_template
      FROM {{schema}}.horsies_workflow_evaluate(v_b_keys, v_b_c, v_b_f, v_b_s, true, true) v
    ), next_bumps AS (
      SELECT v.workflow_id || ':' || e.dep AS node_key, count(*)::int AS s
      FROM evaluated v, unnest(v.dependents) AS e(dep)
      WHERE v.changed AND v.status = 'SKIPPED'
      GROUP BY 1
    )
    -- One pass over the evaluated nodes (the skipped, the task nodes enqueued, the other nodes made READY), one over
    -- the bumps their skips make.
    SELECT e.skipped, e.t_wid, e.t_idx, e.t_id, e.t_tpl, e.other_w, e.other_i, b.keys, b.s
    INTO v_skipped, v_new_t_wid, v_new_t_idx, v_new_t_id, v_new_t_tpl, v_new_other_w, v_new_other_i, v_b_keys,
         v_b_s
    FROM (
      SELECT coalesce(array_agg(v.workflow_id) FILTER (WHERE v.changed AND v.status = 'SKIPPED'), '{}') AS skipped,
             coalesce(array_agg(v.workflow_id ORDER BY v.task_id) FILTER (WHERE v.task_id IS NOT NULL), '{}') AS t_wid,
             coalesce(array_agg(v.node_index ORDER BY v.task_id) FILTER (WHERE v.task_id IS NOT NULL), '{}') AS t_idx,
             coalesce(array_agg(v.task_id ORDER BY v.task_id) FILTER (WHERE v.task_id IS NOT NULL), '{}') AS t_id,
             coalesce(array_agg(v.input_template ORDER BY v.task_id) FILTER (WHERE v.task_id IS NOT NULL), '{}')
               AS t_tpl,
             coalesce(array_agg(v.workflow_id ORDER BY v.workflow_id, v.node_index)
                        FILTER (WHERE v.changed AND v.status = 'READY'), '{}') AS other_w,
             coalesce(array_agg(v.node_index ORDER BY v.workflow_id, v.node_index)
                        FILTER (WHERE v.changed AND v.status = 'READY'), '{}') AS other_i
      FROM evaluated v
    ) e, (
      SELECT coalesce(array_agg(x.node_key ORDER BY x.node_key), '{}') AS keys,
             coalesce(array_agg(x.s ORDER BY x.node_key), '{}') AS s
      FROM next_bumps x
    ) b;
    v_b_c := array_fill(0, ARRAY[cardinality(v_b_keys)]);
    v_b_f := v_b_c;
    v_terminal := v_terminal || v_skipped;
    v_t_wid := v_t_wid || v_new_t_wid;
    v_t_idx := v_t_idx || v_new_t_idx;
    v_t_id := v_t_id || v_new_t_id;
    v_t_tpl := v_t_tpl || v_new_t_tpl;
    v_ready_other_w := v_ready_other_w || v_new_other_w;
    v_ready_other_i := v_ready_other_i || v_new_other_i;
  END LOOP;

  -- The enqueued task nodes: inputs resolved (resolveRefs of src/workflow/wiring.ts, kinds result and outcome),
  -- then their tasks inserted in one statement.
  v_enq_wid := '{}';
  v_enq_n := '{}';
  v_enq_started := '{}';
  IF cardinality(v_t_id) > 0 THEN
    v_e_kwargs := '{}';
    FOR v_n IN 1 .. cardinality(v_t_id) LOOP
      v_tpl := v_t_tpl[v_n];
      v_value := coalesce(v_tpl -> 'static', 'null'::jsonb);
      -- Most inputs read no upstream node: no query for them.
      IF jsonb_array_length(coalesce(v_tpl -> 'refs', '[]'::jsonb)) > 0 THEN
        FOR v_ref IN
          SELECT e.value FROM jsonb_array_elements(coalesce(v_tpl -> 'refs', '[]'::jsonb))
            WITH ORDINALITY AS e(value, ord)
          WHERE e.value ->> 'kind' IN ('result', 'outcome')
          ORDER BY e.ord
        LOOP
          v_up_status := NULL;
          v_up_result := NULL;
          SELECT u.status, u.result INTO v_up_status, v_up_result FROM {{schema}}.horsies_workflow_tasks u
          WHERE u.node_key = v_t_wid[v_n] || ':' || (v_ref ->> 'node');
          IF v_ref ->> 'kind' = 'outcome' THEN
            -- outcomeOf: the upstream's TaskResult.
            v_resolved := CASE
              WHEN v_up_status = 'COMPLETED' AND jsonb_typeof(v_up_result) = 'object' AND v_up_result ? 'ok'
                THEN jsonb_build_object('ok', true, 'value', coalesce(v_up_result -> 'ok', 'null'::jsonb))
              WHEN v_up_status = 'COMPLETED' THEN jsonb_build_object('ok', false, 'error', jsonb_build_object(
                'code', 'RESULT_NOT_AVAILABLE', 'message', 'the node completed without a result'))
              WHEN v_up_status IN ('FAILED', 'SKIPPED') THEN jsonb_build_object('ok', false, 'error', coalesce(
                nullif(v_up_result -> 'err', 'null'::jsonb),
                jsonb_build_object('code', 'RESULT_NOT_AVAILABLE', 'message', 'the node ended ' || v_up_status)))
              ELSE jsonb_build_object('ok', false, 'error', jsonb_build_object(
                'code', 'RESULT_NOT_AVAILABLE', 'message', 'the node has not finished'))
            END;
          ELSIF v_up_status = 'COMPLETED' THEN
            -- readPath into the ok value: a missing step, or a step into a scalar, reads nothing (null).
            v_resolved := v_up_result -> 'ok';
            FOR v_step IN
              SELECT e.value FROM jsonb_array_elements(coalesce(v_ref -> 'from', '[]'::jsonb))
                WITH ORDINALITY AS e(value, ord)
              ORDER BY e.ord
            LOOP
              EXIT WHEN v_resolved IS NULL;
              v_resolved := CASE jsonb_typeof(v_resolved)
                WHEN 'object' THEN v_resolved -> (v_step #>> '{}')
                WHEN 'array' THEN CASE WHEN (v_step #>> '{}') ~ '^(0|[1-9][0-9]{0,8})$'
                                       THEN v_resolved -> (v_step #>> '{}')::int END
              END;
            END LOOP;
          ELSE
            v_resolved := NULL;
          END IF;
          v_resolved := coalesce(v_resolved, 'null'::jsonb);
          -- writePath: containers made on the way (an array for an index step, else an object).
          v_path := coalesce(v_ref -> 'to', '[]'::jsonb);
          v_len := jsonb_array_length(v_path);
          IF v_len = 0 THEN
            v_value := v_resolved;
          ELSE
            v_chain := ARRAY[v_value];
            FOR v_i IN 1 .. v_len - 1 LOOP
              v_step := v_path -> (v_i - 1);
              v_cont := CASE WHEN jsonb_typeof(v_chain[v_i]) IN ('object', 'array') THEN v_chain[v_i]
                             WHEN jsonb_typeof(v_step) = 'number' THEN '[]'::jsonb ELSE '{}'::jsonb END;
              v_chain := array_append(v_chain, coalesce(CASE jsonb_typeof(v_cont)
                WHEN 'object' THEN v_cont -> (v_step #>> '{}')
                ELSE CASE WHEN (v_step #>> '{}') ~ '^(0|[1-9][0-9]{0,8})$' THEN v_cont -> (v_step #>> '{}')::int END
              END, 'null'::jsonb));
            END LOOP;
            FOR v_i IN REVERSE v_len .. 1 LOOP
              v_step := v_path -> (v_i - 1);
              v_cont := CASE WHEN jsonb_typeof(v_chain[v_i]) IN ('object', 'array') THEN v_chain[v_i]
                             WHEN jsonb_typeof(v_step) = 'number' THEN '[]'::jsonb ELSE '{}'::jsonb END;
              IF jsonb_typeof(v_cont) = 'object' THEN
                v_resolved := v_cont || jsonb_build_object(v_step #>> '{}', v_resolved);
              ELSIF (v_step #>> '{}') ~ '^(0|[1-9][0-9]{0,8})$' THEN
                IF (v_step #>> '{}')::int < jsonb_array_length(v_cont) THEN
                  v_resolved := jsonb_set(v_cont, ARRAY[v_step #>> '{}'], v_resolved);
                ELSE
                  -- Past the end: the holes between are nulls, as JSON writes a sparse array.
                  v_resolved := v_cont
                    || (SELECT coalesce(jsonb_agg('null'::jsonb), '[]'::jsonb)
                        FROM generate_series(1, (v_step #>> '{}')::int - jsonb_array_length(v_cont)))
                    || jsonb_build_array(v_resolved);
                END IF;
              ELSE
                -- A named property of an array: JSON keeps none.
                v_resolved := v_cont;
              END IF;
            END LOOP;
            v_value := v_resolved;
          END IF;
        END LOOP;
      END IF;
      -- Element assignment grows the array in place (an append would copy it: quadratic on a wide fan-out).
      v_e_kwargs[v_n] := v_value;
    END LOOP;
    WITH linked AS (
      SELECT n.workflow_id, n.node_index, n.node_id, i.task_id, n.task_name, n.queue_name, n.priority,
             n.max_retries, n.task_options, n.good_until, i.kwargs
      FROM unnest(v_t_wid, v_t_idx, v_t_id, v_e_kwargs) AS i(wid, node_index, task_id, kwargs)
      JOIN {{schema}}.horsies_workflow_tasks n ON n.node_key = i.wid || ':' || i.node_index
    ), eager AS (
      -- The tasks started for the calling worker: the first of those it may take, in claim order.
      SELECT e.task_id FROM (
        SELECT l.task_id, row_number() OVER (ORDER BY l.priority, l.workflow_id, l.node_index) AS k
        FROM linked l
        WHERE v_slots > 0
          AND l.queue_name = ANY (v_eager_queues) AND l.task_name = ANY (v_eager_names)
          AND (l.good_until IS NULL OR l.good_until > now())
          AND NOT EXISTS (
            SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = l.queue_name AND q.paused)
          -- In the terms of horsies_tasks_claim_idx: a task that a claim of this queue would take first.
          AND NOT EXISTS (
            SELECT 1 FROM {{schema}}.horsies_tasks n
            WHERE NOT n.claimed AND n.finished_at IS NULL AND n.queue_name = l.queue_name
              AND n.priority <= l.priority AND n.enqueued_at <= now())
      ) e
      WHERE e.k <= v_slots
    ), inserted AS (
      INSERT INTO {{schema}}.horsies_tasks
        (id, task_name, queue_name, priority, kwargs, status, enqueued_at, good_until, max_retries, task_options,
         workflow_id, workflow_node, workflow_node_id, trace_context, claimed, claimed_at, claimed_by_worker_id,
         claim_generation, claim_token, claim_expires_at, started_at, attempt, worker_hostname, worker_pid,
         worker_process_name)
      SELECT l.task_id, l.task_name, l.queue_name, l.priority, l.kwargs,
             CASE WHEN g.task_id IS NULL THEN 'PENDING' ELSE 'RUNNING' END, now(), l.good_until,
             l.max_retries, l.task_options, l.workflow_id, l.node_index, l.node_id, x.trace_context,
             g.task_id IS NOT NULL,
             CASE WHEN g.task_id IS NOT NULL THEN now() END,
             CASE WHEN g.task_id IS NOT NULL THEN p_eager ->> 'worker_id' END,
             CASE WHEN g.task_id IS NOT NULL THEN 1 ELSE 0 END,
             CASE WHEN g.task_id IS NOT NULL THEN v_token END,
             CASE WHEN g.task_id IS NOT NULL
                  THEN now() + (p_eager ->> 'lease_ms')::int * interval '1 millisecond' END,
             CASE WHEN g.task_id IS NOT NULL THEN now() END,
             CASE WHEN g.task_id IS NOT NULL THEN 1 ELSE 0 END,
             CASE WHEN g.task_id IS NOT NULL THEN p_eager ->> 'hostname' END,
             CASE WHEN g.task_id IS NOT NULL THEN (p_eager ->> 'pid')::int END,
             CASE WHEN g.task_id IS NOT NULL THEN p_eager ->> 'process_name' END
      FROM linked l
      JOIN {{schema}}.horsies_workflows x ON x.id = l.workflow_id
      LEFT JOIN eager g ON g.task_id = l.task_id
      RETURNING *
    ), per_workflow AS (
      SELECT i.workflow_id AS wid, count(*)::int AS n,
             coalesce(jsonb_agg(jsonb_build_object(
               'id', i.id, 'task_name', i.task_name, 'queue_name', i.queue_name, 'priority', i.priority,
               'kwargs', i.kwargs, 'claim_generation', i.claim_generation, 'claim_token', i.claim_token,
               'retry_count', i.retry_count, 'max_retries', i.max_retries, 'attempt', i.attempt,
               'enqueued_at', i.enqueued_at, 'trace_context', i.trace_context, 'workflow_id', i.workflow_id,
               'workflow_node', i.workflow_node, 'workflow_node_id', i.workflow_node_id,
               'started_at', i.started_at) ORDER BY i.priority, i.workflow_node) FILTER (WHERE i.status = 'RUNNING'),
               '[]') AS started
      FROM inserted i
      GROUP BY i.workflow_id
    )
    SELECT coalesce(array_agg(p.wid), '{}'), coalesce(array_agg(p.n), '{}'), coalesce(array_agg(p.started), '{}')
    INTO v_enq_wid, v_enq_n, v_enq_started
    FROM per_workflow p;
  END IF;

  -- The workflows advance by the nodes that turned terminal; a running one whose every node is terminal finishes.
  WITH counts AS (
    SELECT t.wid, count(*)::int AS n FROM unnest(v_terminal) AS t(wid) GROUP BY t.wid
  ), advanced AS (
    UPDATE {{schema}}.horsies_workflows x
    SET nodes_terminal = x.nodes_terminal + c.n, updated_at = now()
    FROM counts c
    WHERE x.id = c.wid
    RETURNING x.id, x.status, x.nodes_terminal >= x.nodes_total AS done
  )
  SELECT coalesce(array_agg(a.id ORDER BY a.id) FILTER (WHERE a.done AND a.status = 'RUNNING'), '{}')
  INTO v_finishing
  FROM advanced a;

  v_fin_id := '{}';
  v_fin_status := '{}';
  v_fin_parent := '{}';
  v_fin_parent_node := '{}';
  FOREACH v_id IN ARRAY v_finishing LOOP
    SELECT * INTO w FROM {{schema}}.horsies_workflows x WHERE x.id = v_id;
    -- Every node is terminal: the workflow ends once (decideOutcome in src/workflow/step.ts). Success: no failed
    -- node, or with a success policy some case whose nodes all completed (optional nodes never count).
    v_policy := CASE WHEN jsonb_typeof(w.success_policy) = 'object' THEN w.success_policy END;
    SELECT n.node_id, n.status, n.result INTO v_culprit_id, v_culprit_status, v_culprit_result FROM {{schema}}.horsies_workflow_tasks n
    WHERE n.workflow_id = v_id AND n.status = 'FAILED'
      AND NOT coalesce(v_policy -> 'optional' @> to_jsonb(n.node_index), false)
    ORDER BY n.completed_at NULLS LAST, n.node_index
    LIMIT 1;
    v_culprit_found := FOUND;
    IF v_policy IS NULL THEN
      v_success := NOT v_culprit_found;
    ELSE
      v_success := EXISTS (
        SELECT 1 FROM jsonb_array_elements(v_policy -> 'cases') AS pc(nodes)
        WHERE NOT EXISTS (
          SELECT 1 FROM jsonb_array_elements(pc.nodes) AS pn(node)
          WHERE NOT EXISTS (
            SELECT 1 FROM {{schema}}.horsies_workflow_tasks n
            WHERE n.node_key = v_id || ':' || (pn.node #>> '{}') AND n.status = 'COMPLETED')));
    END IF;
    v_output_found := false;
    IF w.output_index IS NOT NULL THEN
      SELECT n.node_id, n.status, n.result INTO v_output_id, v_output_status, v_output_result FROM {{schema}}.horsies_workflow_tasks n
      WHERE n.node_key = v_id || ':' || w.output_index;
      v_output_found := FOUND;
    END IF;
    IF v_success AND v_output_found AND v_output_status = 'COMPLETED' THEN
      v_outcome := jsonb_build_object('ok', coalesce(v_output_result -> 'ok', 'null'::jsonb));
    ELSIF v_success AND w.output_index IS NULL THEN
      -- The outcomes of the terminal nodes (nobody's dependency), by node id.
      v_outcome := jsonb_build_object('ok', coalesce((
        SELECT jsonb_object_agg(n.node_id, CASE
          WHEN n.status = 'COMPLETED' AND jsonb_typeof(n.result) = 'object' AND n.result ? 'ok'
            THEN jsonb_build_object('ok', true, 'value', coalesce(n.result -> 'ok', 'null'::jsonb))
          WHEN n.status = 'COMPLETED' THEN jsonb_build_object('ok', false, 'error', jsonb_build_object(
            'code', 'RESULT_NOT_AVAILABLE', 'message', 'the node completed without a result'))
          WHEN n.status IN ('FAILED', 'SKIPPED') THEN jsonb_build_object('ok', false, 'error', coalesce(
            nullif(n.result -> 'err', 'null'::jsonb),
            jsonb_build_object('code', 'RESULT_NOT_AVAILABLE', 'message', 'the node ended ' || n.status)))
          ELSE jsonb_build_object('ok', false, 'error', jsonb_build_object(
            'code', 'RESULT_NOT_AVAILABLE', 'message', 'the node has not finished'))
        END)
        FROM {{schema}}.horsies_workflow_tasks n
        WHERE n.workflow_id = v_id AND cardinality(n.dependents) = 0), '{}'::jsonb));
    ELSIF (v_success AND v_output_found) OR (NOT v_success AND v_culprit_found) THEN
      IF v_success THEN
        v_culprit_id := v_output_id;
        v_culprit_status := v_output_status;
        v_culprit_result := v_output_result;
      END IF;
      v_outcome := jsonb_build_object('err', jsonb_build_object(
        'code', 'WORKFLOW_FAILED',
        'message', 'workflow "' || w.name || '" failed: node "' || v_culprit_id || '" ended '
                   || v_culprit_status,
        'data', jsonb_build_object('node', v_culprit_id,
                                   'error', coalesce(v_culprit_result -> 'err', 'null'::jsonb))));
    ELSE
      v_outcome := jsonb_build_object('err', jsonb_build_object(
        'code', 'WORKFLOW_SUCCESS_CASE_NOT_MET',
        'message', 'workflow "' || w.name || '" met none of its success cases',
        'data', jsonb_build_object('nodes', coalesce((
          SELECT jsonb_object_agg(n.node_id, n.status) FROM {{schema}}.horsies_workflow_tasks n
          WHERE n.workflow_id = v_id), '{}'::jsonb))));
    END IF;
    UPDATE {{schema}}.horsies_workflows x
    SET status = CASE WHEN v_outcome ? 'ok' THEN 'COMPLETED' ELSE 'FAILED' END, result = v_outcome,
        error_code = v_outcome -> 'err' ->> 'code', completed_at = now(), updated_at = now()
    WHERE x.id = v_id AND x.status IN ('RUNNING', 'PAUSED')
    RETURNING x.status INTO v_final;
    IF FOUND THEN
      PERFORM pg_notify(p_channel, v_id);
    ELSE
      v_final := w.status;
    END IF;
    v_fin_id := v_fin_id || v_id;
    v_fin_status := v_fin_status || v_final;
    v_fin_parent := v_fin_parent || CASE WHEN w.parent_node_index IS NOT NULL THEN w.parent_workflow_id END;
    v_fin_parent_node := v_fin_parent_node
      || CASE WHEN w.parent_workflow_id IS NOT NULL AND w.parent_node_index IS NOT NULL THEN w.parent_node_index END;
  END LOOP;

  RETURN QUERY
  SELECT b.wid::varchar, coalesce(f.status, b.status)::varchar, coalesce(t.n, 0), coalesce(e.n, 0), b.fallback,
         coalesce(o.ready, '{}'::integer[]), f.parent::varchar, f.parent_node, coalesce(e.started, '[]'::jsonb)
  FROM unnest(v_ids, v_status, v_fallback) AS b(wid, status, fallback)
  LEFT JOIN (SELECT c.wid, count(*)::int AS n FROM unnest(v_terminal) AS c(wid) GROUP BY c.wid) t ON t.wid = b.wid
  LEFT JOIN unnest(v_enq_wid, v_enq_n, v_enq_started) AS e(wid, n, started) ON e.wid = b.wid
  LEFT JOIN (SELECT q.wid, array_agg(q.idx ORDER BY q.idx) AS ready
             FROM unnest(v_ready_other_w, v_ready_other_i) AS q(wid, idx) GROUP BY q.wid) o ON o.wid = b.wid
  LEFT JOIN unnest(v_fin_id, v_fin_status, v_fin_parent, v_fin_parent_node) AS f(wid, status, parent, parent_node)
    ON f.wid = b.wid
  ORDER BY b.wid;
END;
$function$;

-- trigger horsies_tasks.horsies_tasks_notify_change
CREATE TRIGGER horsies_tasks_notify_change AFTER UPDATE ON {{schema}}.horsies_tasks FOR EACH ROW WHEN (new.status::text = 'PENDING'::text AND old.status::text <> 'PENDING'::text OR new.finished_at IS NOT NULL AND old.status::text <> new.status::text AND current_setting('horsies.notify_done_later'::text, true) IS DISTINCT FROM 'on'::text OR new.status::text = 'RUNNING'::text AND new.cancel_requested_at IS NOT NULL AND old.cancel_requested_at IS NULL) EXECUTE FUNCTION {{schema}}.horsies_notify_task_change();

-- trigger horsies_tasks.horsies_tasks_notify_insert
CREATE TRIGGER horsies_tasks_notify_insert AFTER INSERT ON {{schema}}.horsies_tasks REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {{schema}}.horsies_notify_task_insert();

-- trigger horsies_tasks.horsies_tasks_release_dedupe_key
CREATE TRIGGER horsies_tasks_release_dedupe_key BEFORE UPDATE ON {{schema}}.horsies_tasks FOR EACH ROW WHEN (new.dedupe_held) EXECUTE FUNCTION {{schema}}.horsies_release_dedupe_key();
