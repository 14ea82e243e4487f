-- Pauses the rate limiters p_keys for p_after_ms from now (an upstream asked for it), unless a later pause stands.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_rate_pause(p_keys text[], p_max integer[], p_interval_ms integer[], p_after_ms integer)
 RETURNS void
 LANGUAGE sql
AS $function$
  INSERT INTO {{schema}}.horsies_rate_limiters AS l (limiter_key, max_starts, interval_ms, paused_until)
  SELECT k.key, k.max, k.interval_ms, now() + p_after_ms * interval '1 millisecond'
  FROM unnest(p_keys, p_max, p_interval_ms) AS k(key, max, interval_ms)
  ORDER BY k.key
  ON CONFLICT (limiter_key) DO UPDATE
    SET paused_until = GREATEST(l.paused_until, EXCLUDED.paused_until), updated_at = now();
$function$;
