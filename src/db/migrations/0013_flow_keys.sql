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
