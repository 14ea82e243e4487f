-- One update writes RUNNING to a task row.
--
-- A claim that starts wrote its rows through horsies_claim_rows, and a start of tasks claimed earlier through the
-- update of horsies_start_tasks: two texts of the columns a start writes. Both now call horsies_start_rows, created
-- from its file by the same migrate, so horsies_claim_rows goes, with its record among the applied routines. The
-- routines the workers call keep their arguments and results, so workers of an earlier version go on claiming and
-- starting through the new text.

DROP FUNCTION IF EXISTS {{schema}}.horsies_claim_rows(character varying[], integer, integer, text, text, integer, text);
DO $$
BEGIN
  IF to_regclass('{{schema}}.horsies_schema_routines') IS NOT NULL THEN
    DELETE FROM {{schema}}.horsies_schema_routines WHERE name = 'horsies_claim_rows';
  END IF;
END $$;
