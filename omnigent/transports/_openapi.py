"""The OpenAPI 3.1 document of the HTTP transport, written by hand.

A test compares its paths and methods with the app's URL map, so it stays true.
"""

from __future__ import annotations

import copy
from typing import Any

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
        "required": ["agent_id"],
        "additionalProperties": False,
        "properties": {
            "agent_id": {"type": "string"},
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
            "type": {"type": "string", "enum": ["message", "interrupt", "stop_session"]},
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
}

_SID = [_path("session_id")]

_PATHS: dict[str, Any] = {
    "/health": {"get": {"summary": "Liveness", "responses": _ok("200", "ok", _OBJ)}},
    "/v1/openapi.json": {"get": {"summary": "This document", "responses": _ok("200", "ok")}},
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
            "responses": {**_ok("201", "created", _ref("Agent")), **_errors("401", "422")},
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
                **_errors("400", "404", "422"),
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
            "responses": {**_ok("200", "snapshot", _ref("Session")), **_errors("404", "422")},
        },
        "delete": {
            "summary": "Cancel all work of the session and its children, then delete them",
            "parameters": _SID,
            "responses": {**_ok("200", "deleted", _OBJ), **_errors("404")},
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
    "/v1/sessions/{session_id}/events": {
        "post": {
            "summary": "Post an event: message, interrupt, stop_session",
            "parameters": [
                *_SID,
                _query("stream", {"type": "boolean"}, "stream the turn answering a message"),
            ],
            "requestBody": {"required": True, **_json(_ref("Event"))},
            "responses": {
                **_ok("202", "accepted", _OBJ),
                "200": {"description": "the turn's events (stream=true)", **_SSE},
                **_errors("404", "422", "503"),
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

_DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "omnigent", "version": "1"},
    "paths": _PATHS,
    "components": {"schemas": _SCHEMAS},
}


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the document (callers may not change the shared one)."""
    return copy.deepcopy(_DOCUMENT)
