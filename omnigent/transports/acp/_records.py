"""ACP's views of session records: config options, session lists, histories.

Plain functions of a :class:`~omnigent.Runtime` behind :class:`~._agent.AcpAgent`'s
``session/list``, ``session/load``, ``session/set_config_option`` and the
``configOptions`` every session answer carries (and ``config_option_update`` sends
when another client changed the model).
"""

from __future__ import annotations

import fnmatch
from typing import Any

from ...core import Runtime, SessionSnapshot
from ...errors import InvalidInput
from ...model import Item
from ...spec import AgentSpec
from ._handshake import ClientCapabilities
from ._outcomes import iso
from ._params import Params, invalid

__all__ = [
    "LIST_PAGE",
    "asks_about_edits",
    "config_options",
    "history",
    "session_list",
    "set_config_option",
]

LIST_PAGE = 50


# The temperatures offered (any the runtime takes, 0..2, is kept if set elsewhere).
TEMPERATURES = ("0", "0.2", "0.5", "0.8", "1", "1.5")
EDIT_TOOLS = ("sys_os_write", "sys_os_edit")
MODEL, TEMPERATURE, AUTO_EDIT = "model", "temperature", "auto_approve_edits"


async def config_options(
    runtime: Runtime, snapshot: SessionSnapshot, client: ClientCapabilities
) -> list[dict[str, Any]]:
    """The session's config options (omnigent agents have no modes).

    - ``model`` (category ``model``): the session's model (any name is accepted);
    - ``temperature`` (category ``model_config``), for ``loop`` sessions;
    - ``auto_approve_edits`` (boolean), when the client takes boolean options and an
      ``ask_tools`` policy of the agent asks about file writes or edits: a standing
      ``accept`` for both (:meth:`~omnigent.Runtime.remember_answer`).
    """
    spec = await runtime.get_agent_spec(snapshot.agent_id)
    options = [_model_option(spec, snapshot)]
    if snapshot.harness == "loop":
        options.append(_temperature_option(spec, runtime.session_temperature(snapshot.id)))
    if client.boolean_options and asks_about_edits(spec):
        on = all(runtime.standing_answer(snapshot.id, t) == "accept" for t in EDIT_TOOLS)
        options.append(
            {
                "id": AUTO_EDIT,
                "name": "Always allow file edits",
                "description": "Approve every file write and edit in this session without asking",
                "type": "boolean",
                "currentValue": on,
            }
        )
    return options


def _model_option(spec: AgentSpec, snapshot: SessionSnapshot) -> dict[str, Any]:
    default = spec.model or "default"
    current = snapshot.model_override or default
    label = f"{spec.model} (agent default)" if spec.model else "Agent default"
    values = [{"value": default, "name": label}]
    if current != default:
        values.append({"value": current, "name": current})
    return {
        "id": MODEL,
        "name": "Model",
        "description": "The model this session's turns use (any model name is accepted)",
        "category": "model",
        "type": "select",
        "currentValue": current,
        "options": values,
    }


def _temperature_option(spec: AgentSpec, chosen: float | None) -> dict[str, Any]:
    own = spec.executor.config.temperature
    label = f"Agent default ({own:g})" if own is not None else "Model default"
    values = [{"value": "default", "name": label}]
    values += [{"value": t, "name": t} for t in TEMPERATURES]
    current = "default" if chosen is None else f"{chosen:g}"
    if current not in ("default", *TEMPERATURES):
        values.append({"value": current, "name": current})
    return {
        "id": TEMPERATURE,
        "name": "Temperature",
        "description": "Sampling temperature: lower is more focused, higher more varied",
        "category": "model_config",
        "type": "select",
        "currentValue": current,
        "options": values,
    }


def asks_about_edits(spec: AgentSpec) -> bool:
    """Whether an ``ask_tools`` policy of the agent asks about writes or edits."""
    return any(
        policy.type == "ask_tools" and fnmatch.filter(EDIT_TOOLS, pattern)
        for policy in spec.policies
        for pattern in policy.tools
    )


async def set_config_option(
    runtime: Runtime, snapshot: SessionSnapshot, params: Params, client: ClientCapabilities
) -> None:
    """Apply ``session/set_config_option``.

    ``model``: the agent's own model clears the override. ``temperature``: ``default``
    clears it. ``auto_approve_edits``: standing answers for writes and edits.

    Raises:
        RpcError: ``-32602`` for an option the session does not offer, or a value of
        the wrong type or out of range.
    """
    config_id = params.string("configId", max_len=200)
    offered = [o["id"] for o in await config_options(runtime, snapshot, client)]
    if config_id not in offered:
        names = ", ".join(offered)
        raise invalid("configId", f"unknown config option {config_id!r} (offered: {names})")
    boolean = params.raw("type") == "boolean" or isinstance(params.raw("value"), bool)
    if config_id == AUTO_EDIT:
        value = params.raw("value")
        if not isinstance(value, bool):
            raise invalid("value", f"{AUTO_EDIT} is a boolean option: give true or false")
        for tool in EDIT_TOOLS:
            await runtime.remember_answer(snapshot.id, tool, "accept" if value else None)
        return
    if boolean:
        raise invalid("value", f"{config_id} is a select option: give one of its values")
    value_id = params.string("value", max_len=200)
    if config_id == TEMPERATURE:
        await _set_temperature(runtime, snapshot.id, value_id)
        return
    spec = await runtime.get_agent_spec(snapshot.agent_id)
    override = None if value_id in ("default", spec.model) else value_id
    try:
        await runtime.update_session(snapshot.id, model_override=override)
    except InvalidInput as exc:
        raise invalid("value", "must match ^[A-Za-z0-9._:/@-]{1,200}$") from exc


async def _set_temperature(runtime: Runtime, session_id: str, value: str) -> None:
    if value == "default":
        await runtime.set_session_temperature(session_id, None)
        return
    try:
        number = float(value)
        await runtime.set_session_temperature(session_id, number)
    except (ValueError, InvalidInput):
        raise invalid("value", "a temperature between 0 and 2, or default") from None


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
