-- A claim token that never repeats.
--
-- Every statement of a task's owner (start, heartbeat, progress, step, transactional finish, finish) was fenced on
-- the worker's id and the claim generation, a counter the claim increments. A claim or start commits without
-- waiting for its WAL flush, so a server crash can undo it: the task is PENDING again with the generation it had
-- before, and the next claim draws the same generation. When that claim is the same worker's, the lost run and the
-- new one held the same fence, and a late statement of the lost run was accepted. Each claim now also draws a
-- random token (gen_random_uuid: nothing the server lost can be drawn again), and the owner's statements are fenced
-- on it. The generation still counts claims.
--
-- Adding a nullable column without a default changes no row. The functions whose result or arguments change are
-- put aside here (when they exist) and created again from their files by the same migrate. horsies_finish_tasks
-- gains a last argument with a default, so the workers of 0.1, which call it with twelve, keep finishing (fenced on
-- the generation, as they were) until they are replaced.

ALTER TABLE {{schema}}.horsies_tasks ADD COLUMN claim_token uuid;

-- The four that workers of 0.1 call are renamed (to <name>_retired) rather than dropped: such a worker's call that
-- began before this migrate committed looks its function up by id after the commit, and a dropped function failed it
-- ("cache lookup failed for function"). Renamed, the function that call found is still there, with the text it
-- began with; the calls that follow find the new function by its name. A later release drops the retired ones.
DO $$
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY[
    'horsies_claim_limited(text, text[], integer, integer, text, text, integer, text, text[], integer[], integer[], integer, integer, boolean)',
    'horsies_claim_tasks(text, text[], integer, integer, text, text, integer, text)',
    'horsies_claim_and_start(text, text[], integer, integer, text, text, integer, text, integer, boolean)',
    'horsies_finish_tasks(text[], text[], integer[], text[], jsonb[], text[], text[], text[], integer[], boolean[], boolean, boolean)'
  ] LOOP
    IF to_regprocedure('{{schema}}.' || f) IS NOT NULL THEN
      EXECUTE format('ALTER FUNCTION {{schema}}.%s RENAME TO %I', f, split_part(f, '(', 1) || '_retired');
    END IF;
  END LOOP;
END $$;
DROP FUNCTION IF EXISTS {{schema}}.horsies_claim_rows(character varying[], integer, integer, text, text, integer, text);
