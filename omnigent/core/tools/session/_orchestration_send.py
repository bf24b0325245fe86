"""``sys_session_send``, and the steps the orchestration tools share.

A send dispatches a message to a named sub-agent of the caller (finding or creating the
child ``agent:title``) or to a direct child by id. Arguments are checked first
(:mod:`._agent_args`), then everything that can be known before a child is created or
messaged, so a refused call changes nothing. Named sends find-or-create one at a time,
and a child being sent to is claimed until its dispatch is watched
(:class:`~._control.ChildClaims`): two sends never make twin children or two
dispatches to one child, even from concurrent tool calls.

Everything here acts through :class:`~._control.SessionControl`; the other tools'
modules (:mod:`._orchestration_manage`, :mod:`._orchestration_reads`,
:mod:`._orchestration_agents`) use the shared steps: the caller's tree, a new child's
model, a dispatch and its handle.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....errors import ConfigError, OmnigentError
from ....providers import localise_model
from ....spec import AgentSpec
from ....stores import SessionRow
from ....tools import ArgField, ToolError, check_args, non_empty_string
from .._agent_args import SendArgs, TypedError, is_closed, parse_send, split_title
from .._control import SessionControl
from ._acting import readable

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = [
    "child_cwd",
    "dispatch_to",
    "model_for",
    "next_title",
    "refuse_busy",
    "send",
    "tree_target",
]

log = logging.getLogger(__name__)


async def send(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_send``: dispatch work to a named sub-agent or a direct child.

    Raises:
        ToolError: the refusal (see :func:`~._agent_args.refusal`).
    """
    args = parse_send(raw)
    caller = await control.row(tools.session_id)
    if args.session_id is not None:
        return await _send_by_id(control, tools, caller, args)
    return await _send_named(control, tools, caller, args)


async def _send_named(
    control: SessionControl, tools: SessionTools, caller: SessionRow, args: SendArgs
) -> str:
    assert args.agent is not None
    granted = tools.spec.granted_sub_agents()
    sub = granted.get(args.agent)
    if sub is None:
        known = ", ".join(granted) or "none (the spec's tools.agents is empty)"
        raise ToolError(
            f"sub-agent {args.agent!r} not found in agent spec (you may dispatch to: {known})"
        )
    claims = tools.claims
    async with claims.naming:  # one find-or-create at a time: no twin children
        child, title = await _named_child(control, tools, caller, args, sub)
        claims.claim(child.id)
    try:
        return await dispatch_to(control, tools, caller, child, args.agent, title, args.message)
    finally:
        claims.release(child.id)


async def _named_child(
    control: SessionControl,
    tools: SessionTools,
    caller: SessionRow,
    args: SendArgs,
    sub: AgentSpec,
) -> tuple[SessionRow, str]:
    """The open child ``agent:title`` of the caller (free to take work), or a new one."""
    assert args.agent is not None
    title = args.title or await next_title(control, caller.id, args.agent)
    existing = await _find_named(control, caller.id, args.agent, title)
    if existing is not None:
        if args.model is not None:
            raise ToolError(
                f"sys_session_send 'model' applies only when a sub-agent session is first "
                f"created; {args.agent!r} title {title!r} already exists as {existing.id}. "
                "Continue without 'model', or close the session (sys_session_close) and "
                "send again to start a fresh one on that model"
            )
        refuse_busy(control, tools, existing.id, f"sub-agent {args.agent!r} title {title!r}")
        return existing, title
    model_override = await model_for(control, args.agent, sub, args.model)
    path = args.agent if caller.sub_agent is None else f"{caller.sub_agent}/{args.agent}"
    try:
        child = await control.create_child(
            caller,
            caller.agent_id,
            caller.agent_version,
            title=f"{args.agent}:{title}",
            model_override=model_override,
            cwd=await child_cwd(tools, sub),
            sub_agent=path,
        )
    except OmnigentError as exc:
        raise ToolError(f"could not create the sub-agent session: {exc.message}") from None
    return child, title


async def _send_by_id(
    control: SessionControl, tools: SessionTools, caller: SessionRow, args: SendArgs
) -> str:
    assert args.session_id is not None
    about = ("conversation_id", args.session_id)
    target = await control.find_session(args.session_id)
    if target is None or not await readable(control, caller, target):
        raise TypedError("session_not_found", about)
    if target.parent_session_id != caller.id:
        raise TypedError(
            "session_out_of_tree",
            about,
            "target is not a direct child of the calling session; "
            "sys_session_send by session_id is child-only.",
        )
    if is_closed(target.labels, target.title):
        raise TypedError(
            "session_closed",
            about,
            "target sub-agent session is closed; create a new session to continue.",
        )
    agent, title = split_title(target.title)
    if agent is None:
        agent = (await control.snapshot(target)).agent_name
    refuse_busy(control, tools, target.id, f"session {target.id!r}")
    tools.claims.claim(target.id)
    try:
        return await dispatch_to(control, tools, caller, target, agent, title or "", args.message)
    finally:
        tools.claims.release(target.id)


async def child_cwd(tools: SessionTools, spec: AgentSpec) -> str | None:
    """The directory given to a new child of the caller: its parent's working
    directory — unless the child's spec names an absolute ``os_env.cwd``: then only a
    directory chosen for the parent (by its client or the command line, inherited with
    the session) wins over it, not one omnigent made up (a per-session workspace).
    ``None``: the child inherits its parent's chosen directory, if any (see
    ``working_directory``); a session on a runner gives none (its children inherit the
    runner, and each resolves its own ``os_env.cwd`` there)."""
    own = spec.os_env.cwd if spec.os_env is not None else None
    if own and Path(own).is_absolute():
        return None
    return await tools.children_cwd()


def refuse_busy(control: SessionControl, tools: SessionTools, child_id: str, what: str) -> None:
    """Refuse a child that has a dispatch in flight (or one being sent right now).

    Raises:
        ToolError: it has.
    """
    dispatch = control.open_dispatch(child_id)
    if dispatch is not None or tools.claims.claimed(child_id):
        work = f" ({dispatch.row.work_id})" if dispatch is not None else ""
        raise ToolError(
            f"{what} already has a launching or running turn{work}; "
            "wait for its result in your inbox, or stop it with sys_cancel_task, "
            "before sending again"
        )


async def model_for(
    control: SessionControl, agent: str, sub: AgentSpec, model: str | None
) -> str | None:
    """Check that a new child of ``sub`` can start, and spell ``model`` for it."""
    registry = control.harnesses
    try:
        harness = control.harness_of(sub)
        info = registry.info(harness)
    except OmnigentError as exc:
        raise ToolError(f"sub-agent {agent!r} cannot start: {exc.message}") from None
    missing = registry.unavailable_reason(harness)
    if missing is not None:
        raise ToolError(
            f"sub-agent {agent!r} can't start on this machine: {missing} (or don't "
            f"dispatch to {agent!r} here)"
        )
    if model is None:
        return None
    if not info.accepts_model:
        raise ToolError(
            f"sys_session_send 'model' is not supported for sub-agent {agent!r}: harness "
            f"{harness!r} cannot apply a model chosen at dispatch. Omit 'model' to use "
            "the model its spec names"
        )
    # The registry's family guard, on the id as it was asked for.
    mismatch = registry.model_problem(harness, model)
    if mismatch is not None:
        raise ToolError(f"sys_session_send 'model' rejected for sub-agent {agent!r}: {mismatch}")
    try:
        config = await control.provider_config()
    except ConfigError as exc:
        raise ToolError(f"cannot read the provider configuration: {exc.message}") from None
    provider = config.for_worker(harness, sub.executor.config.base_url)
    spelled = localise_model(model, provider, config.gateway_prefixes)
    if spelled != model:
        log.info("localised model %r -> %r for sub-agent %r", model, spelled, agent)
    return spelled


async def next_title(control: SessionControl, parent_id: str, agent: str) -> str:
    """The first free ``<agent>-<n>`` title among the parent's children."""
    taken = {
        split_title(row.title)[1]
        for row in await control.children(parent_id)
        if split_title(row.title)[0] == agent
    }
    number = len(taken) + 1
    while f"{agent}-{number}" in taken:
        number += 1
    return f"{agent}-{number}"


async def _find_named(
    control: SessionControl, parent_id: str, agent: str, title: str
) -> SessionRow | None:
    """The open child ``agent:title`` of ``parent_id``, if there is one."""
    for row in await control.children(parent_id):
        if row.sub_agent is None or is_closed(row.labels, row.title):
            continue
        if split_title(row.title) == (agent, title):
            return row
    return None


async def dispatch_to(
    control: SessionControl,
    tools: SessionTools,
    caller: SessionRow,
    child: SessionRow,
    agent: str,
    title: str,
    message: str,
) -> str:
    """Dispatch ``message`` to ``child`` and answer the send's handle (JSON)."""
    work = tools.work
    if work is None:
        raise ToolError("this session cannot dispatch work (it has no actor)")
    try:
        await control.dispatch(work, caller, child, agent=agent, title=title, message=message)
    except OmnigentError as exc:
        raise ToolError(f"could not send to {child.id}: {exc.message}") from None
    return json.dumps(
        {
            "task_id": child.id,
            "kind": "sub_agent",
            "agent": agent,
            "title": title,
            "conversation_id": child.id,
            "status": "launching",
            "message": (
                f"[System: sub-agent {agent} title {title!r} launching as task {child.id}. "
                "Result will appear in your inbox; call sys_read_inbox to check or "
                "sys_cancel_task to interrupt it.]"
            ),
        }
    )


async def tree_target(
    control: SessionControl, caller: SessionRow, raw: Any, tool: str
) -> SessionRow:
    """The session ``raw["conversation_id"]`` names, if it is in the caller's tree.

    A session the caller's acting users cannot read is answered as a missing one (no
    existence oracle, issue 23 defect 10), in the tree or out of it.

    Raises:
        ToolError: bad arguments; TypedError ``session_not_found`` or
        ``session_out_of_tree``.
    """
    args = check_args(tool, raw, (ArgField("conversation_id", non_empty_string, True),))
    target_id: str = args["conversation_id"]
    about = ("conversation_id", target_id)
    target = await control.find_session(target_id)
    if target is None or not await readable(control, caller, target):
        raise TypedError("session_not_found", about)
    if target.root_session_id != caller.root_session_id:
        raise TypedError(
            "session_out_of_tree",
            about,
            "target conversation is not part of the caller's session tree; peek/close "
            "are scoped to the caller's root.",
        )
    return target
