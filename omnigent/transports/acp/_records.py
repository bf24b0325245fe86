"""ACP's views of session records: config options, session lists, histories.

Plain functions of a :class:`~omnigent.Runtime` behind :class:`~._agent.AcpAgent`'s
``session/list``, ``session/load``, ``session/set_config_option`` and the
``configOptions`` every session answer carries.
"""

from __future__ import annotations

from typing import Any

from ...core import Runtime, SessionSnapshot
from ...errors import InvalidInput
from ...model import Item
from ._outcomes import iso
from ._params import Params, invalid

__all__ = [
    "LIST_PAGE",
    "config_options",
    "history",
    "model_override",
    "session_list",
]

LIST_PAGE = 50


async def config_options(runtime: Runtime, snapshot: SessionSnapshot) -> list[dict[str, Any]]:
    """The session's config options: its model (omnigent agents have no modes)."""
    spec = await runtime.get_agent_spec(snapshot.agent_id)
    default = spec.model or "default"
    current = snapshot.model_override or default
    label = f"{spec.model} (agent default)" if spec.model else "Agent default"
    options = [{"value": default, "name": label}]
    if current != default:
        options.append({"value": current, "name": current})
    return [
        {
            "id": "model",
            "name": "Model",
            "description": "The model this session's turns use (any model name is accepted)",
            "category": "model",
            "type": "select",
            "currentValue": current,
            "options": options,
        }
    ]


async def model_override(runtime: Runtime, snapshot: SessionSnapshot, params: Params) -> None:
    """Apply ``session/set_config_option``: the agent's own model clears the override.

    Raises:
        RpcError: ``-32602`` for another option, a boolean, or a bad model name.
    """
    config_id = params.string("configId", max_len=200)
    if config_id != "model":
        raise invalid("configId", f"unknown config option {config_id!r} (this agent has: model)")
    if params.raw("type") == "boolean" or isinstance(params.raw("value"), bool):
        raise invalid("value", "model is a select option: give a model name")
    value = params.string("value", max_len=200)
    spec = await runtime.get_agent_spec(snapshot.agent_id)
    override = None if value in ("default", spec.model) else value
    try:
        await runtime.update_session(snapshot.id, model_override=override)
    except InvalidInput as exc:
        raise invalid("value", "must match ^[A-Za-z0-9._:/@-]{1,200}$") from exc


async def session_list(
    runtime: Runtime,
    params: Params,
    *,
    agent_name: str | None,
    viewer: str | None,
) -> dict[str, Any]:
    """``session/list``: top-level sessions with a working directory, newest first.

    A page scans ``LIST_PAGE`` sessions, so it may hold fewer (those without a ``cwd``
    are skipped); ``nextCursor`` is the last one scanned.
    """
    cwd = params.absolute_path("cwd", required=False)
    cursor = params.optional_string("cursor", max_len=200)
    try:
        page = await runtime.list_sessions(
            agent_name=agent_name, limit=LIST_PAGE, after=cursor, viewer=viewer, cwd=cwd
        )
    except InvalidInput as exc:
        raise invalid("cursor", "not a cursor this listing gave out") from exc
    sessions = [
        {
            "sessionId": s.id,
            "cwd": s.cwd,
            "title": s.title,
            "updatedAt": iso(s.updated_at or s.created_at),
            "_meta": {"omnigent": {"status": s.status, "agentName": s.agent_name}},
        }
        for s in page.data
        if s.parent_session_id is None and s.cwd is not None
    ]
    answer: dict[str, Any] = {"sessions": sessions}
    if page.has_more and page.data:
        answer["nextCursor"] = page.data[-1].id
    return answer


async def history(runtime: Runtime, session_id: str) -> list[Item]:
    """The session's whole history, oldest first (read a thousand items at a time)."""
    items: list[Item] = []
    after: str | None = None
    while True:
        page = await runtime.list_items(session_id, limit=1000, after=after)
        items.extend(page.data)
        if not page.has_more:
            return items
        after = page.last_id
