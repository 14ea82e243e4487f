-- The insert of tasks that may repeat (an explicit id or idempotency key, and small batches): inserts what is new and
-- looks a repeated task up by id or key. Sequential scans are off so that a connection which planned it while the
-- table was nearly empty still looks repeats up by index as the table grows. PL/pgSQL, so that it is planned once per
-- connection on every PostgreSQL version (a SQL function's body is planned at each call before PostgreSQL 18).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_insert_tasks(p_tasks json)
 RETURNS TABLE(requested_id text, id character varying, enqueue_sha character varying)
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
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
    -- json_to_recordset reads a JSON null as SQL NULL: an input of null is the JSON value.
    SELECT id, task_name, queue_name, priority, COALESCE(kwargs, 'null'::jsonb), 'PENDING', COALESCE(sent_at, now()),
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
$function$;
