-- The recovery pass also repairs cancelled workflows: a cancel leaves the nodes of running tasks open (the task may
-- still return, and its step records the result), and a step lost to a crash left such a node ENQUEUED or RUNNING
-- for good, since the pass looked only at RUNNING and PAUSED workflows. This index holds the cancelled workflows
-- with nodes still open, so the pass finds them without reading every finished workflow; it is empty almost always.
CREATE INDEX horsies_workflows_cancelled_open_idx ON {{schema}}.horsies_workflows (updated_at)
  WHERE status = 'CANCELLED' AND nodes_terminal < nodes_total;
