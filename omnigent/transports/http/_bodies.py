"""The request bodies HTTP routes structure: sessions, events, hooks, grants, answers.

Each route structures its body into one of these frozen attrs classes with the strict
wire converter (:func:`~._params.structured_body`), so an unknown key or a wrong type
is a ``422`` naming the field before anything happens; the OpenAPI document describes
the same classes (:mod:`._openapi`), so what it says a route takes is what it takes.

Each route imports its class when it first reads a body, not its module: attrs compiles
every class's methods as it is made, and a server's first answer needs none of these
(``benchmarks/startup.py``, ``tests/test_serve_startup.py``), as with :mod:`._answers`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from ..._ids import RUNNER_ID_PATTERN
from ...core import MODEL_OVERRIDE_PATTERN, InitialItem, WirePolicyEvent
from ...model import wire_as, wire_schema
from ._access import EDIT, MANAGE, READ

__all__ = [
    "CodexRequestBody",
    "CreateSessionBody",
    "EventBody",
    "ForkSessionBody",
    "GrantBody",
    "PermissionRequestBody",
    "PolicyEvaluationBody",
    "ResolveBody",
    "UpdateSessionBody",
]

_NON_EMPTY = wire_schema({"minLength": 1})


# -- sessions and events -------------------------------------------------------------


_MODEL_OVERRIDE = wire_schema({"pattern": MODEL_OVERRIDE_PATTERN})
_RUNNER_ID = wire_schema({"pattern": f"^{RUNNER_ID_PATTERN}$"})


@attrs.frozen
class CreateSessionBody:
    """``POST /sessions``: the agent by id or by name (exactly one), and the options.

    The core checks ``model_override``, ``labels`` and ``initial_items`` (as
    :class:`~omnigent.core.InitialItem` entries) before anything is stored.
    """

    wire_exactly_one: ClassVar[tuple[str, ...]] = ("agent_id", "agent_name")

    agent_id: str | None = None
    agent_name: str | None = None
    title: str | None = None
    parent_session_id: str | None = None
    harness_override: str | None = None
    model_override: str | None = attrs.field(default=None, metadata=_MODEL_OVERRIDE)
    labels: dict[str, str] | None = None
    initial_items: list[Any] = attrs.field(factory=list, metadata=wire_as(list[InitialItem]))
    runner_id: str | None = attrs.field(default=None, metadata=_RUNNER_ID)


@attrs.frozen
class UpdateSessionBody:
    """``PATCH /sessions/{id}``: only the fields sent change; ``null`` clears one."""

    title: str | None = None
    labels: dict[str, str] | None = None
    model_override: str | None = attrs.field(default=None, metadata=_MODEL_OVERRIDE)


@attrs.frozen
class ForkSessionBody:
    """``POST /sessions/{id}/fork``: copy the history up to ``up_to_item_id`` (default all)."""

    up_to_item_id: str | None = None
    title: str | None = None


@attrs.frozen
class EventBody:
    """``POST /sessions/{id}/events``: ``data`` is checked by the core for ``type``.

    The document describes it per type, from :data:`~omnigent.core.EVENT_DATA`.
    """

    type: str
    data: Any = None


# -- elicitations and sharing --------------------------------------------------------


@attrs.frozen
class ResolveBody:
    """MCP's ``ElicitationResult``: ``{action, content?}`` (strict: no other keys)."""

    action: Literal["accept", "decline", "cancel"]
    content: Any = None


@attrs.frozen
class GrantBody:
    """``PUT …/permissions``: the core checks ``user_id`` and ``level`` (422 at each).

    ``__public__`` stands for everyone and takes read (1) only.
    """

    user_id: str = attrs.field(metadata=wire_schema({"minLength": 1, "maxLength": 320}))
    level: int = attrs.field(
        metadata=wire_schema(
            {"enum": [READ, EDIT, MANAGE], "description": "1 read, 2 edit, 3 manage"}
        )
    )


# -- hooks and policies --------------------------------------------------------------


@attrs.frozen
class PermissionRequestBody:
    """Claude Code's ``PermissionRequest`` hook input; the other keys it sends are ignored.

    Claude Code adds keys over time (``session_id``, ``transcript_path``, ``cwd``,
    ``permission_suggestions``, …), so the body is open: only these are read.
    """

    wire_open: ClassVar[bool] = True

    tool_name: str = attrs.field(metadata=_NON_EMPTY)
    tool_input: dict[str, Any]
    hook_event_name: Literal["PermissionRequest"] = "PermissionRequest"


@attrs.frozen
class CodexRequestBody:
    """A Codex app-server JSON-RPC request, forwarded as it came."""

    id: str | int
    method: str = attrs.field(metadata=_NON_EMPTY)
    params: dict[str, Any] = attrs.field(factory=dict)
    jsonrpc: Literal["2.0"] = "2.0"


@attrs.frozen
class PolicyEvaluationBody:
    """``{event}``: one tool call or result, in either spelling (``parse_policy_event``)."""

    event: dict[str, Any] = attrs.field(metadata=wire_as(WirePolicyEvent))
