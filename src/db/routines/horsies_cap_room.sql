-- The room left under a queue's cap and the cluster's cap, taken and counted in one call under the cap's advisory
-- transaction lock, so that a capped claim (TaskClaimWithinCap, and the capped claim that starts) or a soft mode's
-- start (TaskStartWithinCap) is one statement instead of a transaction of five round trips. The count is a
-- statement of its own after the lock is granted: each statement of a function that is not STABLE takes a new
-- snapshot, so it sees every claim and start that earlier holders of the lock committed.
-- p_cluster_cap, p_queue_cap: the caps that apply (NULL: none); p_extra: what may be held beyond them (the soft
-- mode's prefetch); p_running: count RUNNING tasks only (a start) or everything in flight (a claim).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_cap_room(p_key text, p_queue text, p_cluster_cap integer, p_queue_cap integer, p_extra integer, p_running boolean)
 RETURNS integer
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
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
$function$;
