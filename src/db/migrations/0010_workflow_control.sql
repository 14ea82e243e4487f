-- Workflow control and nesting: pause, resume and cancel (with cascade to child workflows), and nodes that run a
-- whole workflow (subworkflows).
--
-- Lock order, everywhere: a workflow's row before its nodes' rows before their tasks' rows, and a parent
-- workflow before its children (control operations lock a tree level by level, parents first). A child that
-- finishes does not touch its parent in the same transaction: its parent takes a step of its own afterwards.

-- A subworkflow node names the registered workflow it runs (its stable key); it runs no task of its own but a
-- child workflow, linked through child_workflow_id.
ALTER TABLE {{schema}}.horsies_workflow_tasks ADD COLUMN subworkflow varchar(255);
ALTER TABLE {{schema}}.horsies_workflow_tasks DROP CONSTRAINT horsies_workflow_tasks_linked_check;
ALTER TABLE {{schema}}.horsies_workflow_tasks ADD CONSTRAINT horsies_workflow_tasks_linked_check
  CHECK (status NOT IN ('ENQUEUED', 'RUNNING') OR task_id IS NOT NULL OR child_workflow_id IS NOT NULL);
ALTER TABLE {{schema}}.horsies_workflow_tasks ADD CONSTRAINT horsies_workflow_tasks_subworkflow_check
  CHECK (subworkflow IS NOT NULL OR child_workflow_id IS NULL);

-- The claim skips tasks of a workflow that is not RUNNING (paused: they wait, retries included), and returns
-- the workflow and node a task runs for, so the handler's context can say so. A plain task pays nothing for
-- either: both are guarded by workflow_id IS NULL.
DROP FUNCTION {{schema}}.horsies_claim_tasks(text, text[], integer, integer, text, text, integer, text);
CREATE FUNCTION {{schema}}.horsies_claim_tasks(
  p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer,
  p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
RETURNS TABLE (id varchar, task_name varchar, queue_name varchar, priority integer, kwargs jsonb,
               claim_generation integer, retry_count integer, max_retries integer, attempt integer,
               enqueued_at timestamptz, workflow_id varchar, workflow_node integer, workflow_node_id varchar)
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
      AND (n.workflow_id IS NULL OR EXISTS (
        SELECT 1 FROM {{schema}}.horsies_workflows w WHERE w.id = n.workflow_id AND w.status = 'RUNNING'))
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
            CASE WHEN t.workflow_id IS NOT NULL THEN (
              SELECT wt.node_id FROM {{schema}}.horsies_workflow_tasks wt
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) END;
END;
$$;

-- The start hands back, before their code runs, the tasks of a workflow that stopped running (paused or
-- cancelled) after they were claimed: CLAIMED → PENDING, no attempt counted, returned with status STOPPED
-- (`WORKFLOW_STOPPED`). The worker names its workflow tasks in p_workflow_ids, so a batch of plain tasks skips
-- the check. The start itself is as before.
DROP FUNCTION {{schema}}.horsies_start_tasks(text, text[], text[], boolean);
CREATE FUNCTION {{schema}}.horsies_start_tasks(
  p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
RETURNS TABLE (id varchar, status varchar, attempt integer, started_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  IF NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  IF cardinality(p_workflow_ids) > 0 THEN
    RETURN QUERY
    UPDATE {{schema}}.horsies_tasks t
    SET status = 'PENDING', claimed = false, claimed_at = NULL, claimed_by_worker_id = NULL,
        claim_expires_at = NULL, updated_at = now()
    WHERE t.id = ANY (p_workflow_ids)
      AND (t.id || ':' || t.claim_generation) = ANY (p_id_generations)
      AND t.status || '' = 'CLAIMED' AND t.claimed_by_worker_id || '' = p_worker_id
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.horsies_workflows w
                      WHERE w.id = t.workflow_id AND w.status = 'RUNNING')
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

-- As in migration 6, with the workflow tasks among the started ones named to the start.
CREATE OR REPLACE PROCEDURE {{schema}}.horsies_claim_and_start(
  p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer,
  p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_start integer, p_wait_for_flush boolean,
  INOUT claimed jsonb DEFAULT NULL, INOUT started jsonb DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
  start_ids text[];
  start_generations text[];
  start_workflow_ids text[];
BEGIN
  SELECT COALESCE(jsonb_agg(to_jsonb(c) ORDER BY c.priority, c.enqueued_at, c.id), '[]'::jsonb) INTO claimed
  FROM {{schema}}.horsies_claim_tasks(p_queue, p_task_names, p_limit, p_lease_ms, p_worker_id, p_hostname, p_pid,
                                      p_process_name) c;
  started := '[]'::jsonb;
  IF p_start <= 0 OR jsonb_array_length(claimed) = 0 THEN
    RETURN;
  END IF;
  COMMIT;
  SELECT array_agg(e ->> 'id'), array_agg((e ->> 'id') || ':' || (e ->> 'claim_generation')),
         array_agg(e ->> 'id') FILTER (WHERE e ->> 'workflow_id' IS NOT NULL)
  INTO start_ids, start_generations, start_workflow_ids
  FROM jsonb_array_elements(claimed) WITH ORDINALITY AS x(e, n)
  WHERE n <= p_start;
  SELECT COALESCE(jsonb_agg(to_jsonb(s)), '[]'::jsonb) INTO started
  FROM {{schema}}.horsies_start_tasks(p_worker_id, start_ids, start_generations, p_wait_for_flush,
                                      start_workflow_ids) s;
END;
$$;

