"""Which orchestration tools a spec grants, and the function behind each name.

``tools.agents`` (the sub-agents a spec may dispatch to) grants the dispatch set —
send, list, history, info, close, cancel, the agent lookups and the model list;
``spawn: true`` grants it too, plus ``sys_session_create`` and
``sys_agent_download``. ``sys_cancel_task`` also comes with ``async_enabled`` (it
cancels background tasks as well), and ``sys_session_share`` with an
``agent_session_sharing`` other than ``none``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...spec import AgentSpec
from . import _orchestration_agents as agents
from . import _orchestration_manage as manage
from . import _orchestration_reads as reads
from ._control import SessionControl
from ._orchestration_send import send

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = ["DISPATCH_TOOLS", "SPAWN_TOOLS", "TOOLS", "granted_tools"]

Run = Callable[[SessionControl, "SessionTools", Any], Awaitable[str]]
"""One orchestration tool: the control, the caller's tools and the raw arguments in,
the tool's output out."""

TOOLS: dict[str, Run] = {
    "sys_session_send": send,
    "sys_session_create": manage.create,
    "sys_session_list": reads.session_list,
    "sys_session_get_history": reads.session_get_history,
    "sys_session_get_info": reads.session_get_info,
    "sys_session_close": manage.close,
    "sys_cancel_task": manage.cancel_task,
    "sys_session_share": manage.session_share,
    "sys_agent_get": agents.agent_get,
    "sys_agent_list": agents.agent_list,
    "sys_agent_download": agents.agent_download,
    "sys_list_models": agents.sys_list_models,
}

DISPATCH_TOOLS = (
    "sys_session_send",
    "sys_session_list",
    "sys_session_get_history",
    "sys_session_get_info",
    "sys_session_close",
    "sys_cancel_task",
    "sys_agent_get",
    "sys_agent_list",
    "sys_list_models",
)
SPAWN_TOOLS = ("sys_session_create", "sys_agent_download")


def granted_tools(spec: AgentSpec) -> tuple[str, ...]:
    """The orchestration tools ``spec`` grants, in the order they are offered."""
    names: list[str] = []
    if spec.tools.agents or spec.spawn:
        names += DISPATCH_TOOLS
    if spec.spawn:
        names += SPAWN_TOOLS
    if spec.async_enabled and "sys_cancel_task" not in names:
        names.append("sys_cancel_task")
    if spec.agent_session_sharing != "none":
        names.append("sys_session_share")
    return tuple(names)
