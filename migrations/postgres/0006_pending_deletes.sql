-- 0006_pending_deletes: deletion plans of snapshot expiry.
--
-- pending_delete: one row per file a runner is about to delete because the
-- snapshots that referenced it were expired. The runner records the plan
-- (fenced by its job row) before it commits the expiry and removes each row
-- once the file is gone; a runner that dies in between leaves the rows, and
-- the next run of the table deletes what is still unreferenced by every
-- snapshot, branch and tag, and drops the rest.
--   table_id:   the maintained_table row.
--   path:       the file, spelled as the table metadata spelled it.
--   job_id:     the job row that planned it.
CREATE TABLE pending_delete (
    table_id   bigint      NOT NULL,
    path       text        NOT NULL,
    job_id     bigint      NOT NULL,
    planned_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, path)
);
