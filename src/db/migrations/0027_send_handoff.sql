-- A single send that hands its task to an idle worker: the task starts without the worker's claim round trip.
--
-- An idle worker that opted in (throughput 'high') registers the free slots it reserved for one queue in
-- horsies_idle_slots and holds a session-level advisory lock on its LISTEN connection while it lives. The single
-- send (horsies_send_one) looks for such a registration; when it finds one whose worker still holds its lock, it
-- inserts the task already claimed and started by that worker (RUNNING, claim generation 1, attempt 1, the claim's
-- lease and the worker's identity, as a claim that starts would write them), takes one slot from the registration,
-- lists the task there, and tells the worker on the worker's own channel with what a claim would have returned. In
-- one transaction with the insert: a send that rolls back hands nothing over. The worker takes its registration
-- back before its next claim (and when it stops), with the ids handed to it, so that a notification lost with its
-- connection loses no task. A registration whose worker no longer holds its lock (the worker died) is removed by
-- the first send that finds it; what was handed to that worker is RUNNING under a dead worker, which the reaper
-- recovers as for any crash.
--
-- Only plain tasks are handed over: due now, without a group key, to a queue that is not paused, with a payload
-- small enough for a notification. Everything else, and a send when no registration has a free slot (or every one
-- is being taken by another send: SKIP LOCKED), is inserted PENDING and announced as before.

CREATE TABLE {{schema}}.horsies_idle_slots (
  queue_name varchar(100) COLLATE "C" NOT NULL,
  worker_id varchar(255) COLLATE "C" NOT NULL,
  task_names text[] COLLATE "C" NOT NULL,
  free integer NOT NULL,
  lock_key bigint NOT NULL,
  channel text COLLATE "C" NOT NULL,
  -- Which registration of the worker a notification is for: one that arrives after its registration was taken
  -- back is left to the take, which fetched its task.
  token bigint NOT NULL,
  lease_ms integer NOT NULL,
  worker_hostname varchar(255),
  worker_pid integer,
  worker_process_name varchar(255),
  handed text[] COLLATE "C" NOT NULL DEFAULT '{}',
  registered_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (queue_name, worker_id),
  CONSTRAINT horsies_idle_slots_free_check CHECK (free >= 0),
  CONSTRAINT horsies_idle_slots_lease_check CHECK (lease_ms > 0)
);

CREATE INDEX horsies_idle_slots_worker_idx ON {{schema}}.horsies_idle_slots (worker_id);

-- The single send. The worker's notification carries the claim's row as JSON, under PostgreSQL's limit of 8,000
-- bytes for a payload: a task whose row is larger is inserted PENDING.
CREATE FUNCTION {{schema}}.horsies_send_one(
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
     -- A producer role granted before this migration lacks these: its sends keep the old way.
     AND has_table_privilege('{{schema}}.horsies_idle_slots', 'UPDATE')
     AND has_table_privilege('{{schema}}.horsies_idle_slots', 'DELETE') THEN
    FOR s IN
      SELECT * FROM {{schema}}.horsies_idle_slots i
      WHERE i.queue_name = p_queue AND i.free > 0 AND p_task_name = ANY (i.task_names)
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
