-- CLAIMED -> RUNNING for tasks a worker claimed ahead of its free slots (prefetch), each fenced on its claim token
-- ('id:token' in p_id_generations; the workers of 0.1 send 'id:generation', matched as well until they are gone); a
-- task whose good_until passed is EXPIRED instead, and a task whose workflow was paused meanwhile is handed back
-- (PENDING, returned as STOPPED) before any user code runs. Rows are found by primary key, never through the
-- in-flight index. Unless p_wait_for_flush, it commits without waiting for the WAL flush (what that risks, and why
-- it is safe: horsies_claim_and_start.sql).
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
    AND ((t.id || ':' || t.claim_token) = ANY (p_id_generations)
         OR (t.id || ':' || t.claim_generation) = ANY (p_id_generations))
    -- Not indexable on purpose (|| ''): the rows must be found by primary key, not through the in-flight index.
    AND t.status || '' = 'CLAIMED' AND t.claimed_by_worker_id || '' = p_worker_id
  RETURNING t.id, t.status, t.attempt, t.started_at;
END;
$function$;
