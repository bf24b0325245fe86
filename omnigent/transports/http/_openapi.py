"""The OpenAPI 3.2 document of the HTTP transport, generated from the routes' own types.

Request bodies are described from the attrs classes the routes structure them into
(:class:`._bodies.CreateSessionBody`, the hook bodies, the :class:`~omnigent.AgentSpec`,
the event ``data`` classes of :data:`~omnigent.core.EVENT_DATA`), and answers from the
classes that build them (the core's records, :mod:`._answers`, the typed events of the
SSE streams), by the generator of :mod:`omnigent.model._schema`: what the document
says is what the code checks and sends. This module lists the operations (paths,
parameters, statuses); parameters mirror the routes' checks (``_params.query_int`` and
friends: a ``limit`` is ``1..100``, a query string may not be empty). Tests compare the
operations with the app's URL map, validate real answers against the document, and
fuzz the API from it (``tests/reliability/test_fuzz_openapi.py``).

Every ``/v1`` operation may answer ``401`` under ``--auth header``, every operation
``421`` for a foreign ``Host``, a state-changing one ``403`` for a foreign ``Origin``
and one with a body ``415`` for a ``Content-Type`` it does not read (all added here);
a session route answers ``404`` to a caller who cannot read the session and ``403``
to one who can read but not do what it asks.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from ..._ids import RUNNER_ID_PATTERN
from ...core import (
    Agent,
    FileInfo,
    Health,
    ItemPage,
    ResourceScreen,
    SessionPage,
    SessionSnapshot,
)
from ...spec import AgentSpec
from ...tools.terminals import HISTORY_LIMIT
from ._agent_file_routes import YAML_TYPES
from ._answers import (
    AgentList,
    AgentSpecAnswer,
    ChildSessionList,
    ResourceList,
    RunnerList,
    RunnerStatus,
    ServerList,
    SessionDeleted,
)
from ._bodies import CreateSessionBody, ForkSessionBody, UpdateSessionBody
from ._openapi_kit import (
    LIMIT,
    NON_EMPTY,
    SESSION_ID,
    DocumentBuilder,
    path_param,
    query_param,
)
from ._openapi_links import name_and_link
from ._openapi_sessions import session_operations
from ._websocket import AGENT_PATTERN

__all__ = ["openapi_document", "paths"]


def paths(doc: DocumentBuilder) -> dict[str, Any]:
    """The ``paths`` object: every route the app serves, by path and method."""
    return {**_service(doc), **_agents_files(doc), **_sessions(doc), **session_operations(doc)}


def _service(doc: DocumentBuilder) -> dict[str, Any]:
    return {
        "/health": {
            "get": {
                "summary": "Liveness: this server, and whether it reaches its database",
                "responses": {
                    **doc.answer("200", "ok", Health),
                    **doc.answer("503", "the database does not answer", Health),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics: turns, tools, tokens, events, store latency",
                "description": (
                    "The Prometheus text exposition format (docs/observability.md lists "
                    "each metric). Needs the API's identity."
                ),
                "responses": {
                    "200": {
                        "description": "the metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/v1/servers": {
            "get": {
                "summary": "The live servers sharing the database, and the sessions each runs",
                "responses": doc.answer("200", "the servers", ServerList),
            }
        },
        "/v1/runners": {
            "get": {
                "summary": "The runners connected here, and every runner sessions are bound to",
                "description": (
                    "Each with whether it is connected now, since when, and how many of "
                    "the caller's sessions are bound to it (docs/runners.md)."
                ),
                "responses": doc.answer("200", "the runners", RunnerList),
            }
        },
        "/v1/runners/{runner_id}/status": {
            "get": {
                "summary": "Whether a runner is connected: {runner_id, online}",
                "parameters": [
                    {
                        **path_param("runner_id"),
                        "schema": {"type": "string", "pattern": f"^{RUNNER_ID_PATTERN}$"},
                    }
                ],
                "responses": {
                    **doc.answer("200", "its status", RunnerStatus),
                    **doc.errors("422"),
                },
            }
        },
        "/v1/runners/connect": {
            "get": {
                "summary": "A runner's link to this server (a WebSocket; docs/runners.md)",
                "description": (
                    "A WebSocket upgrade with `Authorization: Bearer TOKEN` (a token given "
                    "with `serve --runner-token`); one JSON-RPC 2.0 message per text frame, "
                    "the first the runner's `initialize` (protocol version 2)."
                ),
                "parameters": [
                    query_param(
                        "name",
                        {"type": "string", "pattern": f"^{RUNNER_ID_PATTERN}$"},
                        "the runner's name (required)",
                    ),
                    query_param(
                        "link",
                        {"type": "string", "pattern": "^link_[0-9a-f]{24}$"},
                        "the link this connection resumes",
                    ),
                ],
                "responses": {
                    "101": {"description": "switching protocols"},
                    **doc.errors("400", "401", "403", "409", "422"),
                },
            }
        },
        "/v1/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": doc.answer("200", "the document", {"type": "object"}),
            }
        },
        "/v1/ws": {
            "get": {
                "summary": "The Agent Client Protocol (ACP v1) over a WebSocket",
                "description": (
                    "A WebSocket upgrade; one JSON-RPC 2.0 message per text frame. The same "
                    "protocol as `omnigent stdio` (docs/editors.md). A foreign Origin is 403."
                ),
                "parameters": [
                    query_param(
                        "agent",
                        {"type": "string", "pattern": f"^{AGENT_PATTERN}$"},
                        "the agent session/new uses",
                    ),
                    query_param(
                        "runner",
                        {"type": "string", "pattern": f"^{RUNNER_ID_PATTERN}$"},
                        "the runner the sessions session/new creates run on (docs/runners.md)",
                    ),
                ],
                "responses": {
                    "101": {"description": "switching protocols"},
                    **doc.errors("400", "403", "422"),
                },
            }
        },
    }


def _agents_files(doc: DocumentBuilder) -> dict[str, Any]:
    spec = doc.request(AgentSpec)
    file_id = [path_param("file_id")]
    return {
        "/v1/agents": {
            "post": {
                "summary": "Register an agent (or a new version of it)",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": spec},
                        **{media: {"schema": {"type": "string"}} for media in YAML_TYPES},
                    },
                },
                "responses": {
                    **doc.answer("201", "created", Agent),
                    **doc.errors("400", "403", "413", "422"),  # 400: an unknown harness
                },
            },
            "get": {"summary": "List agents", "responses": doc.answer("200", "agents", AgentList)},
        },
        "/v1/agents/{agent_id}": {
            "get": {
                "summary": "Get an agent",
                "parameters": [path_param("agent_id")],
                "responses": {**doc.answer("200", "agent", Agent), **doc.errors("404")},
            }
        },
        "/v1/agents/{agent_id}/spec": {
            "get": {
                "summary": "An agent version's spec (secrets redacted)",
                "parameters": [
                    path_param("agent_id"),
                    query_param(
                        "version", {"type": "integer", "minimum": 1}, "the version (latest if not)"
                    ),
                ],
                "responses": {
                    **doc.answer("200", "the spec", AgentSpecAnswer),
                    **doc.errors("404", "422"),
                },
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
                                "required": ["file"],
                                "properties": {
                                    "file": {"type": "string", "format": "binary", "minLength": 1}
                                },
                            }
                        }
                    },
                },
                "responses": {**doc.answer("201", "file", FileInfo), **doc.errors("413", "422")},
            }
        },
        "/v1/files/{file_id}": {
            "get": {
                "summary": "File metadata",
                "parameters": file_id,
                "responses": {**doc.answer("200", "file", FileInfo), **doc.errors("404")},
            }
        },
        "/v1/files/{file_id}/content": {
            "get": {
                "summary": "File content, with its content type",
                "parameters": file_id,
                "responses": {"200": {"description": "the bytes"}, **doc.errors("404")},
            }
        },
    }


def _sessions(doc: DocumentBuilder) -> dict[str, Any]:
    snapshot = doc.answer("200", "snapshot", SessionSnapshot)
    return {
        "/v1/feed": {
            "get": {
                "summary": "Every readable session, then each change, as SSE (snapshot-then-tail)",
                "responses": doc.feed("sessions feed", doc.schemas.response(SessionSnapshot)),
            }
        },
        "/v1/sessions": {
            "post": {
                "summary": "Create a session",
                "requestBody": doc.body(CreateSessionBody),
                "responses": {
                    **doc.answer("201", "snapshot", SessionSnapshot),
                    **doc.errors("400", "403", "404", "422"),
                },
            },
            "get": {
                "summary": "List sessions, newest first",
                "parameters": [
                    query_param("agent_name", NON_EMPTY),
                    query_param("parent_session_id", NON_EMPTY),
                    LIMIT,
                    query_param("after", NON_EMPTY, "the last id of the previous page"),
                    query_param("top_level", {"type": "boolean"}, "only sessions without a parent"),
                ],
                "responses": {**doc.answer("200", "sessions", SessionPage), **doc.errors("422")},
            },
        },
        "/v1/sessions/{session_id}": {
            "get": {
                "summary": "Get a session snapshot",
                "parameters": SESSION_ID,
                "responses": {**snapshot, **doc.errors("404")},
            },
            "patch": {
                "summary": "Change title, labels or model_override (null clears)",
                "parameters": SESSION_ID,
                "requestBody": doc.body(UpdateSessionBody),
                "responses": {**snapshot, **doc.errors("403", "404", "422")},
            },
            "delete": {
                "summary": "Cancel all work of the session and its children, then delete them",
                "parameters": SESSION_ID,
                "responses": {
                    **doc.answer("200", "deleted", SessionDeleted),
                    **doc.errors("403", "404"),
                },
            },
        },
        "/v1/sessions/{session_id}/fork": {
            "post": {
                "summary": (
                    "A new session (the caller's) with a copy of this one's history up to "
                    "up_to_item_id (default: all); needs read"
                ),
                "parameters": SESSION_ID,
                "requestBody": doc.body(ForkSessionBody),
                "responses": {
                    **doc.answer("201", "the fork's snapshot", SessionSnapshot),
                    **doc.errors("404", "422"),
                },
            }
        },
        "/v1/sessions/{session_id}/items": {
            "get": {
                "summary": "A session's items",
                "parameters": [
                    *SESSION_ID,
                    query_param("order", {"enum": ["asc", "desc"]}),
                    LIMIT,
                    query_param("after", NON_EMPTY, "an item id (exclusive)"),
                ],
                "responses": {**doc.answer("200", "items", ItemPage), **doc.errors("404", "422")},
            }
        },
        "/v1/sessions/{session_id}/child_sessions": {
            "get": {
                "summary": "Summaries of the session's children",
                "parameters": SESSION_ID,
                "responses": {
                    **doc.answer("200", "children", ChildSessionList),
                    **doc.errors("404"),
                },
            }
        },
        "/v1/sessions/{session_id}/resources": {
            "get": {
                "summary": "The session's live resources (running terminals)",
                "parameters": SESSION_ID,
                "responses": {
                    **doc.answer("200", "resources", ResourceList),
                    **doc.errors("404"),
                },
            }
        },
        "/v1/sessions/{session_id}/resources/{resource_id}/screen": {
            "get": {
                "summary": "What a running terminal shows now",
                "parameters": [
                    *SESSION_ID,
                    path_param("resource_id"),
                    query_param(
                        "scrollback",
                        {"type": "integer", "minimum": 0, "maximum": HISTORY_LIMIT},
                        "lines of history above the screen",
                    ),
                ],
                "responses": {
                    **doc.answer("200", "screen", ResourceScreen),
                    **doc.errors("404", "422"),
                },
            }
        },
    }


@functools.cache
def _document() -> Mapping[str, Any]:
    doc = DocumentBuilder()
    operations = paths(doc)
    for path, item in operations.items():
        for method, operation in item.items():
            responses = operation["responses"]
            if path.startswith("/v1/"):
                responses.update(doc.errors("401"))
            # The cross-site fence (docs/security.md): every route checks Host;
            # state-changing ones Origin; those with a body their Content-Type.
            responses.update(doc.errors("421"))
            if method in ("post", "put", "patch", "delete"):
                responses.update(doc.errors("403"))
            if method in ("post", "put", "patch"):
                responses.update(doc.errors("415"))
    name_and_link(operations)
    schemas = {**doc.schemas.components(), **doc.extra}
    return {
        "openapi": "3.2.0",
        "info": {
            "title": "omnigent",
            "version": "1",
            "description": "The omnigent HTTP API (docs/http.md). Bodies are JSON.",
        },
        "paths": operations,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the document (callers may change it; the shared one stays)."""
    return copy.deepcopy(dict(_document()))
