-- 0001_ledger: the maintenance ledger (tables, job rows, per-snapshot metrics)
-- and the schema version table. Applied in one transaction together with its
-- version row; see package migrations.

CREATE TABLE IF NOT EXISTS tms_schema_migration (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- maintained_table: the Iceberg tables TMS knows. A table that is dropped and
-- recreated under the same name gets a new table_uuid and therefore a new row;
-- the newest row (highest id) is the live one.
CREATE TABLE maintained_table (
    id         bigserial   PRIMARY KEY,
    catalog    text        NOT NULL,
    namespace  text        NOT NULL, -- namespace levels joined with '.'
    name       text        NOT NULL,
    table_uuid text        NOT NULL, -- Iceberg table-uuid
    created_at timestamptz NOT NULL DEFAULT now(),
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
    id                 bigserial   PRIMARY KEY,
    job_id             text,
    table_id           bigint      NOT NULL REFERENCES maintained_table (id),
    policy_id          bigint      NOT NULL,
    types              text        NOT NULL,
    "trigger"          text        NOT NULL CHECK ("trigger" IN ('cron', 'commit', 'manual')),
    status             text        NOT NULL DEFAULT 'pending',
    fence              bigint      NOT NULL DEFAULT 1,
    before_snapshot_id bigint,
    after_snapshot_id  bigint,
    error              text,
    spec               jsonb,
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    finished_at        timestamptz
);

CREATE UNIQUE INDEX table_maintenance_job_inflight_uq
    ON table_maintenance_job (table_id, policy_id)
    WHERE finished_at IS NULL;

CREATE INDEX table_maintenance_job_table_idx
    ON table_maintenance_job (table_id, id);

CREATE INDEX table_maintenance_job_finished_idx
    ON table_maintenance_job (table_id, policy_id, finished_at);

-- table_snapshot_metrics: the sampler's metrics of one table at one snapshot,
-- as seen by one policy (0 = no policy). metrics_value is a JSON object.
CREATE TABLE table_snapshot_metrics (
    table_id      bigint      NOT NULL REFERENCES maintained_table (id),
    policy_id     bigint      NOT NULL,
    snapshot_id   bigint      NOT NULL,
    metrics_value jsonb       NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT table_snapshot_metrics_uq UNIQUE (table_id, policy_id, snapshot_id)
);
