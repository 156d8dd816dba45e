-- 0009_metrics_by_time: a table's metrics rows in time order.
--
-- ListSnapshotMetrics reads a table's rows ORDER BY recorded_at, policy_id,
-- snapshot_id (the console's table page, status, /v1). With only the
-- (table_id, policy_id, snapshot_id) unique index, a table with 10,000
-- samples was sorted on every read (on PostgreSQL, spilling to disk: 43 ms);
-- this index returns them in order (4 ms).
CREATE INDEX table_snapshot_metrics_by_time ON table_snapshot_metrics (table_id, recorded_at, policy_id, snapshot_id);
