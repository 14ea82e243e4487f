-- Observability: a handler's progress, and the trace context a task carries from its sender to its runs.

-- Progress: the latest value a handler reported (JSON), when, and for which attempt (a retry starts over; the
-- value of an earlier attempt stays readable, marked with its attempt). Written by the owner of the run only
-- (fenced like every owner statement); not indexed, so a progress write is a HOT update.
ALTER TABLE {{schema}}.horsies_tasks
  ADD COLUMN progress jsonb,
  ADD COLUMN progress_at timestamptz,
  ADD COLUMN progress_attempt integer,
  -- The sender's trace context (W3C trace context: {"traceparent": ..., "tracestate": ...}), so that every run
  -- of the task, on whichever machine, continues the sender's trace. Null when the sender traced nothing.
  ADD COLUMN trace_context jsonb,
  ADD CONSTRAINT horsies_tasks_progress_check CHECK ((progress_at IS NULL) = (progress_attempt IS NULL));

-- A workflow run carries the trace context of the code that started it, which its nodes' tasks take on.
ALTER TABLE {{schema}}.horsies_workflows ADD COLUMN trace_context jsonb;

-- The claim as in migration 10, returning the trace context too (one more column of the claimed rows; nothing
-- else changes). horsies_claim_and_start returns the claim's rows as JSON (to_jsonb of each), so it carries the
-- new column without being redefined.
DROP FUNCTION {{schema}}.horsies_claim_tasks(text, text[], integer, integer, text, text, integer, text);
CREATE FUNCTION {{schema}}.horsies_claim_tasks(
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
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) END,
            t.trace_context;
END;
$$;
