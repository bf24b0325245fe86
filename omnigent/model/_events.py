"""Session events: what the core publishes, persists and replays.

Every event has ``type`` (a class constant), ``event_id`` (per-session, increasing,
assigned by the bus when published), ``session_id`` and ``created_at``. A harness or
the core builds an event without those three; the bus stamps them with
:meth:`Event.stamped` as it sequences the event. ``to_dict()`` is the wire form,
``event_from_dict()`` its inverse (used for replay from the store), and ``to_json()``
the wire form as compact JSON text, encoded once per event and kept: the bus encodes
every event it publishes (for the store), and every subscriber's transport writes that
same text, so 200 SSE subscribers cost one encoding, not 200.
"""

from __future__ import annotations

import json
import math
import os
from json.encoder import encode_basestring_ascii as _quote
from typing import Any, ClassVar, Literal

import attrs

from ._items import Item
from ._statuses import SessionStatus, TaskStatus, TurnStatus
from ._usage import Usage
from ._wire import register_tagged_union, structure, wire_converter

__all__ = [
    "EVENT_CLASSES",
    "TERMINAL_STATUSES",
    "ChangedFilesInvalidated",
    "ChildSessionSummary",
    "ChildSessionUpdated",
    "ElicitationParams",
    "ElicitationRequest",
    "ElicitationResolved",
    "ErrorInfo",
    "Event",
    "InboxUpdated",
    "OutputItemDone",
    "OutputTextDelta",
    "ResourceCreated",
    "ResourceDeleted",
    "ResponseCancelled",
    "ResponseCompleted",
    "ResponseCreated",
    "ResponseFailed",
    "ResponseInfo",
    "SessionStatusChanged",
    "elicitation_params",
    "event_from_dict",
]

# Strict (no NaN) and compact; one encoder object, as json.dumps(**options) builds a new
# one on every call.
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode

TERMINAL_STATUSES: frozenset[SessionStatus] = frozenset(s for s in SessionStatus if s.terminal)
"""The statuses a turn ends with: ``idle``, ``failed``, ``cancelled``."""


@attrs.frozen
class ErrorInfo:
    """Why a turn or response failed: a message for people, a code for programs, and
    — for an unexpected failure told by a fixed sentence — the ``type`` (class name)
    of what failed."""

    message: str
    code: str = "error"
    type: str | None = None


@attrs.frozen
class ResponseInfo:
    """The response (one turn's output) an event belongs to.

    ``usage`` is set on a turn's terminal event (``response.completed``, ``.failed``,
    ``.cancelled``) when its harness reported any: the sum of the turn's model calls.
    """

    id: str
    status: TurnStatus = attrs.field(converter=TurnStatus)
    usage: Usage | None = None


@attrs.frozen(kw_only=True)
class _EventBase:
    """What every event has: its place in a session's log, and its wire form."""

    type: ClassVar[str]
    event_id: int = 0
    session_id: str = ""
    created_at: float = 0.0
    # to_json()'s text, once computed: a cache, not part of the value (no init, no
    # eq, no hash, not on the wire; a stamped copy starts without it).
    _json: str | None = attrs.field(
        default=None, init=False, eq=False, hash=False, repr=False, kw_only=True
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``{"type": ..., "event_id": ..., ...}``."""
        out: dict[str, Any] = wire_converter().unstructure(self, unstructure_as=Event)
        return out

    def to_json(self) -> str:
        """The wire form as compact, strict JSON text; encoded on the first call only.

        Raises:
            ValueError: a payload value JSON cannot carry (``NaN``, infinity), or a
                circular one. TypeError: a value that is not JSON (a ``datetime``).
        """
        text = self._json
        if text is None:
            text = _ENCODE(self.to_dict())
            object.__setattr__(self, "_json", text)  # frozen: a cache, set once
        return text

    def stamped(self, *, session_id: str, event_id: int, created_at: float) -> Any:
        """A copy carrying its place in the session's event log."""
        return attrs.evolve(
            self,
            session_id=session_id,
            event_id=event_id,
            created_at=created_at,
        )


@attrs.frozen(kw_only=True)
class SessionStatusChanged(_EventBase):
    """The session's state changed; a turn ends with exactly one terminal status."""

    type: ClassVar[str] = "session.status"
    status: SessionStatus = attrs.field(converter=SessionStatus)
    error: ErrorInfo | None = None


@attrs.frozen(kw_only=True)
class ResponseCreated(_EventBase):
    type: ClassVar[str] = "response.created"
    response: ResponseInfo


@attrs.frozen(kw_only=True)
class OutputTextDelta(_EventBase):
    """A piece of streamed assistant text. Deliberately lean: it is the hot path."""

    type: ClassVar[str] = "response.output_text.delta"
    response_id: str
    item_id: str
    delta: str

    def stamped(self, *, session_id: str, event_id: int, created_at: float) -> Any:
        # The hot path: a direct construction is several times cheaper than evolve().
        return OutputTextDelta(
            response_id=self.response_id,
            item_id=self.item_id,
            delta=self.delta,
            event_id=event_id,
            session_id=session_id,
            created_at=created_at,
        )

    def to_json(self) -> str:
        # The hot path, formatted directly: the very text the generic encoder makes
        # of to_dict() (same keys, order, escaping; tests compare the two).
        text = self._json
        if text is None:
            at = self.created_at
            plain = (
                type(self.response_id) is str
                and type(self.item_id) is str
                and type(self.delta) is str
                and type(self.session_id) is str
                and type(self.event_id) is int
                and (type(at) is int or (type(at) is float and math.isfinite(at)))
            )
            if not plain:
                return super().to_json()  # the generic encoder (and its errors)
            text = (
                '{"type":"response.output_text.delta","response_id":'
                f"{_quote(self.response_id)},"
                f'"item_id":{_quote(self.item_id)},"delta":{_quote(self.delta)},'
                f'"event_id":{int.__repr__(self.event_id)},'
                f'"session_id":{_quote(self.session_id)},'
                f'"created_at":{at!r}}}'
            )
            object.__setattr__(self, "_json", text)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "response_id": self.response_id,
            "item_id": self.item_id,
            "delta": self.delta,
            "event_id": self.event_id,
            "session_id": self.session_id,
            "created_at": self.created_at,
        }


@attrs.frozen(kw_only=True)
class OutputItemDone(_EventBase):
    """An item is complete (and persisted)."""

    type: ClassVar[str] = "response.output_item.done"
    item: Item
    response_id: str | None = None


@attrs.frozen(kw_only=True)
class ResponseCompleted(_EventBase):
    type: ClassVar[str] = "response.completed"
    response: ResponseInfo


@attrs.frozen(kw_only=True)
class ResponseFailed(_EventBase):
    type: ClassVar[str] = "response.failed"
    response: ResponseInfo
    error: ErrorInfo


@attrs.frozen(kw_only=True)
class ResponseCancelled(_EventBase):
    type: ClassVar[str] = "response.cancelled"
    response: ResponseInfo


@attrs.frozen(kw_only=True)
class ElicitationParams:
    """What an elicitation asks, in MCP's vocabulary (``requestedSchema`` on the wire)."""

    mode: Literal["form", "url"]
    message: str
    phase: str
    requestedSchema: dict[str, Any] | None = None
    url: str | None = None
    policy_name: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    command: str | None = None
    ask_user_question: dict[str, Any] | None = None
    target_session_id: str | None = None


def elicitation_params(message: str, phase: str, **fields: Any) -> ElicitationParams:
    """Params for a request; ``mode``/``url`` follow ``$OMNIGENT_ELICITATION_MODE``.

    ``url`` (the default) points a person at the approval page; ``form`` carries a
    ``requestedSchema`` for clients that render the question themselves.
    """
    mode = os.environ.get("OMNIGENT_ELICITATION_MODE", "url")
    if mode not in ("url", "form"):
        mode = "url"
    return ElicitationParams(
        mode=mode,  # type: ignore[arg-type]
        message=message,
        phase=phase,
        **fields,
    )


@attrs.frozen(kw_only=True)
class ElicitationRequest(_EventBase):
    type: ClassVar[str] = "response.elicitation_request"
    elicitation_id: str
    params: ElicitationParams


@attrs.frozen(kw_only=True)
class ElicitationResolved(_EventBase):
    type: ClassVar[str] = "response.elicitation_resolved"
    elicitation_id: str
    action: Literal["accept", "decline", "cancel", "expired"] | None = None
    content: Any = None
    target_session_id: str | None = None


@attrs.frozen(kw_only=True)
class ChildSessionSummary:
    """A child session as its parent lists it (its ``null`` fields shown)."""

    wire_keeps_none: ClassVar[bool] = True

    id: str
    title: str | None
    agent: str
    session_name: str | None
    status: SessionStatus
    busy: bool
    # The child's work: ``launching`` while work sent to it waits for a turn to take
    # it, ``in_progress`` while it runs, then how its last turn ended; ``None`` before
    # its first.
    current_task_status: TaskStatus | None = None
    # The sub-agent's name (the original omnigent's field; the same as ``agent``).
    tool: str | None = None
    preview: str | None = None
    labels: dict[str, str] = attrs.Factory(dict)


@attrs.frozen(kw_only=True)
class ChildSessionUpdated(_EventBase):
    type: ClassVar[str] = "session.child_session.updated"
    child: ChildSessionSummary


@attrs.frozen(kw_only=True)
class InboxUpdated(_EventBase):
    type: ClassVar[str] = "session.inbox.updated"
    count: int


@attrs.frozen(kw_only=True)
class ResourceCreated(_EventBase):
    type: ClassVar[str] = "session.resource.created"
    resource: dict[str, Any]


@attrs.frozen(kw_only=True)
class ResourceDeleted(_EventBase):
    type: ClassVar[str] = "session.resource.deleted"
    resource_id: str
    resource_type: str


@attrs.frozen(kw_only=True)
class ChangedFilesInvalidated(_EventBase):
    """Files in an environment changed: a client should refetch its file view."""

    type: ClassVar[str] = "session.changed_files.invalidated"
    environment_id: str = "default"


@attrs.frozen(kw_only=True)
class SessionInfoUpdated(_EventBase):
    """The session's title, labels or model override changed (the new values).

    Published on the session itself whoever changed it (``PATCH``, a client's first
    prompt naming it, ACP's config options), so every client watching shows it live.
    """

    type: ClassVar[str] = "session.info.updated"
    title: str | None = None
    labels: dict[str, str] = attrs.Factory(dict)
    model_override: str | None = None


@attrs.frozen(kw_only=True)
class ToolTaskUpdated(_EventBase):
    """A held tool call kept as a durable task changed: ``working``, then its end.

    Kept tool calls are MCP's tasks (``POST /v1/sessions/{id}/mcp``): the log is where
    a task is found again, by ``call_id``, after its request — or its server — is gone.
    ``output`` is the call's output once ``completed``.
    """

    type: ClassVar[str] = "session.tool_task.updated"
    call_id: str
    name: str
    status: Literal["working", "completed", "cancelled"]
    started_at: float
    output: str | None = None


Event = (
    SessionStatusChanged
    | ResponseCreated
    | OutputTextDelta
    | OutputItemDone
    | ResponseCompleted
    | ResponseFailed
    | ResponseCancelled
    | ElicitationRequest
    | ElicitationResolved
    | ChildSessionUpdated
    | InboxUpdated
    | ResourceCreated
    | ResourceDeleted
    | ChangedFilesInvalidated
    | SessionInfoUpdated
    | ToolTaskUpdated
)

EVENT_CLASSES: dict[str, type[Any]] = {
    c.type: c
    for c in (
        SessionStatusChanged,
        ResponseCreated,
        OutputTextDelta,
        OutputItemDone,
        ResponseCompleted,
        ResponseFailed,
        ResponseCancelled,
        ElicitationRequest,
        ElicitationResolved,
        ChildSessionUpdated,
        InboxUpdated,
        ResourceCreated,
        ResourceDeleted,
        ChangedFilesInvalidated,
        SessionInfoUpdated,
        ToolTaskUpdated,
    )
}

register_tagged_union(Event, EVENT_CLASSES, what="event type")


def event_from_dict(data: Any) -> Event:
    """Rebuild a typed event from its wire form.

    Raises:
        InvalidInput: naming the offending field.
    """
    event: Event = structure(data, Event)
    return event
