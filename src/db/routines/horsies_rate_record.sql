-- Records p_ran starts at p_at in the windows of the rate limiters p_keys (at the newest recorded time when that is
-- later than p_at, so the windows stay ordered), dropping counts older than the interval.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_record(p_keys text[], p_interval_ms integer[], p_at timestamp with time zone, p_ran integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;
