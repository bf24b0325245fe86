"""The orchestration tools that read sessions: list, history, info.

Each function is one tool call from a calling session, acting through
:class:`~._control.SessionControl`, and answers the tool's output string; a refusal is
raised (:class:`~omnigent.tools.ToolError`) and answered as the original omnigent's JSON
object. The shapes are the original's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ....model import (
    ElicitationRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    MessageItem,
    SessionSnapshot,
    item_text,
)
from ....stores import SessionRow
from ....tools import ArgField, check_args, non_empty_string
from ...asking import READ
from .._agent_args import TypedError, is_closed, parse_history, split_title, visible_title
from .._control import SessionControl
from ._acting import lowest_level, readable
from ._orchestration_send import tree_target

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = [
    "ACTIVITY_MAX_CHARS",
    "LIST_LIMIT",
    "pending_item",
    "project_item",
    "readable_listed",
    "runner_of",
    "session_get_history",
    "session_get_info",
    "session_list",
]

ACTIVITY_MAX_CHARS = 2000
LIST_LIMIT = 100
"""The most sessions ``sys_session_list`` shows (the newest)."""


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


def pending_item(request: ElicitationRequest) -> dict[str, Any]:
    """A question the session waits on, as its history's last item (the original's
    ``pending_elicitation``: the prompt, and a form's field names)."""
    item: dict[str, Any] = {
        "type": "pending_elicitation",
        "elicitation_id": request.elicitation_id,
        "prompt": request.params.message,
    }
    schema = request.params.requestedSchema
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and properties:
        item["fields"] = list(properties)
    return item


def runner_of(snapshot: SessionSnapshot) -> str | None:
    """The runner a session's work runs on (``docs/runners.md``); ``None``: this
    server's own."""
    return snapshot.runner_id


async def _runners_online(
    control: SessionControl, runner_ids: Iterable[str | None]
) -> dict[str, bool]:
    """Whether each runner named is connected: one lookup for every distinct runner."""
    distinct = {runner for runner in runner_ids if runner is not None}
    return await control.runners_online(distinct) if distinct else {}


def _named(row: SessionRow) -> dict[str, Any] | None:
    agent, title = split_title(row.title)
    if agent is None or row.sub_agent is None or is_closed(row.labels, row.title):
        return None
    return {"agent": agent, "title": title, "conversation_id": row.id}


async def _sub_agents(control: SessionControl, caller: SessionRow) -> list[dict[str, Any]]:
    """The caller's open named children; a child also sees its parent (``main``, whose
    title is not shown) and its open siblings."""
    sub_agents = [entry for row in await control.children(caller.id) if (entry := _named(row))]
    if caller.parent_session_id is not None:
        parent = await control.find_session(caller.parent_session_id)
        if parent is not None:
            sub_agents.append({"agent": "main", "title": None, "conversation_id": parent.id})
            for row in await control.children(parent.id):
                entry = _named(row)
                if entry is not None and row.id != caller.id:
                    sub_agents.append(entry)
    return sub_agents


async def session_list(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_list``: the caller's open sub-agents, and the sessions it may read.

    ``sessions``: the newest :data:`LIST_LIMIT` sessions every acting user may read
    (optionally of one agent), each with its runner and whether it is connected (looked
    up once per distinct runner). Past the limit, ``page`` says so.
    """
    args = check_args("sys_session_list", raw, (ArgField("agent_name", non_empty_string),))
    caller = await control.row(tools.session_id)
    sub_agents = await _sub_agents(control, caller)
    page = await control.list_sessions(
        viewer=caller.owner, agent_name=args.get("agent_name"), limit=LIST_LIMIT
    )
    shown = await readable_listed(control, caller, page.data)
    online = await _runners_online(control, (runner_of(s) for s in shown))
    sessions = [
        {
            "session_id": s.id,
            "agent_name": s.agent_name,
            "title": visible_title(s.title),
            "status": s.status,
            "runner_id": (runner := runner_of(s)),
            "runner_online": None if runner is None else online.get(runner, False),
            "parent_session_id": s.parent_session_id,
        }
        for s in shown
    ]
    answer: dict[str, Any] = {"sub_agents": sub_agents, "sessions": sessions}
    if page.has_more:
        answer["page"] = {"limit": LIST_LIMIT, "has_more": {"sessions": True}}
    return json.dumps(answer)


async def readable_listed(
    control: SessionControl, caller: SessionRow, listed: Sequence[SessionSnapshot]
) -> list[SessionSnapshot]:
    """The listed sessions (listed for the caller's owner) that every other acting user
    may read too."""
    users = await control.acting_users(caller)
    if users == {caller.owner}:
        return list(listed)
    shown = []
    for snapshot in listed:
        row = await control.find_session(snapshot.id)
        if row is not None and await lowest_level(control, users, row) >= READ:
            shown.append(snapshot)
    return shown


async def session_get_history(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_get_history``: a tree session's latest items, then its questions."""
    target_id, tail = parse_history(raw)
    caller = await control.row(tools.session_id)
    target = await tree_target(
        control, caller, {"conversation_id": target_id}, "sys_session_get_history"
    )
    items = [project_item(item) for item in await control.latest_items(target.id, tail)]
    items += [pending_item(request) for request in control.pending_elicitations(target.id)]
    agent, title = split_title(target.title)
    return json.dumps(
        {"conversation_id": target.id, "agent": agent, "title": title, "items": items}
    )


async def session_get_info(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_get_info``: metadata of a session the caller may read (its own by
    default); one it may not read is answered as a missing one."""
    args = check_args("sys_session_get_info", raw, (ArgField("session_id", non_empty_string),))
    caller = await control.row(tools.session_id)
    target_id: str = args.get("session_id", caller.id)
    target = await control.find_session(target_id)
    if target is None or not await readable(control, caller, target):
        raise TypedError("session_not_found", ("session_id", target_id))
    snapshot = await control.snapshot(target)
    runner = runner_of(snapshot)
    online = await _runners_online(control, (runner,))
    pending = [request.to_dict() for request in snapshot.pending_elicitations]
    sub_agent = target.sub_agent.rpartition("/")[2] if target.sub_agent else None
    return json.dumps(
        {
            "session_id": snapshot.id,
            "status": snapshot.status,
            "last_activity_at": snapshot.updated_at,
            "title": visible_title(snapshot.title),
            "agent_id": snapshot.agent_id,
            "agent_name": snapshot.agent_name,
            "runner_id": runner,
            "runner_online": None if runner is None else online.get(runner, False),
            "parent_session_id": snapshot.parent_session_id,
            "sub_agent_name": sub_agent,
            "model": snapshot.model,
            "workspace": snapshot.cwd,
            "pending_elicitations": pending,
            "pending_elicitation_count": len(pending),
        }
    )
