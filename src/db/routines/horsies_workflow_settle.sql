-- Settles the nodes named by p_keys ('<workflow id>:<node index>') whose task, child workflow or wait ended:
-- ENQUEUED or RUNNING -> COMPLETED or FAILED, with the task's stored result, or one made where none is stored
-- (WORKER_CRASHED for a FAILED task without an error, TASK_CANCELLED, TASK_EXPIRED, RESULT_NOT_AVAILABLE for a
-- COMPLETED task without a result, TASK_NOT_FOUND for a task row that no longer exists). A subworkflow node takes
-- its child's result, or SUBWORKFLOW_FAILED with the child's id, status, node counts by status and error; a signal
-- wait its first delivery or WAIT_TIMEOUT once due; a sleep null once due. A compare-and-set: a node already
-- terminal is left alone, so a replay changes nothing. The one text of the settle: the server-side step
-- (horsies_workflow_step) and the step in TypeScript (WorkflowNodeSettle, WorkflowNodeSettleAll) call it. The
-- caller holds the workflows' row locks. Each node comes back with its workflow (the keys may name many).
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_settle(p_keys text[])
 RETURNS TABLE(node_index integer, status character varying, dependents integer[], workflow_id character varying)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH source AS (
    SELECT n.node_key, n.subworkflow IS NOT NULL AS nested, t.id AS task_found, t.status AS task_status,
           t.result AS task_result, c.id AS child_found, c.status AS child_status, c.result AS child_result,
           n.wait_kind, n.wait_name, n.wait_timeout_ms, g.payload AS signal_payload
    FROM {{schema}}.horsies_workflow_tasks n
    LEFT JOIN {{schema}}.horsies_tasks t ON t.id = n.task_id
    LEFT JOIN {{schema}}.horsies_workflows c ON c.id = n.child_workflow_id
    LEFT JOIN LATERAL (
      SELECT sg.payload FROM {{schema}}.horsies_workflow_signals sg
      WHERE n.wait_kind = 'signal' AND n.status = 'RUNNING'
        AND sg.workflow_id = n.workflow_id AND sg.node_index = n.node_index
      ORDER BY sg.seq LIMIT 1) g ON true
    -- Nodes found by their keys only: a status test the open-nodes index could serve (status || '' cannot) may
    -- make a generic plan scan every open node of a wide workflow once per named node.
    WHERE n.node_key = ANY (p_keys)
      AND n.status || '' IN ('ENQUEUED', 'RUNNING')
      AND CASE WHEN n.wait_kind IS NOT NULL
               THEN n.status = 'RUNNING' AND (g.payload IS NOT NULL OR n.wait_due_at <= now())
               WHEN n.subworkflow IS NULL
               THEN t.id IS NULL OR t.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'EXPIRED')
               ELSE c.id IS NULL OR c.status IN ('COMPLETED', 'FAILED', 'CANCELLED') END
  ), decided AS (
    SELECT s.node_key,
           CASE
             WHEN s.wait_kind = 'signal' AND s.signal_payload IS NOT NULL
               THEN jsonb_build_object('ok', s.signal_payload)
             WHEN s.wait_kind = 'signal' THEN jsonb_build_object('err', jsonb_build_object(
               'code', 'WAIT_TIMEOUT',
               'message', 'no signal "' || s.wait_name || '" came within ' || s.wait_timeout_ms || ' ms'))
             WHEN s.wait_kind = 'sleep' THEN jsonb_build_object('ok', 'null'::jsonb)
             WHEN s.nested AND s.child_status = 'COMPLETED' AND s.child_result ? 'ok' THEN s.child_result
             WHEN s.nested THEN jsonb_build_object('err', jsonb_build_object(
               'code', 'SUBWORKFLOW_FAILED',
               'message', CASE WHEN s.child_found IS NULL THEN 'the child workflow of this node no longer exists'
                               ELSE 'child workflow ' || s.child_found || ' ended ' || s.child_status END,
               'data', jsonb_build_object(
                 'workflowId', s.child_found,
                 'status', s.child_status,
                 'nodes', (SELECT jsonb_object_agg(k.status, k.count) FROM (
                             SELECT cn.status, count(*) AS count FROM {{schema}}.horsies_workflow_tasks cn
                             WHERE cn.workflow_id = s.child_found GROUP BY cn.status) k),
                 'error', s.child_result -> 'err')))
             WHEN s.task_found IS NULL THEN jsonb_build_object('err', jsonb_build_object(
               'code', 'TASK_NOT_FOUND', 'message', 'the task of this node no longer exists'))
             WHEN s.task_status = 'COMPLETED' AND s.task_result ? 'ok' THEN s.task_result
             WHEN s.task_status = 'COMPLETED' THEN jsonb_build_object('err', jsonb_build_object(
               'code', 'RESULT_NOT_AVAILABLE', 'message', 'the task completed but no result is stored'))
             WHEN s.task_result ? 'err' THEN s.task_result
             ELSE jsonb_build_object('err', jsonb_build_object(
               'code', CASE s.task_status WHEN 'CANCELLED' THEN 'TASK_CANCELLED'
                                          WHEN 'EXPIRED' THEN 'TASK_EXPIRED' ELSE 'WORKER_CRASHED' END,
               'message', 'the task ended ' || s.task_status || ' without a stored error'))
           END AS result
    FROM source s
  )
  UPDATE {{schema}}.horsies_workflow_tasks n
  SET status = CASE WHEN d.result ? 'ok' THEN 'COMPLETED' ELSE 'FAILED' END,
      result = d.result,
      error_code = d.result -> 'err' ->> 'code',
      completed_at = now(),
      updated_at = now()
  FROM decided d
  WHERE n.node_key = d.node_key
  RETURNING n.node_index, n.status, n.dependents, n.workflow_id;
END;
$function$;
