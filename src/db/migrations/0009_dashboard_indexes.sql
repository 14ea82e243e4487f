-- The dashboard's task lists, fast over millions of rows. Finished tasks are listed newest first, keyset on
-- (finished_at, id); with a filter on a queue, a task name or an error code the walk must start at that value,
-- or the first page of a rare one scans the whole finished set. None of these columns changes while a task is
-- claimed or running, so starts and lease renewals stay HOT; a finish (already a non-HOT update, finished_at is
-- indexed) writes two more index entries (queue and name), and a failure, cancel or expiry two more besides.

CREATE INDEX horsies_tasks_finished_queue_idx
  ON {{schema}}.horsies_tasks (queue_name, finished_at, id)
  WHERE finished_at IS NOT NULL;

CREATE INDEX horsies_tasks_finished_name_idx
  ON {{schema}}.horsies_tasks (task_name, finished_at, id)
  WHERE finished_at IS NOT NULL;

CREATE INDEX horsies_tasks_finished_error_idx
  ON {{schema}}.horsies_tasks (error_code, finished_at, id)
  WHERE finished_at IS NOT NULL AND error_code IS NOT NULL;

-- The dead-letter set (FAILED, CANCELLED, EXPIRED: finished but not completed), newest first.
CREATE INDEX horsies_tasks_dead_letter_idx
  ON {{schema}}.horsies_tasks (finished_at, id)
  WHERE finished_at IS NOT NULL AND completed_at IS NULL;
