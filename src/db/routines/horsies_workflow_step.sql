-- The workflow step of a batch of finished tasks, in one round trip (see src/workflow/step.ts). The workflows are
-- locked in id order; then the batch's workflows go together through each stage, one statement for all of them:
-- their named nodes settled from their tasks (or child workflows, or deliveries and timers), the dependents'
-- counters bumped and their join rules applied (skips cascade; a task node that becomes READY is written ENQUEUED,
-- linked to a task id), those nodes' tasks inserted (inputs resolved from the upstream results as
-- src/workflow/wiring.ts resolves them), and the workflows advanced; those whose every node is terminal finish, one
-- by one (their result or first failure, and the notification on p_channel). Statement by statement rather than
-- workflow by workflow: what a statement costs to start is paid once for the batch. One row per workflow, in id
-- order, tells the caller what is left to it:
--   fallback: nothing was done (a PAUSED workflow, or one that pauses on error); the caller runs the whole step;
--   ready: subworkflow and wait nodes left READY, which the caller starts (it runs the app's code);
--   parent_id, parent_node: a child workflow that ended; its parent's node steps next.
--   started: the tasks of this step that it started for the calling worker (eager dispatch, below).
-- Eager dispatch: p_eager names the worker that runs the step and the free slots it reserved for this call
-- ({"slots", "queues", "task_names", "worker_id", "hostname", "pid", "process_name", "lease_ms"}; null: none).
-- A ready node's task is inserted RUNNING for that worker, claimed and started in the step's transaction, while
-- slots are left (in claim order: priority, then workflow and node), when the worker serves its queue and task,
-- the queue is not paused, the task is due and not past good_until, and no task waits PENDING ahead of it in claim
-- order in that queue (a priority as high or higher, enqueued earlier). The others are inserted PENDING. A step
-- that a server crash undoes takes its eager starts with it: their runs are fenced out (no row has their claim),
-- and the recovery pass enqueues anew.
-- p_workflow_ids and p_nodes are parallel (one entry per finished node; a null node names a workflow only). With
-- p_wait_for_flush false the commit does not wait for the WAL flush: the outcomes this follows were flushed, and
-- the recovery pass redoes a step that a server crash undid.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_step(p_workflow_ids text[], p_nodes integer[], p_channel text, p_wait_for_flush boolean, p_eager jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(workflow_id character varying, status character varying, settled integer, enqueued integer, fallback boolean, ready integer[], parent_id character varying, parent_node integer, started jsonb)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
  -- The batch: its workflows in id order, each one's status (null: no such workflow) and whether it falls back.
  v_ids text[];
  v_status text[];
  v_fallback boolean[];
  -- The cancelled workflows of the batch (settled, never evaluated), and the node keys to settle.
  v_cancelled text[];
  v_keys text[];
  -- One entry per node that turned terminal in this step: its workflow.
  v_terminal text[];
  v_skipped text[];
  -- Bumps of the join rules: node keys with their completed, failed and skipped counts.
  v_b_keys text[];
  v_b_c integer[];
  v_b_f integer[];
  v_b_s integer[];
  -- Task nodes enqueued by the join rules (workflow, index, task id, input template), and subworkflow and wait
  -- nodes that became READY (workflow, index).
  v_new_t_wid text[];
  v_new_t_idx integer[];
  v_new_t_id text[];
  v_new_t_tpl jsonb[];
  v_t_wid text[];
  v_t_idx integer[];
  v_t_id text[];
  v_t_tpl jsonb[];
  v_new_other_w text[];
  v_new_other_i integer[];
  v_ready_other_w text[];
  v_ready_other_i integer[];
  -- The enqueue: each task's input, then per workflow its count and starts.
  v_e_kwargs jsonb[];
  v_enq_wid text[];
  v_enq_n integer[];
  v_enq_started jsonb[];
  -- The workflows that finish, with their final status and parent node.
  v_finishing text[];
  v_fin_id text[];
  v_fin_status text[];
  v_fin_parent text[];
  v_fin_parent_node integer[];
  v_id text;
  w {{schema}}.horsies_workflows%ROWTYPE;
  v_n integer;
  v_tpl jsonb;
  v_ref jsonb;
  v_value jsonb;
  v_resolved jsonb;
  v_up_status text;
  v_up_result jsonb;
  v_path jsonb;
  v_step jsonb;
  v_len integer;
  v_chain jsonb[];
  v_cont jsonb;
  v_i integer;
  v_policy jsonb;
  v_success boolean;
  v_culprit_id text;
  v_culprit_status text;
  v_culprit_result jsonb;
  v_culprit_found boolean;
  v_output_id text;
  v_output_status text;
  v_output_result jsonb;
  v_output_found boolean;
  v_outcome jsonb;
  v_final text;
  v_slots integer := coalesce((p_eager ->> 'slots')::int, 0);
  v_eager_queues text[];
  v_eager_names text[];
  v_token uuid;
BEGIN
  IF NOT p_wait_for_flush THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  IF v_slots > 0 THEN
    v_eager_queues := ARRAY(SELECT jsonb_array_elements_text(p_eager -> 'queues'));
    v_eager_names := ARRAY(SELECT jsonb_array_elements_text(p_eager -> 'task_names'));
    -- One claim token for every task this call starts, as one claim statement draws one.
    v_token := gen_random_uuid();
  END IF;
  -- Every workflow of the batch, locked in id order (as a cancel or a pause locks a tree's children).
  PERFORM 1 FROM {{schema}}.horsies_workflows x WHERE x.id = ANY (p_workflow_ids) ORDER BY x.id FOR UPDATE;
  -- A PAUSED workflow gives back tasks that never ran, and one that pauses on error pauses its tree: the caller's.
  -- A COMPLETED or FAILED one takes no step; a CANCELLED one only records the outcomes of runs that still ended.
  WITH batch AS (
    SELECT b.wid, x.status,
           x.status IS NOT NULL AND x.status NOT IN ('COMPLETED', 'FAILED')
             AND (x.status NOT IN ('RUNNING', 'CANCELLED') OR (x.status = 'RUNNING' AND x.on_error = 'pause'))
             AS fallback
    FROM (SELECT DISTINCT i.wid FROM unnest(p_workflow_ids) AS i(wid)) b
    LEFT JOIN {{schema}}.horsies_workflows x ON x.id = b.wid
  )
  SELECT coalesce(array_agg(b.wid ORDER BY b.wid), '{}'),
         coalesce(array_agg(b.status ORDER BY b.wid), '{}'),
         coalesce(array_agg(b.fallback ORDER BY b.wid), '{}'),
         coalesce(array_agg(b.wid ORDER BY b.wid) FILTER (WHERE b.status = 'CANCELLED'), '{}'),
         ARRAY(SELECT DISTINCT i.wid || ':' || i.node FROM unnest(p_workflow_ids, p_nodes) AS i(wid, node)
               WHERE i.node IS NOT NULL AND i.wid = ANY (
                 ARRAY(SELECT c.wid FROM batch c WHERE c.status IN ('RUNNING', 'CANCELLED') AND NOT c.fallback)))
  INTO v_ids, v_status, v_fallback, v_cancelled, v_keys
  FROM batch b;

  -- Settles the named nodes whose task (child workflow, wait) ended; the dependents of those of running
  -- workflows learn the outcomes.
  WITH settled_nodes AS (
    SELECT * FROM {{schema}}.horsies_workflow_settle(v_keys)
  ), bumps AS (
    SELECT s.workflow_id || ':' || e.dep AS node_key,
           count(*) FILTER (WHERE s.status = 'COMPLETED')::int AS c,
           count(*) FILTER (WHERE s.status = 'FAILED')::int AS f
    FROM settled_nodes s, unnest(s.dependents) AS e(dep)
    WHERE s.workflow_id <> ALL (v_cancelled)
    GROUP BY 1
  )
  SELECT (SELECT coalesce(array_agg(s.workflow_id), '{}') FROM settled_nodes s),
         coalesce(array_agg(b.node_key ORDER BY b.node_key), '{}'),
         coalesce(array_agg(b.c ORDER BY b.node_key), '{}'),
         coalesce(array_agg(b.f ORDER BY b.node_key), '{}')
  INTO v_terminal, v_b_keys, v_b_c, v_b_f
  FROM bumps b;
  v_b_s := array_fill(0, ARRAY[cardinality(v_b_keys)]);

  -- The dependents' join rules decide (horsies_workflow_evaluate), and enqueue the task nodes they make READY;
  -- skips cascade.
  v_t_wid := '{}';
  v_t_idx := '{}';
  v_t_id := '{}';
  v_t_tpl := '{}';
  v_ready_other_w := '{}';
  v_ready_other_i := '{}';
  WHILE cardinality(v_b_keys) > 0 LOOP
    WITH evaluated AS (
      SELECT v.workflow_id, v.node_index, v.status, v.changed, v.dependents, v.task_id, v.input_template
      FROM {{schema}}.horsies_workflow_evaluate(v_b_keys, v_b_c, v_b_f, v_b_s, true, true) v
    ), next_bumps AS (
      SELECT v.workflow_id || ':' || e.dep AS node_key, count(*)::int AS s
      FROM evaluated v, unnest(v.dependents) AS e(dep)
      WHERE v.changed AND v.status = 'SKIPPED'
      GROUP BY 1
    )
    -- One pass over the evaluated nodes (the skipped, the task nodes enqueued, the other nodes made READY), one over
    -- the bumps their skips make.
    SELECT e.skipped, e.t_wid, e.t_idx, e.t_id, e.t_tpl, e.other_w, e.other_i, b.keys, b.s
    INTO v_skipped, v_new_t_wid, v_new_t_idx, v_new_t_id, v_new_t_tpl, v_new_other_w, v_new_other_i, v_b_keys,
         v_b_s
    FROM (
      SELECT coalesce(array_agg(v.workflow_id) FILTER (WHERE v.changed AND v.status = 'SKIPPED'), '{}') AS skipped,
             coalesce(array_agg(v.workflow_id ORDER BY v.task_id) FILTER (WHERE v.task_id IS NOT NULL), '{}') AS t_wid,
             coalesce(array_agg(v.node_index ORDER BY v.task_id) FILTER (WHERE v.task_id IS NOT NULL), '{}') AS t_idx,
             coalesce(array_agg(v.task_id ORDER BY v.task_id) FILTER (WHERE v.task_id IS NOT NULL), '{}') AS t_id,
             coalesce(array_agg(v.input_template ORDER BY v.task_id) FILTER (WHERE v.task_id IS NOT NULL), '{}')
               AS t_tpl,
             coalesce(array_agg(v.workflow_id ORDER BY v.workflow_id, v.node_index)
                        FILTER (WHERE v.changed AND v.status = 'READY'), '{}') AS other_w,
             coalesce(array_agg(v.node_index ORDER BY v.workflow_id, v.node_index)
                        FILTER (WHERE v.changed AND v.status = 'READY'), '{}') AS other_i
      FROM evaluated v
    ) e, (
      SELECT coalesce(array_agg(x.node_key ORDER BY x.node_key), '{}') AS keys,
             coalesce(array_agg(x.s ORDER BY x.node_key), '{}') AS s
      FROM next_bumps x
    ) b;
    v_b_c := array_fill(0, ARRAY[cardinality(v_b_keys)]);
    v_b_f := v_b_c;
    v_terminal := v_terminal || v_skipped;
    v_t_wid := v_t_wid || v_new_t_wid;
    v_t_idx := v_t_idx || v_new_t_idx;
    v_t_id := v_t_id || v_new_t_id;
    v_t_tpl := v_t_tpl || v_new_t_tpl;
    v_ready_other_w := v_ready_other_w || v_new_other_w;
    v_ready_other_i := v_ready_other_i || v_new_other_i;
  END LOOP;

  -- The enqueued task nodes: inputs resolved (resolveRefs of src/workflow/wiring.ts, kinds result and outcome),
  -- then their tasks inserted in one statement.
  v_enq_wid := '{}';
  v_enq_n := '{}';
  v_enq_started := '{}';
  IF cardinality(v_t_id) > 0 THEN
    v_e_kwargs := '{}';
    FOR v_n IN 1 .. cardinality(v_t_id) LOOP
      v_tpl := v_t_tpl[v_n];
      v_value := coalesce(v_tpl -> 'static', 'null'::jsonb);
      -- Most inputs read no upstream node: no query for them.
      IF jsonb_array_length(coalesce(v_tpl -> 'refs', '[]'::jsonb)) > 0 THEN
        FOR v_ref IN
          SELECT e.value FROM jsonb_array_elements(coalesce(v_tpl -> 'refs', '[]'::jsonb))
            WITH ORDINALITY AS e(value, ord)
          WHERE e.value ->> 'kind' IN ('result', 'outcome')
          ORDER BY e.ord
        LOOP
          v_up_status := NULL;
          v_up_result := NULL;
          SELECT u.status, u.result INTO v_up_status, v_up_result FROM {{schema}}.horsies_workflow_tasks u
          WHERE u.node_key = v_t_wid[v_n] || ':' || (v_ref ->> 'node');
          IF v_ref ->> 'kind' = 'outcome' THEN
            -- outcomeOf: the upstream's TaskResult.
            v_resolved := CASE
              WHEN v_up_status = 'COMPLETED' AND jsonb_typeof(v_up_result) = 'object' AND v_up_result ? 'ok'
                THEN jsonb_build_object('ok', true, 'value', coalesce(v_up_result -> 'ok', 'null'::jsonb))
              WHEN v_up_status = 'COMPLETED' THEN jsonb_build_object('ok', false, 'error', jsonb_build_object(
                'code', 'RESULT_NOT_AVAILABLE', 'message', 'the node completed without a result'))
              WHEN v_up_status IN ('FAILED', 'SKIPPED') THEN jsonb_build_object('ok', false, 'error', coalesce(
                nullif(v_up_result -> 'err', 'null'::jsonb),
                jsonb_build_object('code', 'RESULT_NOT_AVAILABLE', 'message', 'the node ended ' || v_up_status)))
              ELSE jsonb_build_object('ok', false, 'error', jsonb_build_object(
                'code', 'RESULT_NOT_AVAILABLE', 'message', 'the node has not finished'))
            END;
          ELSIF v_up_status = 'COMPLETED' THEN
            -- readPath into the ok value: a missing step, or a step into a scalar, reads nothing (null).
            v_resolved := v_up_result -> 'ok';
            FOR v_step IN
              SELECT e.value FROM jsonb_array_elements(coalesce(v_ref -> 'from', '[]'::jsonb))
                WITH ORDINALITY AS e(value, ord)
              ORDER BY e.ord
            LOOP
              EXIT WHEN v_resolved IS NULL;
              v_resolved := CASE jsonb_typeof(v_resolved)
                WHEN 'object' THEN v_resolved -> (v_step #>> '{}')
                WHEN 'array' THEN CASE WHEN (v_step #>> '{}') ~ '^(0|[1-9][0-9]{0,8})$'
                                       THEN v_resolved -> (v_step #>> '{}')::int END
              END;
            END LOOP;
          ELSE
            v_resolved := NULL;
          END IF;
          v_resolved := coalesce(v_resolved, 'null'::jsonb);
          -- writePath: containers made on the way (an array for an index step, else an object).
          v_path := coalesce(v_ref -> 'to', '[]'::jsonb);
          v_len := jsonb_array_length(v_path);
          IF v_len = 0 THEN
            v_value := v_resolved;
          ELSE
            v_chain := ARRAY[v_value];
            FOR v_i IN 1 .. v_len - 1 LOOP
              v_step := v_path -> (v_i - 1);
              v_cont := CASE WHEN jsonb_typeof(v_chain[v_i]) IN ('object', 'array') THEN v_chain[v_i]
                             WHEN jsonb_typeof(v_step) = 'number' THEN '[]'::jsonb ELSE '{}'::jsonb END;
              v_chain := array_append(v_chain, coalesce(CASE jsonb_typeof(v_cont)
                WHEN 'object' THEN v_cont -> (v_step #>> '{}')
                ELSE CASE WHEN (v_step #>> '{}') ~ '^(0|[1-9][0-9]{0,8})$' THEN v_cont -> (v_step #>> '{}')::int END
              END, 'null'::jsonb));
            END LOOP;
            FOR v_i IN REVERSE v_len .. 1 LOOP
              v_step := v_path -> (v_i - 1);
              v_cont := CASE WHEN jsonb_typeof(v_chain[v_i]) IN ('object', 'array') THEN v_chain[v_i]
                             WHEN jsonb_typeof(v_step) = 'number' THEN '[]'::jsonb ELSE '{}'::jsonb END;
              IF jsonb_typeof(v_cont) = 'object' THEN
                v_resolved := v_cont || jsonb_build_object(v_step #>> '{}', v_resolved);
              ELSIF (v_step #>> '{}') ~ '^(0|[1-9][0-9]{0,8})$' THEN
                IF (v_step #>> '{}')::int < jsonb_array_length(v_cont) THEN
                  v_resolved := jsonb_set(v_cont, ARRAY[v_step #>> '{}'], v_resolved);
                ELSE
                  -- Past the end: the holes between are nulls, as JSON writes a sparse array.
                  v_resolved := v_cont
                    || (SELECT coalesce(jsonb_agg('null'::jsonb), '[]'::jsonb)
                        FROM generate_series(1, (v_step #>> '{}')::int - jsonb_array_length(v_cont)))
                    || jsonb_build_array(v_resolved);
                END IF;
              ELSE
                -- A named property of an array: JSON keeps none.
                v_resolved := v_cont;
              END IF;
            END LOOP;
            v_value := v_resolved;
          END IF;
        END LOOP;
      END IF;
      -- Element assignment grows the array in place (an append would copy it: quadratic on a wide fan-out).
      v_e_kwargs[v_n] := v_value;
    END LOOP;
    WITH linked AS (
      SELECT n.workflow_id, n.node_index, n.node_id, i.task_id, n.task_name, n.queue_name, n.priority,
             n.max_retries, n.task_options, n.good_until, i.kwargs
      FROM unnest(v_t_wid, v_t_idx, v_t_id, v_e_kwargs) AS i(wid, node_index, task_id, kwargs)
      JOIN {{schema}}.horsies_workflow_tasks n ON n.node_key = i.wid || ':' || i.node_index
    ), eager AS (
      -- The tasks started for the calling worker: the first of those it may take, in claim order.
      SELECT e.task_id FROM (
        SELECT l.task_id, row_number() OVER (ORDER BY l.priority, l.workflow_id, l.node_index) AS k
        FROM linked l
        WHERE v_slots > 0
          AND l.queue_name = ANY (v_eager_queues) AND l.task_name = ANY (v_eager_names)
          AND (l.good_until IS NULL OR l.good_until > now())
          AND NOT EXISTS (
            SELECT 1 FROM {{schema}}.horsies_queue_state q WHERE q.queue_name = l.queue_name AND q.paused)
          -- In the terms of horsies_tasks_claim_idx: a task that a claim of this queue would take first.
          AND NOT EXISTS (
            SELECT 1 FROM {{schema}}.horsies_tasks n
            WHERE NOT n.claimed AND n.finished_at IS NULL AND n.queue_name = l.queue_name
              AND n.priority <= l.priority AND n.enqueued_at <= now())
      ) e
      WHERE e.k <= v_slots
    ), inserted AS (
      INSERT INTO {{schema}}.horsies_tasks
        (id, task_name, queue_name, priority, kwargs, status, enqueued_at, good_until, max_retries, task_options,
         workflow_id, workflow_node, workflow_node_id, trace_context, claimed, claimed_at, claimed_by_worker_id,
         claim_generation, claim_token, claim_expires_at, started_at, attempt, worker_hostname, worker_pid,
         worker_process_name)
      SELECT l.task_id, l.task_name, l.queue_name, l.priority, l.kwargs,
             CASE WHEN g.task_id IS NULL THEN 'PENDING' ELSE 'RUNNING' END, now(), l.good_until,
             l.max_retries, l.task_options, l.workflow_id, l.node_index, l.node_id, x.trace_context,
             g.task_id IS NOT NULL,
             CASE WHEN g.task_id IS NOT NULL THEN now() END,
             CASE WHEN g.task_id IS NOT NULL THEN p_eager ->> 'worker_id' END,
             CASE WHEN g.task_id IS NOT NULL THEN 1 ELSE 0 END,
             CASE WHEN g.task_id IS NOT NULL THEN v_token END,
             CASE WHEN g.task_id IS NOT NULL
                  THEN now() + (p_eager ->> 'lease_ms')::int * interval '1 millisecond' END,
             CASE WHEN g.task_id IS NOT NULL THEN now() END,
             CASE WHEN g.task_id IS NOT NULL THEN 1 ELSE 0 END,
             CASE WHEN g.task_id IS NOT NULL THEN p_eager ->> 'hostname' END,
             CASE WHEN g.task_id IS NOT NULL THEN (p_eager ->> 'pid')::int END,
             CASE WHEN g.task_id IS NOT NULL THEN p_eager ->> 'process_name' END
      FROM linked l
      JOIN {{schema}}.horsies_workflows x ON x.id = l.workflow_id
      LEFT JOIN eager g ON g.task_id = l.task_id
      RETURNING *
    ), per_workflow AS (
      SELECT i.workflow_id AS wid, count(*)::int AS n,
             coalesce(jsonb_agg(jsonb_build_object(
               'id', i.id, 'task_name', i.task_name, 'queue_name', i.queue_name, 'priority', i.priority,
               'kwargs', i.kwargs, 'claim_generation', i.claim_generation, 'claim_token', i.claim_token,
               'retry_count', i.retry_count, 'max_retries', i.max_retries, 'attempt', i.attempt,
               'enqueued_at', i.enqueued_at, 'trace_context', i.trace_context, 'workflow_id', i.workflow_id,
               'workflow_node', i.workflow_node, 'workflow_node_id', i.workflow_node_id,
               'started_at', i.started_at) ORDER BY i.priority, i.workflow_node) FILTER (WHERE i.status = 'RUNNING'),
               '[]') AS started
      FROM inserted i
      GROUP BY i.workflow_id
    )
    SELECT coalesce(array_agg(p.wid), '{}'), coalesce(array_agg(p.n), '{}'), coalesce(array_agg(p.started), '{}')
    INTO v_enq_wid, v_enq_n, v_enq_started
    FROM per_workflow p;
  END IF;

  -- The workflows advance by the nodes that turned terminal; a running one whose every node is terminal finishes.
  WITH counts AS (
    SELECT t.wid, count(*)::int AS n FROM unnest(v_terminal) AS t(wid) GROUP BY t.wid
  ), advanced AS (
    UPDATE {{schema}}.horsies_workflows x
    SET nodes_terminal = x.nodes_terminal + c.n, updated_at = now()
    FROM counts c
    WHERE x.id = c.wid
    RETURNING x.id, x.status, x.nodes_terminal >= x.nodes_total AS done
  )
  SELECT coalesce(array_agg(a.id ORDER BY a.id) FILTER (WHERE a.done AND a.status = 'RUNNING'), '{}')
  INTO v_finishing
  FROM advanced a;

  v_fin_id := '{}';
  v_fin_status := '{}';
  v_fin_parent := '{}';
  v_fin_parent_node := '{}';
  FOREACH v_id IN ARRAY v_finishing LOOP
    SELECT * INTO w FROM {{schema}}.horsies_workflows x WHERE x.id = v_id;
    -- Every node is terminal: the workflow ends once (decideOutcome in src/workflow/step.ts). Success: no failed
    -- node, or with a success policy some case whose nodes all completed (optional nodes never count).
    v_policy := CASE WHEN jsonb_typeof(w.success_policy) = 'object' THEN w.success_policy END;
    SELECT n.node_id, n.status, n.result INTO v_culprit_id, v_culprit_status, v_culprit_result FROM {{schema}}.horsies_workflow_tasks n
    WHERE n.workflow_id = v_id AND n.status = 'FAILED'
      AND NOT coalesce(v_policy -> 'optional' @> to_jsonb(n.node_index), false)
    ORDER BY n.completed_at NULLS LAST, n.node_index
    LIMIT 1;
    v_culprit_found := FOUND;
    IF v_policy IS NULL THEN
      v_success := NOT v_culprit_found;
    ELSE
      v_success := EXISTS (
        SELECT 1 FROM jsonb_array_elements(v_policy -> 'cases') AS pc(nodes)
        WHERE NOT EXISTS (
          SELECT 1 FROM jsonb_array_elements(pc.nodes) AS pn(node)
          WHERE NOT EXISTS (
            SELECT 1 FROM {{schema}}.horsies_workflow_tasks n
            WHERE n.node_key = v_id || ':' || (pn.node #>> '{}') AND n.status = 'COMPLETED')));
    END IF;
    v_output_found := false;
    IF w.output_index IS NOT NULL THEN
      SELECT n.node_id, n.status, n.result INTO v_output_id, v_output_status, v_output_result FROM {{schema}}.horsies_workflow_tasks n
      WHERE n.node_key = v_id || ':' || w.output_index;
      v_output_found := FOUND;
    END IF;
    IF v_success AND v_output_found AND v_output_status = 'COMPLETED' THEN
      v_outcome := jsonb_build_object('ok', coalesce(v_output_result -> 'ok', 'null'::jsonb));
    ELSIF v_success AND w.output_index IS NULL THEN
      -- The outcomes of the terminal nodes (nobody's dependency), by node id.
      v_outcome := jsonb_build_object('ok', coalesce((
        SELECT jsonb_object_agg(n.node_id, CASE
          WHEN n.status = 'COMPLETED' AND jsonb_typeof(n.result) = 'object' AND n.result ? 'ok'
            THEN jsonb_build_object('ok', true, 'value', coalesce(n.result -> 'ok', 'null'::jsonb))
          WHEN n.status = 'COMPLETED' THEN jsonb_build_object('ok', false, 'error', jsonb_build_object(
            'code', 'RESULT_NOT_AVAILABLE', 'message', 'the node completed without a result'))
          WHEN n.status IN ('FAILED', 'SKIPPED') THEN jsonb_build_object('ok', false, 'error', coalesce(
            nullif(n.result -> 'err', 'null'::jsonb),
            jsonb_build_object('code', 'RESULT_NOT_AVAILABLE', 'message', 'the node ended ' || n.status)))
          ELSE jsonb_build_object('ok', false, 'error', jsonb_build_object(
            'code', 'RESULT_NOT_AVAILABLE', 'message', 'the node has not finished'))
        END)
        FROM {{schema}}.horsies_workflow_tasks n
        WHERE n.workflow_id = v_id AND cardinality(n.dependents) = 0), '{}'::jsonb));
    ELSIF (v_success AND v_output_found) OR (NOT v_success AND v_culprit_found) THEN
      IF v_success THEN
        v_culprit_id := v_output_id;
        v_culprit_status := v_output_status;
        v_culprit_result := v_output_result;
      END IF;
      v_outcome := jsonb_build_object('err', jsonb_build_object(
        'code', 'WORKFLOW_FAILED',
        'message', 'workflow "' || w.name || '" failed: node "' || v_culprit_id || '" ended '
                   || v_culprit_status,
        'data', jsonb_build_object('node', v_culprit_id,
                                   'error', coalesce(v_culprit_result -> 'err', 'null'::jsonb))));
    ELSE
      v_outcome := jsonb_build_object('err', jsonb_build_object(
        'code', 'WORKFLOW_SUCCESS_CASE_NOT_MET',
        'message', 'workflow "' || w.name || '" met none of its success cases',
        'data', jsonb_build_object('nodes', coalesce((
          SELECT jsonb_object_agg(n.node_id, n.status) FROM {{schema}}.horsies_workflow_tasks n
          WHERE n.workflow_id = v_id), '{}'::jsonb))));
    END IF;
    UPDATE {{schema}}.horsies_workflows x
    SET status = CASE WHEN v_outcome ? 'ok' THEN 'COMPLETED' ELSE 'FAILED' END, result = v_outcome,
        error_code = v_outcome -> 'err' ->> 'code', completed_at = now(), updated_at = now()
    WHERE x.id = v_id AND x.status IN ('RUNNING', 'PAUSED')
    RETURNING x.status INTO v_final;
    IF FOUND THEN
      PERFORM pg_notify(p_channel, v_id);
    ELSE
      v_final := w.status;
    END IF;
    v_fin_id := v_fin_id || v_id;
    v_fin_status := v_fin_status || v_final;
    v_fin_parent := v_fin_parent || CASE WHEN w.parent_node_index IS NOT NULL THEN w.parent_workflow_id END;
    v_fin_parent_node := v_fin_parent_node
      || CASE WHEN w.parent_workflow_id IS NOT NULL AND w.parent_node_index IS NOT NULL THEN w.parent_node_index END;
  END LOOP;

  RETURN QUERY
  SELECT b.wid::varchar, coalesce(f.status, b.status)::varchar, coalesce(t.n, 0), coalesce(e.n, 0), b.fallback,
         coalesce(o.ready, '{}'::integer[]), f.parent::varchar, f.parent_node, coalesce(e.started, '[]'::jsonb)
  FROM unnest(v_ids, v_status, v_fallback) AS b(wid, status, fallback)
  LEFT JOIN (SELECT c.wid, count(*)::int AS n FROM unnest(v_terminal) AS c(wid) GROUP BY c.wid) t ON t.wid = b.wid
  LEFT JOIN unnest(v_enq_wid, v_enq_n, v_enq_started) AS e(wid, n, started) ON e.wid = b.wid
  LEFT JOIN (SELECT q.wid, array_agg(q.idx ORDER BY q.idx) AS ready
             FROM unnest(v_ready_other_w, v_ready_other_i) AS q(wid, idx) GROUP BY q.wid) o ON o.wid = b.wid
  LEFT JOIN unnest(v_fin_id, v_fin_status, v_fin_parent, v_fin_parent_node) AS f(wid, status, parent, parent_node)
    ON f.wid = b.wid
  ORDER BY b.wid;
END;
$function$
