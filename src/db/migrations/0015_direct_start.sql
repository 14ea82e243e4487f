-- The hot path, third pass: a task started in the statement that claims it.
--
-- Until now every task went PENDING → CLAIMED → RUNNING in two row updates with two commits, even when the worker
-- had a free handler slot for it at the claim (horsies_claim_and_start ran the claim, committed, then ran the
-- start, and wrapped both results in JSON). When a slot is free, the claim now writes the task RUNNING at once:
-- one row update, one commit, both timestamps (claimed_at = started_at) and every claim field (worker, lease,
-- claim generation), the attempt counted as a start counts it. Only the tasks beyond the free slots (prefetched,
-- or a soft cap's or a per-worker limit's) stay CLAIMED and go through horsies_start_tasks later.
--
-- Nothing is checked at the start that the claim does not check already: the claim takes only tasks whose
-- good_until has not passed and whose workflow is not paused, under the row lock it holds until its commit.
--
-- Durability is the claim's: the transaction commits without waiting for its WAL flush unless it starts tasks
-- and the worker asked for synchronous starts. A start lost in a server crash leaves the task PENDING, with its
-- previous claim generation, so the worker's heartbeat and finish (fenced on the generation) change nothing
-- and the task runs again; as migration 6 describes for a lost claim.

DROP PROCEDURE {{schema}}.horsies_claim_and_start(text, text[], integer, integer, text, text, integer, text,
                                                  integer, boolean, jsonb, jsonb);

-- Claims up to p_limit tasks of one queue (unless it is paused) and the given names, in priority then enqueue
-- order, like horsies_claim_tasks, and writes the first p_start of them (in that order) RUNNING instead of
-- CLAIMED. Rows come back in no particular order; `status` tells the started ones (RUNNING, with started_at and
-- the new attempt number) from the claimed ones (CLAIMED).
CREATE FUNCTION {{schema}}.horsies_claim_and_start(
  p_queue text, p_task_names text[], p_limit integer, p_lease_ms integer,
  p_worker_id text, p_hostname text, p_pid integer, p_process_name text, p_start integer, p_wait_for_flush boolean)
RETURNS TABLE (id varchar, task_name varchar, queue_name varchar, priority integer, kwargs jsonb,
               claim_generation integer, retry_count integer, max_retries integer, attempt integer,
               enqueued_at timestamptz, workflow_id varchar, workflow_node integer, workflow_node_id varchar,
               trace_context jsonb, status varchar, started_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  picked varchar[];
  starting varchar[];
BEGIN
  IF p_start <= 0 OR NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  -- The selection of horsies_claim_tasks (migration 12), kept in claim order in an array.
  picked := ARRAY(
    SELECT n.id FROM {{schema}}.horsies_tasks n
    WHERE NOT n.claimed AND n.finished_at IS NULL
      AND n.queue_name = p_queue
      AND n.task_name = ANY (p_task_names)
      AND n.enqueued_at <= now()
      AND (n.good_until IS NULL OR n.good_until > now())
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused)
      AND (n.workflow_id IS NULL OR NOT n.workflow_id = ANY (ARRAY(
        SELECT w.id FROM {{schema}}.horsies_workflows w WHERE w.status = 'PAUSED')))
    ORDER BY n.priority, n.enqueued_at, n.id
    LIMIT p_limit
    FOR UPDATE OF n SKIP LOCKED);
  IF cardinality(picked) = 0 THEN
    RETURN;
  END IF;
  starting := picked[1:GREATEST(p_start, 0)];
  RETURN QUERY
  UPDATE {{schema}}.horsies_tasks t
  SET status = CASE WHEN t.id = ANY (starting) THEN 'RUNNING' ELSE 'CLAIMED' END,
      claimed = true,
      claimed_at = now(),
      claimed_by_worker_id = p_worker_id,
      claim_generation = t.claim_generation + 1,
      claim_expires_at = now() + p_lease_ms * interval '1 millisecond',
      started_at = CASE WHEN t.id = ANY (starting) THEN now() ELSE t.started_at END,
      attempt = CASE WHEN t.id = ANY (starting) THEN t.attempt + 1 ELSE t.attempt END,
      worker_hostname = p_hostname,
      worker_pid = p_pid,
      worker_process_name = p_process_name,
      updated_at = now()
  WHERE t.id = ANY (picked)
  RETURNING t.id, t.task_name, t.queue_name, t.priority, t.kwargs, t.claim_generation, t.retry_count,
            t.max_retries, t.attempt, t.enqueued_at, t.workflow_id, t.workflow_node,
            CASE WHEN t.workflow_id IS NOT NULL AND t.workflow_node_id IS NULL THEN (
              SELECT wt.node_id FROM {{schema}}.horsies_workflow_tasks wt
              WHERE wt.node_key = t.workflow_id || ':' || t.workflow_node) ELSE t.workflow_node_id END,
            t.trace_context, t.status, t.started_at;
END;
$$;

-- A finish written by a worker's completer leaves its task_done notifications to the worker, which sends them
-- after the commit, in a transaction of their own (TaskDoneNotify). PostgreSQL serializes the commits of all
-- transactions that send notifications, each holding the lock until its WAL is flushed: with the notifications
-- in the finish, the finishes of every worker process of the database committed one at a time (in the
-- multi-process benchmark, nearly all lock waits of horsies' backends were on that lock). The finish sets
-- horsies.notify_done_later for its transaction; every other path that ends a task (reaper, cancel, expiry, a
-- handler's own transaction) notifies from this trigger as before.
DROP TRIGGER horsies_tasks_notify_change ON {{schema}}.horsies_tasks;
CREATE TRIGGER horsies_tasks_notify_change
  AFTER UPDATE ON {{schema}}.horsies_tasks
  FOR EACH ROW
  WHEN (
    (NEW.status = 'PENDING' AND OLD.status <> 'PENDING')
    OR (NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED') AND OLD.status <> NEW.status
        AND current_setting('horsies.notify_done_later', true) IS DISTINCT FROM 'on')
    OR (NEW.status = 'RUNNING' AND NEW.cancel_requested_at IS NOT NULL AND OLD.cancel_requested_at IS NULL)
  )
  EXECUTE FUNCTION {{schema}}.horsies_notify_task_change();
