-- The veto of a transactional finish (ctx.transaction): called with whether the fenced finish changed its task,
-- it raises (SQLSTATE HR001) when it did not, so that the handler's transaction is aborted and the COMMIT sent
-- behind the finish rolls it back; returns false otherwise. It knows nothing of the fence itself, which stays in
-- horsies_finish_tasks.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_finish_found(p_found boolean)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF NOT p_found THEN
    RAISE EXCEPTION 'the task is no longer this run''s (reaped, claimed again or cancelled)'
      USING ERRCODE = 'HR001';
  END IF;
  RETURN false;
END;
$function$;
