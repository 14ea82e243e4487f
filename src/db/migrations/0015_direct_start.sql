-- The hot path, third pass: a task started in the statement that claims it.
-- (Filled in by the change that builds it.)
SELECT 1;
