-- 0004_policies: maintenance policies, their versioned content, and the
-- catalogs, namespaces and tables they are attached to.
--
-- policy: one row per policy. A policy covers one maintenance type, named by
-- policy_type in Gravitino's spelling (system_iceberg_compaction, …); the
-- store keeps it as text and the coordinator validates it.
--   current_version: the policy_version row in force. Altering a policy adds
--                    a version and moves this; old versions are never
--                    rewritten, so a job can name the content it ran with.
--   deleted_at:      deletion is soft: ledger rows keep their policy_id and
--                    the policy's versions stay readable. Deleting removes
--                    the policy's attachments, and the name becomes free
--                    (the unique index only covers live policies).
CREATE TABLE policy (
    id              bigserial   PRIMARY KEY,
    name            text        NOT NULL,
    comment         text        NOT NULL DEFAULT '',
    policy_type     text        NOT NULL,
    enabled         boolean     NOT NULL DEFAULT true,
    current_version integer     NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    deleted_at      timestamptz,
    -- Target of policy_attachment's (policy_id, policy_type) foreign key.
    CONSTRAINT policy_id_type_uq UNIQUE (id, policy_type)
);

CREATE UNIQUE INDEX policy_name_live_uq ON policy (name) WHERE deleted_at IS NULL;

-- policy_version: the content of each version of a policy, a JSON object
-- (Gravitino's content: schedule, minIntervalMs, jobOptions, rewriteOptions
-- and the type's thresholds).
CREATE TABLE policy_version (
    policy_id  bigint      NOT NULL REFERENCES policy (id),
    version    integer     NOT NULL,
    content    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (policy_id, version)
);

-- policy_attachment: a policy attached to a catalog, a namespace or a table.
-- Absent parts are '' (not NULL) so the unique constraint sees them.
--   namespace:   levels joined with '.'. A namespace attachment also covers
--                the namespaces below it ('db' covers 'db.sales').
--   policy_type: the policy's type, held consistent by the composite foreign
--                key, so that the unique constraint allows one policy of
--                each type per object and "the nearest attachment wins" has
--                exactly one winner per table and type.
CREATE TABLE policy_attachment (
    policy_id    bigint      NOT NULL,
    policy_type  text        NOT NULL,
    object_level text        NOT NULL,
    catalog      text        NOT NULL,
    namespace    text        NOT NULL DEFAULT '',
    table_name   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (policy_id, catalog, namespace, table_name),
    CONSTRAINT policy_attachment_policy_fk FOREIGN KEY (policy_id, policy_type) REFERENCES policy (id, policy_type),
    CONSTRAINT policy_attachment_level_ck CHECK (
        catalog <> '' AND (
            (object_level = 'catalog' AND namespace = '' AND table_name = '') OR
            (object_level = 'namespace' AND namespace <> '' AND table_name = '') OR
            (object_level = 'table' AND namespace <> '' AND table_name <> ''))),
    CONSTRAINT policy_attachment_type_object_uq UNIQUE (policy_type, catalog, namespace, table_name)
);

-- Attachments by object, for resolving a table's effective policies.
CREATE INDEX policy_attachment_object_idx ON policy_attachment (catalog, namespace, table_name);
