-- Flow control, send side: the group key a task may carry (fair sharing between tenants, claimed by the claim
-- side of migration 14).
--
-- Index predicates follow migration 6: they name `claimed` and `finished_at`, never `status`, so that a start
-- (CLAIMED → RUNNING) still changes no indexed column and stays a HOT update. Neither index lists a column that a
-- start or a lease renewal writes.

-- A caller's grouping of tasks, for example a tenant id: at most 255 characters, null for a task of no group.
ALTER TABLE {{schema}}.horsies_tasks ADD COLUMN group_key varchar(255);

-- Tasks of a group in flight (CLAIMED or RUNNING), per queue: what a per-group limit counts.
CREATE INDEX horsies_tasks_group_in_flight_idx
  ON {{schema}}.horsies_tasks (queue_name, group_key)
  WHERE claimed AND group_key IS NOT NULL;

-- PENDING tasks of a group, per queue, in claim order (the claim index's order within one group): what a claim
-- that takes groups in turn reads.
CREATE INDEX horsies_tasks_group_pending_idx
  ON {{schema}}.horsies_tasks (queue_name, group_key, priority, enqueued_at, id)
  WHERE NOT claimed AND finished_at IS NULL AND group_key IS NOT NULL;

-- Deduplication and debounce keys. A task sent with a key holds it (`dedupe_held`) for as long as its scope lasts;
-- a unique index over the held keys of a task name makes a second send with the same key meet the holder inside its
-- own INSERT (ON CONFLICT), so that concurrent senders can never create two holders. The key is released
-- (`dedupe_held` false; the key stays on the row for reading) by the transition that ends its scope, in the same
-- row update, by the trigger below:
--   pending   held while PENDING and never claimed: released by the first claim or any end
--   debounce  as pending; a send with the key meanwhile replaces the holder's input and start time
--   running   held until the task ends (any terminal status), across claims, retries and requeues
--   finished  held until the task ends and for `dedupe_window_ms` after `finished_at`: an expired holder is released
--             by the send that meets it (under its row lock), which then inserts its own task
-- A released key is never taken back (a resubmit does not retake it; a resubmitted `finished` holder that has not
-- released its key keeps it); deleting the row releases it too.
ALTER TABLE {{schema}}.horsies_tasks
  ADD COLUMN dedupe_key varchar(255),
  ADD COLUMN dedupe_scope varchar(16),
  ADD COLUMN dedupe_window_ms bigint,
  ADD COLUMN dedupe_held boolean,
  ADD CONSTRAINT horsies_tasks_dedupe_check
    CHECK ((dedupe_scope IS NULL OR dedupe_scope IN ('pending', 'debounce', 'running', 'finished'))
      AND (dedupe_key IS NULL) = (dedupe_scope IS NULL)
      AND (dedupe_key IS NULL) = (dedupe_held IS NULL)
      AND (dedupe_scope IS NOT DISTINCT FROM 'finished') = (dedupe_window_ms IS NOT NULL)
      AND (dedupe_window_ms IS NULL OR dedupe_window_ms > 0));

CREATE UNIQUE INDEX horsies_tasks_dedupe_key_idx
  ON {{schema}}.horsies_tasks (task_name, dedupe_key)
  WHERE dedupe_held;

-- Releases a held key when the row leaves its scope. The WHEN clause is evaluated in C on every update, so tasks
-- that hold no key (nearly all) never enter PL/pgSQL, and a start (CLAIMED → RUNNING) of such a task still changes
-- no indexed column (a HOT update).
CREATE FUNCTION {{schema}}.horsies_release_dedupe_key() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.dedupe_held := false;
  RETURN NEW;
END;
$$;

CREATE TRIGGER horsies_tasks_release_dedupe_key
  BEFORE UPDATE ON {{schema}}.horsies_tasks
  FOR EACH ROW
  WHEN (
    NEW.dedupe_held
    AND ((NEW.claimed AND NEW.dedupe_scope IN ('pending', 'debounce'))
      OR (NEW.finished_at IS NOT NULL AND NEW.dedupe_scope <> 'finished'))
  )
  EXECUTE FUNCTION {{schema}}.horsies_release_dedupe_key();
