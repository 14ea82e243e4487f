-- Room left now under the given rate limiters (the least of them), without locking or writing anything: what a claim
-- takes at most, so that a worker does not hoard tasks it cannot start yet. 0 while any of them is paused.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_room(p_keys text[], p_max integer[], p_interval_ms integer[])
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $function$
  SELECT COALESCE(min(CASE
           WHEN r.paused_until > now() THEN 0
           ELSE GREATEST(0, k.max - COALESCE((
             SELECT sum(w.n) FROM unnest(r.window_at, r.window_count) AS w(at, n)
             WHERE w.at > now() - k.interval_ms * interval '1 millisecond'), 0))::integer
         END), 2147483647)
  FROM unnest(p_keys, p_max, p_interval_ms) AS k(key, max, interval_ms)
  LEFT JOIN {{schema}}.horsies_rate_limiters r ON r.limiter_key = k.key
$function$;
