-- A task that leaves its claim for PENDING frees room under a cap, as a finished task does: a run that ends in a
-- retry, claims handed back by a stopping worker or the prefetch hold, and the reaper's requeue of a dead worker's
-- tasks. Workers serving a capped queue wake their deferred starts (soft mode) on `<schema>:task_done`, which only
-- finished tasks sent: room freed by such a move elsewhere was found at their next timed try, up to the poll
-- interval later. The move now also sends the task's id on `<schema>:task_done`. Result waiters re-read the row
-- on every notification and go on waiting for a task that is PENDING again; the dashboard's live feed reloads it.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_notify_task_change() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;
