"""The orchestration tools that manage children: create, cancel, close — and share.

Each function is one tool call from a calling session, acting through
:class:`~._control.SessionControl`, and answers the tool's output string; a refusal is
raised (:class:`~omnigent.tools.ToolError`) and answered as the original omnigent's JSON
object. Sharing acts with the caller's acting users' rights (:mod:`._acting`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio

from ....errors import Conflict, Forbidden, InvalidInput, OmnigentError, UnknownHarness
from ....model import Agent
from ....tools import ArgField, ToolError, check_args, non_empty_string
from ...asking import MANAGE, PUBLIC, READ
from ...work import Dispatch
from .._agent_args import (
    CLOSED_LABEL,
    LEVELS,
    Refusal,
    TypedError,
    closed_title,
    is_closed,
    parse_cancel,
    parse_create,
    parse_level,
    split_title,
)
from .._control import SessionControl
from ._acting import acting_level
from ._agent_files import read_spec
from ._orchestration_send import child_cwd, dispatch_to, model_for, tree_target

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = ["cancel_task", "close", "create", "session_share"]


async def create(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_create``: a child of a registered agent or of a spec file."""
    args = parse_create(raw)
    caller = await control.row(tools.session_id)
    if args.config_path is not None:
        spec = await trio.to_thread.run_sync(read_spec, await tools.cwd(), args.config_path)
        try:
            # A spec file in the workspace is the model's (or a client's) writing,
            # not the operator's: it may not name programs to run.
            agent = await control.register_agent(spec, caller.owner)
        except Forbidden:
            raise TypedError("access_denied", ("config_path", args.config_path)) from None
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
            cwd=await child_cwd(tools, spec),
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


async def _registered(control: SessionControl, agent_id: str) -> Agent:
    agent = await control.find_agent(agent_id)
    if agent is None:
        raise TypedError("agent_not_found", ("agent_id", agent_id))
    return agent


CANCEL_REQUESTED = (
    "Cancel requested; cancellation has not been confirmed yet. Use sys_read_inbox to "
    "observe terminal status."
)
NATIVE_CANCEL = (
    "Stop requested; a native agent stops at its next step, so it may still finish the "
    "step it is in. Its result is recorded as cancelled (a late answer is dropped): use "
    "sys_read_inbox to observe terminal status."
)


async def cancel_task(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_cancel_task``: stop a sub-agent's work (or a background task).

    A dispatch is settled ``cancelled`` and its child told to stop at once; the answer
    does not wait for the child (its inbox line — exactly one — says when it stopped).
    """
    task_id = parse_cancel(raw)
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
    raise TypedError(
        "task_not_found",
        ("task_id", task_id),
        extra={
            "hint": (
                "sys_cancel_task stops a task of this session: a sub-agent task "
                "(sys_session_send's task_id) or a background task (sys_call_async's "
                "handle_id)."
            )
        },
    )


async def _cancel(control: SessionControl, dispatch: Dispatch, task_id: str) -> str:
    status = "running" if dispatch.taken else "launching"
    native = await _native(control, dispatch.child_id)
    control.cancel_dispatch(dispatch)
    answer: dict[str, Any] = {"cancel_requested": True, "cancel_confirmed": False}
    if native:
        answer["best_effort"] = True
    answer.update(
        task_id=task_id, status=status, message=NATIVE_CANCEL if native else CANCEL_REQUESTED
    )
    return json.dumps(answer)


async def _native(control: SessionControl, session_id: str) -> bool:
    """Whether the session runs a native agent (its own process: a stop reaches it at
    its next step)."""
    row = await control.find_session(session_id)
    if row is None:
        return False
    try:
        return control.harnesses.info((await control.snapshot(row)).harness).native
    except UnknownHarness:
        return False


async def close(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_close``: retire a sub-agent session in the caller's tree."""
    caller = await control.row(tools.session_id)
    target = await tree_target(control, caller, raw, "sys_session_close")
    about = ("conversation_id", target.id)
    if target.parent_session_id is None or target.sub_agent is None:
        raise TypedError(
            "session_not_a_sub_agent",
            about,
            "target conversation is not a named sub-agent session (a top-level "
            "conversation, or one made with sys_session_create); close only operates "
            "on sub-agents.",
        )
    if target.id == caller.id:
        raise ToolError("sys_session_close: a session cannot close itself")
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
            about,
            "target sub-agent is still working; wait for its result or stop it with "
            "sys_cancel_task, then close it.",
        )
    await control.retitle(
        target,
        closed_title(target.title, target.id),
        {**target.labels, CLOSED_LABEL: "true"},
    )
    return json.dumps(answer)


_SHARE_FIELDS = (
    ArgField("user_id", non_empty_string, required=True),
    ArgField("level", lambda v: None),
    ArgField("session_id", non_empty_string),
)
_NOT_ENABLED = (
    "sys_session_share: session sharing is not enabled for this agent (set "
    "agent_session_sharing: non-public or agent_session_sharing: public in the spec)"
)
_PUBLIC_NOT_ENABLED = (
    "sys_session_share: public ('__public__') sharing is not enabled for this agent "
    "(requires agent_session_sharing: public); grant a specific user instead"
)
_PUBLIC_READ_ONLY = "Public access is limited to read-only (level 1)"


async def session_share(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_session_share``: give a user a level on a session, as the caller's acting
    users could themselves (``PUT …/permissions``: manage, and never above their own
    level) — only when the spec's ``agent_session_sharing`` allows it.

    Answered by name even where it is not offered (``none``): a call the model makes
    anyway is refused as not enabled, not as an unknown tool.
    """
    sharing = tools.spec.agent_session_sharing
    args = check_args("sys_session_share", raw, _SHARE_FIELDS)
    user_id: str = args["user_id"]
    target_id: str = args.get("session_id", tools.session_id)
    about = {"session_id": target_id}
    if sharing == "none":
        raise Refusal({"error": _NOT_ENABLED, **about})
    if user_id == PUBLIC and sharing != "public":
        raise Refusal({"error": _PUBLIC_NOT_ENABLED, **about})
    level = parse_level(args.get("level", "read"))
    caller = await control.row(tools.session_id)
    target = await control.find_session(target_id)
    rights = 0 if target is None else await acting_level(control, caller, target)
    if target is None or rights < READ:
        raise TypedError("session_not_found", ("session_id", target_id))
    if rights < MANAGE or level > rights:  # sharing is managing; no grant above one's own
        raise TypedError("access_denied", ("session_id", target_id))
    if user_id == PUBLIC and level != READ:
        raise Refusal({"error": _PUBLIC_READ_ONLY, "status_code": 400, **about})
    try:
        grant = await control.grant(target.id, user_id, level)
    except InvalidInput as exc:  # as the server answers PUT …/permissions: its message
        message = exc.details[0].msg if exc.details else exc.message
        raise Refusal({"error": message, "status_code": 400, **about}) from None
    except Conflict as exc:
        raise Refusal({"error": exc.message, "status_code": 409, **about}) from None
    names = {number: name for name, number in LEVELS.items()}
    return json.dumps(
        {
            "shared": True,
            "session_id": target.id,
            "user_id": grant.user_id,
            "level": names.get(grant.level, grant.level),
        }
    )
