-- Bounds on task rows that a hand-written or buggy insert could break, checked by the database at write.
--
-- Counters: the claim, the start and a resubmit each add one to a counter that starts at 0, so a real task stays
-- far below the bound. A row written with a counter at the top of the integer range would make the increment
-- overflow, and the statement claiming or starting it would fail for every task of its batch, at every claim.
--
-- Times: 'infinity' and '-infinity' are valid timestamps in PostgreSQL, but the driver hands them to JavaScript as
-- numbers, not dates, and a worker cannot order or measure them. A task that should never become due, or never
-- expire, is written with a far date or no deadline (NULL) instead.
ALTER TABLE {{schema}}.horsies_tasks
  ADD CONSTRAINT horsies_tasks_counter_bounds_check
    CHECK (attempt <= 1000000000 AND claim_generation <= 1000000000 AND resubmit_count <= 1000000000),
  ADD CONSTRAINT horsies_tasks_finite_times_check
    CHECK (isfinite(sent_at) AND isfinite(enqueued_at) AND (good_until IS NULL OR isfinite(good_until))
      AND (next_retry_at IS NULL OR isfinite(next_retry_at)));
