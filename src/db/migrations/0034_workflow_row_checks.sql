-- The row rules of horsies_workflow_tasks and horsies_workflows checked by one function each instead of nine and
-- five CHECK constraints, as migration 18 did for horsies_tasks.
--
-- PostgreSQL prepares a table's CHECK expressions anew for every statement that writes it (it reads each from the
-- catalog, plans it and builds its evaluator). The workflow step writes node and workflow rows in many small
-- statements, and with 1,000 ten-node workflows that preparation took about a tenth of the server's CPU. A
-- PL/pgSQL function is prepared once per connection. The rules are the same, and a row that breaks one is refused as
-- before: SQLSTATE 23514 (check_violation), with the name of the rule it broke as the constraint name.
--
-- The functions are created here with a body that passes every row, because a constraint must name an existing
-- function; the same migrate then applies their files (horsies_workflow_node_row_check.sql and
-- horsies_workflow_row_check.sql), which hold the rules, in the same transaction, before any row is written.

CREATE FUNCTION {{schema}}.horsies_workflow_node_row_check(n {{schema}}.horsies_workflow_tasks)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN true; END; $$;

CREATE FUNCTION {{schema}}.horsies_workflow_row_check(w {{schema}}.horsies_workflows)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN true; END; $$;

ALTER TABLE {{schema}}.horsies_workflow_tasks
  DROP CONSTRAINT horsies_workflow_tasks_status_check,
  DROP CONSTRAINT horsies_workflow_tasks_priority_check,
  DROP CONSTRAINT horsies_workflow_tasks_join_check,
  DROP CONSTRAINT horsies_workflow_tasks_quorum_check,
  DROP CONSTRAINT horsies_workflow_tasks_counts_check,
  DROP CONSTRAINT horsies_workflow_tasks_completed_check,
  DROP CONSTRAINT horsies_workflow_tasks_linked_check,
  DROP CONSTRAINT horsies_workflow_tasks_subworkflow_check,
  DROP CONSTRAINT horsies_workflow_tasks_wait_check,
  -- Every row kept the nine rules until this statement: NOT VALID spares a large table a full read.
  ADD CONSTRAINT horsies_workflow_tasks_row_check
    CHECK ({{schema}}.horsies_workflow_node_row_check(horsies_workflow_tasks)) NOT VALID;

ALTER TABLE {{schema}}.horsies_workflows
  DROP CONSTRAINT horsies_workflows_status_check,
  DROP CONSTRAINT horsies_workflows_on_error_check,
  DROP CONSTRAINT horsies_workflows_counts_check,
  DROP CONSTRAINT horsies_workflows_completed_check,
  DROP CONSTRAINT horsies_workflows_parent_check,
  ADD CONSTRAINT horsies_workflows_row_check CHECK ({{schema}}.horsies_workflow_row_check(horsies_workflows)) NOT VALID;
