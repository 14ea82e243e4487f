-- The update notifications move from a statement-level trigger with transition tables to a row-level trigger
-- whose WHEN clause filters in C: claims, starts and lease renewals (most updates) no longer build transition
-- tables or enter PL/pgSQL at all. A statement that finishes many tasks sends one task_done per task; the
-- task_new and task_queue notifications carry the queue name (or nothing), so PostgreSQL folds repeats within
-- a transaction into one. Inserts keep the statement-level trigger (one notification per queue per statement).

DROP TRIGGER horsies_tasks_notify_update ON {{schema}}.horsies_tasks;
DROP FUNCTION {{schema}}.horsies_notify_task_update();

CREATE FUNCTION {{schema}}.horsies_notify_task_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status = 'PENDING' AND OLD.status <> 'PENDING' THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_new', NEW.queue_name);
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_queue_' || NEW.queue_name, '');
  ELSIF NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') AND OLD.status <> NEW.status THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_done', NEW.id);
  ELSIF NEW.status = 'RUNNING' AND NEW.cancel_requested_at IS NOT NULL AND OLD.cancel_requested_at IS NULL THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_cancel', NEW.id);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER horsies_tasks_notify_change
  AFTER UPDATE ON {{schema}}.horsies_tasks
  FOR EACH ROW
  WHEN (
    (NEW.status = 'PENDING' AND OLD.status <> 'PENDING')
    OR (NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') AND OLD.status <> NEW.status)
    OR (NEW.status = 'RUNNING' AND NEW.cancel_requested_at IS NOT NULL AND OLD.cancel_requested_at IS NULL)
  )
  EXECUTE FUNCTION {{schema}}.horsies_notify_task_change();
