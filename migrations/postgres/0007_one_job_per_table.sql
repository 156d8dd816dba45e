-- 0007_one_job_per_table: one in-flight job per table, the node that
-- submitted each job, and tasks that wait for a table to be free.
--
-- table_maintenance_job.node: the coordinator node that created the row
-- (NULL for rows made before this migration and for manual and replay runs).
-- A row whose node is dead (its coordinator_node heartbeat older than the
-- dead-node limit, or its row gone) and whose job the submitter cannot vouch
-- for is closed lost by the reconciler, so its table is not blocked.
ALTER TABLE table_maintenance_job ADD COLUMN node text;

-- At most one in-flight row per table, whatever its policy, trigger or
-- types. Rows that already overlap are closed first: all but the oldest
-- in-flight row of a table become lost with their fence bumped, so a runner
-- still working on one is fenced out at its next ledger write.
UPDATE table_maintenance_job j
SET status = 'lost', fence = j.fence + 1, finished_at = now(),
    error = 'migration 0007: closed as a second in-flight job of its table (one job in flight per table from now on)'
FROM (
    SELECT id, row_number() OVER (PARTITION BY table_id ORDER BY id) AS rn
    FROM table_maintenance_job WHERE finished_at IS NULL
) r
WHERE j.id = r.id AND r.rn > 1;

DROP INDEX table_maintenance_job_inflight_uq;

CREATE UNIQUE INDEX table_maintenance_job_table_inflight_uq
    ON table_maintenance_job (table_id)
    WHERE finished_at IS NULL;

-- scheduled_tasks.wait_for: what a rescheduled row waits for, e.g.
-- 'table:42' for a job deferred because table 42 had a job in flight.
-- Finishing that table's job row makes such rows due at once (and notifies
-- the nodes), so a deferred job starts as soon as its table is free rather
-- than at its fallback due time.
ALTER TABLE scheduled_tasks ADD COLUMN wait_for text;

CREATE INDEX scheduled_tasks_wait_idx
    ON scheduled_tasks (wait_for)
    WHERE wait_for IS NOT NULL;

-- coordinator_node.catalogs: the catalog names the node is configured with,
-- comma-separated; serve sets it at start. Policy attachments to a catalog
-- no live node has are refused or reported.
ALTER TABLE coordinator_node ADD COLUMN catalogs text;
