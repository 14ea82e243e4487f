-- The row rules of horsies_tasks checked by one function instead of seventeen CHECK constraints, and the WHEN
-- conditions of its two update triggers evaluated by functions too.
--
-- PostgreSQL prepares a table's CHECK expressions, and the WHEN conditions of its triggers, anew for every
-- statement that writes the table (it reads each from the catalog, plans it as an expression and builds its
-- evaluator, then applies it to each row). With the seventeen checks of migrations 1 to 16 that preparation cost
-- about 250 us per INSERT or UPDATE statement on the machine of docs/benchmarks.md, whatever the number of rows,
-- and the two WHEN conditions about 100 us more per UPDATE: more than the update of a row itself, paid by every
-- claim, start, finish and send. A PL/pgSQL function is prepared once per connection, and a constraint or a WHEN
-- that calls it is a single function call to prepare.
--
-- The rules are the same, and a row that breaks one is refused as before: SQLSTATE 23514 (check_violation), with
-- the name of the rule it broke as the constraint name (error.constraint), so "horsies_tasks_status_check" and the
-- others still say what is wrong. As with CHECK constraints, a rule that evaluates to NULL passes.

CREATE FUNCTION {{schema}}.horsies_task_row_check(t {{schema}}.horsies_tasks)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
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
  IF broken IS NULL THEN
    RETURN true;
  END IF;
  RAISE EXCEPTION 'new row for relation "horsies_tasks" violates check constraint "%"', broken
    USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'horsies_tasks',
          SCHEMA = (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE c.oid = '{{schema}}.horsies_tasks'::regclass);
END;
$$;

ALTER TABLE {{schema}}.horsies_tasks
  DROP CONSTRAINT horsies_tasks_status_check,
  DROP CONSTRAINT horsies_tasks_priority_check,
  DROP CONSTRAINT horsies_tasks_args_check,
  DROP CONSTRAINT horsies_tasks_counts_check,
  DROP CONSTRAINT horsies_tasks_finished_check,
  DROP CONSTRAINT horsies_tasks_completed_check,
  DROP CONSTRAINT horsies_tasks_failed_check,
  DROP CONSTRAINT horsies_tasks_claimed_check,
  DROP CONSTRAINT horsies_tasks_running_check,
  DROP CONSTRAINT horsies_tasks_resubmit_count_check,
  DROP CONSTRAINT horsies_tasks_retention_check,
  DROP CONSTRAINT horsies_tasks_purge_after_check,
  DROP CONSTRAINT horsies_tasks_workflow_check,
  DROP CONSTRAINT horsies_tasks_progress_check,
  DROP CONSTRAINT horsies_tasks_dedupe_check,
  DROP CONSTRAINT horsies_tasks_counter_bounds_check,
  DROP CONSTRAINT horsies_tasks_finite_times_check,
  -- Every row kept the seventeen rules until this statement: NOT VALID spares a large table a full read (the
  -- constraint holds for every row written from now on, as the old ones did).
  ADD CONSTRAINT horsies_tasks_row_check CHECK ({{schema}}.horsies_task_row_check(horsies_tasks)) NOT VALID;

-- The WHEN conditions of migrations 13 and 15, unchanged, as functions.
CREATE FUNCTION {{schema}}.horsies_task_change_notifies(o {{schema}}.horsies_tasks, n {{schema}}.horsies_tasks)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (n.status = 'PENDING' AND o.status <> 'PENDING')
    OR (n.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') AND o.status <> n.status
        AND current_setting('horsies.notify_done_later', true) IS DISTINCT FROM 'on')
    OR (n.status = 'RUNNING' AND n.cancel_requested_at IS NOT NULL AND o.cancel_requested_at IS NULL);
END;
$$;

CREATE FUNCTION {{schema}}.horsies_task_releases_dedupe_key(n {{schema}}.horsies_tasks)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN n.dedupe_held
    AND ((n.claimed AND n.dedupe_scope IN ('pending', 'debounce'))
      OR (n.finished_at IS NOT NULL AND n.dedupe_scope <> 'finished'));
END;
$$;

DROP TRIGGER horsies_tasks_notify_change ON {{schema}}.horsies_tasks;
CREATE TRIGGER horsies_tasks_notify_change
  AFTER UPDATE ON {{schema}}.horsies_tasks
  FOR EACH ROW
  WHEN ({{schema}}.horsies_task_change_notifies(OLD, NEW))
  EXECUTE FUNCTION {{schema}}.horsies_notify_task_change();

DROP TRIGGER horsies_tasks_release_dedupe_key ON {{schema}}.horsies_tasks;
CREATE TRIGGER horsies_tasks_release_dedupe_key
  BEFORE UPDATE ON {{schema}}.horsies_tasks
  FOR EACH ROW
  WHEN ({{schema}}.horsies_task_releases_dedupe_key(NEW))
  EXECUTE FUNCTION {{schema}}.horsies_release_dedupe_key();
