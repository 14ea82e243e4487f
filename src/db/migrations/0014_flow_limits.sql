-- Flow control, claim side: rate limiters and per-group limits.
-- (Filled in by the change that builds them.)
SELECT 1;
