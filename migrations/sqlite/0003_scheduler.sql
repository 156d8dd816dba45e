-- 0003_scheduler: the coordinator's task table and node liveness.
--
-- scheduled_tasks follows the db-scheduler layout. One row per task instance
-- (PK task_name, task_instance). A row is due when execution_time <= now and
-- picked is 0. Claiming sets picked, picked_by, last_heartbeat and
-- increments version, which is the claim's fencing token: every completion,
-- heartbeat and handler write made for a claim carries the version it got
-- and changes nothing once the version moved on (a rescue, a new claim).
--   rerun_at: set by an upsert that arrives while the row is picked. When
--             the running claim completes, the row is put back at rerun_at
--             instead of being deleted, so an event that landed during a
--             run is not lost; coalesced events stay one row.
-- Times are fixed-width UTC text like in 0001, so text order is time order.
CREATE TABLE scheduled_tasks (
    task_name            TEXT    NOT NULL,
    task_instance        TEXT    NOT NULL,
    task_data            BLOB,
    execution_time       TEXT    NOT NULL,
    picked               INTEGER NOT NULL DEFAULT 0,
    picked_by            TEXT,
    last_success         TEXT,
    last_failure         TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    last_heartbeat       TEXT,
    version              INTEGER NOT NULL DEFAULT 1,
    priority             INTEGER NOT NULL DEFAULT 0,
    rerun_at             TEXT,
    PRIMARY KEY (task_name, task_instance)
);

CREATE INDEX scheduled_tasks_due_idx
    ON scheduled_tasks (task_name, priority DESC, execution_time)
    WHERE picked = 0;

CREATE INDEX scheduled_tasks_picked_idx
    ON scheduled_tasks (last_heartbeat)
    WHERE picked = 1;

CREATE TABLE coordinator_node (
    node_id        TEXT NOT NULL PRIMARY KEY,
    started_at     TEXT NOT NULL,
    last_heartbeat TEXT NOT NULL
);
