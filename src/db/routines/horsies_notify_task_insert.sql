-- Statement-level insert trigger of horsies_tasks, over the transition table: one notification per queue that
-- received PENDING tasks, not one per row, so a bulk send of thousands of tasks sends a handful. Channels carry the
-- schema name so that several apps (and test schemas) can share one database.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_notify_task_insert()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
  q text;
BEGIN
  FOR q IN SELECT DISTINCT queue_name FROM new_rows WHERE status = 'PENDING' LOOP
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_new', q);
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_queue_' || q, '');
  END LOOP;
  RETURN NULL;
END;
$function$;
