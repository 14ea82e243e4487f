-- Kept for the claims of workers of the earlier version that are in flight while the migration that brings
-- horsies_start_rows commits: such a claim runs the body of horsies_claim_and_start it began with, whose cached plan
-- calls this function by its id, so dropping it in that migrate made those claims fail ("cache lookup failed for
-- function"). Nothing of this version calls it: it hands its rows to the one start (horsies_start_rows). A later
-- release drops it, once every claim runs a body that calls horsies_start_rows.
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
