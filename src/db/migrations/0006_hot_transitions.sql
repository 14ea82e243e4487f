-- The hot path, cheaper per task.
--
-- A status change that keeps a task claimed (CLAIMED → RUNNING) and a lease renewal should change no indexed
-- column, so that PostgreSQL writes the new row version on the same page without new index entries (a HOT
-- update). A column named in a partial index's WHERE clause counts as indexed, so no index names `status`
-- any more: the predicates use `claimed` and `finished_at`, which the CHECK constraints of migration 1 tie to
-- the status (PENDING = NOT claimed AND finished_at IS NULL; CLAIMED or RUNNING = claimed).
-- Queries that need these indexes say so in the same terms (see src/db/*.ts).

DROP INDEX {{schema}}.horsies_tasks_claim_idx;
CREATE INDEX horsies_tasks_claim_idx
  ON {{schema}}.horsies_tasks (queue_name, priority, enqueued_at, id)
  WHERE NOT claimed AND finished_at IS NULL;

DROP INDEX {{schema}}.horsies_tasks_in_flight_idx;
CREATE INDEX horsies_tasks_in_flight_idx
  ON {{schema}}.horsies_tasks (claimed_by_worker_id)
  WHERE claimed;

DROP INDEX {{schema}}.horsies_tasks_good_until_idx;
CREATE INDEX horsies_tasks_good_until_idx
  ON {{schema}}.horsies_tasks (good_until)
  WHERE good_until IS NOT NULL AND NOT claimed AND finished_at IS NULL;

DROP INDEX {{schema}}.horsies_tasks_cancel_requested_idx;
CREATE INDEX horsies_tasks_cancel_requested_idx
  ON {{schema}}.horsies_tasks (claimed_by_worker_id)
  WHERE cancel_requested_at IS NOT NULL AND claimed;

-- Room on each page for the new versions of HOT updates (pages written by inserts are otherwise filled up).
ALTER TABLE {{schema}}.horsies_tasks SET (fillfactor = 85);

-- Every attempt row paid for this index and no query reads attempts by finish time (recent activity is read
-- from the tasks' own finished_at index).
DROP INDEX {{schema}}.horsies_task_attempts_finished_at_idx;

-- Claim and start as server-side routines, so that a worker with free slots claims and starts in one round
-- trip (horsies_claim_and_start), while the claim and the start stay two transitions, each in its own commit.
-- src/db/tasks.ts runs the two functions on their own as TaskClaim and TaskStartMany.

-- Durability. Claims, and starts unless the worker asks otherwise, commit without waiting for their WAL flush
-- (synchronous_commit off for their transaction). A server crash can lose such a commit: a lost claim leaves the
-- task PENDING, and a lost start leaves it CLAIMED by a worker whose next heartbeat finds the task not RUNNING,
-- so the worker stops the handler and the reaper requeues the task. Every statement of an owner is fenced on
-- the claim, so nothing is written on a lost claim, and the task runs again: as after a worker crash, never
-- lost. Outcomes (and sends) always wait for the flush, and since WAL is written in order, that flush makes
-- every earlier claim and start of the same server durable too.

-- PENDING → CLAIMED for up to p_limit tasks of one queue (unless it is paused) and the given names, in priority
-- then enqueue order. `FOR UPDATE SKIP LOCKED` lets any number of workers claim at once without waiting on each
-- other. One queue per call on purpose: with `queue_name = p_queue` the planner walks horsies_tasks_claim_idx in
-- order and stops after p_limit rows; with `= ANY(...)` it would sort every ready row first. The transaction that
-- runs it commits asynchronously (see above).
CREATE FUNCTION {{schema}}.horsies_claim_tasks(
  p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer,
  p_worker_id text, p_hostname text, p_pid integer, p_process_name text)
RETURNS TABLE (id varchar, task_name varchar, queue_name varchar, priority integer, kwargs jsonb,
               claim_generation integer, retry_count integer, max_retries integer, attempt integer,
               enqueued_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN QUERY
  WITH next AS (
    SELECT n.id FROM {{schema}}.horsies_tasks n
    -- PENDING, in the terms of horsies_tasks_claim_idx's predicate.
    WHERE NOT n.claimed AND n.finished_at IS NULL
      AND n.queue_name = p_queue
      AND n.task_name = ANY (p_task_names)
      AND n.enqueued_at <= now()
      AND (n.good_until IS NULL OR n.good_until > now())
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused)
    ORDER BY n.priority, n.enqueued_at, n.id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  )
  UPDATE {{schema}}.horsies_tasks t
  SET status = 'CLAIMED',
      claimed = true,
      claimed_at = now(),
      claimed_by_worker_id = p_worker_id,
      claim_generation = t.claim_generation + 1,
      claim_expires_at = now() + p_lease_ms * interval '1 millisecond',
      worker_hostname = p_hostname,
      worker_pid = p_pid,
      worker_process_name = p_process_name,
      updated_at = now()
  -- The ids go through an array so the planner looks each row up by primary key; joining the CTE instead
  -- turns into a hash join over a sequential scan of the whole table once the batch is large.
  WHERE t.id = ANY (ARRAY(SELECT next.id FROM next))
  RETURNING t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count,
            t.max_retries, t.attempt, t.enqueued_at;
END;
$$;

-- CLAIMED → RUNNING for the tasks p_worker_id still owns (each named in p_ids and, with the claim generation it
-- must still have, as 'id:generation' in p_id_generations), counting a new attempt; or CLAIMED → EXPIRED
-- (TASK_EXPIRED, no attempt row) for those whose good_until passed while they were claimed. Tasks missing from
-- the result were reclaimed or cancelled meanwhile and must not run. One UPDATE: its WHERE is re-checked on the
-- latest row version under the row lock, so a claim superseded meanwhile is skipped. The common case changes no
-- indexed column, so it is a HOT update. Unless p_wait_for_flush, the transaction commits asynchronously.
CREATE FUNCTION {{schema}}.horsies_start_tasks(
  p_worker_id text, p_ids text[], p_id_generations text[], p_wait_for_flush boolean)
RETURNS TABLE (id varchar, status varchar, attempt integer, started_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  IF NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  RETURN QUERY
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN t.good_until <= now() THEN 'EXPIRED' ELSE 'RUNNING' END,
      started_at = CASE WHEN t.good_until <= now() THEN NULL ELSE now() END,
      attempt = CASE WHEN t.good_until <= now() THEN t.attempt ELSE t.attempt + 1 END,
      claimed = NOT COALESCE(t.good_until <= now(), false),
      claim_expires_at = CASE WHEN t.good_until <= now() THEN NULL ELSE t.claim_expires_at END,
      finished_at = CASE WHEN t.good_until <= now() THEN now() END,
      error_code = CASE WHEN t.good_until <= now() THEN 'TASK_EXPIRED' END,
      failed_reason = CASE WHEN t.good_until <= now() THEN 'good_until passed before the task started' END,
      result = CASE WHEN t.good_until <= now() THEN jsonb_build_object('err', jsonb_build_object(
                 'code', 'TASK_EXPIRED', 'message', 'good_until passed before the task started')) END,
      updated_at = now()
  WHERE t.id = ANY (p_ids)
    AND (t.id || ':' || t.claim_generation) = ANY (p_id_generations)
    -- Not indexable on purpose (|| ''): the rows must be found by primary key, not through the in-flight index.
    AND t.status || '' = 'CLAIMED' AND t.claimed_by_worker_id || '' = p_worker_id
  RETURNING t.id, t.status, t.attempt, t.started_at;
END;
$$;

-- Claims like horsies_claim_tasks and, when p_start > 0, starts the first p_start of the claimed tasks (in claim
-- order) like horsies_start_tasks, after committing the claim: one round trip, two transitions, two commits.
-- Both results come back as JSON arrays of the functions' rows. Call it outside any transaction block.
CREATE PROCEDURE {{schema}}.horsies_claim_and_start(
  p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer,
  p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_start integer, p_wait_for_flush boolean,
  INOUT claimed jsonb DEFAULT NULL, INOUT started jsonb DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
  start_ids text[];
  start_generations text[];
BEGIN
  SELECT COALESCE(jsonb_agg(to_jsonb(c) ORDER BY c.priority, c.enqueued_at, c.id), '[]'::jsonb) INTO claimed
  FROM {{schema}}.horsies_claim_tasks(p_queue, p_task_names, p_limit, p_lease_ms, p_worker_id, p_hostname, p_pid,
                                      p_process_name) c;
  started := '[]'::jsonb;
  IF p_start <= 0 OR jsonb_array_length(claimed) = 0 THEN
    RETURN;
  END IF;
  COMMIT;
  SELECT array_agg(e ->> 'id'), array_agg((e ->> 'id') || ':' || (e ->> 'claim_generation'))
  INTO start_ids, start_generations
  FROM jsonb_array_elements(claimed) WITH ORDINALITY AS x(e, n)
  WHERE n <= p_start;
  SELECT COALESCE(jsonb_agg(to_jsonb(s)), '[]'::jsonb) INTO started
  FROM {{schema}}.horsies_start_tasks(p_worker_id, start_ids, start_generations, p_wait_for_flush) s;
END;
$$;
