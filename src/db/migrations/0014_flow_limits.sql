-- Flow control, claim side: rate limiters (starts per interval, per queue and per task name, with the pause an
-- upstream's "429 Retry-After" asks for) and per-group limits with claims that take groups in turn.
--
-- Nothing here runs for a queue or task without a limit: workers call these routines only for queues that have a
-- limiter or a group limit, and the plain claim (horsies_claim_tasks) is untouched.

-- One row per limiter, keyed 'queue:<name>' or 'task:<name>'. The window holds the starts of the last interval as
-- (time, count) pairs, one pair per start statement, oldest first; a start statement appends its own pair and drops
-- the pairs older than the interval, so the row stays as small as the number of start batches in one interval.
-- max_starts and interval_ms are the settings of the last worker that started a task under the limiter (for the
-- CLI and getTask; each worker enforces its own config).
CREATE TABLE {{schema}}.horsies_rate_limiters (
  limiter_key varchar(300) PRIMARY KEY,
  max_starts integer NOT NULL,
  interval_ms integer NOT NULL,
  window_at timestamptz[] NOT NULL DEFAULT '{}',
  window_count integer[] NOT NULL DEFAULT '{}',
  -- Set by a run that an upstream throttled: no start under this limiter before then.
  paused_until timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT horsies_rate_limiters_settings_check CHECK (max_starts > 0 AND interval_ms > 0),
  CONSTRAINT horsies_rate_limiters_window_check
    CHECK (cardinality(window_at) = cardinality(window_count))
);

-- Per queue: its per-group limit (as last declared by a worker, for the CLI and getTask) and the group the last
-- grouped claim ended on, where the next one resumes its turn.
CREATE TABLE {{schema}}.horsies_group_limits (
  queue_name varchar(100) PRIMARY KEY,
  group_limit integer NOT NULL,
  group_cursor varchar(255),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT horsies_group_limits_limit_check CHECK (group_limit > 0)
);

-- Room left now under the given limiters (the least of them), without locking or writing anything: what a claim
-- takes at most, so that a worker does not hoard tasks it cannot start yet. 0 while any of them is paused.
CREATE FUNCTION {{schema}}.horsies_rate_room(p_keys text[], p_max integer[], p_interval_ms integer[])
RETURNS integer
LANGUAGE sql STABLE AS $$
  SELECT COALESCE(min(CASE
           WHEN r.paused_until > now() THEN 0
           ELSE GREATEST(0, k.max - COALESCE((
             SELECT sum(w.n) FROM unnest(r.window_at, r.window_count) AS w(at, n)
             WHERE w.at > now() - k.interval_ms * interval '1 millisecond'), 0))::integer
         END), 2147483647)
  FROM unnest(p_keys, p_max, p_interval_ms) AS k(key, max, interval_ms)
  LEFT JOIN {{schema}}.horsies_rate_limiters r ON r.limiter_key = k.key
$$;

-- Starts claimed tasks under rate limiters, exactly: locks each limiter's row (in the order given, which callers
-- sort, so two starters never wait on each other in a cycle), grants at most the room left in the sliding window
-- of every limiter, starts the first granted tasks with horsies_start_tasks, and records the starts that ran
-- (RUNNING rows) at now(), the started_at the start wrote. Everything happens in this one statement, so a
-- limiter's row is locked only while it runs. The tasks not granted come back as 'DEFERRED' rows whose started_at
-- says when the limiter has room again (or its pause ends).
--
-- Exactness: for every interval-long window, the starts recorded in it are at most max_starts, because each
-- grant counts every start recorded after now() - interval. That needs the recorded times to grow in lock order:
-- a statement whose now() is older than a start some other statement already recorded (it began first but got
-- the lock later) fails with a serialization failure (40001), and the caller runs it again with a later now().
CREATE FUNCTION {{schema}}.horsies_start_limited(
  p_keys text[], p_max integer[], p_interval_ms integer[],
  p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean, p_workflow_ids text[])
RETURNS TABLE (id varchar, status varchar, attempt integer, started_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  i integer;
  r {{schema}}.horsies_rate_limiters%ROWTYPE;
  granted integer := cardinality(p_ids);
  ran integer;
  used integer;
  started record;
  room_at timestamptz;
  free_at timestamptz := now();
  keep_at timestamptz[];
  keep_count integer[];
BEGIN
  FOR i IN 1 .. cardinality(p_keys) LOOP
    INSERT INTO {{schema}}.horsies_rate_limiters AS l (limiter_key, max_starts, interval_ms)
    VALUES (p_keys[i], p_max[i], p_interval_ms[i])
    ON CONFLICT (limiter_key) DO UPDATE
      SET max_starts = EXCLUDED.max_starts, interval_ms = EXCLUDED.interval_ms
      WHERE l.max_starts <> EXCLUDED.max_starts OR l.interval_ms <> EXCLUDED.interval_ms;
    SELECT * INTO r FROM {{schema}}.horsies_rate_limiters l WHERE l.limiter_key = p_keys[i] FOR UPDATE;
    IF r.window_at[cardinality(r.window_at)] > now() THEN
      RAISE EXCEPTION 'a later start was recorded under rate limiter %', p_keys[i] USING ERRCODE = '40001';
    END IF;
    IF r.paused_until > now() THEN
      granted := 0;
      free_at := GREATEST(free_at, r.paused_until);
      CONTINUE;
    END IF;
    SELECT COALESCE(sum(w.n), 0) INTO used FROM unnest(r.window_at, r.window_count) AS w(at, n)
    WHERE w.at > now() - p_interval_ms[i] * interval '1 millisecond';
    granted := LEAST(granted, GREATEST(0, p_max[i] - used));
    IF used >= p_max[i] THEN
      -- Room comes back when enough of the oldest starts leave the window for one more.
      SELECT min(x.at) + p_interval_ms[i] * interval '1 millisecond' INTO STRICT room_at
      FROM (SELECT w.at, sum(w.n) OVER (ORDER BY w.at DESC) AS newer
            FROM unnest(r.window_at, r.window_count) AS w(at, n)
            WHERE w.at > now() - p_interval_ms[i] * interval '1 millisecond') x
      WHERE x.newer >= p_max[i];
      free_at := GREATEST(free_at, room_at);
    END IF;
  END LOOP;

  IF granted > 0 THEN
    ran := 0;
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
    IF ran > 0 THEN
      FOR i IN 1 .. cardinality(p_keys) LOOP
        SELECT array_agg(w.at ORDER BY w.ord), array_agg(w.n ORDER BY w.ord) INTO keep_at, keep_count
        FROM {{schema}}.horsies_rate_limiters l,
             unnest(l.window_at, l.window_count) WITH ORDINALITY AS w(at, n, ord)
        WHERE l.limiter_key = p_keys[i] AND w.at > now() - p_interval_ms[i] * interval '1 millisecond';
        UPDATE {{schema}}.horsies_rate_limiters l
        SET window_at = COALESCE(keep_at, '{}') || now(),
            window_count = COALESCE(keep_count, '{}') || ran,
            updated_at = now()
        WHERE l.limiter_key = p_keys[i];
      END LOOP;
    END IF;
  END IF;

  IF granted < cardinality(p_ids) THEN
    RETURN QUERY SELECT d.id::varchar, 'DEFERRED'::varchar, NULL::integer, free_at
    FROM unnest(p_ids[granted + 1:]) AS d(id);
  END IF;
END;
$$;

-- Pauses limiters for p_after_ms from now (an upstream asked for it), unless a later pause stands.
CREATE FUNCTION {{schema}}.horsies_rate_pause(
  p_keys text[], p_max integer[], p_interval_ms integer[], p_after_ms integer)
RETURNS void
LANGUAGE sql AS $$
  INSERT INTO {{schema}}.horsies_rate_limiters AS l (limiter_key, max_starts, interval_ms, paused_until)
  SELECT k.key, k.max, k.interval_ms, now() + p_after_ms * interval '1 millisecond'
  FROM unnest(p_keys, p_max, p_interval_ms) AS k(key, max, interval_ms)
  ORDER BY k.key
  ON CONFLICT (limiter_key) DO UPDATE
    SET paused_until = GREATEST(l.paused_until, EXCLUDED.paused_until), updated_at = now();
$$;

-- PENDING → CLAIMED for up to p_limit tasks of one queue, like horsies_claim_and_start (same columns: those of
-- horsies_claim_tasks, the status and started_at; with a group limit, the first p_start start at once), but at most
-- p_room of them (the rate limiters' room; see horsies_rate_room), and, when p_group_limit is set, at most
-- p_group_limit tasks of one group in flight cluster-wide, taking the groups with work in turn.
--
-- Groups: under the queue's advisory transaction lock (grouped claims of one queue run one at a time, as capped
-- claims do), count each group's tasks in flight (horsies_tasks_group_in_flight_idx), find the groups with
-- PENDING tasks in key order starting after the group the previous claim ended on (skipping through
-- horsies_tasks_group_pending_idx, one probe per group: a group of 100,000 tasks costs the same as a group of
-- one), stop after p_limit groups with room, take from each at most its room and its share of p_limit, and
-- interleave them: every group's first task, then every group's second, and so on. The claim ends by storing the
-- last group it took from, so the next claim begins with the following one: with more groups than a claim takes,
-- they are served round-robin. Tasks without a group are one more turn at the end, taken from the front of the
-- queue (the first 500 PENDING tasks in claim order).
CREATE FUNCTION {{schema}}.horsies_claim_limited(
  p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer,
  p_worker_id text, p_hostname text, p_pid integer, p_process_name text,
  p_room integer, p_group_limit integer, p_start integer, p_wait_for_flush boolean)
RETURNS TABLE (id varchar, task_name varchar, queue_name varchar, priority integer, kwargs jsonb,
               claim_generation integer, retry_count integer, max_retries integer, attempt integer,
               enqueued_at timestamptz, workflow_id varchar, workflow_node integer, workflow_node_id varchar,
               trace_context jsonb, status varchar, started_at timestamptz)
-- Planned for each call's values: a generic plan cannot know how the groups' sizes differ (it walked a large
-- group's index range for each claim, about 150 ms with 100,000 tasks, where a custom plan takes a few ms).
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
#variable_conflict use_column
DECLARE
  wanted integer := LEAST(p_limit, p_room);
  cursor_key varchar;
  ids text[];
  starting text[];
  last_group varchar;
  paused_workflows varchar[];
BEGIN
  IF wanted <= 0 THEN
    RETURN;
  END IF;
  IF p_group_limit IS NULL THEN
    -- Rate limits alone: the plain claim (the start goes through horsies_start_limited).
    RETURN QUERY SELECT c.*, 'CLAIMED'::varchar, NULL::timestamptz FROM {{schema}}.horsies_claim_tasks(
      p_queue, p_task_names, wanted, p_lease_ms, p_worker_id, p_hostname, p_pid, p_process_name) c;
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused) THEN
    RETURN;
  END IF;
  IF p_start <= 0 OR NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  PERFORM pg_advisory_xact_lock(hashtextextended('horsies.group.{{schema}}.' || p_queue, 0));
  INSERT INTO {{schema}}.horsies_group_limits AS g (queue_name, group_limit)
  VALUES (p_queue, p_group_limit)
  ON CONFLICT (queue_name) DO UPDATE SET group_limit = EXCLUDED.group_limit, updated_at = now()
    WHERE g.group_limit <> EXCLUDED.group_limit;
  SELECT g.group_cursor INTO cursor_key FROM {{schema}}.horsies_group_limits g WHERE g.queue_name = p_queue;
  paused_workflows := ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED');

  WITH RECURSIVE later AS (
    -- Groups with PENDING tasks after the cursor, one index probe each.
    SELECT (SELECT min(n.group_key) FROM {{schema}}.horsies_tasks n
            WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL
              AND n.queue_name = p_queue AND (cursor_key IS NULL OR n.group_key > cursor_key)) AS g
    UNION ALL
    SELECT (SELECT min(n.group_key) FROM {{schema}}.horsies_tasks n
            WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL
              AND n.queue_name = p_queue AND n.group_key > l.g)
    FROM later l WHERE l.g IS NOT NULL
  ), earlier AS (
    -- Then from the first group up to the cursor (the turn wraps around).
    SELECT (SELECT min(n.group_key) FROM {{schema}}.horsies_tasks n
            WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL
              AND n.queue_name = p_queue AND cursor_key IS NOT NULL AND n.group_key <= cursor_key) AS g
    UNION ALL
    SELECT (SELECT min(n.group_key) FROM {{schema}}.horsies_tasks n
            WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL
              AND n.queue_name = p_queue AND n.group_key > e.g AND n.group_key <= cursor_key)
    FROM earlier e WHERE e.g IS NOT NULL
  ), turn AS (
    -- The first groups of the turn with room under the limit (each counted through the in-flight index); the
    -- scans above stop once enough are found.
    SELECT o.g, p_group_limit - (
             SELECT count(*)::integer FROM {{schema}}.horsies_tasks b
             WHERE b.claimed AND b.group_key IS NOT NULL AND b.queue_name = p_queue AND b.group_key = o.g
               AND (b.status = 'RUNNING' OR b.claim_expires_at > now())) AS room
    FROM (SELECT l.g FROM later l WHERE l.g IS NOT NULL
          UNION ALL
          SELECT e.g FROM earlier e WHERE e.g IS NOT NULL) o
  ), numbered AS (
    SELECT t.g, t.room, row_number() OVER () AS ord, count(*) OVER () AS groups
    FROM (SELECT * FROM turn WHERE room > 0 LIMIT wanted) t
  ), picked AS (
    SELECT c.id, c.group_key, c.rank, nb.ord
    FROM numbered nb
    CROSS JOIN LATERAL (
      SELECT x.id, x.group_key, row_number() OVER (ORDER BY x.priority, x.enqueued_at, x.id) AS rank
      FROM (
        SELECT n.id, n.group_key, n.priority, n.enqueued_at FROM {{schema}}.horsies_tasks n
        WHERE NOT n.claimed AND n.finished_at IS NULL AND n.group_key IS NOT NULL
          -- A range rather than group_key = nb.g on purpose, with group_key leading the ORDER BY: only
          -- horsies_tasks_group_pending_idx gives that order, so the planner walks one group's tasks there. With an
          -- equality, a group that held most tasks when the table was analyzed looks like the whole queue, and
          -- the planner walks the queue's claim index instead, through every task of the groups ahead.
          AND n.queue_name = p_queue AND n.group_key >= nb.g AND n.group_key <= nb.g
          AND n.task_name = ANY (p_task_names)
          AND n.enqueued_at <= now()
          AND (n.good_until IS NULL OR n.good_until > now())
          AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (paused_workflows))
        ORDER BY n.group_key, n.priority, n.enqueued_at, n.id
        LIMIT LEAST(nb.room, GREATEST(1, ceil(wanted::numeric / nb.groups)))
        FOR UPDATE OF n SKIP LOCKED
      ) x
    ) c
    ORDER BY c.rank, nb.ord
    LIMIT wanted
  )
  SELECT array_agg(p.id ORDER BY p.rank, p.ord),
         (array_agg(p.group_key ORDER BY p.rank DESC, p.ord DESC))[1]
  INTO ids, last_group
  FROM picked p;

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

  -- The first p_start tasks of the turn start at once, in the same row update, as horsies_claim_and_start does
  -- (migration 15); the others stay CLAIMED.
  starting := ids[1:GREATEST(p_start, 0)];
  RETURN QUERY
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN t.id = ANY (starting) THEN 'RUNNING' ELSE 'CLAIMED' END,
      claimed = true,
      claimed_at = now(),
      claimed_by_worker_id = p_worker_id,
      claim_generation = t.claim_generation + 1,
      claim_expires_at = now() + p_lease_ms * interval '1 millisecond',
      started_at = CASE WHEN t.id = ANY (starting) THEN now() ELSE t.started_at END,
      attempt = CASE WHEN t.id = ANY (starting) THEN t.attempt + 1 ELSE t.attempt END,
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
END;
$$;
