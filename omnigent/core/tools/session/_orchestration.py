"""Which orchestration tools a spec grants, and the function behind each name.

As in the original omnigent, the discovery tools — ``sys_session_list``,
``sys_session_get_history``, ``sys_session_get_info``, ``sys_agent_get``,
``sys_agent_list``, ``sys_agent_download`` — and ``sys_cancel_task`` are offered to
every agent: they act with no more than the rights of the session's acting users
(:mod:`._acting`), so offering them grants nothing. The spec gates what acts on other
sessions: ``tools.agents`` (the sub-agents a spec may dispatch to) grants
``sys_session_send``, ``sys_session_close`` and ``sys_list_models``; ``spawn: true``
grants them too, plus ``sys_session_create``; an ``agent_session_sharing`` other than
``none`` offers ``sys_session_share`` (which, not offered, still answers a call by its
name with a refusal).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ....spec import AgentSpec
from .._control import SessionControl
from . import _orchestration_agents as agents
from . import _orchestration_manage as manage
from . import _orchestration_reads as reads
from ._orchestration_send import send

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = ["ALWAYS_TOOLS", "DISPATCH_TOOLS", "SPAWN_TOOLS", "TOOLS", "granted_tools"]

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

ALWAYS_TOOLS = (
    "sys_session_list",
    "sys_session_get_history",
    "sys_session_get_info",
    "sys_agent_get",
    "sys_agent_list",
    "sys_agent_download",
    "sys_cancel_task",
)
DISPATCH_TOOLS = ("sys_session_send", "sys_session_close", "sys_list_models")
SPAWN_TOOLS = ("sys_session_create",)


def granted_tools(spec: AgentSpec) -> tuple[str, ...]:
    """The orchestration tools ``spec`` is offered, in the order they are offered."""
    names: list[str] = []
    if spec.tools.agents or spec.spawn:
        names += DISPATCH_TOOLS
    if spec.spawn:
        names += SPAWN_TOOLS
    names += ALWAYS_TOOLS
    if spec.agent_session_sharing != "none":
        names.append("sys_session_share")
    return tuple(names)
