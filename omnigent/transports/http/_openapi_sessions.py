"""The OpenAPI document's operations on a session's events, sharing, elicitations and
hooks (the rest, and the document itself, are in :mod:`._openapi`)."""

from __future__ import annotations

from typing import Any

from ...core import (
    ElicitationHeld,
    EventAccepted,
    Grant,
    MessageAccepted,
    ResolveResult,
)
from ._answers import (
    ClaudeHookAnswer,
    CodexDecision,
    GrantList,
    GrantRevoked,
    PendingElicitation,
    PolicyVerdict,
    ResolvedElicitation,
)
from ._bodies import (
    CodexRequestBody,
    GrantBody,
    PermissionRequestBody,
    PolicyEvaluationBody,
    ResolveBody,
)
from ._openapi_kit import (
    ELICITATION_ID,
    HTML,
    JSONRPC,
    SESSION_ID,
    WAITS,
    DocumentBuilder,
    path_param,
    query_param,
)

__all__ = ["session_operations"]


def session_operations(doc: DocumentBuilder) -> dict[str, Any]:
    """Events in and out, sharing, elicitations, the approval page, hooks and MCP."""
    return {**_events(doc), **_sharing(doc), **_elicitations(doc), **_hooks(doc)}


def _events(doc: DocumentBuilder) -> dict[str, Any]:
    accepted = doc.any_of(MessageAccepted, ResolveResult, ElicitationHeld, EventAccepted)
    return {
        "/v1/sessions/{session_id}/events": {
            "post": {
                "summary": "Post an event: a message, an interrupt, an approval…",
                "description": (
                    "`type` is message, interrupt, stop_session, approval or "
                    "mcp_elicitation; `data` is described per type."
                ),
                "parameters": [
                    *SESSION_ID,
                    query_param(
                        "stream", {"type": "boolean"}, "stream the turn answering a message"
                    ),
                ],
                "requestBody": doc.event_body(),
                "responses": {
                    **doc.answer("202", "accepted", accepted),
                    **doc.events("the turn's events (stream=true)"),
                    # 409: the session already buffers 100 messages for its turn.
                    **doc.errors("403", "404", "409", "422", "503"),
                },
            }
        },
        "/v1/sessions/{session_id}/stream": {
            "get": {
                "summary": "The session's events as SSE: replay after a point, then live",
                "parameters": [
                    *SESSION_ID,
                    query_param(
                        "after", {"type": "integer", "minimum": 0}, "replay events after this id"
                    ),
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "schema": {"type": "integer", "minimum": 0},
                        "description": "wins over ?after (EventSource reconnects)",
                    },
                ],
                "responses": {**doc.events("event stream"), **doc.errors("404", "422")},
            }
        },
    }


def _sharing(doc: DocumentBuilder) -> dict[str, Any]:
    return {
        "/v1/sessions/{session_id}/permissions": {
            "get": {
                "summary": "The session's owner and grants (needs read)",
                "parameters": SESSION_ID,
                "responses": {**doc.answer("200", "grants", GrantList), **doc.errors("404")},
            },
            "put": {
                "summary": "Grant a user a level, replacing an earlier grant (needs manage)",
                "parameters": SESSION_ID,
                "requestBody": doc.body(GrantBody),
                "responses": {
                    **doc.answer("200", "the grant", Grant),
                    **doc.errors("403", "404", "409", "422"),
                },
            },
        },
        "/v1/sessions/{session_id}/permissions/{user_id}": {
            "delete": {
                "summary": "Revoke a user's grant (needs manage); deleted: false if there was none",
                "parameters": [*SESSION_ID, path_param("user_id")],
                "responses": {
                    **doc.answer("200", "revoked", GrantRevoked),
                    **doc.errors("403", "404", "409"),
                },
            }
        },
    }


def _elicitations(doc: DocumentBuilder) -> dict[str, Any]:
    return {
        "/v1/sessions/{session_id}/elicitations/{elicitation_id}/resolve": {
            "post": {
                "summary": "Answer an elicitation owned by this session (needs edit)",
                "parameters": ELICITATION_ID,
                "requestBody": doc.body(ResolveBody),
                "responses": {
                    **doc.answer(
                        "202", "resolved: false if this session does not own it", ResolveResult
                    ),
                    **doc.errors("403", "404", "422"),
                },
            }
        },
        "/v1/sessions/{session_id}/elicitations/{elicitation_id}": {
            "get": {
                "summary": "A pending elicitation of this session or a descendant; else resolved",
                "parameters": ELICITATION_ID,
                "responses": {
                    **doc.answer(
                        "200", "elicitation", doc.any_of(PendingElicitation, ResolvedElicitation)
                    ),
                    **doc.errors("404"),
                },
            }
        },
        "/approve/{session_id}/{elicitation_id}": {
            "get": {
                "summary": "An HTML page showing the request, with an Accept/Decline form",
                "parameters": ELICITATION_ID,
                "responses": {
                    "200": {"description": "the page", **HTML},
                    **doc.errors("401", "404"),
                },
            },
            "post": {
                "summary": (
                    "Answer from the page's form (fields 'action' and the page's 'token'; "
                    "needs edit; only from this server's own origin)"
                ),
                "parameters": ELICITATION_ID,
                "requestBody": {
                    "required": True,
                    "content": {media: {"schema": _FORM} for media in _FORM_TYPES},
                },
                "responses": {
                    "200": {"description": "the outcome page", **HTML},
                    **doc.errors("401", "403", "404", "422"),
                },
            },
        },
    }


_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# The page's own fields; an accepted form's answers (q0, q0_other, …) come with them.
_FORM = {
    "type": "object",
    "required": ["token", "action"],
    "properties": {
        "token": {"type": "string"},
        "action": {"enum": ["accept", "decline", "cancel"]},
    },
}


def _hooks(doc: DocumentBuilder) -> dict[str, Any]:
    return {
        "/v1/sessions/{session_id}/hooks/permission-request": {
            "post": {
                "summary": "Claude Code's PermissionRequest hook (needs edit)." + WAITS,
                "parameters": SESSION_ID,
                "requestBody": doc.body(PermissionRequestBody),
                "responses": {
                    **doc.answer("200", "the decision", ClaudeHookAnswer),
                    **doc.errors("403", "404", "422", "503"),
                },
            }
        },
        "/v1/sessions/{session_id}/hooks/codex-elicitation-request": {
            "post": {
                "summary": "A Codex app-server approval request (needs edit)." + WAITS,
                "parameters": SESSION_ID,
                "requestBody": doc.body(CodexRequestBody),
                "responses": {
                    **doc.answer("200", "the decision", CodexDecision),
                    **doc.errors("403", "404", "422", "503"),
                },
            }
        },
        "/v1/sessions/{session_id}/policies/evaluate": {
            "post": {
                "summary": "Evaluate the session's policies (needs edit); an ASK waits." + WAITS,
                "parameters": SESSION_ID,
                "requestBody": doc.body(PolicyEvaluationBody),
                "responses": {
                    **doc.answer("200", "the verdict", PolicyVerdict),
                    **doc.errors("403", "404", "422", "503"),
                },
            }
        },
        "/v1/sessions/{session_id}/mcp": {
            "post": {
                "summary": (
                    "The session's tools as an MCP server (streamable HTTP, one JSON-RPC "
                    "message per POST; needs edit). A call needing approval answers "
                    "input_required (inputRequests, requestState)."
                ),
                "parameters": SESSION_ID,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": JSONRPC}},
                },
                "responses": {
                    **doc.answer("200", "the JSON-RPC answer", JSONRPC),
                    "202": {"description": "a notification, accepted"},
                    **doc.answer("400", "not one JSON-RPC 2.0 request (a JSON-RPC error)", JSONRPC),
                    **doc.errors("403", "404"),
                },
            },
            "get": {
                "summary": "Not offered (no server stream): 405",
                "parameters": SESSION_ID,
                "responses": doc.errors("404", "405"),
            },
            "delete": {
                "summary": "Not offered (no MCP session to end): 405",
                "parameters": SESSION_ID,
                "responses": doc.errors("404", "405"),
            },
        },
    }
