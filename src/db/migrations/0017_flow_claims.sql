-- Flow control, second pass: limited claims as cheap as they can be.
--
-- 1. A rate-limited task with a free slot starts in the statement that claims it, as a plain task does since
--    migration 15: the claim locks its limiters' rows (in key order), takes at most the room their windows have
--    left, starts the tasks it has slots for and records those starts, all in one statement. Until now such a task
--    was claimed in one statement and started under the limiters in a second (horsies_start_limited), which now
--    serves only the tasks a claim could not start at once (prefetched, or behind a soft cap).
-- 2. The grouped claim is planned once per connection instead of on every call. It walked the groups in one large
--    statement whose plan had to be made for each call's values (a generic plan of it walked a large group's index
--    range); planning it cost several times its execution. The walk is now a loop of one-row index probes and the
--    pick one statement per claim, each with a plan that fits every value.
--
-- Exactness is unchanged: every recorded start is at the statement's now(), under the limiter rows' lock; a
-- statement whose now() is older than a start already recorded fails with a serialization failure (40001) and the
-- caller runs it again.

-- Locks the limiters' rows in the order given (callers sort by key; missing rows are created) and returns the room
-- their windows have left at p_at (the least of them; 0 while one is paused) and, when that is less than p_want,
-- the time they have room for one more start (their pause's end, or when enough of the oldest starts leave the
-- window). Raises 40001 when a start later than p_at was recorded already.
CREATE FUNCTION {{schema}}.horsies_rate_acquire(
  p_keys text[], p_max integer[], p_interval_ms integer[], p_at timestamptz, p_want integer,
  OUT room integer, OUT free_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  i integer;
  r {{schema}}.horsies_rate_limiters%ROWTYPE;
  used integer;
  room_at timestamptz;
BEGIN
  room := p_want;
  free_at := p_at;
  FOR i IN 1 .. cardinality(p_keys) LOOP
    -- One statement when the row exists with these settings (every start but a limiter's first).
    SELECT * INTO r FROM {{schema}}.horsies_rate_limiters l WHERE l.limiter_key = p_keys[i] FOR UPDATE;
    IF NOT FOUND THEN
      INSERT INTO {{schema}}.horsies_rate_limiters (limiter_key, max_starts, interval_ms)
      VALUES (p_keys[i], p_max[i], p_interval_ms[i])
      ON CONFLICT (limiter_key) DO NOTHING;
      SELECT * INTO r FROM {{schema}}.horsies_rate_limiters l WHERE l.limiter_key = p_keys[i] FOR UPDATE;
    END IF;
    IF r.max_starts <> p_max[i] OR r.interval_ms <> p_interval_ms[i] THEN
      UPDATE {{schema}}.horsies_rate_limiters l SET max_starts = p_max[i], interval_ms = p_interval_ms[i]
      WHERE l.limiter_key = p_keys[i];
    END IF;
    IF r.window_at[cardinality(r.window_at)] > p_at THEN
      RAISE EXCEPTION 'a later start was recorded under rate limiter %', p_keys[i] USING ERRCODE = '40001';
    END IF;
    IF r.paused_until > p_at THEN
      room := 0;
      free_at := GREATEST(free_at, r.paused_until);
      CONTINUE;
    END IF;
    SELECT COALESCE(sum(w.n), 0) INTO used FROM unnest(r.window_at, r.window_count) AS w(at, n)
    WHERE w.at > p_at - p_interval_ms[i] * interval '1 millisecond';
    room := LEAST(room, GREATEST(0, p_max[i] - used));
    IF used >= p_max[i] THEN
      -- Room comes back when enough of the oldest starts leave the window for one more.
      SELECT min(x.at) + p_interval_ms[i] * interval '1 millisecond' INTO STRICT room_at
      FROM (SELECT w.at, sum(w.n) OVER (ORDER BY w.at DESC) AS newer
            FROM unnest(r.window_at, r.window_count) AS w(at, n)
            WHERE w.at > p_at - p_interval_ms[i] * interval '1 millisecond') x
      WHERE x.newer >= p_max[i];
      free_at := GREATEST(free_at, room_at);
    END IF;
  END LOOP;
END;
$$;

-- Records p_ran starts at p_at under limiters whose rows this transaction locked (horsies_rate_acquire), dropping
-- the pairs that left their window. Starts within 1/32 of the interval after the last recorded pair join it, and
-- the pair takes the later time: a pair counts until its latest start leaves the window, so its earlier starts
-- count a little longer than they need to (the limit may grant up to 1/32 of an interval late, never early), and a
-- limiter's row holds at most about 33 pairs however many start statements an interval sees. (Migration 14 kept
-- one pair per statement: a busy limiter's row grew past a kilobyte, and every start rewrote it.)
CREATE FUNCTION {{schema}}.horsies_rate_record(
  p_keys text[], p_interval_ms integer[], p_at timestamptz, p_ran integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  i integer;
BEGIN
  IF p_ran <= 0 THEN
    RETURN;
  END IF;
  FOR i IN 1 .. cardinality(p_keys) LOOP
    UPDATE {{schema}}.horsies_rate_limiters l
    SET window_at = k.kept_at || p_at,
        window_count = k.kept_count || (p_ran + k.joined),
        updated_at = now()
    FROM (
      SELECT COALESCE(array_agg(w.at ORDER BY w.ord) FILTER (WHERE NOT w.joins), '{}') AS kept_at,
             COALESCE(array_agg(w.n ORDER BY w.ord) FILTER (WHERE NOT w.joins), '{}') AS kept_count,
             COALESCE(sum(w.n) FILTER (WHERE w.joins), 0)::integer AS joined
      FROM {{schema}}.horsies_rate_limiters r,
           LATERAL (
             SELECT u.at, u.n, u.ord,
                    u.ord = cardinality(r.window_at)
                      AND u.at > p_at - p_interval_ms[i] * interval '1 millisecond' / 32 AS joins
             FROM unnest(r.window_at, r.window_count) WITH ORDINALITY AS u(at, n, ord)
             WHERE u.at > p_at - p_interval_ms[i] * interval '1 millisecond'
           ) w
      WHERE r.limiter_key = p_keys[i]
    ) k
    WHERE l.limiter_key = p_keys[i];
  END LOOP;
END;
$$;

-- As in migration 14, on the two routines above.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_start_limited(
  p_keys text[], p_max integer[], p_interval_ms integer[],
  p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
RETURNS TABLE (id varchar, status varchar, attempt integer, started_at timestamptz)
LANGUAGE plpgsql AS $$
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
$$;

DROP FUNCTION {{schema}}.horsies_claim_limited(text, text[], integer, integer, text, text, integer, text, integer,
                                               integer, integer, boolean);

-- PENDING → CLAIMED for up to p_limit tasks of one queue (unless it is paused), the first p_start of them written
-- RUNNING at once; the columns of horsies_claim_and_start. Under the rate limiters p_keys (sorted by key; empty for
-- none) and with p_group_limit (NULL for none):
--
-- - Rate limiters: a claim that starts nothing takes at most the room they have left, read without a lock (so a
--   worker does not hold tasks it cannot start). A claim that starts tasks locks their rows, takes at most the
--   room, and records the starts it made, as horsies_start_limited does; the tasks it claims beyond p_start start
--   later through horsies_start_limited.
-- - Group limit: under the queue's advisory transaction lock (grouped claims of one queue run one at a time, as
--   capped claims do), walk the groups with PENDING tasks in key order from the one after the group the previous
--   claim ended on, wrapping around once (one index probe per group in horsies_tasks_group_pending_idx: a group of
--   100,000 tasks costs the same as a group of one), keep the first p_limit groups with fewer than p_group_limit
--   tasks in flight (counted in horsies_tasks_group_in_flight_idx), take from each at most its room and its share
--   of the claim, and interleave them: every group's first task, then every group's second, and so on. The claim
--   stores the last group it took from, so the next one begins with the following group: with more groups than a
--   claim takes, they are served in turn. Tasks without a group are one more turn at the end, taken from the
--   front of the queue (the first 500 PENDING tasks in claim order).
CREATE FUNCTION {{schema}}.horsies_claim_limited(
  p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer,
  p_worker_id text, p_hostname text, p_pid integer, p_process_name text,
  p_keys text[], p_max integer[], p_interval_ms integer[],
  p_group_limit integer, p_start integer, p_wait_for_flush boolean)
RETURNS TABLE (id varchar, task_name varchar, queue_name varchar, priority integer, kwargs jsonb,
               claim_generation integer, retry_count integer, max_retries integer, attempt integer,
               enqueued_at timestamptz, workflow_id varchar, workflow_node integer, workflow_node_id varchar,
               trace_context jsonb, status varchar, started_at timestamptz)
LANGUAGE plpgsql AS $$
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
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN t.id = ANY (ids[1:starts]) THEN 'RUNNING' ELSE 'CLAIMED' END,
      claimed = true,
      claimed_at = now(),
      claimed_by_worker_id = p_worker_id,
      claim_generation = t.claim_generation + 1,
      claim_expires_at = now() + p_lease_ms * interval '1 millisecond',
      started_at = CASE WHEN t.id = ANY (ids[1:starts]) THEN now() ELSE t.started_at END,
      attempt = CASE WHEN t.id = ANY (ids[1:starts]) THEN t.attempt + 1 ELSE t.attempt END,
      worker_hostname = p_hostname,
      worker_pid = p_pid,
      worker_process_name = p_process_name,
      updated_at = now()
  WHERE t.id = ANY (ids)
  RETURNING t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count,
            t.max_retries, t.attempt, t.enqueued_at, t.workflow_id, t.workflow_node,
            CASE WHEN t.workflow_id IS NOT NULL AND t.workflow_node_id IS NULL THEN (
              SELECT wt.node_id FROM {{schema}}.horsies_workflow_tasks wt
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) ELSE t.workflow_node_id END,
            t.trace_context, t.status, t.started_at;
  IF limited THEN
    -- Rate limits and a group limit: the update started the first `starts` of the tasks it locked.
    PERFORM {{schema}}.horsies_rate_record(p_keys, p_interval_ms, now(),
                                           LEAST(starts, COALESCE(cardinality(ids), 0)));
  END IF;
END;
$$;
