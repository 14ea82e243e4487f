-- CLAIMED -> RUNNING for prefetched tasks of a rate-limited queue: takes at most the limiters' room
-- (horsies_rate_acquire), starts that many through horsies_start_tasks, records the starts that ran, and returns the
-- rest as DEFERRED with the time the next start becomes free.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_start_limited(p_keys text[], p_max integer[], p_interval_ms integer[], p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
 RETURNS TABLE(id character varying, status character varying, attempt integer, started_at timestamp with time zone)
 LANGUAGE plpgsql
AS $function$
#variable_conflict use_column
DECLARE
  granted integer;
  free_at timestamptz;
  ran integer := 0;
  started record;
BEGIN
  SELECT a.room, a.free_at INTO granted, free_at
  FROM {{schema}}.horsies_rate_acquire(p_keys, p_max, p_interval_ms, now(), cardinality(p_ids)) a;
  IF granted > 0 THEN
    FOR started IN SELECT * FROM {{schema}}.horsies_start_tasks(
        p_worker_id, p_ids[1:granted], p_id_generations[1:granted], p_wait_for_flush,
        ARRAY(SELECT w FROM unnest(p_workflow_ids) w WHERE w = ANY (p_ids[1:granted]))) LOOP
      -- Only the tasks that now run count (not the expired, nor those handed back for a paused workflow).
      IF started.status = 'RUNNING' THEN
        ran := ran + 1;
      END IF;
      id := started.id;
      status := started.status;
      attempt := started.attempt;
      started_at := started.started_at;
      RETURN NEXT;
    END LOOP;
    PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(), ran);
  END IF;
  IF granted < cardinality(p_ids) THEN
    RETURN QUERY SELECT d.id::varchar, 'DEFERRED'::varchar, NULL::integer, free_at
    FROM unnest(p_ids[granted + 1:]) AS d(id);
  END IF;
END;
$function$;
