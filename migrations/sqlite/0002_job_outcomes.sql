-- 0002_job_outcomes: per-type outcomes of a job row.
--   outcomes: a JSON array (text) written by the runner when it finishes the
--             row, one object per maintenance type in chain order:
--             {type, outcome, reason, error, before_snapshot_id,
--              after_snapshot_id, duration_ms}. NULL until the row is
--             finished, and for rows closed by anyone but the runner.
ALTER TABLE table_maintenance_job ADD COLUMN outcomes TEXT CHECK (outcomes IS NULL OR json_valid(outcomes));
