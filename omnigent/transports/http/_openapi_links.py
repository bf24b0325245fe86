"""Operation ids and links for the OpenAPI document.

Every operation has an ``operationId`` (code generators name methods after them), and
the operations that create something link to the operations that take its id: a
session's ``id`` in ``POST /v1/sessions``'s answer feeds every ``{session_id}``, an
agent's every ``{agent_id}``, a file's every ``{file_id}`` (except the hooks, which
wait for a person). Clients and stateful fuzzers (``schemathesis``' stateful phase)
follow them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OPERATION_IDS", "name_and_link"]

OPERATION_IDS: dict[tuple[str, str], str] = {
    ("/health", "get"): "health",
    ("/v1/openapi.json", "get"): "get_openapi_document",
    ("/metrics", "get"): "metrics",
    ("/v1/servers", "get"): "list_servers",
    ("/v1/ws", "get"): "acp_websocket",
    ("/v1/runners", "get"): "list_runners",
    ("/v1/runners/{runner_id}/status", "get"): "get_runner_status",
    ("/v1/runners/connect", "get"): "runner_connect",
    ("/v1/agents", "post"): "create_agent",
    ("/v1/agents", "get"): "list_agents",
    ("/v1/agents/{agent_id}", "get"): "get_agent",
    ("/v1/agents/{agent_id}/spec", "get"): "get_agent_spec",
    ("/v1/files", "post"): "upload_file",
    ("/v1/files/{file_id}", "get"): "get_file",
    ("/v1/files/{file_id}/content", "get"): "get_file_content",
    ("/v1/sessions", "post"): "create_session",
    ("/v1/sessions", "get"): "list_sessions",
    ("/v1/feed", "get"): "watch_sessions",
    ("/v1/sessions/{session_id}", "get"): "get_session",
    ("/v1/sessions/{session_id}", "patch"): "update_session",
    ("/v1/sessions/{session_id}", "delete"): "delete_session",
    ("/v1/sessions/{session_id}/fork", "post"): "fork_session",
    ("/v1/sessions/{session_id}/items", "get"): "list_items",
    ("/v1/sessions/{session_id}/child_sessions", "get"): "list_child_sessions",
    ("/v1/sessions/{session_id}/resources", "get"): "list_resources",
    ("/v1/sessions/{session_id}/resources/{resource_id}/screen", "get"): "get_resource_screen",
    ("/v1/sessions/{session_id}/events", "post"): "post_event",
    ("/v1/sessions/{session_id}/stream", "get"): "stream_events",
    ("/v1/sessions/{session_id}/permissions", "get"): "list_permissions",
    ("/v1/sessions/{session_id}/permissions", "put"): "put_permission",
    ("/v1/sessions/{session_id}/permissions/{user_id}", "delete"): "delete_permission",
    ("/v1/sessions/{session_id}/elicitations/{elicitation_id}/resolve", "post"): (
        "resolve_elicitation"
    ),
    ("/v1/sessions/{session_id}/elicitations/{elicitation_id}", "get"): "get_elicitation",
    ("/approve/{session_id}/{elicitation_id}", "get"): "show_approval_page",
    ("/approve/{session_id}/{elicitation_id}", "post"): "answer_approval_page",
    ("/v1/sessions/{session_id}/hooks/permission-request", "post"): "claude_permission_request",
    ("/v1/sessions/{session_id}/hooks/codex-elicitation-request", "post"): (
        "codex_elicitation_request"
    ),
    ("/v1/sessions/{session_id}/policies/evaluate", "post"): "evaluate_policy",
    ("/v1/sessions/{session_id}/mcp", "post"): "mcp_message",
    ("/v1/sessions/{session_id}/mcp", "get"): "mcp_stream",
    ("/v1/sessions/{session_id}/mcp", "delete"): "mcp_end",
}

# Hooks hold their request until a person answers: a client following links would
# wait on each, so they are not linked (they are documented all the same).
_WAITING = frozenset({"claude_permission_request", "codex_elicitation_request", "evaluate_policy"})
# What each creating operation makes, the status it answers, and the path parameter
# its ``id`` fills.
_CREATES = {
    "create_session": ("201", "session_id"),
    "create_agent": ("201", "agent_id"),
    "upload_file": ("201", "file_id"),
}


def name_and_link(operations: dict[str, Any]) -> None:
    """Give every operation of ``operations`` (the ``paths`` object) its id and links.

    Raises:
        KeyError: an operation :data:`OPERATION_IDS` does not name (a new route must
            be given one).
    """
    takes: dict[str, list[str]] = {}
    for path, item in operations.items():
        for method, operation in item.items():
            operation_id = OPERATION_IDS[(path, method)]
            operation["operationId"] = operation_id
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path":
                    takes.setdefault(parameter["name"], []).append(operation_id)
    for item in operations.values():
        for operation in item.values():
            made = _CREATES.get(operation["operationId"])
            if made is None:
                continue
            status, name = made
            links = {
                target: {
                    "operationId": target,
                    "parameters": {f"path.{name}": "$response.body#/id"},
                }
                for target in takes.get(name, [])
                if target not in _WAITING
            }
            operation["responses"][status]["links"] = links
