-- CLAIMED -> RUNNING for tasks a worker claimed ahead of its free slots (prefetch), each fenced on its claim token
-- ('id:token' in p_id_generations, aligned with p_ids; the workers of 0.1 send 'id:generation'), through the one
-- start (horsies_start_rows: a task whose good_until passed is EXPIRED instead). A task whose workflow was paused
-- meanwhile is handed back first (PENDING, returned as STOPPED), before any user code runs. Unless
-- p_wait_for_flush, it commits without waiting for the WAL flush (what that risks, and why it is safe:
-- horsies_claim_and_start.sql).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_start_tasks(p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
 RETURNS TABLE(id character varying, status character varying, attempt integer, started_at timestamp with time zone)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
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
      AND ((t.id || ':' || t.claim_token) = ANY (p_id_generations)
           OR (t.id || ':' || t.claim_generation) = ANY (p_id_generations))
      AND t.status || '' = 'CLAIMED' AND t.claimed_by_worker_id || '' = p_worker_id
      AND t.workflow_id = ANY (ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED'))
    RETURNING t.id, 'STOPPED'::varchar, t.attempt, NULL::timestamptz;
  END IF;
  -- The start itself: horsies_start_rows, each task fenced on its 'id:fence'.
  RETURN QUERY
  SELECT s.id, s.status, s.attempt, s.started_at
  FROM {{schema}}.horsies_start_rows(p_ids::varchar[], p_id_generations, cardinality(p_ids), NULL, p_worker_id,
                                     NULL, NULL, NULL) s;
END;
$function$;
