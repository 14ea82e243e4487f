-- Starts under a rate limiter recorded in the order their statements take the limiter's lock, whatever the order of
-- their now().
--
-- Every start is recorded at its statement's now() (the tasks' started_at), under the lock of the limiter's row.
-- Until now a statement whose now() was older than a start already recorded failed with a serialization failure
-- (40001) and the worker ran it again with a later now(): two workers claiming under one limiter, each at once after
-- the other, could lose that race several times in a row, and after five losses the claim failed, was logged as an
-- error and the worker's claims paused for a moment (a few times per 6,000 tasks in bench:caps).
--
-- The room a start takes is counted over every start recorded after the start of its window (p_at minus the
-- interval), later ones included: that is at least the count of any window that holds p_at, so a start whose now()
-- is older than the newest recorded one still never passes the limit. It is then recorded at the newest recorded
-- time rather than at its own (it counts a little longer than it needs to: the limiter may grant late by as much as
-- the two statements' now() differ, never early). The newest time stays the last pair of window_at, which the
-- joining of pairs and the search for the time room comes back rely on.

-- As in migration 17, without the serialization failure.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_acquire(
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
    IF r.paused_until > p_at THEN
      room := 0;
      free_at := GREATEST(free_at, r.paused_until);
      CONTINUE;
    END IF;
    -- Starts recorded after p_at (by statements with a later now() that took the lock first) count too.
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

-- As in migration 17, at the newest recorded time when that is later than p_at.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_record(
  p_keys text[], p_interval_ms integer[], p_at timestamptz, p_ran integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  i integer;
  v_at timestamptz;
BEGIN
  IF p_ran <= 0 THEN
    RETURN;
  END IF;
  FOR i IN 1 .. cardinality(p_keys) LOOP
    SELECT GREATEST(p_at, r.window_at[cardinality(r.window_at)]) INTO v_at
    FROM {{schema}}.horsies_rate_limiters r WHERE r.limiter_key = p_keys[i];
    UPDATE {{schema}}.horsies_rate_limiters l
    SET window_at = k.kept_at || v_at,
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
                      AND u.at > v_at - p_interval_ms[i] * interval '1 millisecond' / 32 AS joins
             FROM unnest(r.window_at, r.window_count) WITH ORDINALITY AS u(at, n, ord)
             WHERE u.at > v_at - p_interval_ms[i] * interval '1 millisecond'
           ) w
      WHERE r.limiter_key = p_keys[i]
    ) k
    WHERE l.limiter_key = p_keys[i];
  END LOOP;
END;
$$;
