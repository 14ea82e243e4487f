-- Bounds on task rows that a hand-written or buggy insert could break, checked by the database at write.
--
-- Counters: the claim, the start and a resubmit each add one to a counter that starts at 0, so a real task stays
-- far below the bound. A row written with a counter at the top of the integer range would make the increment
-- overflow, and the statement claiming or starting it would fail for every task of its batch, at every claim.
--
-- Times: 'infinity' and '-infinity' are valid timestamps in PostgreSQL, but the driver hands them to JavaScript as
-- numbers, not dates, and a worker (or the reaper, which reads a stale run's start) cannot order or measure them.
-- A task that should never become due, or never expire, is written with a far date or no deadline (NULL)
-- instead. isfinite(NULL) is NULL, which a CHECK lets through.
ALTER TABLE {{schema}}.horsies_tasks
  ADD CONSTRAINT horsies_tasks_counter_bounds_check
    CHECK (attempt <= 1000000000 AND claim_generation <= 1000000000 AND resubmit_count <= 1000000000),
  ADD CONSTRAINT horsies_tasks_finite_times_check
    CHECK (isfinite(sent_at) AND isfinite(enqueued_at) AND isfinite(claimed_at) AND isfinite(started_at)
      AND isfinite(completed_at) AND isfinite(failed_at) AND isfinite(finished_at) AND isfinite(claim_expires_at)
      AND isfinite(good_until) AND isfinite(next_retry_at) AND isfinite(created_at) AND isfinite(updated_at)
      AND isfinite(cancel_requested_at) AND isfinite(resubmitted_at) AND isfinite(purge_after)
      AND isfinite(progress_at));
