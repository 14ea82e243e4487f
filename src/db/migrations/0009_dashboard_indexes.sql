-- The dashboard's task lists, fast over millions of rows (see src/db/dashboard.ts and docs/dashboard.md).
--
-- None of these indexes names a column that a start (CLAIMED -> RUNNING) or a lease renewal changes, so those
-- updates stay HOT. A finish is already a non-HOT update (finished_at is indexed); it now writes two more index
-- entries (queue and name), and a failure, cancel or expiry two more (the dead-letter indexes).

-- Finished tasks of one queue, or of one task name, newest first: the first page of a rare queue or name is found
-- without walking the whole finished set.
CREATE INDEX horsies_tasks_finished_queue_idx
  ON {{schema}}.horsies_tasks (queue_name, finished_at, id)
  WHERE finished_at IS NOT NULL;

CREATE INDEX horsies_tasks_finished_name_idx
  ON {{schema}}.horsies_tasks (task_name, finished_at, id)
  WHERE finished_at IS NOT NULL;

-- The dead-letter set (FAILED, CANCELLED, EXPIRED: finished but not completed), newest first. The included
-- columns let the dead-letter page group it by task, queue and error code from the index alone.
CREATE INDEX horsies_tasks_dead_letter_idx
  ON {{schema}}.horsies_tasks (finished_at, id) INCLUDE (task_name, queue_name, error_code)
  WHERE finished_at IS NOT NULL AND completed_at IS NULL;

-- Dead letters with one error code, newest first. Rare codes are also found through horsies_tasks_error_code_idx;
-- a common one (thousands of rows) would be read whole and sorted there.
CREATE INDEX horsies_tasks_dead_letter_error_idx
  ON {{schema}}.horsies_tasks (error_code, finished_at, id)
  WHERE finished_at IS NOT NULL AND completed_at IS NULL;

-- The planner multiplies the selectivities of status and error_code as if they were independent; an error code
-- belongs to one or two statuses, so a filter on both looked hundreds of times rarer than it is, and a common
-- code's list was read whole and sorted instead of walked in order. Their joint frequencies fix the estimate.
CREATE STATISTICS {{schema}}.horsies_tasks_status_error_stats (mcv) ON status, error_code
  FROM {{schema}}.horsies_tasks;

-- PENDING tasks waiting for a retry, by the time of their next attempt (enqueued_at holds it).
CREATE INDEX horsies_tasks_retrying_idx
  ON {{schema}}.horsies_tasks (enqueued_at, id)
  WHERE retry_count > 0 AND NOT claimed AND finished_at IS NULL;
