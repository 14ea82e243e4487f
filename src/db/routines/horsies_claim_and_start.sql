-- PENDING -> CLAIMED for up to p_limit tasks of one queue (unless it is paused), in claim order (priority, then
-- enqueued_at, then id), FOR UPDATE SKIP LOCKED, passing by tasks of paused workflows; the first p_start of them
-- are written RUNNING in the same update (horsies_start_rows): a worker with free slots claims and starts in one
-- round trip. One generic plan per connection, with index lookups only; one queue per call on purpose: with
-- `queue_name = p_queue` the planner walks horsies_tasks_claim_idx in order and stops after p_limit rows. Bitmap
-- scans and sorts are off so that it always does: statistics that put few rows past the filters (several queues,
-- many task names) made it collect every PENDING entry of the queue through a bitmap and sort them, at each claim.
--
-- Durability: the transaction commits without waiting for its WAL flush unless it starts tasks and p_wait_for_flush
-- is set. A server crash can lose such a commit: a lost claim leaves the task PENDING, a lost start leaves it PENDING
-- (or CLAIMED, for horsies_start_tasks) with its previous claim generation; every statement of an owner is fenced
-- on the claim, so nothing is written on a lost claim, and the task runs again, as after a worker crash, never
-- lost. Outcomes and sends always wait for the flush, and since WAL is written in order, that flush makes every
-- earlier claim and start of the same server durable too.
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
