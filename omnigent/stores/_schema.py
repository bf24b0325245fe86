"""The SQLite schema, as an ordered list of migrations.

``PRAGMA user_version`` records how many migrations a database has had; opening a
store applies the missing ones in one transaction each. Never edit a migration that
has shipped: append a new one.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_V1 = """
CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    latest_version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE agent_versions (
    agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    spec TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (agent_id, version)
) WITHOUT ROWID;
CREATE TABLE sessions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
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
    last_event_id INTEGER NOT NULL DEFAULT 0,
    turn_count INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX sessions_parent ON sessions(parent_session_id);
CREATE INDEX sessions_agent ON sessions(agent_id);
CREATE TABLE items (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX items_session ON items(session_id, seq);
CREATE TABLE events (
    session_id TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, event_id)
) WITHOUT ROWID;
CREATE TABLE files (
    id TEXT PRIMARY KEY,
    filename TEXT NOT NULL,
    content_type TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    owner TEXT NOT NULL,
    content BLOB NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    data TEXT NOT NULL,
    delivered INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX inbox_session ON inbox(session_id, delivered, seq);
CREATE TABLE elicitations (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    request TEXT NOT NULL,
    action TEXT,
    created_at REAL NOT NULL,
    resolved_at REAL
);
CREATE INDEX elicitations_session ON elicitations(session_id, status);
CREATE TABLE permissions (
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    level INTEGER NOT NULL,
    PRIMARY KEY (session_id, user_id)
) WITHOUT ROWID;
"""

# Sessions remember the directory their client works in (ACP's ``cwd``) and when they
# last saw activity (the time of their newest event).
_V2 = """
ALTER TABLE sessions ADD COLUMN cwd TEXT;
ALTER TABLE sessions ADD COLUMN updated_at REAL;
UPDATE sessions SET updated_at = created_at;
CREATE INDEX sessions_cwd ON sessions(cwd);
"""

# Harness state: what a harness keeps on a session across restarts (a native coding
# agent's conversation id).
_V3 = """
CREATE TABLE harness_state (
    session_id TEXT NOT NULL,
    harness TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (session_id, harness, key)
) WITHOUT ROWID;
"""

# Sub-agents: a child session may run one of its agent's sub-agents (``sub_agent``, a
# path into the spec), and each dispatch of work to a child is a row until, in one
# transaction, it is finished and its result written to the parent's inbox.
_SUBAGENTS = """
ALTER TABLE sessions ADD COLUMN sub_agent TEXT;
CREATE TABLE subagent_work (
    work_id TEXT PRIMARY KEY,
    parent_session_id TEXT NOT NULL,
    child_session_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    title TEXT NOT NULL,
    message_id TEXT,
    status TEXT NOT NULL,
    output TEXT,
    created_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX subagent_work_parent ON subagent_work(parent_session_id, status);
CREATE INDEX subagent_work_child ON subagent_work(child_session_id, status);
"""

# What a process that dies (``kill -9``) leaves behind, so the next start can finish it:
# messages no turn has taken yet (``items.pending``), background tasks that were
# running, and the process groups its tools started (with the leader's start time, so
# a recycled pid is never signalled).
_CRASH_RECOVERY = """
ALTER TABLE items ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;
CREATE INDEX items_pending ON items(pending) WHERE pending = 1;
CREATE TABLE running_tasks (
    handle_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    started_at REAL NOT NULL
);
CREATE TABLE process_groups (
    pgid INTEGER NOT NULL,
    start_time INTEGER NOT NULL,
    boot_id TEXT NOT NULL,
    session_id TEXT,
    started_at REAL NOT NULL,
    PRIMARY KEY (pgid, start_time)
) WITHOUT ROWID;
"""

# Which turn took a buffered message (its response id; "" when a stop dropped it), so a
# server that does not run the session's turns can tell which turn answers it.
_TAKEN_BY = """
ALTER TABLE items ADD COLUMN taken_by TEXT;
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

MIGRATIONS: tuple[str, ...] = (
    _V1,
    _V2,
    _V3,
    _SUBAGENTS,
    _CRASH_RECOVERY,
    _TAKEN_BY,
    _USAGE,
    _RUNNERS,
)
