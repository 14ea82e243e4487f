-- Flow control, send side: deduplication and debounce keys, and the group key a task may carry.
-- (Filled in by the change that builds them.)
SELECT 1;
