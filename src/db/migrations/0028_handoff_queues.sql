-- Workers of several queues take hand-offs too (migration 27 served single-queue workers only).
--
-- A registration now names every queue of the worker whose sends may be handed to it (queue_names): the worker's
-- queues that no cap, rate limit or group limit meters, once a claim pass found all of its queues empty. Its free
-- slots are one count for all of them, so a worker of three queues is never handed more than it reserved. queue_name
-- keeps the first of them, so the primary key stays one registration per worker and queue.
--
-- A registration written by a worker from before this migration names no queue_names: no send finds it, and that
-- worker claims as it did before hand-offs, until it restarts on the new version. Its registration goes at its next
-- claim pass, as every registration does.

ALTER TABLE {{schema}}.horsies_idle_slots ADD COLUMN queue_names text[] COLLATE "C";

-- The single send looks for a registration that names its queue; the rest is as in migration 27. (No index serves
-- the lookup: the table holds one row per idle worker, read whole.)
CREATE OR REPLACE FUNCTION {{schema}}.horsies_send_one(
  p_id text, p_task_name text, p_queue text, p_priority integer, p_kwargs jsonb, p_sent_at timestamptz,
  p_run_at timestamptz, p_delay_ms integer, p_good_until timestamptz, p_max_retries integer, p_retention_ms bigint,
  p_task_options jsonb, p_trace_context jsonb, p_group_key text, p_handoff boolean)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
  v_enqueued timestamptz := COALESCE(p_run_at, now() + p_delay_ms * interval '1 millisecond');
  v_payload text;
  s record;
BEGIN
  IF p_handoff AND p_group_key IS NULL AND v_enqueued <= now() AND (p_good_until IS NULL OR p_good_until > now())
     -- A producer role granted before migration 27 lacks these: its sends keep the old way.
     AND has_table_privilege('{{schema}}.horsies_idle_slots', 'UPDATE')
     AND has_table_privilege('{{schema}}.horsies_idle_slots', 'DELETE') THEN
    FOR s IN
      SELECT * FROM {{schema}}.horsies_idle_slots i
      WHERE i.queue_names @> ARRAY[p_queue]::text[] AND i.free > 0 AND p_task_name = ANY (i.task_names)
      ORDER BY i.registered_at
      FOR UPDATE SKIP LOCKED
    LOOP
      -- A paused queue's tasks wait PENDING (read only when a registration is found: most sends find none).
      EXIT WHEN EXISTS (SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = p_queue AND q.paused);
      IF pg_try_advisory_xact_lock(s.lock_key) THEN
        -- Its worker no longer holds the lock: it is gone.
        DELETE FROM {{schema}}.horsies_idle_slots i WHERE i.queue_name = s.queue_name AND i.worker_id = s.worker_id;
        CONTINUE;
      END IF;
      v_payload := json_build_object(
        'id', p_id, 'task_name', p_task_name, 'queue_name', p_queue, 'priority', p_priority, 'kwargs', p_kwargs,
        'claim_generation', 1, 'retry_count', 0, 'max_retries', p_max_retries, 'attempt', 1,
        'enqueued_at', v_enqueued, 'trace_context', p_trace_context, 'started_at', now(), 'token', s.token)::text;
      EXIT WHEN octet_length(v_payload) > 7900;
      INSERT INTO {{schema}}.horsies_tasks
        (id, task_name, queue_name, priority, kwargs, status, sent_at, enqueued_at, good_until, max_retries,
         retention_ms, task_options, trace_context, claimed, claimed_at, claimed_by_worker_id, claim_generation,
         claim_expires_at, started_at, attempt, worker_hostname, worker_pid, worker_process_name)
      VALUES (p_id, p_task_name, p_queue, p_priority, p_kwargs, 'RUNNING', COALESCE(p_sent_at, now()), v_enqueued,
              p_good_until, p_max_retries, p_retention_ms, p_task_options, p_trace_context, true, now(), s.worker_id,
              1, now() + s.lease_ms * interval '1 millisecond', now(), 1, s.worker_hostname, s.worker_pid,
              s.worker_process_name);
      UPDATE {{schema}}.horsies_idle_slots i SET free = i.free - 1, handed = i.handed || p_id
      WHERE i.queue_name = s.queue_name AND i.worker_id = s.worker_id;
      PERFORM pg_notify(s.channel, v_payload);
      -- The dashboard's live feed hears of new tasks here; no worker listens to it.
      PERFORM pg_notify((parse_ident('{{schema}}'))[1] || ':task_new', p_queue);
      RETURN s.worker_id;
    END LOOP;
  END IF;
  INSERT INTO {{schema}}.horsies_tasks
    (id, task_name, queue_name, priority, kwargs, status, sent_at, enqueued_at, good_until, max_retries,
     retention_ms, task_options, trace_context, group_key)
  VALUES (p_id, p_task_name, p_queue, p_priority, p_kwargs, 'PENDING', COALESCE(p_sent_at, now()), v_enqueued,
          p_good_until, p_max_retries, p_retention_ms, p_task_options, p_trace_context, p_group_key);
  RETURN NULL;
END;
$$;
