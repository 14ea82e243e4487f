-- Takes up to p_want starts from the rate limiters p_keys at p_at (locking their rows in key order), returning the
-- room granted and, when less than wanted, the time the next start becomes free. The limiters keep a window of
-- start counts per interval; a paused limiter (after an upstream's 429) grants nothing until paused_until.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_acquire(p_keys text[], p_max integer[], p_interval_ms integer[], p_at timestamp with time zone, p_want integer, OUT room integer, OUT free_at timestamp with time zone)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;
