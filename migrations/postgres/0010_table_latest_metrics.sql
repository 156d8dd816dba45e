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
    table_id               bigint           PRIMARY KEY REFERENCES maintained_table (id),
    policy_id              bigint           NOT NULL,
    snapshot_id            bigint           NOT NULL,
    metrics_value          jsonb            NOT NULL,
    recorded_at            timestamptz      NOT NULL,
    data_file_number       double precision,
    small_file_number      double precision,
    data_file_mse          double precision,
    delete_file_number     double precision,
    manifest_number        double precision,
    snapshot_number        double precision,
    oldest_snapshot_age_ms double precision
);

INSERT INTO table_latest_metrics (table_id, policy_id, snapshot_id, metrics_value, recorded_at,
    data_file_number, small_file_number, data_file_mse, delete_file_number, manifest_number, snapshot_number, oldest_snapshot_age_ms)
SELECT m.table_id, m.policy_id, m.snapshot_id, m.metrics_value, m.recorded_at,
    CASE WHEN jsonb_typeof(m.metrics_value -> 'data-file-number') = 'number' THEN (m.metrics_value -> 'data-file-number')::double precision END,
    CASE WHEN jsonb_typeof(m.metrics_value -> 'small-file-number') = 'number' THEN (m.metrics_value -> 'small-file-number')::double precision END,
    CASE WHEN jsonb_typeof(m.metrics_value -> 'data-file-mse') = 'number' THEN (m.metrics_value -> 'data-file-mse')::double precision END,
    CASE WHEN jsonb_typeof(m.metrics_value -> 'delete-file-number') = 'number' THEN (m.metrics_value -> 'delete-file-number')::double precision END,
    CASE WHEN jsonb_typeof(m.metrics_value -> 'manifest-number') = 'number' THEN (m.metrics_value -> 'manifest-number')::double precision END,
    CASE WHEN jsonb_typeof(m.metrics_value -> 'snapshot-number') = 'number' THEN (m.metrics_value -> 'snapshot-number')::double precision END,
    CASE WHEN jsonb_typeof(m.metrics_value -> 'oldest-snapshot-age-ms') = 'number' THEN (m.metrics_value -> 'oldest-snapshot-age-ms')::double precision END
FROM maintained_table t
CROSS JOIN LATERAL (
    SELECT s.table_id, s.policy_id, s.snapshot_id, s.metrics_value, s.recorded_at
    FROM table_snapshot_metrics s WHERE s.table_id = t.id
    ORDER BY s.recorded_at DESC, s.policy_id DESC, s.snapshot_id DESC
    LIMIT 1
) m;

-- The tables page shows each table's newest job of every maintenance type:
-- the newest row of each (table, types) of the page's tables, where types is
-- the chain (compaction,manifest-rewrite), found in this index alone.
CREATE INDEX table_maintenance_job_types_idx ON table_maintenance_job (table_id, types, id);

-- The tables page puts first the tables whose last job failed or was lost.
-- Starting from these rows (few: most jobs succeed, and PurgeJobs bounds the
-- history) it finds those tables without probing every table's newest row.
CREATE INDEX table_maintenance_job_failed_idx ON table_maintenance_job (table_id, id) WHERE status IN ('failed', 'lost');
