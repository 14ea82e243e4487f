-- Adds the outcomes of dependencies that just turned terminal to each dependent's counters (p_keys, each
-- '<workflow id>:<node index>', of one workflow or many, with the parallel p_completed, p_failed and p_skipped)
-- and, with p_evaluate (the workflows run), applies the join rule of every dependent still PENDING: READY, SKIPPED
-- (with an UPSTREAM_SKIPPED error) or still PENDING.
--   all: decided when every dependency is terminal; SKIPPED if one failed or was skipped, unless allow_failed_deps;
--   any: READY at the first COMPLETED dependency; SKIPPED when all are terminal and none completed;
--   quorum: READY at min_success completions; SKIPPED as soon as they can no longer be reached.
-- Bumps of zero re-evaluate a node as it stands (resume, recovery). Returns each node bumped: its status, whether
-- this call moved it out of PENDING, its dependents, what it runs when it is not a task (subworkflow, wait_kind),
-- the input template of one that became READY, and its workflow. With p_enqueue, a task node that becomes READY is
-- made ENQUEUED at once, linked to the id of the task the caller inserts in the same transaction (a version 7
-- UUID, returned as task_id): one write of its row instead of two. The one text of the join rules: the
-- server-side step (horsies_workflow_step, which enqueues) and the step in TypeScript (WorkflowNodeEvaluate, which
-- does not) call it. The caller holds the workflows' row locks.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_evaluate(p_keys text[], p_completed integer[], p_failed integer[], p_skipped integer[], p_evaluate boolean, p_enqueue boolean)
 RETURNS TABLE(node_index integer, status character varying, changed boolean, dependents integer[], subworkflow character varying, wait_kind character varying, input_template jsonb, workflow_id character varying, task_id character varying)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH bump AS (
    SELECT * FROM unnest(p_keys, p_completed, p_failed, p_skipped) AS b(node_key, completed, failed, skipped)
  ), counted AS (
    SELECT n.node_key, n.workflow_id, n.node_index, n.status AS old_status, n.join_rule, n.min_success,
           n.allow_failed_deps, n.subworkflow IS NULL AND n.wait_kind IS NULL AS runs_task,
           cardinality(n.dependencies) AS total,
           n.deps_completed + b.completed AS c, n.deps_failed + b.failed AS f, n.deps_skipped + b.skipped AS s
    FROM bump b JOIN {{schema}}.horsies_workflow_tasks n ON n.node_key = b.node_key
  ), decided AS (
    SELECT k.*,
           CASE
             WHEN k.old_status <> 'PENDING' OR NOT p_evaluate THEN k.old_status
             WHEN k.join_rule = 'all' THEN
               CASE WHEN k.c + k.f + k.s < k.total THEN 'PENDING'
                    WHEN k.f + k.s > 0 AND NOT k.allow_failed_deps THEN 'SKIPPED'
                    ELSE 'READY' END
             WHEN k.join_rule = 'any' THEN
               CASE WHEN k.c >= 1 THEN 'READY' WHEN k.c + k.f + k.s = k.total THEN 'SKIPPED' ELSE 'PENDING' END
             ELSE
               CASE WHEN k.c >= k.min_success THEN 'READY'
                    WHEN k.total - k.f - k.s < k.min_success THEN 'SKIPPED'
                    ELSE 'PENDING' END
           END AS new_status
    FROM counted k
  ), linked AS (
    -- A version 7 UUID for each task node enqueued here: the time in ms, a counter, then random bits.
    SELECT d.*,
           CASE WHEN p_enqueue AND d.new_status = 'READY' AND d.old_status = 'PENDING' AND d.runs_task THEN
             substr(c.hex, 1, 8) || '-' || substr(c.hex, 9, 4) || '-7' || lpad(to_hex(d.k % 4096), 3, '0') || '-'
             || substr(d.rand, 17, 4) || '-' || substr(d.rand, 21, 12)
           END AS new_task_id
    FROM (SELECT e.*, row_number() OVER (ORDER BY e.workflow_id, e.node_index) AS k,
                 replace(gen_random_uuid()::text, '-', '') AS rand
          FROM decided e) d,
         (SELECT lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') AS hex) c
  )
  UPDATE {{schema}}.horsies_workflow_tasks n
  SET deps_completed = d.c, deps_failed = d.f, deps_skipped = d.s,
      status = CASE WHEN d.new_task_id IS NOT NULL THEN 'ENQUEUED' ELSE d.new_status END,
      task_id = coalesce(d.new_task_id, n.task_id),
      enqueued_at = CASE WHEN d.new_task_id IS NOT NULL THEN now() ELSE n.enqueued_at END,
      completed_at = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED' THEN now()
                          ELSE n.completed_at END,
      result = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED'
                    THEN jsonb_build_object('err', jsonb_build_object(
                      'code', 'UPSTREAM_SKIPPED', 'message', 'its dependencies did not meet its join rule'))
                    ELSE n.result END,
      error_code = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED' THEN 'UPSTREAM_SKIPPED'
                        ELSE n.error_code END,
      updated_at = now()
  FROM linked d
  WHERE n.node_key = d.node_key
  RETURNING n.node_index, n.status, n.status <> d.old_status, n.dependents, n.subworkflow, n.wait_kind,
            CASE WHEN n.status <> d.old_status AND n.status IN ('READY', 'ENQUEUED') THEN n.input_template END,
            n.workflow_id, d.new_task_id::varchar;
END;
$function$;
