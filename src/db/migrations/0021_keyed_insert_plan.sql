-- The insert of tasks that may repeat (an explicit id or an idempotency key, and small batches) looks a repeated
-- task up by index whatever the table held when the connection planned it.
--
-- TaskInsertMany was a statement sent by the client, prepared once per connection. For a task it did not insert
-- (its id or key already stored), it looks the stored task up by id or key. A connection that planned that lookup
-- while the table was nearly empty (a new deployment, the first sends of the day on a fresh table) kept a plan
-- that reads the whole table, and kept it as the table grew, until the table's first ANALYZE: one read of the
-- whole table per repeated id or key. horsies_insert_tasks runs the same statement with sequential scans of tables
-- disabled (the input and the inserted rows are read as before), as migration 20 does for the hot path. In PL/pgSQL,
-- so that a connection plans it once on every PostgreSQL version (a SQL function's body is planned at each call
-- before PostgreSQL 18).

CREATE FUNCTION {{schema}}.horsies_insert_tasks(p_tasks json)
RETURNS TABLE (requested_id text, id varchar, enqueue_sha varchar)
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH input AS (
    SELECT * FROM json_to_recordset(p_tasks)
      AS i(id text, task_name text, queue_name text, priority int, kwargs jsonb, delay_ms int, run_at timestamptz,
           good_until timestamptz, enqueue_sha text, idempotency_key text, max_retries int, retention_ms bigint,
           task_options jsonb, sent_at timestamptz, trace_context jsonb, group_key text)
  ), inserted AS (
    INSERT INTO {{schema}}.horsies_tasks
      (id, task_name, queue_name, priority, kwargs, status, sent_at, enqueued_at, good_until, enqueue_sha,
       idempotency_key, max_retries, retention_ms, task_options, trace_context, group_key)
    SELECT id, task_name, queue_name, priority, kwargs, 'PENDING', COALESCE(sent_at, now()),
           COALESCE(run_at, now() + delay_ms * interval '1 millisecond'), good_until, enqueue_sha,
           idempotency_key, max_retries, retention_ms, task_options, trace_context, group_key
    FROM input
    ON CONFLICT DO NOTHING
    RETURNING id
  )
  SELECT i.id, t.id, t.enqueue_sha
  FROM input i
  LEFT JOIN inserted n ON n.id = i.id
  LEFT JOIN LATERAL (
    -- Looked up only for the rows the insert skipped (n.id IS NULL), not for every row sent.
    SELECT e.id, e.enqueue_sha FROM {{schema}}.horsies_tasks e
    WHERE n.id IS NULL
      AND (e.id = i.id OR (i.idempotency_key IS NOT NULL AND e.idempotency_key = i.idempotency_key))
    LIMIT 1
  ) t ON true
  WHERE n.id IS NULL;
END;
$$;
