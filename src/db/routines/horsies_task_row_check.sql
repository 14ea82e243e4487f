-- The row rules of horsies_tasks in one function called by one CHECK constraint, instead of seventeen CHECK
-- constraints: PostgreSQL prepares a table's CHECK expressions anew for every statement that writes it (about 250 us
-- per statement with seventeen), while a PL/pgSQL function is prepared once per connection. A row that breaks a rule
-- is refused as before (SQLSTATE 23514) with the rule's name as the constraint name. As with CHECK constraints, a
-- rule that evaluates to NULL passes.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_task_row_check(t {{schema}}.horsies_tasks)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  broken text;
BEGIN
  -- The first rule the row breaks (a rule that is NULL passes, as a CHECK's does), or none.
  broken := CASE
    WHEN (t.status IN ('PENDING', 'CLAIMED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')) IS FALSE
      THEN 'horsies_tasks_status_check'
    WHEN (t.priority BETWEEN 1 AND 100) IS FALSE THEN 'horsies_tasks_priority_check'
    WHEN (jsonb_typeof(t.args) = 'array') IS FALSE THEN 'horsies_tasks_args_check'
    WHEN (t.attempt >= 0 AND t.retry_count >= 0 AND t.max_retries >= 0 AND t.claim_generation >= 0) IS FALSE
      THEN 'horsies_tasks_counts_check'
    WHEN ((t.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')) = (t.finished_at IS NOT NULL)) IS FALSE
      THEN 'horsies_tasks_finished_check'
    WHEN ((t.status = 'COMPLETED') = (t.completed_at IS NOT NULL)) IS FALSE THEN 'horsies_tasks_completed_check'
    WHEN ((t.status = 'FAILED') = (t.failed_at IS NOT NULL)) IS FALSE THEN 'horsies_tasks_failed_check'
    WHEN (t.claimed = (t.status IN ('CLAIMED', 'RUNNING'))
          AND (NOT t.claimed OR (t.claimed_by_worker_id IS NOT NULL AND t.claimed_at IS NOT NULL))) IS FALSE
      THEN 'horsies_tasks_claimed_check'
    WHEN (t.status <> 'RUNNING' OR t.started_at IS NOT NULL) IS FALSE THEN 'horsies_tasks_running_check'
    WHEN (t.resubmit_count >= 0) IS FALSE THEN 'horsies_tasks_resubmit_count_check'
    WHEN (t.retention_ms IS NULL OR t.retention_ms >= 0) IS FALSE THEN 'horsies_tasks_retention_check'
    WHEN (t.purge_after IS NULL OR t.status = 'COMPLETED') IS FALSE THEN 'horsies_tasks_purge_after_check'
    WHEN ((t.workflow_id IS NULL) = (t.workflow_node IS NULL)) IS FALSE THEN 'horsies_tasks_workflow_check'
    WHEN ((t.progress_at IS NULL) = (t.progress_attempt IS NULL)) IS FALSE THEN 'horsies_tasks_progress_check'
    WHEN (t.attempt <= 1000000000 AND t.claim_generation <= 1000000000 AND t.resubmit_count <= 1000000000) IS FALSE
      THEN 'horsies_tasks_counter_bounds_check'
    WHEN (isfinite(t.sent_at) AND isfinite(t.enqueued_at) AND isfinite(t.claimed_at) AND isfinite(t.started_at)
          AND isfinite(t.completed_at) AND isfinite(t.failed_at) AND isfinite(t.finished_at)
          AND isfinite(t.claim_expires_at) AND isfinite(t.good_until) AND isfinite(t.next_retry_at)
          AND isfinite(t.created_at) AND isfinite(t.updated_at) AND isfinite(t.cancel_requested_at)
          AND isfinite(t.resubmitted_at) AND isfinite(t.purge_after) AND isfinite(t.progress_at)) IS FALSE
      THEN 'horsies_tasks_finite_times_check'
    WHEN ((t.dedupe_scope IS NULL OR t.dedupe_scope IN ('pending', 'debounce', 'running', 'finished'))
          AND (t.dedupe_key IS NULL) = (t.dedupe_scope IS NULL)
          AND (t.dedupe_key IS NULL) = (t.dedupe_held IS NULL)
          AND (t.dedupe_scope IS NOT DISTINCT FROM 'finished') = (t.dedupe_window_ms IS NOT NULL)
          AND (t.dedupe_window_ms IS NULL OR t.dedupe_window_ms > 0)) IS FALSE
      THEN 'horsies_tasks_dedupe_check'
  END;
  IF broken IS NOT NULL THEN
    PERFORM {{schema}}.horsies_refuse_row('{{schema}}.horsies_tasks'::regclass, broken);
  END IF;
  RETURN true;
END;
$function$;
