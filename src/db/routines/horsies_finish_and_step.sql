-- A worker's batch of outcomes written together with the step of their workflows, in one transaction and one
-- round trip (src/workflow/step.ts): after a workflow task's finish, its workflow moves on without a second
-- transaction and a second commit. The workflows of the batch's tasks are locked first, in id order, as a step and
-- a control operation lock a workflow before its tasks; one that another transaction holds (another write's step, a
-- control operation) is skipped rather than waited for, so that writes of one busy workflow do not queue up behind
-- each other's WAL flush: its tasks' outcomes are written all the same, and their nodes left to a step after the
-- commit. Then the outcomes are written as horsies_finish_tasks writes them (fenced on their claims, their task_done
-- notifications left to the caller), and the nodes of the locked workflows' tasks that ended are stepped
-- (horsies_workflow_step, with p_eager). The commit waits for the WAL flush, as any outcome's does. Returns one row
-- per written outcome (`stepped`: its node was stepped here; step null), then one per stepped workflow with the
-- step's row as JSON (id null).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_finish_and_step(p_ids text[], p_worker_ids text[], p_statuses text[], p_results jsonb[], p_error_codes text[], p_error_messages text[], p_failed_reasons text[], p_retry_delays_ms integer[], p_crashed boolean[], p_tokens uuid[], p_channel text, p_eager jsonb)
 RETURNS TABLE(id character varying, status character varying, workflow_id character varying, workflow_node integer, stepped boolean, step jsonb)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
  -- The outcomes written (parallel: task, status, workflow, node, and whether its node is stepped here).
  v_ids text[];
  v_status text[];
  v_wid text[];
  v_node integer[];
  v_stepped boolean[];
  v_locked text[];
BEGIN
  v_locked := ARRAY(SELECT w.id FROM {{schema}}.horsies_workflows w
                    WHERE w.id = ANY (ARRAY(SELECT t.workflow_id FROM {{schema}}.horsies_tasks t
                                            WHERE t.id = ANY (p_ids) AND t.workflow_id IS NOT NULL))
                    ORDER BY w.id
                    FOR UPDATE SKIP LOCKED);
  -- A node is stepped here when its task ended (a retry leaves it PENDING) and its workflow is locked.
  SELECT coalesce(array_agg(f.id), '{}'), coalesce(array_agg(f.status), '{}'),
         coalesce(array_agg(f.workflow_id), '{}'), coalesce(array_agg(f.workflow_node), '{}'),
         coalesce(array_agg(coalesce(f.workflow_id = ANY (v_locked), false) AND f.status <> 'PENDING'), '{}')
  INTO v_ids, v_status, v_wid, v_node, v_stepped
  FROM {{schema}}.horsies_finish_tasks(p_ids, p_worker_ids, NULL, p_statuses, p_results, p_error_codes,
         p_error_messages, p_failed_reasons, p_retry_delays_ms, p_crashed, false, true, p_tokens) f;
  RETURN QUERY
  SELECT f.id::varchar, f.status::varchar, f.wid::varchar, f.node, f.stepped, NULL::jsonb
  FROM unnest(v_ids, v_status, v_wid, v_node, v_stepped) AS f(id, status, wid, node, stepped);
  IF true = ANY (v_stepped) THEN
    RETURN QUERY
    SELECT NULL::varchar, NULL::varchar, NULL::varchar, NULL::integer, NULL::boolean, to_jsonb(s)
    FROM {{schema}}.horsies_workflow_step(
      ARRAY(SELECT e.wid FROM unnest(v_wid, v_stepped) AS e(wid, stepped) WHERE e.stepped),
      ARRAY(SELECT e.node FROM unnest(v_node, v_stepped) AS e(node, stepped) WHERE e.stepped),
      p_channel, true, p_eager) s;
  END IF;
END;
$function$;
