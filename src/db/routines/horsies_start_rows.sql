-- The one update that writes RUNNING to a task row. Every claim and every start of a claimed task ends here, so the
-- columns of a start (an attempt counted, started_at, the expiry of a task whose good_until passed) have one text.
-- It is called two ways:
-- - By every claim (horsies_claim_and_start, and through it horsies_claim_tasks; horsies_claim_limited), with
--   p_fences NULL: the PENDING rows the caller selected and locked, in claim order, become CLAIMED for p_worker_id
--   with a new claim generation, a new random claim token (the owner's fence: unlike the generation, it cannot repeat
--   after a crash undid a claim) and a lease of p_lease_ms; the first p_start of them become RUNNING in the same row
--   update. One token per call: with the task's id it names each row's claim, and one draw costs less than one a row.
-- - By the start of tasks claimed earlier (horsies_start_tasks: prefetched tasks, and those a soft cap or a rate
--   limiter held back), with p_fences giving each task's claim as 'id:token' (a worker of 0.1 gives 'id:generation',
--   matched as well until those workers are gone): a row still CLAIMED by p_worker_id under that claim becomes
--   RUNNING and keeps its claim; a row that is not is left alone and missing from the result.
-- A task due to start whose good_until passed is EXPIRED instead (TASK_EXPIRED, no attempt), before any user code
-- runs; a claim never selects one, so only a later start meets it. The ids come with their place (unnest WITH
-- ORDINALITY) rather than being looked up in an array of those to start, which cost n * n comparisons for n tasks.
-- The caller of a claim must hold the rows' locks. One generic plan per connection that looks rows up by primary key
-- only (never through the in-flight index), whatever the caller's settings.
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
