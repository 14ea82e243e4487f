-- Workflows that wait, and durable steps inside a task.
--
-- A wait node is a workflow node with no task: `wait_kind` 'signal' (completes with the payload of a signal or an
-- event) or 'sleep' (completes at a time). While it waits it is RUNNING with no task and no child; `wait_due_at` is
-- its timer (a signal's timeout, a sleep's end), which the maintenance leader fires by stepping the workflow. The
-- timer is the node row itself, so retention prunes it with its run and no worker slot is held.
--
-- The task table is locked first, in the mode the foreign key below takes anyway: a claim of a worker still running
-- holds the task table and then reads the node table, so altering the node table first deadlocked with such a claim
-- during a rolling upgrade. Claims and finishes wait for this transaction instead.
LOCK TABLE {{schema}}.horsies_tasks IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE {{schema}}.horsies_workflow_tasks
  ADD COLUMN wait_kind varchar(8),
  ADD COLUMN wait_name varchar(255),
  -- The key an event must carry to reach this node; '' for none. Resolved from the node's input when it starts.
  ADD COLUMN wait_key text,
  -- A signal's timeout, or a sleep's length (null: a signal without timeout, or a sleep until wait_until).
  ADD COLUMN wait_timeout_ms bigint,
  ADD COLUMN wait_until timestamptz,
  ADD COLUMN wait_due_at timestamptz,
  ADD CONSTRAINT horsies_workflow_tasks_wait_check
    CHECK ((wait_kind IS NULL OR (wait_kind IN ('signal', 'sleep') AND subworkflow IS NULL AND task_id IS NULL))
           AND (wait_kind = 'signal') = (wait_name IS NOT NULL)
           AND (wait_timeout_ms IS NULL OR wait_timeout_ms >= 0));
ALTER TABLE {{schema}}.horsies_workflow_tasks DROP CONSTRAINT horsies_workflow_tasks_linked_check;
ALTER TABLE {{schema}}.horsies_workflow_tasks ADD CONSTRAINT horsies_workflow_tasks_linked_check
  CHECK (status NOT IN ('ENQUEUED', 'RUNNING') OR task_id IS NOT NULL OR child_workflow_id IS NOT NULL
         OR wait_kind IS NOT NULL);

-- Due timers, for the maintenance leader's one bounded statement: only nodes waiting with a timer are in it.
CREATE INDEX horsies_workflow_tasks_wait_due_idx ON {{schema}}.horsies_workflow_tasks (wait_due_at)
  WHERE status = 'RUNNING' AND wait_due_at IS NOT NULL;
-- Nodes waiting for an event, by name and key (app.emit).
CREATE INDEX horsies_workflow_tasks_wait_name_idx ON {{schema}}.horsies_workflow_tasks (wait_name, wait_key)
  WHERE status = 'RUNNING' AND wait_kind = 'signal';

-- Deliveries of signals and events to one node of one run. A delivery id is unique per node, so a repeated
-- delivery is a no-op. A node completes with its first delivery (by seq, the order of insertion under the
-- workflow's row lock); a signal sent to a node not yet reached waits here until the node starts.
CREATE TABLE {{schema}}.horsies_workflow_signals (
  workflow_id varchar(36) NOT NULL REFERENCES {{schema}}.horsies_workflows (id) ON DELETE CASCADE,
  delivery_id varchar(255) NOT NULL,
  node_index integer NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  payload jsonb NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workflow_id, node_index, delivery_id)
);

-- Results of `ctx.step(name, fn)` inside a task: written by the run's owner (fenced on its claim, like progress),
-- read back by a later attempt so a step done is not run again. They go with their task.
CREATE TABLE {{schema}}.horsies_task_steps (
  task_id varchar(36) NOT NULL REFERENCES {{schema}}.horsies_tasks (id) ON DELETE CASCADE,
  name varchar(255) NOT NULL,
  seq integer NOT NULL,
  result jsonb NOT NULL,
  attempt integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, name)
);
