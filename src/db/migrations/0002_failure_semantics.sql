-- Failure semantics: cancellation requests, resubmission of dead-letter tasks, per-task retention.

ALTER TABLE {{schema}}.horsies_tasks
  ADD COLUMN cancel_requested_at timestamptz,
  ADD COLUMN resubmit_count integer NOT NULL DEFAULT 0,
  ADD COLUMN resubmitted_at timestamptz,
  ADD COLUMN retention_ms bigint,
  ADD COLUMN purge_after timestamptz,
  ADD CONSTRAINT horsies_tasks_resubmit_count_check CHECK (resubmit_count >= 0),
  ADD CONSTRAINT horsies_tasks_retention_check CHECK (retention_ms IS NULL OR retention_ms >= 0),
  ADD CONSTRAINT horsies_tasks_purge_after_check CHECK (purge_after IS NULL OR status = 'COMPLETED');

-- Completed tasks with their own retention, by the time they may be deleted.
CREATE INDEX horsies_tasks_purge_after_idx
  ON {{schema}}.horsies_tasks (purge_after)
  WHERE purge_after IS NOT NULL;

-- Running tasks with a cancel request, for the owning worker's backstop poll.
CREATE INDEX horsies_tasks_cancel_requested_idx
  ON {{schema}}.horsies_tasks (claimed_by_worker_id)
  WHERE cancel_requested_at IS NOT NULL AND status = 'RUNNING';

-- The update trigger also tells owning workers about cancel requests (`<schema>:task_cancel`, ids coalesced).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_notify_task_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  q text;
  ids text;
BEGIN
  FOR q IN
    SELECT DISTINCT n.queue_name
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.status = 'PENDING' AND o.status <> 'PENDING'
  LOOP
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_new', q);
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_queue_' || q, '');
  END LOOP;
  FOR ids IN
    SELECT string_agg(d.id, ',')
    FROM (
      SELECT n.id, (row_number() OVER () - 1) / 200 AS chunk
      FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE n.status <> o.status AND n.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
    ) d
    GROUP BY d.chunk
  LOOP
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_done', ids);
  END LOOP;
  FOR ids IN
    SELECT string_agg(d.id, ',')
    FROM (
      SELECT n.id, (row_number() OVER () - 1) / 200 AS chunk
      FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE n.cancel_requested_at IS NOT NULL AND o.cancel_requested_at IS NULL AND n.status = 'RUNNING'
    ) d
    GROUP BY d.chunk
  LOOP
    PERFORM pg_notify(TG_TABLE_SCHEMA || ':task_cancel', ids);
  END LOOP;
  RETURN NULL;
END;
$$;
