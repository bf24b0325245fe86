"""What the model is told about the orchestration tools: a description and a schema each.

``sys_session_send`` is built per agent (:func:`send_schema`): its ``agent`` enum is
the sub-agents the spec grants. The rest are fixed (:data:`AGENT_TOOL_SCHEMAS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._agent_args import HISTORY_DEFAULT_TAIL, HISTORY_MAX_TAIL

__all__ = ["AGENT_TOOL_SCHEMAS", "send_schema"]

_SEND_DESCRIPTION = (
    "Send work to a sub-agent session and return at once with a handle; the sub-agent's "
    "final answer arrives in your inbox later (you are woken with it when idle; "
    "sys_read_inbox reads it during a turn). Pass (agent, title) to start a named "
    "sub-agent or continue the open one with that pair; or session_id to message a "
    "child session you created. Several sends in one response run in parallel: give each "
    "independent piece of work its own title. sys_cancel_task with the handle's task_id "
    "stops the work."
)


def send_schema(granted: Mapping[str, str]) -> dict[str, Any]:
    """``sys_session_send``'s schema; ``granted`` maps sub-agent names to descriptions."""
    properties: dict[str, Any] = {}
    if granted:
        listing = "\n".join(f"  {name}: {about}" for name, about in granted.items())
        properties["agent"] = {
            "type": "string",
            "enum": sorted(granted),
            "description": f"Named mode: the sub-agent to start or continue.\n{listing}",
        }
        properties["title"] = {
            "type": "string",
            "description": (
                "Named mode: the task this session is for (e.g. 'auth'); the same "
                "(agent, title) continues the same session. Default: '<agent>-<n>'."
            ),
        }
    properties["session_id"] = {
        "type": "string",
        "description": "By-id mode: a direct child session of yours (from sys_session_create).",
    }
    properties["args"] = {
        "anyOf": [
            {"type": "string"},
            {
                "type": "object",
                "properties": {
                    "input": {"type": "string", "description": "The message to send."},
                    "model": {
                        "type": "string",
                        "description": (
                            "The model the new session runs (sys_list_models lists them); "
                            "only when this send creates the session."
                        ),
                    },
                    "purpose": {
                        "type": "string",
                        "description": "What the work is for (seen by policies).",
                    },
                },
                "required": ["input"],
                "additionalProperties": False,
            },
        ],
        "description": "The message (a string), or {input, model?, purpose?}.",
    }
    return {
        "description": _SEND_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": ["args"],
            "additionalProperties": False,
        },
    }


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


_CONVERSATION = {"type": "string", "description": "The session's id (conv_…)."}

AGENT_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "sys_session_create": {
        "description": (
            "Create a child session of a registered agent (agent_id) or of an agent spec "
            "file in your working directory (config_path), optionally with a first "
            "message (its result then arrives in your inbox) and a model."
        ),
        "parameters": _object(
            {
                "agent_id": {"type": "string", "description": "A registered agent's id or name."},
                "config_path": {
                    "type": "string",
                    "description": "An agent spec file (YAML or JSON) in your working directory.",
                },
                "title": {"type": "string"},
                "message": {"type": "string", "description": "The first message to send."},
                "model": {"type": "string"},
            }
        ),
    },
    "sys_session_list": {
        "description": (
            "List your open sub-agent sessions ('sub_agents': agent, title, "
            "conversation_id; a sub-agent also sees 'main', its parent, and its siblings) "
            "and the sessions you can access ('sessions', optionally of one agent)."
        ),
        "parameters": _object(
            {
                "agent_name": {
                    "type": "string",
                    "description": "Only list sessions of this agent in 'sessions'.",
                }
            }
        ),
    },
    "sys_session_get_history": {
        "description": (
            "Read the latest items of a session in your tree (oldest first), with its "
            "pending questions, without sending it anything."
        ),
        "parameters": _object(
            {
                "conversation_id": _CONVERSATION,
                "tail_items": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": HISTORY_MAX_TAIL,
                    "description": f"How many items (default {HISTORY_DEFAULT_TAIL}).",
                },
            },
            ["conversation_id"],
        ),
    },
    "sys_session_get_info": {
        "description": (
            "A session's metadata (status, agent, effective model, parent, pending "
            "questions); yours by default. No transcript: see sys_session_get_history."
        ),
        "parameters": _object({"session_id": _CONVERSATION}),
    },
    "sys_session_close": {
        "description": (
            "Close a sub-agent session in your tree: sys_session_send with the same "
            "(agent, title) then starts a fresh one. Its history stays readable."
        ),
        "parameters": _object({"conversation_id": _CONVERSATION}, ["conversation_id"]),
    },
    "sys_cancel_task": {
        "description": (
            "Stop a running task: a sub-agent's work (the task_id of a sys_session_send "
            "handle) or a background tool task. Its inbox item says it was cancelled."
        ),
        "parameters": _object({"task_id": {"type": "string"}}, ["task_id"]),
    },
    "sys_agent_get": {
        "description": "Describe an agent: one of your sub-agents or a registered agent.",
        "parameters": _object(
            {"agent_id": {"type": "string", "description": "A sub-agent's name, an id or a name."}},
            ["agent_id"],
        ),
    },
    "sys_agent_list": {
        "description": (
            "List the agents you can use: your sub-agents, the registered agents and the "
            "specs in your working directory's .omnigent/agents folder."
        ),
        "parameters": _object({}),
    },
    "sys_agent_download": {
        "description": (
            "Write an agent's spec into your working directory (.omnigent/agents/<file>), "
            "to edit it and create sessions from it with sys_session_create config_path."
        ),
        "parameters": _object(
            {
                "agent_id": {"type": "string"},
                "filename": {
                    "type": "string",
                    "description": "A plain file name (default <agent name>.yaml).",
                },
            },
            ["agent_id"],
        ),
    },
    "sys_list_models": {
        "description": (
            "List the models each of your sub-agents (and you, under 'self') can be asked "
            "to run, from this machine's provider configuration. Pass an id from a "
            "worker's list verbatim as sys_session_send args.model."
        ),
        "parameters": _object(
            {
                "workers": {"type": "array", "items": {"type": "string"}},
                "model_ids": {"type": "array", "items": {"type": "string"}},
            }
        ),
    },
    "sys_session_share": {
        "description": (
            "Share this session (or one of its sub-sessions) with a user at level read, "
            "edit or manage; user_id __public__ makes it readable by everyone."
        ),
        "parameters": _object(
            {
                "user_id": {"type": "string"},
                "level": {
                    "anyOf": [
                        {"type": "string", "enum": ["read", "edit", "manage"]},
                        {"type": "integer", "enum": [1, 2, 3]},
                    ]
                },
                "session_id": {"type": "string"},
            },
            ["user_id"],
        ),
    },
}
