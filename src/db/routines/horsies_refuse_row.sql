-- Refuses a row that breaks a rule of its table, the way a CHECK constraint does: SQLSTATE 23514 (check_violation),
-- with the rule's name as the constraint name and the table and schema named, so that an error tells what is wrong
-- as it did when each rule was a constraint of its own. Called by the row check functions (horsies_task_row_check,
-- horsies_workflow_node_row_check, horsies_workflow_row_check) when a row breaks a rule.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_refuse_row(p_table regclass, p_rule text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_table text;
  v_schema text;
BEGIN
  SELECT c.relname, s.nspname INTO v_table, v_schema
  FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
  WHERE c.oid = p_table;
  RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', v_table, p_rule
    USING ERRCODE = 'check_violation', CONSTRAINT = p_rule, TABLE = v_table, SCHEMA = v_schema;
END;
$function$;
