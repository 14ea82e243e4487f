-- Workflows: one row per run in horsies_workflows, one row per node in horsies_workflow_tasks. The whole DAG and
-- the wiring of every node's input are stored at start, so any worker (and the recovery pass) can progress a
-- workflow without the code that defined it.
--
-- Progression is incremental: each node keeps counters of its dependencies' outcomes, bumped once when a
-- dependency turns terminal (the bump and the status change commit together under the workflow's row lock), so a
-- join over 10,000 nodes is decided without reading them; `dependents` is the reverse adjacency that says whom
-- to bump. The workflow row counts its terminal nodes, so completion needs no scan either.

CREATE TABLE {{schema}}.horsies_workflows (
  id varchar(36) PRIMARY KEY,
  name varchar(255) NOT NULL,
  status varchar(16) NOT NULL,
  on_error varchar(8) NOT NULL DEFAULT 'fail',
  -- Index of the node whose result is the workflow's result; null: the map of terminal nodes' results.
  output_index integer,
  -- {"cases": [[node index, ...], ...], "optional": [node index, ...]} or null (success = no FAILED node).
  success_policy jsonb,
  -- Digest of the stored definition and parameters: a start with the same id must bring the same.
  definition_sha varchar(64) NOT NULL,
  params jsonb,
  -- Envelope as for tasks: {"ok": value} or {"err": {"code", "message", "data"}}.
  result jsonb,
  error_code varchar(100),
  nodes_total integer NOT NULL,
  nodes_terminal integer NOT NULL DEFAULT 0,
  parent_workflow_id varchar(36) REFERENCES {{schema}}.horsies_workflows (id) ON DELETE CASCADE,
  parent_node_index integer,
  root_workflow_id varchar(36) NOT NULL,
  depth integer NOT NULL DEFAULT 0,
  sent_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  completed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT horsies_workflows_status_check
    CHECK (status IN ('PENDING', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED')),
  CONSTRAINT horsies_workflows_on_error_check CHECK (on_error IN ('fail', 'pause')),
  CONSTRAINT horsies_workflows_completed_check
    CHECK ((status IN ('COMPLETED', 'FAILED', 'CANCELLED')) = (completed_at IS NOT NULL)),
  CONSTRAINT horsies_workflows_counts_check
    CHECK (nodes_total >= 1 AND nodes_terminal BETWEEN 0 AND nodes_total AND depth >= 0),
  CONSTRAINT horsies_workflows_parent_check CHECK ((parent_workflow_id IS NULL) = (parent_node_index IS NULL))
);

-- The recovery pass looks only at live workflows; listings go newest first.
CREATE INDEX horsies_workflows_live_idx
  ON {{schema}}.horsies_workflows (updated_at) WHERE status IN ('PENDING', 'RUNNING', 'PAUSED');
CREATE INDEX horsies_workflows_sent_at_idx ON {{schema}}.horsies_workflows (sent_at DESC, id DESC);
CREATE INDEX horsies_workflows_completed_at_idx
  ON {{schema}}.horsies_workflows (completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX horsies_workflows_parent_idx
  ON {{schema}}.horsies_workflows (parent_workflow_id) WHERE parent_workflow_id IS NOT NULL;

CREATE TABLE {{schema}}.horsies_workflow_tasks (
  workflow_id varchar(36) NOT NULL REFERENCES {{schema}}.horsies_workflows (id) ON DELETE CASCADE,
  node_index integer NOT NULL,
  node_id varchar(255) NOT NULL,
  task_name varchar(255) NOT NULL,
  queue_name varchar(100) NOT NULL,
  priority integer NOT NULL,
  dependencies integer[] NOT NULL DEFAULT '{}',
  dependents integer[] NOT NULL DEFAULT '{}',
  join_rule varchar(8) NOT NULL DEFAULT 'all',
  min_success integer,
  allow_failed_deps boolean NOT NULL DEFAULT false,
  -- The wiring: {"static": <input with references left out>, "refs": [{"to": [path], "node": i, "kind":
  -- "result" | "outcome", "from": [path]}]}. Resolved against the dependencies' results when the node is enqueued.
  input_template jsonb NOT NULL,
  max_retries integer NOT NULL DEFAULT 0,
  -- What recovery needs without the task's code (the retry policy), copied to the task at enqueue.
  task_options jsonb,
  good_until timestamptz,
  status varchar(16) NOT NULL,
  deps_completed integer NOT NULL DEFAULT 0,
  deps_failed integer NOT NULL DEFAULT 0,
  deps_skipped integer NOT NULL DEFAULT 0,
  task_id varchar(36),
  child_workflow_id varchar(36),
  result jsonb,
  error_code varchar(100),
  enqueued_at timestamptz,
  completed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- The node's key for the step's lookups. Every index of this table leads with workflow_id, and a planner that
  -- thinks a workflow has two nodes (a young table, a generic plan) reads all of a 10,000-node workflow's rows
  -- to find ten of them; a lookup by this key has one index to use and finds exactly the rows asked for.
  node_key text GENERATED ALWAYS AS (workflow_id || ':' || node_index) STORED,
  PRIMARY KEY (workflow_id, node_index),
  CONSTRAINT horsies_workflow_tasks_node_id_key UNIQUE (workflow_id, node_id),
  CONSTRAINT horsies_workflow_tasks_status_check
    CHECK (status IN ('PENDING', 'READY', 'ENQUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'SKIPPED')),
  CONSTRAINT horsies_workflow_tasks_join_check CHECK (join_rule IN ('all', 'any', 'quorum')),
  CONSTRAINT horsies_workflow_tasks_quorum_check
    CHECK ((join_rule = 'quorum') = (min_success IS NOT NULL)
           AND (min_success IS NULL OR min_success BETWEEN 1 AND cardinality(dependencies))),
  CONSTRAINT horsies_workflow_tasks_completed_check
    CHECK ((status IN ('COMPLETED', 'FAILED', 'SKIPPED')) = (completed_at IS NOT NULL)),
  CONSTRAINT horsies_workflow_tasks_linked_check CHECK (status NOT IN ('ENQUEUED', 'RUNNING') OR task_id IS NOT NULL),
  CONSTRAINT horsies_workflow_tasks_priority_check CHECK (priority BETWEEN 1 AND 100),
  CONSTRAINT horsies_workflow_tasks_counts_check
    CHECK (deps_completed >= 0 AND deps_failed >= 0 AND deps_skipped >= 0
           AND deps_completed + deps_failed + deps_skipped <= cardinality(dependencies))
);

CREATE UNIQUE INDEX horsies_workflow_tasks_node_key_idx ON {{schema}}.horsies_workflow_tasks (node_key);
-- Nodes by their task (recovery and listings join nodes with their tasks).
CREATE INDEX horsies_workflow_tasks_task_idx
  ON {{schema}}.horsies_workflow_tasks (task_id) WHERE task_id IS NOT NULL;
-- Nodes not yet terminal, for the recovery pass.
CREATE INDEX horsies_workflow_tasks_open_idx
  ON {{schema}}.horsies_workflow_tasks (workflow_id, status) WHERE status IN ('PENDING', 'READY', 'ENQUEUED', 'RUNNING');

-- A workflow's tasks carry their workflow and node, so finishing them names the workflow to step without a
-- lookup, and a plain task pays only two null columns.
ALTER TABLE {{schema}}.horsies_tasks
  ADD COLUMN workflow_id varchar(36),
  ADD COLUMN workflow_node integer,
  ADD CONSTRAINT horsies_tasks_workflow_check CHECK ((workflow_id IS NULL) = (workflow_node IS NULL));
