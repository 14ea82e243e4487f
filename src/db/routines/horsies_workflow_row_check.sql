-- The row rules of horsies_workflows in one function called by one CHECK constraint (migration 34; why:
-- horsies_workflow_node_row_check.sql). A row that breaks a rule is refused as before (SQLSTATE 23514) with the
-- rule's name as the constraint name. As with CHECK constraints, a rule that evaluates to NULL passes.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_row_check(w {{schema}}.horsies_workflows)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
DECLARE
  broken text;
BEGIN
  -- The first rule the row breaks (a rule that is NULL passes, as a CHECK's does), or none.
  broken := CASE
    WHEN (w.status IN ('PENDING', 'RUNNING', 'PAUSED', 'COMPLETED', 'FAILED', 'CANCELLED')) IS FALSE
      THEN 'horsies_workflows_status_check'
    WHEN (w.on_error IN ('fail', 'pause')) IS FALSE THEN 'horsies_workflows_on_error_check'
    WHEN (w.nodes_total >= 1 AND w.nodes_terminal >= 0 AND w.nodes_terminal <= w.nodes_total AND w.depth >= 0) IS FALSE
      THEN 'horsies_workflows_counts_check'
    WHEN ((w.status IN ('COMPLETED', 'FAILED', 'CANCELLED')) = (w.completed_at IS NOT NULL)) IS FALSE
      THEN 'horsies_workflows_completed_check'
    WHEN ((w.parent_workflow_id IS NULL) = (w.parent_node_index IS NULL)) IS FALSE
      THEN 'horsies_workflows_parent_check'
  END;
  IF broken IS NOT NULL THEN
    PERFORM {{schema}}.horsies_refuse_row('{{schema}}.horsies_workflows'::regclass, broken);
  END IF;
  RETURN true;
END;
$function$;
