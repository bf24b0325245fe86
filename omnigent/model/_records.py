"""What the runtime answers with: agents, session snapshots, pages, files.

These are frozen views, built from store rows; ``to_dict()`` is the wire form the
HTTP transport sends (``null`` fields included, as the snapshot contract lists them).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from ._events import ElicitationRequest
from ._items import Item
from ._statuses import SessionStatus
from ._usage import Usage
from ._wire import unstructure

__all__ = [
    "Agent",
    "ElicitationHeld",
    "ElicitationInfo",
    "EventAccepted",
    "EventAnswer",
    "FileInfo",
    "Health",
    "ItemPage",
    "MessageAccepted",
    "ResolveResult",
    "Resource",
    "ResourceScreen",
    "ServerInfo",
    "SessionPage",
    "SessionSnapshot",
]


class _Wire:
    wire_keeps_none: ClassVar[bool] = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = unstructure(self)
        return out


@attrs.frozen
class Agent(_Wire):
    """An agent (its latest version, or the version a session runs)."""

    id: str
    name: str
    version: int
    description: str
    harness: str
    model: str | None
    created_at: float
    object: Literal["agent"] = "agent"


@attrs.frozen
class Resource(_Wire):
    """A live resource of a session; today, a terminal.

    For a terminal, ``id`` is ``terminal_<name>_<session key>`` and ``metadata`` is
    ``{terminal_name, session_key, running}`` (the original omnigent's names).
    """

    id: str
    type: str
    metadata: dict[str, Any]


@attrs.frozen
class ResourceScreen(_Wire):
    """What a terminal resource shows: its ``screen`` text (the newest part if long)."""

    id: str
    type: str
    screen: str
    scrollback_lines: int
    truncated: bool


@attrs.frozen
class SessionSnapshot(_Wire):
    """A session as a client sees it at one moment."""

    id: str
    agent_id: str
    agent_name: str
    title: str | None
    status: SessionStatus
    harness: str
    model: str | None
    harness_override: str | None
    model_override: str | None
    parent_session_id: str | None
    root_session_id: str
    labels: dict[str, str]
    busy: bool
    pending_elicitations: tuple[ElicitationRequest, ...]
    last_event_id: int
    created_at: float
    resources: tuple[Resource, ...] = ()
    cwd: str | None = None
    updated_at: float = 0.0
    # What its model calls used: the session's own turns, and the session's with every
    # session below it (``docs/observability.md``).
    usage: Usage = attrs.field(factory=Usage)
    tree_usage: Usage = attrs.field(factory=Usage)
    runner_id: str | None = None
    object: Literal["session"] = "session"

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["pending_elicitations"] = [e.to_dict() for e in self.pending_elicitations]
        out["resources"] = [r.to_dict() for r in self.resources]
        out["usage"] = self.usage.to_dict()
        out["tree_usage"] = self.tree_usage.to_dict()
        return out


@attrs.frozen
class SessionPage(_Wire):
    data: tuple[SessionSnapshot, ...]
    has_more: bool
    object: Literal["list"] = "list"

    def to_dict(self) -> dict[str, Any]:
        return {
            "object": self.object,
            "data": [s.to_dict() for s in self.data],
            "has_more": self.has_more,
        }


@attrs.frozen
class ItemPage(_Wire):
    data: tuple[Item, ...]
    first_id: str | None
    last_id: str | None
    has_more: bool
    object: Literal["list"] = "list"

    def to_dict(self) -> dict[str, Any]:
        return {
            "object": self.object,
            "data": [unstructure(i, Item) for i in self.data],
            "first_id": self.first_id,
            "last_id": self.last_id,
            "has_more": self.has_more,
        }


@attrs.frozen
class MessageAccepted(_Wire):
    """The answer to a message: handled by a new turn, or buffered for the running one."""

    status: Literal["accepted", "buffered"]
    item_id: str


@attrs.frozen
class EventAccepted(_Wire):
    """The answer to an ``interrupt`` or ``stop_session`` event."""

    status: Literal["accepted"] = "accepted"


@attrs.frozen
class ElicitationHeld(_Wire):
    """The answer to an ``mcp_elicitation`` event: the elicitation now pending."""

    elicitation_id: str


@attrs.frozen
class ResolveResult(_Wire):
    """The answer to resolving an elicitation: false if this session did not hold it."""

    resolved: bool


EventAnswer = MessageAccepted | ResolveResult | ElicitationHeld | EventAccepted
"""What :meth:`~omnigent.Runtime.post_event` answers, by event type: a message's
:class:`MessageAccepted`, an approval's :class:`ResolveResult`, an ``mcp_elicitation``'s
:class:`ElicitationHeld`, else :class:`EventAccepted` (``to_dict()`` is the HTTP body)."""


@attrs.frozen
class FileInfo(_Wire):
    id: str
    filename: str
    content_type: str
    bytes: int
    created_at: float
    object: Literal["file"] = "file"


@attrs.frozen
class ElicitationInfo:
    """An elicitation as one session sees it (:meth:`Runtime.get_elicitation`).

    Attributes:
        status: ``pending``, ``resolved``, ``expired`` (withdrawn unanswered), or
            ``unknown`` (no such elicitation, or not shown on this session).
        request: while pending, the request exactly as this session's stream showed
            it (a descendant's carries ``params.target_session_id``).
        action: how it was answered (``accept`` / ``decline`` / ``cancel``), once
            resolved.
    """

    elicitation_id: str
    status: Literal["pending", "resolved", "expired", "unknown"]
    request: ElicitationRequest | None = None
    action: str | None = None


@attrs.frozen
class ServerInfo(_Wire):
    """A live server on the runtime's database (``GET /v1/servers``).

    ``sessions`` counts the sessions whose live work it runs right now. A database one
    process owns (SQLite) lists that process alone.
    """

    id: str
    started_at: float
    sessions: int


@attrs.frozen
class Health(_Wire):
    """``GET /health``: whether this server can serve, and on what store."""

    status: Literal["ok", "unavailable"]
    server_id: str
    store: str

    def to_dict(self) -> dict[str, Any]:
        """The wire form, written out: a readiness probe's answer does not wait for the
        wire converter (cattrs is imported on its first use; issue 32)."""
        return {"status": self.status, "server_id": self.server_id, "store": self.store}
