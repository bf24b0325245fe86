"""The PostgreSQL schema, as an ordered list of migrations.

``omnigent_migrations`` records which migrations a database has had. Opening a store
applies the missing ones, each in its own transaction, under a transaction-level
advisory lock (``pg_advisory_xact_lock``) so that servers starting together never
apply one twice. Never edit a migration that has shipped: append a new one.

The tables mirror the SQLite store's (same columns, same meaning), plus what several
servers on one database need: ``servers`` (who is alive), ``leases`` (which server owns
which session tree, until when) and ``commands`` (requests addressed to the owner).
Times a server compares with another's are the database's (``now()``), never a local
clock; ``created_at`` columns are Unix seconds as elsewhere.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "MIGRATION_LOCK"]

#: The advisory lock key migrations take (any constant; "omnigent" in ASCII).
MIGRATION_LOCK = 0x6F6D6E6967656E74

_V1 = """
CREATE TABLE agents (
    seq BIGSERIAL NOT NULL UNIQUE,
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    latest_version INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE agent_versions (
    agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    spec TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (agent_id, version)
);
CREATE TABLE sessions (
    seq BIGSERIAL NOT NULL UNIQUE,
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    agent_version INTEGER NOT NULL,
    owner TEXT NOT NULL,
    title TEXT,
    parent_session_id TEXT,
    root_session_id TEXT NOT NULL,
    harness_override TEXT,
    model_override TEXT,
    labels TEXT NOT NULL DEFAULT '{}',
    status TEXT NOT NULL DEFAULT 'idle',
    last_event_id BIGINT NOT NULL DEFAULT 0,
    turn_count INTEGER NOT NULL DEFAULT 0,
    turn_token TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    cwd TEXT,
    updated_at DOUBLE PRECISION,
    sub_agent TEXT
);
CREATE INDEX sessions_parent ON sessions(parent_session_id);
CREATE INDEX sessions_cwd ON sessions(cwd);
CREATE INDEX sessions_agent ON sessions(agent_id);
CREATE INDEX sessions_root ON sessions(root_session_id);
CREATE INDEX sessions_unfinished ON sessions(status)
    WHERE status IN ('launching', 'running', 'waiting');
CREATE TABLE items (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    pending BOOLEAN NOT NULL DEFAULT FALSE,
    taken_by TEXT
);
CREATE INDEX items_session ON items(session_id, seq);
CREATE INDEX items_pending ON items(session_id) WHERE pending;
CREATE TABLE events (
    session_id TEXT NOT NULL,
    event_id BIGINT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, event_id)
);
CREATE TABLE files (
    id TEXT PRIMARY KEY,
    filename TEXT NOT NULL,
    content_type TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    owner TEXT NOT NULL,
    content BYTEA NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE inbox (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    data TEXT NOT NULL,
    delivered BOOLEAN NOT NULL DEFAULT FALSE,
    drain_token TEXT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX inbox_session ON inbox(session_id, delivered, seq);
CREATE TABLE elicitations (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    request TEXT NOT NULL,
    action TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    resolved_at DOUBLE PRECISION
);
CREATE INDEX elicitations_session ON elicitations(session_id, status);
CREATE TABLE permissions (
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    level INTEGER NOT NULL,
    PRIMARY KEY (session_id, user_id)
);
CREATE TABLE harness_state (
    session_id TEXT NOT NULL,
    harness TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (session_id, harness, key)
);
CREATE TABLE subagent_work (
    seq BIGSERIAL NOT NULL UNIQUE,
    work_id TEXT PRIMARY KEY,
    parent_session_id TEXT NOT NULL,
    child_session_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    title TEXT NOT NULL,
    message_id TEXT,
    status TEXT NOT NULL,
    output TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION
);
CREATE INDEX subagent_work_parent ON subagent_work(parent_session_id, status);
CREATE INDEX subagent_work_child ON subagent_work(child_session_id, status);
CREATE TABLE running_tasks (
    handle_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX running_tasks_session ON running_tasks(session_id);
CREATE TABLE process_groups (
    pgid INTEGER NOT NULL,
    start_time BIGINT NOT NULL,
    boot_id TEXT NOT NULL,
    session_id TEXT,
    started_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (pgid, start_time)
);
CREATE INDEX process_groups_session ON process_groups(session_id);
CREATE TABLE servers (
    name TEXT PRIMARY KEY,
    instance TEXT NOT NULL UNIQUE,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE leases (
    root_id TEXT PRIMARY KEY,
    instance TEXT NOT NULL,
    server TEXT NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    taken_from TEXT
);
CREATE INDEX leases_instance ON leases(instance);
CREATE INDEX leases_expiry ON leases(expires_at);
CREATE TABLE commands (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    target TEXT NOT NULL,
    sender TEXT NOT NULL,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    reply_to TEXT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX commands_target ON commands(target, seq);
"""

# What each session and each session tree used of its models (omnigent/stores/_sql_usage.py).
_USAGE = """
CREATE TABLE session_usage (
    session_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cached_input_tokens BIGINT NOT NULL DEFAULT 0,
    model_calls BIGINT NOT NULL DEFAULT 0,
    context_tokens BIGINT NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION,
    PRIMARY KEY (session_id, scope)
);
"""

# The runner a session's work runs on (docs/runners.md), by name; children inherit it.
_RUNNERS = """
ALTER TABLE sessions ADD COLUMN runner_id TEXT;
CREATE INDEX sessions_runner ON sessions(runner_id) WHERE runner_id IS NOT NULL;
"""

# Which server each runner is connected to (live while that server's heartbeat is).
_RUNNER_LINKS = """
CREATE TABLE runner_links (
    runner_id TEXT PRIMARY KEY,
    instance TEXT NOT NULL,
    server TEXT NOT NULL,
    connected_at DOUBLE PRECISION NOT NULL
);
"""

MIGRATIONS: tuple[str, ...] = (_V1, _USAGE, _RUNNERS, _RUNNER_LINKS)
