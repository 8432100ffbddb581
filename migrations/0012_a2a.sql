-- migrate_v11_to_v12: the A2A broker's tables.
-- Applied to a fresh database (user_version 0) or to a host-core database at
-- user_version 11, whose other tables are left as they are. Never edit this
-- file once released: add 0013_*.sql instead.
--
-- The schema is lean on purpose: every secondary index is paid for on every
-- task creation, so only the lookups the broker makes are indexed.

-- Registrations, for the audit view (tokens are never stored).
CREATE TABLE a2a_agents (
    context_id      TEXT NOT NULL,
    peer_id         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    delivery        TEXT NOT NULL,
    card            TEXT NOT NULL,   -- AgentCard JSON as stamped
    registered_at   TEXT NOT NULL,
    deregistered_at TEXT,
    PRIMARY KEY (context_id, peer_id)
) WITHOUT ROWID;

CREATE TABLE a2a_tasks (
    id                TEXT PRIMARY KEY,
    seq               INTEGER NOT NULL,  -- creation order (newest first listing, cursors)
    context_id        TEXT NOT NULL,     -- the requester's context
    requester_peer    TEXT NOT NULL,
    worker_ctx        TEXT NOT NULL,
    worker_peer       TEXT NOT NULL,
    state             TEXT NOT NULL,
    status            TEXT NOT NULL,     -- TaskStatus JSON
    version           INTEGER NOT NULL,
    create_message_id TEXT NOT NULL,     -- idempotency key of the creating send
    broadcast         INTEGER NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
) WITHOUT ROWID;
-- Idempotent creation lookup, and the requester's side of tasks.list.
CREATE INDEX a2a_tasks_requester ON a2a_tasks (context_id, requester_peer, create_message_id);
-- The worker's side of tasks.list, and deregistration.
CREATE INDEX a2a_tasks_worker ON a2a_tasks (worker_ctx, worker_peer);

CREATE TABLE a2a_messages (
    task_id    TEXT NOT NULL,
    message_id TEXT NOT NULL,
    pos        INTEGER NOT NULL,  -- place in the task's history
    from_peer  TEXT NOT NULL,
    body       TEXT NOT NULL,     -- Message JSON as stamped
    PRIMARY KEY (task_id, message_id)
) WITHOUT ROWID;

CREATE TABLE a2a_artifacts (
    task_id     TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    pos         INTEGER NOT NULL,
    body        TEXT NOT NULL,    -- Artifact JSON, appended chunks merged
    PRIMARY KEY (task_id, artifact_id)
) WITHOUT ROWID;

CREATE TABLE a2a_push_configs (
    task_id    TEXT NOT NULL,
    owner_ctx  TEXT NOT NULL,
    owner_peer TEXT NOT NULL,
    config     TEXT NOT NULL,     -- PushConfig JSON
    PRIMARY KEY (task_id, owner_ctx, owner_peer)
) WITHOUT ROWID;

-- Every change to a task, in order: the source of resubscribe replay and audit.
CREATE TABLE a2a_task_log (
    task_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    kind    TEXT NOT NULL,        -- status-update | artifact-update
    actor   TEXT NOT NULL,        -- peer id of the caller (or the broker)
    payload TEXT NOT NULL,        -- the event JSON
    at      TEXT NOT NULL,
    PRIMARY KEY (task_id, version)
) WITHOUT ROWID;
