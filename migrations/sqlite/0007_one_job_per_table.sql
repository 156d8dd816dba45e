-- 0007_one_job_per_table: one in-flight job per table, the node that
-- submitted each job, and tasks that wait for a table to be free. See the
-- PostgreSQL file of the same number for the column meanings.
ALTER TABLE table_maintenance_job ADD COLUMN node TEXT;

-- All but the oldest in-flight row of a table become lost, fence bumped.
UPDATE table_maintenance_job
SET status = 'lost', fence = fence + 1,
    finished_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z',
    error = 'migration 0007: closed as a second in-flight job of its table (one job in flight per table from now on)'
WHERE finished_at IS NULL
  AND id > (SELECT min(o.id) FROM table_maintenance_job o
            WHERE o.table_id = table_maintenance_job.table_id AND o.finished_at IS NULL);

DROP INDEX table_maintenance_job_inflight_uq;

CREATE UNIQUE INDEX table_maintenance_job_table_inflight_uq
    ON table_maintenance_job (table_id)
    WHERE finished_at IS NULL;

ALTER TABLE scheduled_tasks ADD COLUMN wait_for TEXT;

CREATE INDEX scheduled_tasks_wait_idx
    ON scheduled_tasks (wait_for)
    WHERE wait_for IS NOT NULL;

-- coordinator_node.catalogs: the catalog names the node is configured with,
-- comma-separated; serve sets it at start. Policy attachments to a catalog
-- no live node has are refused or reported.
ALTER TABLE coordinator_node ADD COLUMN catalogs TEXT;
