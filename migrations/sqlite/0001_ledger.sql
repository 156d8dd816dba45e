-- 0001_ledger: the maintenance ledger (tables, job rows, per-snapshot metrics)
-- and the schema version table. Applied in one transaction together with its
-- version row; see package migrations.
--
-- Times are TEXT in UTC with a fixed width, 'YYYY-MM-DDTHH:MM:SS.ffffffZ', so
-- they sort as text the way they sort as times. The defaults below produce
-- the same width (SQLite gives milliseconds; '000' pads to microseconds).

CREATE TABLE IF NOT EXISTS tms_schema_migration (
    version    INTEGER NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')
);

-- maintained_table: the Iceberg tables TMS knows. A table that is dropped and
-- recreated under the same name gets a new table_uuid and therefore a new row;
-- the newest row (highest id) is the live one.
CREATE TABLE maintained_table (
    id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    catalog    TEXT    NOT NULL,
    namespace  TEXT    NOT NULL, -- namespace levels joined with '.'
    name       TEXT    NOT NULL,
    table_uuid TEXT    NOT NULL, -- Iceberg table-uuid
    created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    CONSTRAINT maintained_table_identity_uq UNIQUE (catalog, namespace, name, table_uuid)
);

-- table_maintenance_job: one row per maintenance run.
--   policy_id: 0 means "no policy" (manual and replay runs).
--   types:     the chain in order, comma-separated (compaction,manifest-rewrite).
--   status:    pending (created) -> running -> one terminal status:
--              succeeded, failed, skipped, cancelled, lost. Validated by the
--              store, not by a CHECK, so a new status needs no table rebuild.
--   fence:     fencing token; every runner/reconciler write carries it and a
--              stale one changes nothing.
--   finished_at IS NULL means in flight; at most one in-flight row per
--   (table_id, policy_id), enforced by the partial unique index below.
CREATE TABLE table_maintenance_job (
    id                 INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    job_id             TEXT,
    table_id           INTEGER NOT NULL REFERENCES maintained_table (id),
    policy_id          INTEGER NOT NULL,
    types              TEXT    NOT NULL,
    "trigger"          TEXT    NOT NULL CHECK ("trigger" IN ('cron', 'commit', 'manual')),
    status             TEXT    NOT NULL DEFAULT 'pending',
    fence              INTEGER NOT NULL DEFAULT 1,
    before_snapshot_id INTEGER,
    after_snapshot_id  INTEGER,
    error              TEXT,
    spec               TEXT CHECK (spec IS NULL OR json_valid(spec)),
    created_at         TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    started_at         TEXT,
    finished_at        TEXT
);

CREATE UNIQUE INDEX table_maintenance_job_inflight_uq
    ON table_maintenance_job (table_id, policy_id)
    WHERE finished_at IS NULL;

CREATE INDEX table_maintenance_job_table_idx
    ON table_maintenance_job (table_id, id);

CREATE INDEX table_maintenance_job_finished_idx
    ON table_maintenance_job (table_id, policy_id, finished_at);

-- table_snapshot_metrics: the sampler's metrics of one table at one snapshot,
-- as seen by one policy (0 = no policy). metrics_value is a JSON object (text).
CREATE TABLE table_snapshot_metrics (
    table_id      INTEGER NOT NULL REFERENCES maintained_table (id),
    policy_id     INTEGER NOT NULL,
    snapshot_id   INTEGER NOT NULL,
    metrics_value TEXT    NOT NULL CHECK (json_valid(metrics_value)),
    recorded_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'),
    CONSTRAINT table_snapshot_metrics_uq UNIQUE (table_id, policy_id, snapshot_id)
);
