-- 0010_table_latest_metrics: each table's latest metrics in a row of its own,
-- and job rows by type and by failure, for the console's tables page.
--
-- table_latest_metrics: one row per table, a copy of the table's newest
-- table_snapshot_metrics row, newest by (recorded_at, policy_id,
-- snapshot_id) as ListSnapshotMetrics orders them. The console's tables page
-- sorts all tables by their current health on every request; finding each
-- table's newest row among 1,000,000 metrics rows would be an index probe per
-- table, here it is one row per table to scan. UpsertSnapshotMetrics keeps
-- it current in the transaction that writes the metrics row; here it is
-- filled from the rows already there, each table's newest found through
-- table_snapshot_metrics_by_time (0009).
--   data_file_number … oldest_snapshot_age_ms: the metrics of metrics_value
--   the page sorts by, as numbers (NULL when absent or not a number), so a
--   sort does not read 10,000 JSON objects; the store fills them with the
--   same rule (store.latestMetricColumns).
CREATE TABLE table_latest_metrics (
    table_id               INTEGER NOT NULL PRIMARY KEY REFERENCES maintained_table (id),
    policy_id              INTEGER NOT NULL,
    snapshot_id            INTEGER NOT NULL,
    metrics_value          TEXT    NOT NULL CHECK (json_valid(metrics_value)),
    recorded_at            TEXT    NOT NULL,
    data_file_number       REAL,
    small_file_number      REAL,
    data_file_mse          REAL,
    delete_file_number     REAL,
    manifest_number        REAL,
    snapshot_number        REAL,
    oldest_snapshot_age_ms REAL
);

INSERT INTO table_latest_metrics (table_id, policy_id, snapshot_id, metrics_value, recorded_at,
    data_file_number, small_file_number, data_file_mse, delete_file_number, manifest_number, snapshot_number, oldest_snapshot_age_ms)
SELECT m.table_id, m.policy_id, m.snapshot_id, m.metrics_value, m.recorded_at,
    CASE WHEN json_type(m.metrics_value, '$."data-file-number"') IN ('integer', 'real') THEN json_extract(m.metrics_value, '$."data-file-number"') END,
    CASE WHEN json_type(m.metrics_value, '$."small-file-number"') IN ('integer', 'real') THEN json_extract(m.metrics_value, '$."small-file-number"') END,
    CASE WHEN json_type(m.metrics_value, '$."data-file-mse"') IN ('integer', 'real') THEN json_extract(m.metrics_value, '$."data-file-mse"') END,
    CASE WHEN json_type(m.metrics_value, '$."delete-file-number"') IN ('integer', 'real') THEN json_extract(m.metrics_value, '$."delete-file-number"') END,
    CASE WHEN json_type(m.metrics_value, '$."manifest-number"') IN ('integer', 'real') THEN json_extract(m.metrics_value, '$."manifest-number"') END,
    CASE WHEN json_type(m.metrics_value, '$."snapshot-number"') IN ('integer', 'real') THEN json_extract(m.metrics_value, '$."snapshot-number"') END,
    CASE WHEN json_type(m.metrics_value, '$."oldest-snapshot-age-ms"') IN ('integer', 'real') THEN json_extract(m.metrics_value, '$."oldest-snapshot-age-ms"') END
FROM maintained_table t
JOIN table_snapshot_metrics m ON m.rowid = (
    SELECT s.rowid FROM table_snapshot_metrics s WHERE s.table_id = t.id
    ORDER BY s.recorded_at DESC, s.policy_id DESC, s.snapshot_id DESC
    LIMIT 1
);

-- The tables page shows each table's newest job of every maintenance type:
-- the newest row of each (table, types) of the page's tables, where types is
-- the chain (compaction,manifest-rewrite), found in this index alone.
CREATE INDEX table_maintenance_job_types_idx ON table_maintenance_job (table_id, types, id);

-- The tables page puts first the tables whose last job failed or was lost.
-- Starting from these rows (few: most jobs succeed, and PurgeJobs bounds the
-- history) it finds those tables without probing every table's newest row.
CREATE INDEX table_maintenance_job_failed_idx ON table_maintenance_job (table_id, id) WHERE status IN ('failed', 'lost');
