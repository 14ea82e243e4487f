-- Workflow steps that start their ready nodes (eager dispatch).
--
-- The server-side step (horsies_workflow_step) takes the free slots of the worker that runs it, as a new last
-- argument with a default, and returns the tasks it started for that worker in a new column. Its four-argument
-- function is dropped here, so that a call resolves to the one new function, which the same migrate creates from
-- its file. A worker of an earlier version calls it with four arguments and reads its columns by name, so it keeps
-- stepping (never eagerly) until it is replaced.

DROP FUNCTION IF EXISTS {{schema}}.horsies_workflow_step(text[], integer[], text, boolean);
