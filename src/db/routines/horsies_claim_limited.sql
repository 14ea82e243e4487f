-- PENDING -> CLAIMED (the first p_start RUNNING) for one queue under rate limiters p_keys (sorted; empty for none)
-- and a per-group limit p_group_limit (NULL for none).
-- - Rate limiters: a claim that starts nothing takes at most the room they have left, read without a lock, so a
--   worker does not hold tasks it cannot start; a claim that starts tasks takes at most the room and records the
--   starts it made. Tasks claimed beyond p_start start later through horsies_start_limited.
-- - Group limit: under the queue's advisory lock, walk the groups with PENDING tasks in key order from the one after
--   the group the previous claim ended on (the stored cursor), wrapping once; keep the groups with room, take from
--   each its share, and interleave them (every group's first task, then every second...). Tasks without a group are
--   one more turn at the end, from the front of the queue (its first 500 PENDING tasks).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_claim_limited(p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer, p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_keys text[], p_max integer[], p_interval_ms integer[], p_group_limit integer, p_start integer, p_wait_for_flush boolean)
 RETURNS TABLE(id character varying, task_name character varying, queue_name character varying, priority integer, kwargs jsonb, claim_generation integer, retry_count integer, max_retries integer, attempt integer, enqueued_at timestamp with time zone, workflow_id character varying, workflow_node integer, workflow_node_id character varying, trace_context jsonb, status character varying, started_at timestamp with time zone, claim_token uuid)
 LANGUAGE plpgsql
AS $function$
#variable_conflict use_column
DECLARE
  wanted integer := p_limit;
  limited boolean := cardinality(p_keys) > 0;
  starts integer := GREATEST(p_start, 0);
  claimed_count integer;
  cursor_key varchar;
  probe varchar;
  next_key varchar;
  wrapped boolean;
  room integer;
  groups varchar[] := '{}';
  rooms integer[] := '{}';
  ids text[];
  last_group varchar;
  paused_workflows varchar[];
BEGIN
  IF wanted <= 0 OR EXISTS (
      SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused) THEN
    RETURN;
  END IF;
  IF limited AND starts > 0 THEN
    wanted := LEAST(wanted, (SELECT a.room FROM {{schema}}.horsies_rate_acquire(
      p_keys, p_max, p_interval_ms, now(), wanted) a));
  ELSIF limited THEN
    wanted := LEAST(wanted, {{schema}}.horsies_rate_room(p_keys, p_max, p_interval_ms));
  END IF;
  IF wanted <= 0 THEN
    RETURN;
  END IF;
  starts := LEAST(starts, wanted);

  IF p_group_limit IS NULL THEN
    -- Rate limits alone: the plain claim, which starts the first `starts`.
    RETURN QUERY SELECT * FROM {{schema}}.horsies_claim_and_start(
      p_queue, p_task_names, wanted, p_lease_ms, p_worker_id, p_hostname, p_pid, p_process_name, starts,
      p_wait_for_flush);
    IF limited THEN
      -- Every task it returns it locked and wrote, the first `starts` of them RUNNING.
      GET DIAGNOSTICS claimed_count = ROW_COUNT;
      PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(), LEAST(starts, claimed_count));
    END IF;
    RETURN;
  END IF;

  IF starts = 0 OR NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('horsies.group.{{schema}}.' || p_queue, 0));
  INSERT INTO {{schema}}.horsies_group_limits AS g (queue_name, group_limit)
  VALUES (p_queue, p_group_limit)
  ON CONFLICT (queue_name) DO UPDATE SET group_limit = EXCLUDED.group_limit, updated_at = now()
    WHERE g.group_limit <> EXCLUDED.group_limit;
  SELECT g.group_cursor INTO cursor_key FROM {{schema}}.horsies_group_limits g WHERE g.queue_name = p_queue;
  paused_workflows := ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED');

  -- The turn: groups with PENDING tasks after the cursor, then from the first up to the cursor itself.
  probe := cursor_key;
  wrapped := cursor_key IS NULL;
  LOOP
    -- Two statements, not one with "probe IS NULL OR ...", whose plan could not use the bound.
    IF probe IS NULL THEN
      SELECT min(n.group_key) INTO next_key FROM {{schema}}.horsies_tasks n
      WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL AND n.queue_name = p_queue;
    ELSE
      SELECT min(n.group_key) INTO next_key FROM {{schema}}.horsies_tasks n
      WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL AND n.queue_name = p_queue
        AND n.group_key > probe;
    END IF;
    IF next_key IS NULL THEN
      EXIT WHEN wrapped;
      wrapped := true;
      probe := NULL;
      CONTINUE;
    END IF;
    EXIT WHEN wrapped AND cursor_key IS NOT NULL AND next_key > cursor_key;
    probe := next_key;
    SELECT p_group_limit - count(*)::integer INTO room FROM {{schema}}.horsies_tasks b
    WHERE b.claimed AND b.group_key IS NOT NULL AND b.queue_name = p_queue AND b.group_key = next_key
      AND (b.status = 'RUNNING' OR b.claim_expires_at > now());
    IF room > 0 THEN
      groups := groups || next_key;
      rooms := rooms || room;
      EXIT WHEN cardinality(groups) >= wanted;
    END IF;
  END LOOP;

  IF cardinality(groups) > 0 THEN
    SELECT array_agg(c.id ORDER BY c.rank, c.ord), (array_agg(c.group_key ORDER BY c.rank DESC, c.ord DESC))[1]
    INTO ids, last_group
    FROM (
      SELECT c.id, c.group_key, c.rank, g.ord
      FROM unnest(groups, rooms) WITH ORDINALITY AS g(key, room, ord)
      CROSS JOIN LATERAL (
        SELECT x.id, x.group_key, row_number() OVER (ORDER BY x.priority, x.enqueued_at, x.id) AS rank
        FROM (
          SELECT n.id, n.group_key, n.priority, n.enqueued_at FROM {{schema}}.horsies_tasks n
          WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL
            -- A range rather than group_key = g.key on purpose, with group_key leading the ORDER BY: only
            -- horsies_tasks_group_pending_idx gives that order, so the planner walks one group's tasks there, also
            -- for a group that held most tasks when the table was analyzed.
            AND n.queue_name = p_queue AND n.group_key >= g.key AND n.group_key <= g.key
            AND n.task_name = ANY (p_task_names)
            AND n.enqueued_at <= now()
            AND (n.good_until IS NULL OR n.good_until > now())
            AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (paused_workflows))
          ORDER BY n.group_key, n.priority, n.enqueued_at, n.id
          LIMIT LEAST(g.room, GREATEST(1, ceil(wanted::numeric / cardinality(groups))))
          FOR UPDATE OF n SKIP LOCKED
        ) x
      ) c
      ORDER BY c.rank, g.ord
      LIMIT wanted
    ) c;
  END IF;

  IF cardinality(ids) IS NULL OR cardinality(ids) < wanted THEN
    -- The tasks without a group: one more turn, from the front of the queue.
    ids := COALESCE(ids, '{}') || ARRAY(
      SELECT u.id FROM {{schema}}.horsies_tasks u
      WHERE u.id = ANY (ARRAY(
        SELECT f.id FROM (
          SELECT n.id, n.group_key FROM {{schema}}.horsies_tasks n
          WHERE NOT n.claimed AND n.finished_at IS NULL
            AND n.queue_name = p_queue
            AND n.task_name = ANY (p_task_names)
            AND n.enqueued_at <= now()
            AND (n.good_until IS NULL OR n.good_until > now())
            AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (paused_workflows))
          ORDER BY n.priority, n.enqueued_at, n.id
          LIMIT 500
        ) f
        WHERE f.group_key IS NULL))
        AND NOT u.claimed AND u.finished_at IS NULL
      LIMIT wanted - COALESCE(cardinality(ids), 0)
      FOR UPDATE SKIP LOCKED);
  END IF;
  IF last_group IS NOT NULL THEN
    UPDATE {{schema}}.horsies_group_limits g SET group_cursor = last_group WHERE g.queue_name = p_queue;
  END IF;

  -- The first `starts` tasks of the turn start at once, in the same row update, as horsies_claim_and_start does.
  RETURN QUERY
  SELECT * FROM {{schema}}.horsies_start_rows(ids::varchar[], NULL, starts, p_lease_ms, p_worker_id, p_hostname, p_pid,
                                              p_process_name);
  IF limited THEN
    -- Rate limits and a group limit: the update started the first `starts` of the tasks it locked.
    PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(),
                                           LEAST(starts, COALESCE(cardinality(ids), 0)));
  END IF;
END;
$function$;
