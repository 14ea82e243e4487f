-- The statements of the hot path keep one plan, made for a table of any size.
--
-- A connection plans a statement inside a function once and keeps the plan until the table's statistics change.
-- A worker that starts on a new or empty table (a fresh deployment, a test, a benchmark) plans its claim, start
-- and finish while the table has a handful of rows: the planner then reads the whole table instead of looking the
-- tasks up by id (a sequential scan, and a hash join in the finish), and keeps doing so as the table grows, until
-- autovacuum's first ANALYZE of it, up to a minute later, or longer on a busy server. With a few hundred rows that
-- cost 0.3 ms per finish; with a bulk send of a million tasks in that minute it would read a million rows per
-- batch. These functions only ever look tasks up through an index (by id, or through the claim index in claim
-- order), so they run with sequential scans, hash joins and merge joins disabled, and on one generic plan:
-- planned once per connection, with the same plan for one task or five hundred.

ALTER FUNCTION {{schema}}.horsies_finish_tasks(text[], text[], integer[], text[], jsonb[], text[], text[], text[],
                                               integer[], boolean[], boolean, boolean)
  SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off;

ALTER FUNCTION {{schema}}.horsies_claim_and_start(text, text[], integer, integer, text, text, integer, text, integer,
                                                  boolean)
  SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_hashjoin = off
  SET enable_mergejoin = off;

ALTER FUNCTION {{schema}}.horsies_start_tasks(text, text[], text[], boolean, text[])
  SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_hashjoin = off
  SET enable_mergejoin = off;
