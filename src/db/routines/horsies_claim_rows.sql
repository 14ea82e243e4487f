-- The one update that moves picked tasks into a worker's claim: every claim (horsies_claim_tasks,
-- horsies_claim_and_start, horsies_claim_limited) selects and locks its rows, then calls this with their ids in claim
-- order. Each row becomes CLAIMED for p_worker_id with a new claim generation, a new random claim token (the
-- owner's fence: unlike the generation, it cannot repeat after a crash undid a claim) and a lease of p_lease_ms;
-- the first p_start of them become RUNNING in the same row update (a start, counted as an attempt). The ids come
-- with their place (unnest WITH ORDINALITY) rather than being looked up in an array of those to start, which cost
-- n * n comparisons for a claim of n tasks. The caller must hold the rows' locks. One generic plan per connection that
-- looks rows up by primary key only, whatever the caller's settings.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_rows(p_ids character varying[], p_start integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, status character varying, started_at timestamp with time zone, claim_token uuid)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
  -- One token per claim: with the task's id, it names the claim of each row, and one draw costs less than one per row.
  v_token uuid := gen_random_uuid();
BEGIN
  RETURN QUERY
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN p.n <= p_start THEN 'RUNNING' ELSE 'CLAIMED' END,
      claimed = true,
      claimed_at = now(),
      claimed_by_worker_id = p_worker_id,
      claim_generation = t.claim_generation + 1,
      claim_token = v_token,
      claim_expires_at = now() + p_lease_ms * interval '1 millisecond',
      started_at = CASE WHEN p.n <= p_start THEN now() ELSE t.started_at END,
      attempt = CASE WHEN p.n <= p_start THEN t.attempt + 1 ELSE t.attempt END,
      worker_hostname = p_hostname,
      worker_pid = p_pid,
      worker_process_name = p_process_name,
      updated_at = now()
  FROM unnest(p_ids) WITH ORDINALITY AS p(id, n)
  WHERE t.id = p.id
  RETURNING t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count,
            t.max_retries, t.attempt, t.enqueued_at, t.workflow_id, t.workflow_node,
            CASE WHEN t.workflow_id IS NOT NULL AND t.workflow_node_id IS NULL THEN (
              SELECT wt.node_id FROM {{schema}}.horsies_workflow_tasks wt
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) ELSE t.workflow_node_id END,
            t.trace_context, t.status, t.started_at, t.claim_token;
END;
$function$;
