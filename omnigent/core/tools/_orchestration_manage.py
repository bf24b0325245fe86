"""The orchestration tools that manage children: create, cancel, close — and share.

Each function is one tool call from a calling session, acting through
:class:`~._control.SessionControl`, and answers the tool's output string.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio

from ...errors import Forbidden, OmnigentError
from ...model import Agent
from ...tools import ArgField, ToolError, check_args, non_empty_string
from ..asking import PUBLIC, check_level
from ..work import Dispatch
from ._agent_args import (
    CLOSED_LABEL,
    LEVELS,
    TypedError,
    closed_title,
    is_closed,
    parse_cancel,
    parse_create,
    parse_level,
    split_title,
)
from ._agent_files import read_spec
from ._control import SessionControl
from ._orchestration_send import dispatch_to, model_for, tree_target

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = ["CANCEL_WAIT", "cancel_task", "close", "create", "session_share"]

# How long sys_cancel_task waits for the child to confirm it stopped.
CANCEL_WAIT = 10.0


async def create(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_create``: a child of a registered agent or of a spec file."""
    try:
        args = parse_create(raw)
        caller = await control.row(tools.session_id)
        if args.config_path is not None:
            spec = await trio.to_thread.run_sync(read_spec, await tools.cwd(), args.config_path)
            try:
                # A spec file in the workspace is the model's (or a client's) writing,
                # not the operator's: it may not name programs to run.
                agent = await control.register_agent(spec, caller.owner)
            except Forbidden as exc:
                raise TypedError("access_denied", exc.message) from None
            except OmnigentError as exc:
                raise ToolError(f"cannot register {args.config_path}: {exc.message}") from None
        else:
            assert args.agent_id is not None
            agent = await _registered(control, args.agent_id)
        spec = await control.agent_spec(agent)
        model = await model_for(control, agent.name, spec, args.model)
        try:
            child = await control.create_child(
                caller,
                agent.id,
                agent.version,
                title=args.title,
                model_override=model,
                cwd=str(await tools.cwd()),  # a child works where its parent works
            )
        except OmnigentError as exc:
            raise ToolError(f"could not create the session: {exc.message}") from None
        handle: dict[str, Any] = {
            "conversation_id": child.id,
            "kind": "sub_agent",
            "agent_id": agent.id,
            "agent_name": agent.name,
            "title": args.title,
            "status": "created",
        }
        if args.message is not None:
            sent = json.loads(
                await dispatch_to(
                    control, tools, caller, child, agent.name, args.title or "", args.message
                )
            )
            handle.update(task_id=sent["task_id"], status="launching", message=sent["message"])
        return json.dumps(handle)
    except ToolError as exc:
        return exc.render()


async def _registered(control: SessionControl, agent_id: str) -> Agent:
    agent = await control.find_agent(agent_id)
    if agent is None:
        raise TypedError("agent_not_found", f"no agent {agent_id!r} (sys_agent_list lists them)")
    return agent


async def cancel_task(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_cancel_task``: stop a sub-agent's work (or a background task)."""
    try:
        task_id = parse_cancel(raw)
    except ToolError as exc:
        return exc.render()
    dispatch = control.open_dispatch(task_id)
    if dispatch is not None and dispatch.row.parent_session_id == tools.session_id:
        return await _cancel(control, dispatch, task_id)
    if tools.cancel_background(task_id):
        return json.dumps({"cancelled": True, "task_id": task_id, "status": "cancelled"})
    done = await control.dispatches(tools.session_id, task_id)
    if done:
        status = done[-1].status
        return json.dumps(
            {"cancelled": status == "cancelled", "task_id": task_id, "status": status}
        )
    return TypedError(
        "task_not_found",
        f"no running task {task_id!r} of this session (a task_id comes from a "
        "sys_session_send handle or sys_call_async)",
    ).render()


def _cancel_answer(task_id: str, status: str) -> str:
    return json.dumps({"cancelled": status == "cancelled", "task_id": task_id, "status": status})


async def _cancel(control: SessionControl, dispatch: Dispatch, task_id: str) -> str:
    control.cancel_dispatch(dispatch)
    with trio.move_on_after(CANCEL_WAIT):
        await dispatch.done.wait()
    if dispatch.done.is_set() and dispatch.result is not None:
        status = dispatch.delivered or dispatch.result[0]
        return json.dumps(
            {"cancelled": status == "cancelled", "task_id": task_id, "status": status}
        )
    return json.dumps(
        {
            "cancel_requested": True,
            "cancel_confirmed": False,
            "best_effort": True,
            "task_id": task_id,
            "status": "cancelling",
            "message": (
                "The sub-agent was asked to stop but has not confirmed yet (its harness "
                f"is still finishing after {CANCEL_WAIT:g} s). Its result is recorded as "
                "cancelled: a late answer is dropped. Use sys_read_inbox to see it."
            ),
        }
    )


async def close(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_close``: retire a sub-agent session in the caller's tree."""
    try:
        caller = await control.row(tools.session_id)
        target = await tree_target(control, caller, raw, "sys_session_close")
        if target.parent_session_id is None or target.sub_agent is None:
            raise TypedError(
                "session_not_a_sub_agent",
                f"{target.id!r} is not a named sub-agent session (top-level sessions and "
                "sessions made with sys_session_create are not closed this way)",
            )
        if target.id == caller.id:
            return "Error: a session cannot close itself"
        agent, title = split_title(target.title)
        answer: dict[str, Any] = {
            "closed": True,
            "conversation_id": target.id,
            "agent": agent,
            "title": title,
        }
        if is_closed(target.labels, target.title):
            return json.dumps({**answer, "already_closed": True})
        if control.open_dispatch(target.id) is not None or control.busy(target.id):
            raise TypedError(
                "sub_agent_busy",
                f"{target.id!r} is still working; wait for its result or stop it with "
                "sys_cancel_task, then close it",
            )
        await control.retitle(
            target,
            closed_title(target.title, target.id),
            {**target.labels, CLOSED_LABEL: "true"},
        )
        return json.dumps(answer)
    except ToolError as exc:
        return exc.render()


_SHARE_FIELDS = (
    ArgField("user_id", non_empty_string, required=True),
    ArgField("level", lambda v: None),
    ArgField("session_id", non_empty_string),
)


async def session_share(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_share``: offered only when the spec's ``agent_session_sharing``
    allows it; this session or one of its descendants, at read, edit or manage."""
    try:
        return await _share(control, tools, raw)
    except ToolError as exc:
        return exc.render()


async def _share(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    sharing = tools.spec.agent_session_sharing
    args = check_args("sys_session_share", raw, _SHARE_FIELDS)
    user_id, target = args["user_id"], args.get("session_id", tools.session_id)
    if user_id == PUBLIC and sharing != "public":
        raise ToolError(
            f"this agent may not make sessions public (agent_session_sharing: {sharing})"
        )
    level = parse_level(args.get("level", "read"))
    if target != tools.session_id and target not in await control.descendant_ids(tools.session_id):
        raise ToolError("only this session and its sub-sessions can be shared")
    try:
        grant = await control.grant(target, user_id, check_level(level, user_id))
    except OmnigentError as exc:
        raise ToolError(exc.message) from None
    names = {number: name for name, number in LEVELS.items()}
    return json.dumps(
        {
            "shared": True,
            "session_id": target,
            "user_id": grant.user_id,
            "level": names.get(grant.level, grant.level),
        }
    )
