"""Rows the stores hand back.

Stores speak in plain rows (JSON-ready dicts for specs, items and events); the core
turns them into typed objects. That keeps SQL out of the core and typed models out of
the stores, so a PostgreSQL store can slot in behind the same methods.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = [
    "WORK_OPEN",
    "WORK_TERMINAL",
    "AgentRow",
    "FileRow",
    "Page",
    "PendingItem",
    "ProcessGroupRow",
    "RunningTask",
    "SessionRow",
    "StoredEvent",
    "WorkRow",
]


@attrs.frozen
class AgentRow:
    id: str
    name: str
    owner: str
    version: int
    spec: dict[str, Any]
    created_at: float
    updated_at: float


@attrs.frozen
class SessionRow:
    id: str
    agent_id: str
    agent_version: int
    owner: str
    title: str | None
    parent_session_id: str | None
    root_session_id: str
    harness_override: str | None
    model_override: str | None
    labels: dict[str, str]
    status: str
    last_event_id: int
    turn_count: int
    created_at: float
    # The directory the session's client works in (absolute), if it named one.
    cwd: str | None = None
    # When the session last saw activity: its newest event (else its creation).
    updated_at: float = 0.0
    # The path of the sub-agent it runs inside its agent's spec (``researcher``, or
    # ``lead/researcher`` for a sub-agent's own sub-agent); ``None``: the agent itself.
    sub_agent: str | None = None
    # The runner its work runs on (a name, ``docs/runners.md``); ``None``: this server.
    runner_id: str | None = None


@attrs.frozen
class TurnStart:
    """A turn counted by :meth:`~omnigent.stores.Store.begin_turn`: its zero-based
    ``number``, and the session's ``row`` with its agent's ``latest_version`` (``None``:
    the agent is gone) as they stand once it is counted — what a turn's start reads,
    in the same write."""

    number: int
    row: SessionRow
    latest_version: int | None


@attrs.frozen
class StoredEvent:
    """One event as persisted: its place in the log and its wire form.

    ``data`` is the wire form already encoded as JSON text: the bus encodes an event
    when it is published (so a payload that cannot be encoded is refused to its
    publisher, never found by the writer). ``status`` is the ``status`` of a
    ``session.status`` event (the store keeps each session's latest), else ``None``;
    ``created_at`` the event's own (the session's ``updated_at``).
    """

    session_id: str
    event_id: int
    type: str
    data: str
    status: str | None = None
    created_at: float = 0.0


@attrs.frozen
class PendingItem:
    """A user message stored but not yet taken by any turn (see ``Store.put_items``)."""

    session_id: str
    item: dict[str, Any]


@attrs.frozen
class RunningTask:
    """A background tool task that was running (recorded until its inbox item is written)."""

    session_id: str
    handle_id: str
    tool: str


@attrs.frozen
class ProcessGroupRow:
    """A process group a tool started: its id and its leader's start time.

    ``start_time`` is the leader's start in clock ticks since boot (``/proc/PID/stat``
    field 22) and ``boot_id`` the kernel's boot id: together they tell the group
    apart from a later process that reuses the pid.
    """

    pgid: int
    start_time: int
    boot_id: str
    session_id: str | None


@attrs.frozen
class FileRow:
    id: str
    filename: str
    content_type: str
    bytes: int
    owner: str
    created_at: float


@attrs.frozen
class Page:
    """A slice of a listing; ``has_more`` says whether the next slice is non-empty."""

    rows: list[Any]
    has_more: bool


WORK_OPEN = ("launching", "running")
WORK_TERMINAL = ("completed", "failed", "cancelled")


@attrs.frozen
class WorkRow:
    """One dispatch of work to a child session, from its send to its delivery.

    ``status`` is ``launching`` (sent, not yet taken by a turn of the child),
    ``running`` (taken), or terminal: ``completed``, ``failed``, ``cancelled`` — set
    once, together with the parent's inbox item (see ``Store.finish_work``).
    """

    work_id: str
    parent_session_id: str
    child_session_id: str
    agent: str
    title: str
    message_id: str | None
    status: str
    output: str | None
    created_at: float
    finished_at: float | None = None
