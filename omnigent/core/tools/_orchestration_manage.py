"""The orchestration tools that manage children: create, cancel, close — and share.

Each function is one tool call from a calling session over the runtime's
:class:`~._orchestration.Orchestration`, and answers the tool's output string.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio

from ...errors import Forbidden, NotFound, OmnigentError
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

if TYPE_CHECKING:
    from ..runtime import Orchestration
    from ._session_tools import SessionTools

__all__ = ["CANCEL_WAIT", "cancel_task", "close", "create", "session_share"]

# How long sys_cancel_task waits for the child to confirm it stopped.
CANCEL_WAIT = 10.0


async def create(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_session_create``: a child of a registered agent or of a spec file."""
    try:
        args = parse_create(raw)
        caller = await orch.caller(tools)
        if args.config_path is not None:
            spec = await trio.to_thread.run_sync(read_spec, await tools.cwd(), args.config_path)
            try:
                # A spec file in the workspace is the model's (or a client's) writing,
                # not the operator's: it may not name programs to run.
                agent = await orch.agents.create(spec, caller.owner, from_client=True)
            except Forbidden as exc:
                raise TypedError("access_denied", exc.message) from None
            except OmnigentError as exc:
                raise ToolError(f"cannot register {args.config_path}: {exc.message}") from None
        else:
            assert args.agent_id is not None
            agent = await _registered(orch, args.agent_id)
        spec = await orch.host.agent_spec(agent.id, agent.version)
        model = await orch.model_for(agent.name, spec, args.model)
        try:
            snapshot = await orch.sessions.create(
                agent.id,
                title=args.title,
                parent_session_id=caller.id,
                harness_override=None,
                model_override=model,
                labels=None,
                initial_items=(),
                owner=caller.owner,
                viewer=None,
                agent_version=agent.version,
                cwd=str(await tools.cwd()),  # a child works where its parent works
            )
        except OmnigentError as exc:
            raise ToolError(f"could not create the session: {exc.message}") from None
        handle: dict[str, Any] = {
            "conversation_id": snapshot.id,
            "kind": "sub_agent",
            "agent_id": agent.id,
            "agent_name": agent.name,
            "title": args.title,
            "status": "created",
        }
        if args.message is not None:
            child = await orch.sessions.row(snapshot.id)
            sent = json.loads(
                await orch.dispatch(
                    tools, caller, child, agent.name, args.title or "", args.message
                )
            )
            handle.update(task_id=sent["task_id"], status="launching", message=sent["message"])
        return json.dumps(handle)
    except ToolError as exc:
        return exc.render()


async def _registered(orch: Orchestration, agent_id: str) -> Agent:
    for lookup in (orch.agents.get, orch.agents.get_by_name):
        try:
            return await lookup(agent_id)
        except NotFound:
            continue
    raise TypedError("agent_not_found", f"no agent {agent_id!r} (sys_agent_list lists them)")


async def cancel_task(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_cancel_task``: stop a sub-agent's work (or a background task)."""
    try:
        task_id = parse_cancel(raw)
    except ToolError as exc:
        return exc.render()
    dispatch = orch.host.subagents.open_for(task_id)
    if dispatch is not None and dispatch.row.parent_session_id == tools.session_id:
        return await _cancel(orch, dispatch, task_id)
    if tools.cancel_background(task_id):
        return json.dumps({"cancelled": True, "task_id": task_id, "status": "cancelled"})
    done = await orch.store.list_work(
        parent_session_id=tools.session_id, child_session_id=task_id, open_only=False
    )
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


async def _cancel(orch: Orchestration, dispatch: Dispatch, task_id: str) -> str:
    orch.host.subagents.cancel(dispatch)
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


async def close(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_session_close``: retire a sub-agent session in the caller's tree."""
    try:
        caller = await orch.caller(tools)
        target = await orch.tree_target(caller, raw, "sys_session_close")
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
        actor = orch.host.actors.get(target.id)
        if orch.host.subagents.open_for(target.id) is not None or (
            actor is not None and actor.busy
        ):
            raise TypedError(
                "sub_agent_busy",
                f"{target.id!r} is still working; wait for its result or stop it with "
                "sys_cancel_task, then close it",
            )
        await orch.store.update_session(
            target.id,
            title=closed_title(target.title, target.id),
            labels={**target.labels, CLOSED_LABEL: "true"},
        )
        await orch.host.turn_changed(target.id)
        return json.dumps(answer)
    except ToolError as exc:
        return exc.render()


_SHARE_FIELDS = (
    ArgField("user_id", non_empty_string, required=True),
    ArgField("level", lambda v: None),
    ArgField("session_id", non_empty_string),
)


async def session_share(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_session_share``: offered only when the spec's ``agent_session_sharing``
    allows it; this session or one of its descendants, at read, edit or manage."""
    try:
        return await _share(tools, raw)
    except ToolError as exc:
        return exc.render()


async def _share(tools: SessionTools, raw: Any) -> str:
    sharing = tools.spec.agent_session_sharing
    args = check_args("sys_session_share", raw, _SHARE_FIELDS)
    user_id, target = args["user_id"], args.get("session_id", tools.session_id)
    if user_id == PUBLIC and sharing != "public":
        raise ToolError(
            f"this agent may not make sessions public (agent_session_sharing: {sharing})"
        )
    level = parse_level(args.get("level", "read"))
    if target != tools.session_id and target not in await tools.descendants():
        raise ToolError("only this session and its sub-sessions can be shared")
    try:
        grant = await tools.permissions.grant(target, user_id, check_level(level, user_id))
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
