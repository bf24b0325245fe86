"""The bodies HTTP routes answer with that the core does not build: lists, deletions,
lookups and the answers coding-agent hooks expect.

Each route builds its answer from one of these frozen attrs classes (or a core record)
and sends ``to_dict()``, and the OpenAPI document describes the same classes
(:mod:`._openapi`), so what the document says a route answers is what it answers.
Field names are the wire's, camelCase included where a foreign protocol sets them
(Claude Code's hook answer).

Each route imports its classes when it first answers, not its module: attrs compiles
every class's methods as it is made, and these eighteen were ≈ 5 ms of ``omnigent
serve``'s start, for routes most servers answer later or never
(``benchmarks/startup.py``, ``tests/test_serve_startup.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from ...core import Agent, Grant, Resource, ServerInfo
from ...model import ChildSessionSummary, unstructure

__all__ = [
    "AgentList",
    "AgentSpecAnswer",
    "ChildSessionList",
    "ClaudeDecision",
    "ClaudeHookAnswer",
    "ClaudeHookOutput",
    "CodexDecision",
    "GrantList",
    "GrantRevoked",
    "PendingElicitation",
    "PolicyVerdict",
    "ResolvedElicitation",
    "ResourceList",
    "RunnerInfo",
    "RunnerList",
    "RunnerStatus",
    "ServerList",
    "SessionDeleted",
]


class _Answer:
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = unstructure(self)
        return out


@attrs.frozen
class ServerList(_Answer):
    """The live servers sharing the database (one process on SQLite)."""

    data: tuple[ServerInfo, ...]
    object: Literal["list"] = "list"


@attrs.frozen
class RunnerInfo(_Answer):
    """One runner: whether it is connected now, since when, and its sessions.

    ``connected_at`` is when its link to this server began (``null`` when offline);
    ``sessions`` counts the sessions bound to it that the caller may read.
    """

    runner_id: str
    online: bool
    connected_at: float | None
    sessions: int


@attrs.frozen
class RunnerList(_Answer):
    """The runners connected here, and every runner a session is bound to."""

    data: tuple[RunnerInfo, ...]
    object: Literal["list"] = "list"


@attrs.frozen
class RunnerStatus(_Answer):
    """The original omnigent's runner status: ``{"runner_id": "r1", "online": true}``."""

    runner_id: str
    online: bool


@attrs.frozen
class AgentList(_Answer):
    """Every registered agent (its latest version)."""

    data: tuple[Agent, ...]
    object: Literal["list"] = "list"


@attrs.frozen
class AgentSpecAnswer(_Answer):
    """``GET /v1/agents/{id}/spec``: one version's spec, secrets redacted.

    ``spec`` is the spec's dict form (``AgentSpec.to_dict``) with every value of an
    ``env`` mapping, and of a key naming a key, token, secret or password, replaced by
    ``"<redacted>"``: every caller may read an agent, not the credentials it runs with.
    """

    agent_id: str
    version: int
    spec: dict[str, Any]
    object: Literal["agent.spec"] = "agent.spec"


@attrs.frozen
class ChildSessionList(_Answer):
    """A session's children, as the parent lists them."""

    data: tuple[ChildSessionSummary, ...]
    object: Literal["list"] = "list"


@attrs.frozen
class ResourceList(_Answer):
    """A session's live resources (running terminals)."""

    data: tuple[Resource, ...]
    object: Literal["list"] = "list"


@attrs.frozen
class GrantList(_Answer):
    """A session's owners and grants."""

    data: tuple[Grant, ...]
    object: Literal["list"] = "list"


@attrs.frozen
class SessionDeleted(_Answer):
    """The session and its descendants are gone."""

    id: str
    object: Literal["session.deleted"] = "session.deleted"
    deleted: Literal[True] = True


@attrs.frozen
class GrantRevoked(_Answer):
    """``deleted`` is false when the user held no grant (a retried revoke is harmless)."""

    user_id: str
    deleted: bool


@attrs.frozen
class PendingElicitation(_Answer):
    """A pending elicitation as this session sees it.

    ``target_session_id`` (the session to resolve it under) is set when a descendant
    owns it; ``content_preview`` is a short text of what is being approved.
    """

    wire_keeps_none: ClassVar[frozenset[str]] = frozenset({"policy_name"})

    status: Literal["pending"]
    elicitation_id: str
    message: str
    phase: str
    policy_name: str | None
    requested_schema: dict[str, Any] | None = None
    content_preview: str | None = None
    target_session_id: str | None = None


@attrs.frozen
class ResolvedElicitation(_Answer):
    """Answered, withdrawn, unknown or not visible from this session: all look alike."""

    status: Literal["resolved"]
    elicitation_id: str


@attrs.frozen
class ClaudeDecision:
    """Allow (with ``updatedInput`` for an answered ``AskUserQuestion``) or deny."""

    behavior: Literal["allow", "deny"]
    updatedInput: dict[str, Any] | None = None
    message: str | None = None


@attrs.frozen
class ClaudeHookOutput:
    hookEventName: Literal["PermissionRequest"]
    decision: ClaudeDecision


@attrs.frozen
class ClaudeHookAnswer(_Answer):
    """Claude Code's ``PermissionRequest`` hook answer."""

    hookSpecificOutput: ClaudeHookOutput


@attrs.frozen
class CodexDecision(_Answer):
    """The answer to a Codex app-server approval request."""

    decision: Literal["accept", "decline"]


@attrs.frozen
class PolicyVerdict(_Answer):
    """The session's policies on one tool call or result (an ASK was answered first).

    ``data`` is the replacement output at ``PHASE_TOOL_RESULT`` (or what the deciding
    function policy returned).
    """

    result: Literal["POLICY_ACTION_ALLOW", "POLICY_ACTION_DENY", "POLICY_ACTION_UNSPECIFIED"]
    reason: str | None = None
    data: Any = None
