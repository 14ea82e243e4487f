-- The room under a cap, taken and counted by the server in one call, so that a capped claim is one statement.
--
-- A claim from a capped queue ran as a transaction of five round trips: BEGIN, the cap's advisory lock, the count
-- of what is in flight, the claim with at most the room left, COMMIT. Every claimer of the same cap waited for the
-- lock during all of them, so the round trips, not the server's work, bounded how fast capped tasks were claimed.
-- horsies_cap_room takes the lock and counts in one call: a claim calls it for its limit and commits as it returns
-- (TaskClaimWithinCap), a soft mode's start likewise for the number of tasks it starts (TaskStartWithinCap), and
-- the limited claims (which run more than one statement under the lock) call it first in their transaction.
--
-- The count is a statement of its own after the lock is granted: in a function that is not STABLE, each statement
-- takes a new snapshot under READ COMMITTED, so it sees every claim and start that earlier holders of the lock
-- committed (they release it after their commit is visible), as the separate count did.
--
-- p_cluster_cap and p_queue_cap are the caps that apply (NULL: none), p_extra what may be held beyond them (the
-- soft mode's prefetch buffer, for claims), and p_running says what counts: RUNNING tasks only (a soft mode's
-- start) or everything in flight (a claim): RUNNING, and CLAIMED while the claim's lease has not expired.

CREATE FUNCTION {{schema}}.horsies_cap_room(
  p_key text, p_queue text, p_cluster_cap integer, p_queue_cap integer, p_extra integer, p_running boolean)
RETURNS integer
LANGUAGE plpgsql
-- Read through the in-flight index whatever the table held when the connection planned it (migration 20).
SET enable_seqscan = off
AS $$
DECLARE
  cluster_used integer;
  queue_used integer;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
  SELECT count(*) FILTER (WHERE t.status = 'RUNNING' OR (NOT p_running AND t.claim_expires_at > now())),
         count(*) FILTER (WHERE t.queue_name = p_queue
                            AND (t.status = 'RUNNING' OR (NOT p_running AND t.claim_expires_at > now())))
  INTO cluster_used, queue_used
  FROM {{schema}}.horsies_tasks t
  WHERE t.claimed;
  RETURN GREATEST(0, LEAST(p_cluster_cap + p_extra - cluster_used, p_queue_cap + p_extra - queue_used));
END;
$$;
