-- The server-side step takes the workflows of a batch together, statement by statement, instead of one after the
-- other (horsies_workflow_step.sql).
--
-- The join rules (horsies_workflow_evaluate) now name their nodes by key ('<workflow id>:<node index>'), so that
-- one call applies them in many workflows, and with p_enqueue write a task node that becomes READY as ENQUEUED at
-- once, linked to the task the step inserts. Their function of a workflow id and node indexes is dropped here; the
-- same migrate creates the new one from its file. The settle and the join rules return each node's workflow. Both
-- are unreleased: only the step and the step in TypeScript call them.

DROP FUNCTION IF EXISTS {{schema}}.horsies_workflow_evaluate(
  text, integer[], integer[], integer[], integer[], boolean);
