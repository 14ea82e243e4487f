-- The send of one task outside a transaction, in one round trip. With p_handoff, a task due now whose queue an idle
-- worker registered (horsies_idle_slots, read whole: one row per idle worker) is inserted RUNNING for that worker,
-- claimed and started in the send's transaction, and the worker is told by notification with the claim's row;
-- otherwise it is inserted PENDING as any send.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_send_one(p_id text, p_task_name text, p_queue text, p_priority integer, p_kwargs jsonb, p_sent_at timestamp with time zone, p_run_at timestamp with time zone, p_delay_ms integer, p_good_until timestamp with time zone, p_max_retries integer, p_retention_ms bigint, p_task_options jsonb, p_trace_context jsonb, p_group_key text, p_handoff boolean)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
DECLARE
  v_enqueued timestamptz := COALESCE(p_run_at, now() + p_delay_ms * interval '1 millisecond');
  v_payload text;
  v_token uuid;
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
      v_token := gen_random_uuid();
      v_payload := json_build_object(
        'id', p_id, 'task_name', p_task_name, 'queue_name', p_queue, 'priority', p_priority, 'kwargs', p_kwargs,
        'claim_generation', 1, 'claim_token', v_token, 'retry_count', 0, 'max_retries', p_max_retries,
        'attempt', 1, 'enqueued_at', v_enqueued, 'trace_context', p_trace_context, 'started_at', now(),
        'token', s.token)::text;
      EXIT WHEN octet_length(v_payload) > 7900;
      INSERT INTO {{schema}}.horsies_tasks
        (id, task_name, queue_name, priority, kwargs, status, sent_at, enqueued_at, good_until, max_retries,
         retention_ms, task_options, trace_context, claimed, claimed_at, claimed_by_worker_id, claim_generation,
         claim_token, claim_expires_at, started_at, attempt, worker_hostname, worker_pid, worker_process_name)
      VALUES (p_id, p_task_name, p_queue, p_priority, p_kwargs, 'RUNNING', COALESCE(p_sent_at, now()), v_enqueued,
              p_good_until, p_max_retries, p_retention_ms, p_task_options, p_trace_context, true, now(), s.worker_id,
              1, v_token, now() + s.lease_ms * interval '1 millisecond', now(), 1, s.worker_hostname, s.worker_pid,
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
$function$;
