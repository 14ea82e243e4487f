-- Writes a batch of outcomes (completed, failed, retried, cancelled), each fenced on its worker and claim
-- token, with the attempt rows, in one statement. A routine rather than a client statement so that it is
-- planned once per connection (force_generic_plan): a one-outcome finish was otherwise planned at every call, 1.5 ms
-- of planning for 0.7 ms of execution on a table with seventeen indexes. The plan keeps to index lookups.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_finish_tasks(p_ids text[], p_worker_ids text[], p_generations integer[], p_statuses text[], p_results jsonb[], p_error_codes text[], p_error_messages text[], p_failed_reasons text[], p_retry_delays_ms integer[], p_crashed boolean[], p_unless_cancel_requested boolean, p_notify_later boolean, p_tokens uuid[] DEFAULT NULL::uuid[])
 RETURNS TABLE(id character varying, status character varying, workflow_id character varying, workflow_node integer)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  -- With p_notify_later, the update trigger leaves the task_done notifications to the caller (migration 15).
  PERFORM set_config('horsies.notify_done_later', CASE WHEN p_notify_later THEN 'on' ELSE 'off' END, true);
  RETURN QUERY
  WITH input AS (
    SELECT i.*
    FROM unnest(p_ids, p_worker_ids, p_generations, p_tokens, p_statuses, p_results, p_error_codes,
                p_error_messages, p_failed_reasons, p_retry_delays_ms, p_crashed)
      AS i(id, worker_id, generation, token, status, result, error_code, error_message, failed_reason,
           retry_delay_ms, crashed)
  ), target AS (
    -- Driven from the input, one primary-key lookup per task: a join the other way round can turn into a
    -- nested loop over every in-flight row of the worker times every input row. Locked, so that a retry's
    -- outcome is decided on the latest row (a cancel request turns it into CANCELLED).
    SELECT i.*, t.*
    FROM input i
    CROSS JOIN LATERAL (
      SELECT t.attempt, t.started_at, t.worker_hostname, t.worker_pid, t.worker_process_name,
             t.cancel_requested_at, t.good_until
      FROM {{schema}}.horsies_tasks t
      -- Written so that no index can serve it (status || ''): a generic plan would otherwise prefer the
      -- in-flight index and scan all of the worker's rows for each input row, instead of one primary-key lookup.
      WHERE t.id = i.id AND t.status || '' = 'RUNNING' AND t.claimed_by_worker_id || '' = i.worker_id
        -- The claim token (none on a claim made before migration 32, which the reaper may still write off). The
        -- workers of 0.1 pass no tokens, and are fenced on the generation until they are gone.
        AND (t.claim_token IS NOT DISTINCT FROM i.token OR (p_tokens IS NULL AND t.claim_generation = i.generation))
        AND (p_unless_cancel_requested IS NOT TRUE OR t.cancel_requested_at IS NULL)
      FOR UPDATE
    ) t
  ), decided AS (
    SELECT g.*,
           CASE
             WHEN g.status NOT IN ('RETRY', 'THROTTLED') THEN g.status
             WHEN g.cancel_requested_at IS NOT NULL THEN 'CANCELLED'
             WHEN g.good_until IS NOT NULL
                  AND now() + g.retry_delay_ms * interval '1 millisecond' >= g.good_until THEN 'FAILED'
             ELSE g.status
           END AS final
    FROM target g
  ), finished AS (
    UPDATE {{schema}}.horsies_tasks t
    SET status = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN 'PENDING' ELSE d.final END,
        completed_at = CASE WHEN d.final = 'COMPLETED' THEN now() END,
        failed_at = CASE WHEN d.final = 'FAILED' THEN now() END,
        finished_at = CASE WHEN d.final NOT IN ('RETRY', 'RELEASE', 'THROTTLED') THEN now() END,
        result = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                      WHEN d.final = 'CANCELLED' AND d.status IN ('RETRY', 'THROTTLED') THEN jsonb_build_object('err',
                        jsonb_build_object('code', 'TASK_CANCELLED', 'message', 'cancelled instead of retried'))
                      ELSE d.result END,
        error_code = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                          WHEN d.final = 'CANCELLED' AND d.status IN ('RETRY', 'THROTTLED') THEN 'TASK_CANCELLED'
                          ELSE d.error_code END,
        failed_reason = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE d.failed_reason END,
        claimed = false,
        claim_expires_at = NULL,
        claimed_at = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE t.claimed_at END,
        claimed_by_worker_id = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL
                                    ELSE t.claimed_by_worker_id END,
        started_at = CASE WHEN d.final IN ('RETRY', 'RELEASE', 'THROTTLED') THEN NULL ELSE t.started_at END,
        attempt = t.attempt - CASE WHEN d.final = 'RELEASE' THEN 1 ELSE 0 END,
        retry_count = t.retry_count + CASE WHEN d.final = 'RETRY' THEN 1 ELSE 0 END,
        next_retry_at = CASE WHEN d.final IN ('RETRY', 'THROTTLED')
                             THEN now() + d.retry_delay_ms * interval '1 millisecond'
                             WHEN d.final = 'RELEASE' THEN t.next_retry_at END,
        enqueued_at = CASE WHEN d.final IN ('RETRY', 'THROTTLED')
                           THEN now() + d.retry_delay_ms * interval '1 millisecond'
                           ELSE t.enqueued_at END,
        -- At least 10 s, so that a caller awaiting the result can still read it (retention 0).
        purge_after = CASE WHEN d.final = 'COMPLETED' AND t.retention_ms IS NOT NULL
                           THEN now() + GREATEST(t.retention_ms, 10000) * interval '1 millisecond' END,
        updated_at = now()
    FROM decided d
    -- Rows are locked and fenced in target, so nothing changed them since.
    WHERE t.id = d.id
    -- Everything the attempt row needs comes back with the changed rows: no join of decided with finished.
    RETURNING t.id, t.status, t.workflow_id, t.workflow_node, d.final, d.status AS requested, d.attempt,
              d.started_at, d.crashed, d.error_code, d.error_message, d.failed_reason, d.worker_id,
              d.worker_hostname, d.worker_pid, d.worker_process_name
  ), recorded AS (
    INSERT INTO {{schema}}.horsies_task_attempts
      (task_id, attempt, outcome, will_retry, started_at, finished_at, error_code, error_message, failed_reason,
       worker_id, worker_hostname, worker_pid, worker_process_name)
    SELECT f.id, f.attempt,
           CASE WHEN f.crashed THEN 'WORKER_FAILURE' WHEN f.final = 'COMPLETED' THEN 'COMPLETED' ELSE 'FAILED' END,
           f.final IN ('RETRY', 'THROTTLED'), f.started_at, now(),
           CASE WHEN f.final = 'CANCELLED' AND f.requested IN ('RETRY', 'THROTTLED') THEN 'TASK_CANCELLED'
                ELSE f.error_code END,
           f.error_message, f.failed_reason, f.worker_id, f.worker_hostname, f.worker_pid, f.worker_process_name
    FROM finished f
    WHERE f.final <> 'RELEASE'
  )
  SELECT f.id, f.status, f.workflow_id, f.workflow_node FROM finished f;
END;
$function$;
