-- 0005_commit_events: idempotency keys of received commit events.
--
-- commit_event: one row per commit event the coordinator accepted (POST
-- /v1/commit-events, and any other ingress that carries an event id). A
-- repeated event_id is recognised by the primary key and ignored, so a
-- catalog that retries a delivery does not enqueue twice. The row is written
-- in the same transaction as the table's commit-job, so an event is never
-- marked seen without its job. Rows are purged by age (received_at).
--   table_id:    the maintained_table row the event resolved to.
--   snapshot_id: the snapshot the commit produced, NULL if the sender did
--                not say.
CREATE TABLE commit_event (
    event_id    text        PRIMARY KEY,
    table_id    bigint      NOT NULL,
    snapshot_id bigint,
    received_at timestamptz NOT NULL DEFAULT now()
);

-- Purging by age.
CREATE INDEX commit_event_received_idx ON commit_event (received_at);
