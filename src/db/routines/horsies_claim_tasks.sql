-- PENDING -> CLAIMED for up to p_limit tasks of one queue, without starting any: the claim of a worker that holds
-- tasks ahead of its free slots (prefetch) or claims within a cap (TaskClaimWithinCap); they start later through
-- horsies_start_tasks. The selection and the update are horsies_claim_and_start's with nothing to start (which
-- also commits without waiting for the WAL flush: a lost claim is requeued by the reaper), so there is one text of
-- each; this keeps the claim's columns.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_tasks(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, claim_token uuid)
 LANGUAGE plpgsql
AS $function$
BEGIN
  RETURN QUERY
  SELECT c.id, c.task_name, c.queue_name, c.priority, c.kwargs, c.claim_generation, c.retry_count, c.max_retries,
         c.attempt, c.enqueued_at, c.workflow_id, c.workflow_node, c.workflow_node_id, c.trace_context,
         c.claim_token
  FROM {{schema}}.horsies_claim_and_start(p_queue, p_task_names, p_limit, p_lease_ms, p_worker_id, p_hostname, p_pid,
                                          p_process_name, 0, false) c;
END;
$function$;
