"""The OpenAPI 3.1 document of the HTTP transport, written by hand.

A test compares its paths and methods with the app's URL map, so it stays true.
Every ``/v1`` operation may answer ``401`` under ``--auth header`` (added when the
document is built); a session route answers ``404`` to a caller who cannot read the
session and ``403`` to one who can read but not do what it asks.
"""

from __future__ import annotations

import copy
from typing import Any

from ..tools.terminals import HISTORY_LIMIT

__all__ = ["openapi_document"]

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"loc": {"type": "string"}, "msg": {"type": "string"}},
                    },
                },
            },
        }
    },
}
_OBJ = {"type": "object"}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _ok(status: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description}
    if schema is not None:
        answer.update(_json(schema))
    return {status: answer}


def _errors(*statuses: str) -> dict[str, Any]:
    return {s: {"description": "error", **_json(_ref("Error"))} for s in statuses}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": schema, "description": description}


_LIMIT = _query("limit", {"type": "integer", "minimum": 1, "maximum": 100})
_SSE = {"content": {"text/event-stream": {"schema": {"type": "string"}}}}

_SCHEMAS: dict[str, Any] = {
    "Error": _ERROR,
    "Agent": {
        "type": "object",
        "properties": {
            k: {"type": t}
            for k, t in [
                ("id", "string"),
                ("object", "string"),
                ("name", "string"),
                ("version", "integer"),
                ("description", "string"),
                ("harness", "string"),
                ("model", ["string", "null"]),
                ("created_at", "number"),
            ]
        },
    },
    "AgentSpec": {"type": "object", "description": "An agent spec (see docs/spec.md)."},
    "Session": {"type": "object", "description": "A session snapshot."},
    "CreateSession": {
        "type": "object",
        "description": "Exactly one of agent_id and agent_name.",
        "oneOf": [{"required": ["agent_id"]}, {"required": ["agent_name"]}],
        "additionalProperties": False,
        "properties": {
            "agent_id": {"type": "string"},
            "agent_name": {"type": "string"},
            "title": {"type": ["string", "null"]},
            "parent_session_id": {"type": ["string", "null"]},
            "harness_override": {"type": ["string", "null"]},
            "model_override": {
                "type": ["string", "null"],
                "pattern": r"^[A-Za-z0-9._:/@-]{1,200}$",
            },
            "labels": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "initial_items": {"type": "array", "items": _OBJ},
        },
    },
    "UpdateSession": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "title": {"type": ["string", "null"]},
            "labels": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "model_override": {"type": ["string", "null"]},
        },
    },
    "Event": {
        "type": "object",
        "required": ["type"],
        "additionalProperties": False,
        "properties": {
            "type": {
                "type": "string",
                "enum": ["message", "interrupt", "stop_session", "approval", "mcp_elicitation"],
            },
            "data": _OBJ,
        },
    },
    "List": {
        "type": "object",
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": _OBJ},
            "has_more": {"type": "boolean"},
        },
    },
    "File": {
        "type": "object",
        "properties": {
            k: {"type": t}
            for k, t in [
                ("id", "string"),
                ("object", "string"),
                ("filename", "string"),
                ("content_type", "string"),
                ("bytes", "integer"),
                ("created_at", "number"),
            ]
        },
    },
    "Resource": {
        "type": "object",
        "required": ["id", "type", "metadata"],
        "properties": {
            "id": {"type": "string", "description": "terminal_<name>_<session key>"},
            "type": {"const": "terminal"},
            "metadata": {
                "type": "object",
                "properties": {
                    "terminal": {"type": "string"},
                    "session": {"type": "string"},
                    "running": {"type": "boolean"},
                },
            },
        },
    },
    "ResourceList": {
        "type": "object",
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": _ref("Resource")},
        },
    },
    "ResourceScreen": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "type": {"const": "terminal"},
            "screen": {"type": "string"},
            "scrollback_lines": {"type": "integer"},
            "truncated": {"type": "boolean"},
        },
    },
    "PutGrant": {
        "type": "object",
        "required": ["user_id", "level"],
        "additionalProperties": False,
        "properties": {
            "user_id": {"type": "string", "description": "'__public__' is everyone (read only)"},
            "level": {"enum": [1, 2, 3], "description": "1 read, 2 edit, 3 manage"},
        },
    },
    "Grant": {
        "type": "object",
        "properties": {
            "user_id": {"type": "string"},
            "level": {"enum": [1, 2, 3]},
            "owner": {"type": "boolean"},
        },
    },
}

_SID = [_path("session_id")]

_PATHS: dict[str, Any] = {
    "/health": {"get": {"summary": "Liveness", "responses": _ok("200", "ok", _OBJ)}},
    "/v1/openapi.json": {"get": {"summary": "This document", "responses": _ok("200", "ok")}},
    "/v1/ws": {
        "get": {
            "summary": "The Agent Client Protocol (ACP v1) over a WebSocket",
            "description": (
                "A WebSocket upgrade; one JSON-RPC 2.0 message per text frame. The same "
                "protocol as `omnigent stdio` (docs/editors.md). A foreign Origin is 403."
            ),
            "parameters": [
                _query("agent", {"type": "string"}, "the agent session/new uses"),
            ],
            "responses": {
                "101": {"description": "switching protocols"},
                **_errors("401", "403", "422"),
            },
        }
    },
    "/v1/agents": {
        "post": {
            "summary": "Register an agent (or a new version of it)",
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": _ref("AgentSpec")},
                    "application/yaml": {"schema": {"type": "string"}},
                },
            },
            "responses": {**_ok("201", "created", _ref("Agent")), **_errors("403", "413", "422")},
        },
        "get": {"summary": "List agents", "responses": _ok("200", "agents", _ref("List"))},
    },
    "/v1/agents/{agent_id}": {
        "get": {
            "summary": "Get an agent",
            "parameters": [_path("agent_id")],
            "responses": {**_ok("200", "agent", _ref("Agent")), **_errors("404")},
        }
    },
    "/v1/sessions": {
        "post": {
            "summary": "Create a session",
            "requestBody": {"required": True, **_json(_ref("CreateSession"))},
            "responses": {
                **_ok("201", "snapshot", _ref("Session")),
                **_errors("400", "403", "404", "422"),
            },
        },
        "get": {
            "summary": "List sessions, newest first",
            "parameters": [
                _query("agent_name", {"type": "string"}),
                _query("parent_session_id", {"type": "string"}),
                _LIMIT,
                _query("after", {"type": "string"}, "the last id of the previous page"),
            ],
            "responses": {**_ok("200", "sessions", _ref("List")), **_errors("422")},
        },
    },
    "/v1/sessions/{session_id}": {
        "get": {
            "summary": "Get a session snapshot",
            "parameters": _SID,
            "responses": {**_ok("200", "snapshot", _ref("Session")), **_errors("404")},
        },
        "patch": {
            "summary": "Change title, labels or model_override (null clears)",
            "parameters": _SID,
            "requestBody": {"required": True, **_json(_ref("UpdateSession"))},
            "responses": {
                **_ok("200", "snapshot", _ref("Session")),
                **_errors("403", "404", "422"),
            },
        },
        "delete": {
            "summary": "Cancel all work of the session and its children, then delete them",
            "parameters": _SID,
            "responses": {**_ok("200", "deleted", _OBJ), **_errors("403", "404")},
        },
    },
    "/v1/sessions/{session_id}/items": {
        "get": {
            "summary": "A session's items",
            "parameters": [
                *_SID,
                _query("order", {"enum": ["asc", "desc"]}),
                _LIMIT,
                _query("after", {"type": "string"}, "an item id (exclusive)"),
            ],
            "responses": {**_ok("200", "items", _ref("List")), **_errors("404", "422")},
        }
    },
    "/v1/sessions/{session_id}/child_sessions": {
        "get": {
            "summary": "Summaries of the session's children",
            "parameters": _SID,
            "responses": {**_ok("200", "children", _ref("List")), **_errors("404")},
        }
    },
    "/v1/sessions/{session_id}/resources": {
        "get": {
            "summary": "The session's live resources (running terminals)",
            "parameters": _SID,
            "responses": {**_ok("200", "resources", _ref("ResourceList")), **_errors("404")},
        }
    },
    "/v1/sessions/{session_id}/resources/{resource_id}/screen": {
        "get": {
            "summary": "What a running terminal shows now",
            "parameters": [
                *_SID,
                _path("resource_id"),
                _query(
                    "scrollback",
                    {"type": "integer", "minimum": 0, "maximum": HISTORY_LIMIT},
                    "lines of history above the screen",
                ),
            ],
            "responses": {
                **_ok("200", "screen", _ref("ResourceScreen")),
                **_errors("404", "422"),
            },
        }
    },
    "/v1/sessions/{session_id}/events": {
        "post": {
            "summary": "Post an event: message, interrupt, stop_session, approval, mcp_elicitation",
            "parameters": [
                *_SID,
                _query("stream", {"type": "boolean"}, "stream the turn answering a message"),
            ],
            "requestBody": {"required": True, **_json(_ref("Event"))},
            "responses": {
                **_ok("202", "accepted", _OBJ),
                "200": {"description": "the turn's events (stream=true)", **_SSE},
                **_errors("403", "404", "422", "503"),
            },
        }
    },
    "/v1/sessions/{session_id}/stream": {
        "get": {
            "summary": "The session's events as SSE: replay after a point, then live",
            "parameters": [
                *_SID,
                _query("after", {"type": "integer", "minimum": 0}, "replay events after this id"),
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "schema": {"type": "integer", "minimum": 0},
                    "description": "wins over ?after (EventSource reconnects)",
                },
            ],
            "responses": {"200": {"description": "event stream", **_SSE}, **_errors("404", "422")},
        }
    },
    "/v1/sessions/{session_id}/permissions": {
        "get": {
            "summary": "The session's owner and grants (needs read)",
            "parameters": _SID,
            "responses": {**_ok("200", "grants", _ref("List")), **_errors("404")},
        },
        "put": {
            "summary": "Grant a user a level, replacing an earlier grant (needs manage)",
            "parameters": _SID,
            "requestBody": {"required": True, **_json(_ref("PutGrant"))},
            "responses": {
                **_ok("200", "the grant", _ref("Grant")),
                **_errors("403", "404", "409", "422"),
            },
        },
    },
    "/v1/sessions/{session_id}/permissions/{user_id}": {
        "delete": {
            "summary": "Revoke a user's grant (needs manage); deleted: false if there was none",
            "parameters": [*_SID, _path("user_id")],
            "responses": {**_ok("200", "{user_id, deleted}", _OBJ), **_errors("403", "404", "409")},
        }
    },
    "/v1/files": {
        "post": {
            "summary": "Upload a file (multipart field 'file')",
            "requestBody": {
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "properties": {"file": {"type": "string", "format": "binary"}},
                        }
                    }
                },
            },
            "responses": {**_ok("201", "file", _ref("File")), **_errors("413", "422")},
        }
    },
    "/v1/files/{file_id}": {
        "get": {
            "summary": "File metadata",
            "parameters": [_path("file_id")],
            "responses": {**_ok("200", "file", _ref("File")), **_errors("404")},
        }
    },
    "/v1/files/{file_id}/content": {
        "get": {
            "summary": "File content, with its content type",
            "parameters": [_path("file_id")],
            "responses": {"200": {"description": "the bytes"}, **_errors("404")},
        }
    },
}

# -- elicitations, hooks, policy evaluation, the approval page -------------------------

_SCHEMAS.update(
    {
        "ElicitationResult": {
            "type": "object",
            "required": ["action"],
            "additionalProperties": False,
            "properties": {
                "action": {"enum": ["accept", "decline", "cancel"]},
                "content": {"description": "the answer (accept only)"},
            },
        },
        "Elicitation": {
            "type": "object",
            "required": ["status", "elicitation_id"],
            "properties": {
                "status": {"enum": ["pending", "resolved"]},
                "elicitation_id": {"type": "string"},
                "message": {"type": "string"},
                "phase": {"type": "string"},
                "policy_name": {"type": ["string", "null"]},
                "requested_schema": _OBJ,
                "content_preview": {"type": "string", "maxLength": 500},
                "target_session_id": {"type": "string"},
            },
        },
        "PermissionRequestHook": {
            "type": "object",
            "required": ["tool_name", "tool_input"],
            "additionalProperties": True,
            "properties": {
                "hook_event_name": {"const": "PermissionRequest"},
                "tool_name": {"type": "string"},
                "tool_input": _OBJ,
            },
        },
        "PermissionRequestAnswer": {
            "type": "object",
            "properties": {
                "hookSpecificOutput": {
                    "type": "object",
                    "properties": {
                        "hookEventName": {"const": "PermissionRequest"},
                        "decision": {
                            "type": "object",
                            "required": ["behavior"],
                            "properties": {
                                "behavior": {"enum": ["allow", "deny"]},
                                "updatedInput": _OBJ,
                                "message": {"type": "string"},
                            },
                        },
                    },
                }
            },
        },
        "CodexRequest": {
            "type": "object",
            "required": ["id", "method"],
            "additionalProperties": False,
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": {"type": ["string", "integer"]},
                "method": {"type": "string"},
                "params": _OBJ,
            },
        },
        "PolicyEvaluation": {
            "type": "object",
            "required": ["event"],
            "additionalProperties": False,
            "properties": {
                "event": {
                    "type": "object",
                    "required": ["type", "data"],
                    "properties": {
                        "type": {"enum": ["PHASE_TOOL_CALL", "PHASE_TOOL_RESULT"]},
                        "data": _OBJ,
                        "request_data": _OBJ,
                        "context": _OBJ,
                    },
                }
            },
        },
        "PolicyVerdict": {
            "type": "object",
            "required": ["result"],
            "properties": {
                "result": {
                    "enum": [
                        "POLICY_ACTION_ALLOW",
                        "POLICY_ACTION_DENY",
                        "POLICY_ACTION_UNSPECIFIED",
                    ]
                },
                "reason": {"type": "string"},
                "data": {},
            },
        },
    }
)

_EID = [*_SID, _path("elicitation_id")]
_HTML = {"content": {"text/html": {"schema": {"type": "string"}}}}
_WAITS = " The request stays open until a person answers."

_PATHS.update(
    {
        "/v1/sessions/{session_id}/elicitations/{elicitation_id}/resolve": {
            "post": {
                "summary": "Answer an elicitation owned by this session (needs edit)",
                "parameters": _EID,
                "requestBody": {"required": True, **_json(_ref("ElicitationResult"))},
                "responses": {
                    **_ok("202", "{resolved: true|false}", _OBJ),
                    **_errors("403", "404", "422"),
                },
            }
        },
        "/v1/sessions/{session_id}/elicitations/{elicitation_id}": {
            "get": {
                "summary": "A pending elicitation of this session or a descendant; else resolved",
                "parameters": _EID,
                "responses": {**_ok("200", "elicitation", _ref("Elicitation")), **_errors("404")},
            }
        },
        "/v1/sessions/{session_id}/hooks/permission-request": {
            "post": {
                "summary": "Claude Code's PermissionRequest hook (needs edit)." + _WAITS,
                "parameters": _SID,
                "requestBody": {"required": True, **_json(_ref("PermissionRequestHook"))},
                "responses": {
                    **_ok("200", "the decision", _ref("PermissionRequestAnswer")),
                    **_errors("403", "404", "422", "503"),
                },
            }
        },
        "/v1/sessions/{session_id}/hooks/codex-elicitation-request": {
            "post": {
                "summary": "A Codex app-server approval request (needs edit)." + _WAITS,
                "parameters": _SID,
                "requestBody": {"required": True, **_json(_ref("CodexRequest"))},
                "responses": {
                    **_ok("200", '{decision: "accept"|"decline"}', _OBJ),
                    **_errors("403", "404", "422", "503"),
                },
            }
        },
        "/v1/sessions/{session_id}/policies/evaluate": {
            "post": {
                "summary": "Evaluate the session's policies (needs edit); an ASK waits." + _WAITS,
                "parameters": _SID,
                "requestBody": {"required": True, **_json(_ref("PolicyEvaluation"))},
                "responses": {
                    **_ok("200", "the verdict", _ref("PolicyVerdict")),
                    **_errors("403", "404", "422", "503"),
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
                "parameters": _SID,
                "requestBody": {"required": True, **_json(_OBJ)},
                "responses": {
                    **_ok("200", "the JSON-RPC answer", _OBJ),
                    "202": {"description": "a notification, accepted"},
                    **_errors("400", "403", "404"),
                },
            },
            "get": {
                "summary": "Not offered (no server stream): 405",
                "parameters": _SID,
                "responses": _errors("405"),
            },
            "delete": {
                "summary": "Not offered (no MCP session to end): 405",
                "parameters": _SID,
                "responses": _errors("405"),
            },
        },
        "/approve/{session_id}/{elicitation_id}": {
            "get": {
                "summary": "An HTML page showing the request, with an Accept/Decline form",
                "parameters": _EID,
                "responses": {"200": {"description": "the page", **_HTML}, **_errors("401", "404")},
            },
            "post": {
                "summary": (
                    "Answer from the page's form (fields 'action' and the page's 'token'; "
                    "needs edit; only from this server's own origin)"
                ),
                "parameters": _EID,
                "requestBody": {
                    "required": True,
                    "content": {"application/x-www-form-urlencoded": {"schema": _OBJ}},
                },
                "responses": {
                    "200": {"description": "the outcome page", **_HTML},
                    **_errors("401", "403", "404", "422"),
                },
            },
        },
    }
)

for _path_name, _operations in _PATHS.items():
    if _path_name.startswith("/v1/"):
        for _operation in _operations.values():
            _operation["responses"].update(_errors("401"))
    # The cross-site fence (docs/security.md): every route checks Host; state-changing
    # ones Origin; those with a body their Content-Type.
    for _method, _operation in _operations.items():
        _operation["responses"].update(_errors("421"))
        if _method in ("post", "put", "patch", "delete"):
            _operation["responses"].update(_errors("403"))
        if _method in ("post", "put", "patch"):
            _operation["responses"].update(_errors("415"))

_DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "omnigent", "version": "1"},
    "paths": _PATHS,
    "components": {"schemas": _SCHEMAS},
}


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the document (callers may not change the shared one)."""
    return copy.deepcopy(_DOCUMENT)
