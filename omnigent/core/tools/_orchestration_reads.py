"""The orchestration tools that read sessions: list, history, info.

Each function is one tool call from a calling session, acting through
:class:`~._control.SessionControl`, and answers the tool's output string.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...errors import OmnigentError
from ...model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    MessageItem,
    item_text,
)
from ...stores import SessionRow
from ...tools import ArgField, ToolError, check_args, non_empty_string
from ..asking import READ
from ._agent_args import TypedError, is_closed, parse_history, split_title, visible_title
from ._control import SessionControl
from ._orchestration_send import tree_target

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = [
    "ACTIVITY_MAX_CHARS",
    "project_item",
    "session_get_history",
    "session_get_info",
    "session_list",
]

ACTIVITY_MAX_CHARS = 2000


def _clip(text: str) -> str:
    return text if len(text) <= ACTIVITY_MAX_CHARS else text[:ACTIVITY_MAX_CHARS] + " [truncated]"


def project_item(item: Item) -> dict[str, Any]:
    """One history item as the model reads it: its kind and its text, bounded."""
    if isinstance(item, MessageItem):
        return {"type": "message", "role": item.role, "text": _clip(item_text(item))}
    if isinstance(item, FunctionCallItem):
        return {"type": "function_call", "name": item.name, "arguments": _clip(item.arguments)}
    if isinstance(item, FunctionCallOutputItem):
        return {"type": "function_call_output", "output": _clip(item.output)}
    return {"type": item.type}


def _named(row: SessionRow) -> dict[str, Any] | None:
    agent, title = split_title(row.title)
    if agent is None or row.sub_agent is None or is_closed(row.labels, row.title):
        return None
    return {"agent": agent, "title": title, "conversation_id": row.id}


async def session_list(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_list``: the caller's open sub-agents, and the sessions it can access."""
    try:
        args = check_args("sys_session_list", raw, (ArgField("agent_name", non_empty_string),))
        caller = await control.row(tools.session_id)
    except ToolError as exc:
        return exc.render()
    sub_agents = [entry for row in await control.children(caller.id) if (entry := _named(row))]
    if caller.parent_session_id is not None:
        parent = await control.find_session(caller.parent_session_id)
        if parent is not None:
            sub_agents.append(
                {
                    "agent": "main",
                    "title": visible_title(parent.title),
                    "conversation_id": parent.id,
                }
            )
            for row in await control.children(parent.id):
                entry = _named(row)
                if entry is not None and row.id != caller.id:
                    sub_agents.append(entry)
    try:
        page = await control.list_sessions(
            viewer=caller.owner, agent_name=args.get("agent_name"), limit=50
        )
    except OmnigentError as exc:
        return f"Error: cannot list sessions: {exc.message}"
    sessions = [
        {
            "conversation_id": s.id,
            "title": visible_title(s.title),
            "agent_name": s.agent_name,
            "status": s.status,
            "busy": s.busy,
            "parent_session_id": s.parent_session_id,
        }
        for s in page.data
    ]
    return json.dumps({"sub_agents": sub_agents, "sessions": sessions, "has_more": page.has_more})


async def session_get_history(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_get_history``: a tree session's latest items, then its questions."""
    try:
        target_id, tail = parse_history(raw)
        caller = await control.row(tools.session_id)
        target = await tree_target(
            control, caller, {"conversation_id": target_id}, "sys_session_get_history"
        )
    except ToolError as exc:
        return exc.render()
    items: list[dict[str, Any]] = [
        project_item(item) for item in await control.latest_items(target.id, tail)
    ]
    for request in control.pending_elicitations(target.id):
        params = request.params
        items.append(
            {
                "type": "elicitation",
                "elicitation_id": request.elicitation_id,
                "message": _clip(params.message),
                "phase": params.phase,
                "tool_name": params.tool_name,
                "target_session_id": params.target_session_id or target.id,
            }
        )
    agent, title = split_title(target.title)
    return json.dumps(
        {"conversation_id": target.id, "agent": agent, "title": title, "items": items}
    )


async def session_get_info(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_get_info``: metadata of a session the caller's user can read."""
    try:
        args = check_args("sys_session_get_info", raw, (ArgField("session_id", non_empty_string),))
        caller = await control.row(tools.session_id)
    except ToolError as exc:
        return exc.render()
    target_id = args.get("session_id", caller.id)
    target = await control.find_session(target_id)
    if target is None:
        return TypedError("session_not_found", f"no session {target_id!r}").render()
    if await control.access_level(target, caller.owner) < READ:
        return TypedError(
            "access_denied", f"the user behind this session may not read {target_id!r}"
        ).render()
    snapshot = await control.snapshot(target)
    agent, title = split_title(snapshot.title)
    return json.dumps(
        {
            "conversation_id": snapshot.id,
            "title": visible_title(snapshot.title),
            "agent": agent,
            "session_name": title,
            "agent_id": snapshot.agent_id,
            "agent_name": snapshot.agent_name,
            "status": snapshot.status,
            "busy": snapshot.busy,
            "harness": snapshot.harness,
            "model": snapshot.model,
            "parent_session_id": snapshot.parent_session_id,
            "root_session_id": snapshot.root_session_id,
            "labels": snapshot.labels,
            "closed": is_closed(snapshot.labels, snapshot.title),
            "turns": target.turn_count,
            "last_event_id": snapshot.last_event_id,
            "created_at": snapshot.created_at,
            "pending_elicitations": len(snapshot.pending_elicitations),
        }
    )
