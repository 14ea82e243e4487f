-- Adds the outcomes of dependencies that just turned terminal to each dependent's counters (p_keys, each
-- '<workflow id>:<node index>', of one workflow or many, with the parallel p_completed, p_failed and p_skipped)
-- and, with p_evaluate (the workflows run), applies the join rule of every dependent still PENDING: READY, SKIPPED
-- (with an UPSTREAM_SKIPPED error) or still PENDING.
--   all: decided when every dependency is terminal; SKIPPED if one failed or was skipped, unless allow_failed_deps;
--   any: READY at the first COMPLETED dependency; SKIPPED when all are terminal and none completed;
--   quorum: READY at min_success completions; SKIPPED as soon as they can no longer be reached.
-- Bumps of zero re-evaluate a node as it stands (resume, recovery). Returns each node bumped: its status, whether
-- this call moved it out of PENDING, its dependents, what it runs when it is not a task (subworkflow, wait_kind),
-- the input template of one that became READY, and its workflow. The one text of the join rules: the server-side
-- step (horsies_workflow_step) and the step in TypeScript (WorkflowNodeEvaluate) call it. The caller holds the
-- workflows' row locks.
CREATE OR REPLACE FUNCTION {{schema}}.horsies_workflow_evaluate(p_keys text[], p_completed integer[], p_failed integer[], p_skipped integer[], p_evaluate boolean)
 RETURNS TABLE(node_index integer, status character varying, changed boolean, dependents integer[], subworkflow character varying, wait_kind character varying, input_template jsonb, workflow_id character varying)
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
    SELECT n.node_key, n.node_index, n.status AS old_status, n.join_rule, n.min_success, n.allow_failed_deps,
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
  )
  UPDATE {{schema}}.horsies_workflow_tasks n
  SET deps_completed = d.c, deps_failed = d.f, deps_skipped = d.s, status = d.new_status,
      completed_at = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED' THEN now()
                          ELSE n.completed_at END,
      result = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED'
                    THEN jsonb_build_object('err', jsonb_build_object(
                      'code', 'UPSTREAM_SKIPPED', 'message', 'its dependencies did not meet its join rule'))
                    ELSE n.result END,
      error_code = CASE WHEN d.new_status = 'SKIPPED' AND d.old_status <> 'SKIPPED' THEN 'UPSTREAM_SKIPPED'
                        ELSE n.error_code END,
      updated_at = now()
  FROM decided d
  WHERE n.node_key = d.node_key
  RETURNING n.node_index, n.status, n.status <> d.old_status, n.dependents, n.subworkflow, n.wait_kind,
            CASE WHEN n.status = 'READY' AND d.old_status <> 'READY' THEN n.input_template END, n.workflow_id;
END;
$function$;
