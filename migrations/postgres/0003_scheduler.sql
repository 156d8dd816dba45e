-- 0003_scheduler: the coordinator's task table and node liveness.
--
-- scheduled_tasks follows the db-scheduler layout. One row per task instance
-- (PK task_name, task_instance). A row is due when execution_time <= now and
-- picked is false. Claiming sets picked, picked_by, last_heartbeat and
-- increments version, which is the claim's fencing token: every completion,
-- heartbeat and handler write made for a claim carries the version it got
-- and changes nothing once the version moved on (a rescue, a new claim).
--   rerun_at: set by an upsert that arrives while the row is picked. When
--             the running claim completes, the row is put back at rerun_at
--             instead of being deleted, so an event that landed during a
--             run is not lost; coalesced events stay one row.
CREATE TABLE scheduled_tasks (
    task_name            text        NOT NULL,
    task_instance        text        NOT NULL,
    task_data            bytea,
    execution_time       timestamptz NOT NULL,
    picked               boolean     NOT NULL DEFAULT false,
    picked_by            text,
    last_success         timestamptz,
    last_failure         timestamptz,
    consecutive_failures integer     NOT NULL DEFAULT 0,
    last_heartbeat       timestamptz,
    version              bigint      NOT NULL DEFAULT 1,
    priority             integer     NOT NULL DEFAULT 0,
    rerun_at             timestamptz,
    PRIMARY KEY (task_name, task_instance)
);

-- Due rows of one kind in claim order (priority first, then due time, as
-- db-scheduler orders them); the partial index keeps picked rows out of it.
-- A claim scans it once per kind of the pool, so it never sorts the table.
CREATE INDEX scheduled_tasks_due_idx
    ON scheduled_tasks (task_name, priority DESC, execution_time)
    WHERE NOT picked;

-- Picked rows by heartbeat, for the rescuer.
CREATE INDEX scheduled_tasks_picked_idx
    ON scheduled_tasks (last_heartbeat)
    WHERE picked;

-- coordinator_node: one row per running coordinator process.
CREATE TABLE coordinator_node (
    node_id        text        PRIMARY KEY,
    started_at     timestamptz NOT NULL,
    last_heartbeat timestamptz NOT NULL
);
