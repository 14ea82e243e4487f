-- Row-level trigger of horsies_tasks for rows that hold a dedupe key: releases the key in the update that ends its
-- scope (the claim for 'pending' and 'debounce'; the end of the task for every scope but 'finished', whose window
-- the retainer ends).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_release_dedupe_key()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF (NEW.claimed AND NEW.dedupe_scope IN ('pending', 'debounce'))
     OR (NEW.finished_at IS NOT NULL AND NEW.dedupe_scope <> 'finished') THEN
    NEW.dedupe_held := false;
  END IF;
  RETURN NEW;
END;
$function$;
