-- The row rules of horsies_workflow_tasks in one function called by one CHECK constraint, as horsies_task_row_check
-- does for horsies_tasks (migration 34): PostgreSQL prepares a table's CHECK expressions anew for every statement
-- that writes it, and the workflow step writes node rows in many small statements. A row that breaks a rule is
-- refused as before (SQLSTATE 23514) with the rule's name as the constraint name. As with CHECK constraints, a rule
-- that evaluates to NULL passes.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_node_row_check(n {{schema}}.horsies_workflow_tasks)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  broken text;
BEGIN
  -- The first rule the row breaks (a rule that is NULL passes, as a CHECK's does), or none.
  broken := CASE
    WHEN (n.status IN ('PENDING', 'READY', 'ENQUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'SKIPPED')) IS FALSE
      THEN 'horsies_workflow_tasks_status_check'
    WHEN (n.priority BETWEEN 1 AND 100) IS FALSE THEN 'horsies_workflow_tasks_priority_check'
    WHEN (n.join_rule IN ('all', 'any', 'quorum')) IS FALSE THEN 'horsies_workflow_tasks_join_check'
    WHEN ((n.join_rule = 'quorum') = (n.min_success IS NOT NULL)
          AND (n.min_success IS NULL OR (n.min_success >= 1 AND n.min_success <= cardinality(n.dependencies)))) IS FALSE
      THEN 'horsies_workflow_tasks_quorum_check'
    WHEN (n.deps_completed >= 0 AND n.deps_failed >= 0 AND n.deps_skipped >= 0
          AND n.deps_completed + n.deps_failed + n.deps_skipped <= cardinality(n.dependencies)) IS FALSE
      THEN 'horsies_workflow_tasks_counts_check'
    WHEN ((n.status IN ('COMPLETED', 'FAILED', 'SKIPPED')) = (n.completed_at IS NOT NULL)) IS FALSE
      THEN 'horsies_workflow_tasks_completed_check'
    WHEN (n.status NOT IN ('ENQUEUED', 'RUNNING') OR n.task_id IS NOT NULL OR n.child_workflow_id IS NOT NULL
          OR n.wait_kind IS NOT NULL) IS FALSE
      THEN 'horsies_workflow_tasks_linked_check'
    WHEN (n.subworkflow IS NOT NULL OR n.child_workflow_id IS NULL) IS FALSE
      THEN 'horsies_workflow_tasks_subworkflow_check'
    WHEN ((n.wait_kind IS NULL OR (n.wait_kind IN ('signal', 'sleep') AND n.subworkflow IS NULL AND n.task_id IS NULL))
          AND (n.wait_kind = 'signal') = (n.wait_name IS NOT NULL)
          AND (n.wait_timeout_ms IS NULL OR n.wait_timeout_ms >= 0)) IS FALSE
      THEN 'horsies_workflow_tasks_wait_check'
  END;
  IF broken IS NOT NULL THEN
    PERFORM {{schema}}.horsies_refuse_row('{{schema}}.horsies_workflow_tasks'::regclass, broken);
  END IF;
  RETURN true;
END;
$function$;
