-- Row-level update trigger of horsies_tasks (its WHEN condition filters by plain column tests): a task back to
-- PENDING wakes the queue's workers (and frees room under a cap: `<schema>:task_done` when it left a claim); a
-- finished task sends `<schema>:task_done`; a cancel request tells the owning worker (`<schema>:task_cancel`).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_notify_task_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF NEW.status = 'PENDING' AND OLD.status <> 'PENDING' THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_new', NEW.queue_name);
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_queue_' || NEW.queue_name, '');
    IF OLD.claimed THEN
      PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_done', NEW.id);
    END IF;
  ELSIF NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') AND OLD.status <> NEW.status THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_done', NEW.id);
  ELSIF NEW.status = 'RUNNING' AND NEW.cancel_requested_at IS NOT NULL AND OLD.cancel_requested_at IS NULL THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_cancel', NEW.id);
  END IF;
  RETURN NULL;
END;
$function$;
