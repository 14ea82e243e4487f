-- The check that holds the tasks of paused workflows, made once per claim and per start rather than per task,
-- and the node id a claim returns read from the task row.
--
-- Migration 10 looked each claimed workflow task's workflow up by id. A running workflow's row is updated at
-- every step of it (its counters, and the lock each step takes), so a wide workflow's row carries a long chain of
-- versions, and each lookup walked it: a claim-and-start of a 500-node batch of one workflow took about 2x as long
-- (bench:workflows, prefetch 490). Only PAUSED workflows hold their tasks (a cancel cancels the tasks it stops, a
-- workflow ends only once its nodes did), so the claim and the start read the set of paused workflows once,
-- through a partial index that holds only them.

CREATE INDEX horsies_workflows_paused_idx ON {{schema}}.horsies_workflows (id) WHERE status = 'PAUSED';

-- A workflow task carries its node's id, written at enqueue, so the claim returns it without a lookup of the
-- node per claimed task (tasks enqueued before this migration are looked up as before).
ALTER TABLE {{schema}}.horsies_tasks ADD COLUMN workflow_node_id varchar(255);

CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_tasks(
  p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer,
  p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
RETURNS TABLE (id varchar, task_name varchar, queue_name varchar, priority integer, kwargs jsonb,
               claim_generation integer, retry_count integer, max_retries integer, attempt integer,
               enqueued_at timestamptz, workflow_id varchar, workflow_node integer, workflow_node_id varchar,
               trace_context jsonb)
LANGUAGE plpgsql AS $$
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
$$;

-- The hand-back of a claimed task whose workflow was paused meanwhile, with the same once-per-statement set. A
-- cancelled workflow's claimed tasks are already CANCELLED, so the start skips them as no longer CLAIMED.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_start_tasks(
  p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
RETURNS TABLE (id varchar, status varchar, attempt integer, started_at timestamptz)
LANGUAGE plpgsql AS $$
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
      AND (t.id || ':' || t.claim_generation) = ANY (p_id_generations)
      AND t.status || '' = 'CLAIMED' AND t.claimed_by_worker_id || '' = p_worker_id
      AND t.workflow_id = ANY (ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED'))
    RETURNING t.id, 'STOPPED'::varchar, t.attempt, NULL::timestamptz;
  END IF;
  RETURN QUERY
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN t.good_until <= now() THEN 'EXPIRED' ELSE 'RUNNING' END,
      started_at = CASE WHEN t.good_until <= now() THEN NULL ELSE now() END,
      attempt = CASE WHEN t.good_until <= now() THEN t.attempt ELSE t.attempt + 1 END,
      claimed = NOT COALESCE(t.good_until <= now(), false),
      claim_expires_at = CASE WHEN t.good_until <= now() THEN NULL ELSE t.claim_expires_at END,
      finished_at = CASE WHEN t.good_until <= now() THEN now() END,
      error_code = CASE WHEN t.good_until <= now() THEN 'TASK_EXPIRED' END,
      failed_reason = CASE WHEN t.good_until <= now() THEN 'good_until passed before the task started' END,
      result = CASE WHEN t.good_until <= now() THEN jsonb_build_object('err', jsonb_build_object(
                 'code', 'TASK_EXPIRED', 'message', 'good_until passed before the task started')) END,
      updated_at = now()
  WHERE t.id = ANY (p_ids)
    AND (t.id || ':' || t.claim_generation) = ANY (p_id_generations)
    -- Not indexable on purpose (|| ''): the rows must be found by primary key, not through the in-flight index.
    AND t.status || '' = 'CLAIMED' AND t.claimed_by_worker_id || '' = p_worker_id
  RETURNING t.id, t.status, t.attempt, t.started_at;
END;
$$;
