"""The orchestration tools that change things: send, create, cancel, close.

:class:`Orchestration` is built once by the runtime and reached by a session's tools
(``SessionTools.orchestration``); each method is one tool call from a calling session
and answers the tool's output string. Arguments are checked first
(:mod:`omnigent.tools._agent_args`), then everything that can be known before a child
is created or messaged — the sub-agent, the model and its family, whether the child's
harness can start here — so a refused call changes nothing.

The read-only tools (list, history, info, agents, models) are in
:mod:`._orchestration_reads`, over the same object.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .._ids import new_id, now
from ..errors import ConfigError, Forbidden, NotFound, OmnigentError, SpecError
from ..providers import family_mismatch, load_provider_config, localise_model
from ..spec import AgentSpec
from ..stores import SessionRow, Store, WorkRow
from ..tools._agent_args import (
    CLOSED_LABEL,
    SendArgs,
    TypedError,
    closed_title,
    is_closed,
    parse_cancel,
    parse_create,
    parse_send,
    split_title,
)
from ..tools._args import ToolError
from ..tools._paths import resolve_inside
from ._agents import AgentCatalog
from ._host import ActorHost
from ._messages import Messages
from ._sessions import SessionRecords
from ._subagents import Dispatch, new_work_id

if TYPE_CHECKING:
    from ._dispatch import SessionTools

__all__ = ["CANCEL_WAIT", "MAX_SPEC_BYTES", "Orchestration"]

log = logging.getLogger(__name__)

# How long sys_cancel_task waits for the child to confirm it stopped.
CANCEL_WAIT = 10.0
MAX_SPEC_BYTES = 1 << 20


class Orchestration:
    """What the orchestration tools do. Made by the runtime; no state of its own."""

    def __init__(
        self,
        *,
        store: Store,
        host: ActorHost,
        sessions: SessionRecords,
        messages: Messages,
        agents: AgentCatalog,
        home: Path,
    ) -> None:
        self.store = store
        self.host = host
        self.sessions = sessions
        self.messages = messages
        self.agents = agents
        self.home = home

    async def caller(self, tools: SessionTools) -> SessionRow:
        return await self.sessions.row(tools.session_id)

    # -- sys_session_send ----------------------------------------------------------------

    async def send(self, tools: SessionTools, raw: Any) -> str:
        """``sys_session_send``: dispatch work to a named sub-agent or a direct child."""
        try:
            args = parse_send(raw)
            caller = await self.caller(tools)
            if args.session_id is not None:
                return await self._send_by_id(tools, caller, args)
            return await self._send_named(tools, caller, args)
        except ToolError as exc:
            return exc.render()

    async def _send_named(self, tools: SessionTools, caller: SessionRow, args: SendArgs) -> str:
        assert args.agent is not None
        granted = granted_sub_agents(tools.spec)
        sub = granted.get(args.agent)
        if sub is None:
            known = ", ".join(granted) or "none (the spec's tools.agents is empty)"
            raise ToolError(
                f"sub-agent {args.agent!r} not found in agent spec (you may dispatch to: {known})"
            )
        title = args.title or await self._next_title(caller.id, args.agent)
        existing = await self.find_named(caller.id, args.agent, title)
        if existing is not None:
            if args.model is not None:
                raise ToolError(
                    f"sys_session_send 'model' applies only when a sub-agent session is first "
                    f"created; {args.agent!r} title {title!r} already exists as {existing.id}. "
                    "Continue without 'model', or close the session (sys_session_close) and "
                    "send again to start a fresh one on that model"
                )
            self._refuse_busy(existing.id, f"sub-agent {args.agent!r} title {title!r}")
            return await self._dispatch(tools, caller, existing, args.agent, title, args.message)
        model_override = await self._model_for(args.agent, sub, args.model)
        path = args.agent if caller.sub_agent is None else f"{caller.sub_agent}/{args.agent}"
        try:
            snapshot = await self.sessions.create(
                caller.agent_id,
                title=f"{args.agent}:{title}",
                parent_session_id=caller.id,
                harness_override=None,
                model_override=model_override,
                labels=None,
                initial_items=(),
                owner=caller.owner,
                viewer=None,
                agent_version=caller.agent_version,
                sub_agent=path,
                cwd=str(await tools.cwd()),  # a child works where its parent works
            )
        except OmnigentError as exc:
            raise ToolError(f"could not create the sub-agent session: {exc.message}") from None
        child = await self.sessions.row(snapshot.id)
        return await self._dispatch(tools, caller, child, args.agent, title, args.message)

    async def _send_by_id(self, tools: SessionTools, caller: SessionRow, args: SendArgs) -> str:
        assert args.session_id is not None
        target = await self.store.get_session(args.session_id)
        if target is None or args.session_id in self.host.deleting:
            raise TypedError("session_not_found", f"no session {args.session_id!r}")
        if target.parent_session_id != caller.id:
            raise TypedError(
                "session_out_of_tree",
                f"{args.session_id!r} is not a direct child of the calling session; "
                "sys_session_send by session_id is child-only (use sys_session_list)",
            )
        if is_closed(target.labels, target.title):
            raise TypedError(
                "session_closed",
                f"{args.session_id!r} is closed; create a new session to continue",
            )
        self._refuse_busy(target.id, f"session {target.id!r}")
        agent, title = split_title(target.title)
        if agent is None:
            agent = (await self.sessions.snapshot(target)).agent_name
        return await self._dispatch(tools, caller, target, agent, title or "", args.message)

    def _refuse_busy(self, child_id: str, what: str) -> None:
        dispatch = self.host.subagents.open_for(child_id)
        if dispatch is not None:
            raise ToolError(
                f"{what} already has a launching or running turn ({dispatch.row.work_id}); "
                "wait for its result in your inbox, or stop it with sys_cancel_task, "
                "before sending again"
            )

    async def _model_for(self, agent: str, sub: AgentSpec, model: str | None) -> str | None:
        """Check that a new child of ``sub`` can start, and spell ``model`` for it."""
        try:
            harness = self.host.harness_of(sub, None)
            info = self.host.harnesses.info(harness)
        except OmnigentError as exc:
            raise ToolError(f"sub-agent {agent!r} cannot start: {exc.message}") from None
        missing = info.unavailable()
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
        mismatch = family_mismatch(harness, info.model_family, model)
        if mismatch is not None:
            raise ToolError(
                f"sys_session_send 'model' rejected for sub-agent {agent!r}: {mismatch}"
            )
        try:
            config = await trio.to_thread.run_sync(load_provider_config, self.home)
        except ConfigError as exc:
            raise ToolError(f"cannot read the provider configuration: {exc.message}") from None
        provider = config.for_worker(harness, sub.executor.config.base_url)
        spelled = localise_model(model, provider, config.gateway_prefixes)
        if spelled != model:
            log.info("localised model %r -> %r for sub-agent %r", model, spelled, agent)
        return spelled

    async def _next_title(self, parent_id: str, agent: str) -> str:
        taken = {
            split_title(row.title)[1]
            for row in await self.children(parent_id)
            if split_title(row.title)[0] == agent
        }
        number = len(taken) + 1
        while f"{agent}-{number}" in taken:
            number += 1
        return f"{agent}-{number}"

    async def children(self, parent_id: str, *, limit: int = 1000) -> list[SessionRow]:
        """The parent's children, newest first (at most ``limit``)."""
        rows: list[SessionRow] = []
        after: str | None = None
        while len(rows) < limit:
            page = await self.store.list_sessions(
                parent_session_id=parent_id, limit=100, after=after
            )
            rows.extend(page.rows)
            if not page.has_more or not page.rows:
                break
            after = page.rows[-1].id
        return rows[:limit]

    async def find_named(self, parent_id: str, agent: str, title: str) -> SessionRow | None:
        """The open child ``agent:title`` of ``parent_id``, if there is one."""
        for row in await self.children(parent_id):
            if row.sub_agent is None or is_closed(row.labels, row.title):
                continue
            if split_title(row.title) == (agent, title) and row.id not in self.host.deleting:
                return row
        return None

    async def _dispatch(
        self,
        tools: SessionTools,
        caller: SessionRow,
        child: SessionRow,
        agent: str,
        title: str,
        message: str,
    ) -> str:
        """Record a dispatch, hand the message to the child, and watch it."""
        work = tools.work
        if work is None:
            raise ToolError("this session cannot dispatch work (it has no actor)")
        row = WorkRow(
            work_id=new_work_id(),
            parent_session_id=caller.id,
            child_session_id=child.id,
            agent=agent,
            title=title,
            message_id=new_id("item"),
            status="launching",
            output=None,
            created_at=now(),
        )
        await self.store.insert_work(row)
        handed = False
        try:
            item = await self.messages.accept(child.id, message, "user", item_id=row.message_id)
            # From here to the enqueue nothing awaits: no turn of the child can take
            # the message before the dispatch is watched.
            actor = self.host.actor(child.id)
            dispatch = Dispatch(row)
            self.host.subagents.watch(dispatch)
            work.start(dispatch)
            actor.enqueue(item)
            handed = True
        except OmnigentError as exc:
            raise ToolError(f"could not send to {child.id}: {exc.message}") from None
        finally:
            if not handed:  # never handed out: the entry must not linger as open
                with trio.move_on_after(5, shield=True):
                    await self.store.drop_work(row.work_id)
        try:
            await self.host.turn_changed(child.id)
        except Exception:
            log.warning("could not announce %s to its parent", child.id, exc_info=True)
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

    # -- sys_session_create ----------------------------------------------------------------

    async def create(self, tools: SessionTools, raw: Any) -> str:
        """``sys_session_create``: a child of a registered agent or of a spec file."""
        try:
            args = parse_create(raw)
            caller = await self.caller(tools)
            if args.config_path is not None:
                spec = await self._spec_file(tools, args.config_path)
                try:
                    agent = await self.agents.create(spec, caller.owner)
                except Forbidden as exc:
                    raise TypedError("access_denied", exc.message) from None
                except OmnigentError as exc:
                    raise ToolError(f"cannot register {args.config_path}: {exc.message}") from None
            else:
                assert args.agent_id is not None
                agent = await self._registered(args.agent_id)
            spec = await self.host.agent_spec(agent.id, agent.version)
            model = await self._model_for(agent.name, spec, args.model)
            try:
                snapshot = await self.sessions.create(
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
                    cwd=str(await tools.cwd()),
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
                child = await self.sessions.row(snapshot.id)
                sent = json.loads(
                    await self._dispatch(
                        tools, caller, child, agent.name, args.title or "", args.message
                    )
                )
                handle.update(task_id=sent["task_id"], status="launching", message=sent["message"])
            return json.dumps(handle)
        except ToolError as exc:
            return exc.render()

    async def _registered(self, agent_id: str) -> Any:
        try:
            return await self.agents.get(agent_id)
        except NotFound:
            pass
        try:
            return await self.agents.get_by_name(agent_id)
        except NotFound:
            raise TypedError(
                "agent_not_found", f"no agent {agent_id!r} (sys_agent_list lists them)"
            ) from None

    async def _spec_file(self, tools: SessionTools, config_path: str) -> AgentSpec:
        cwd = await tools.cwd()

        def read() -> AgentSpec:
            try:
                path = resolve_inside(cwd, config_path)
            except ToolError as exc:
                raise ToolError(
                    f"'config_path' must stay inside the working directory: {exc.message}"
                ) from None
            if not path.is_file():
                raise TypedError("config_not_found", f"no agent spec file at {config_path!r}")
            if path.stat().st_size > MAX_SPEC_BYTES:
                raise ToolError(f"{config_path!r} is larger than {MAX_SPEC_BYTES} bytes")
            try:
                return AgentSpec.load(path)
            except SpecError as exc:
                raise ToolError(
                    f"{config_path!r} is not a valid agent spec: {exc.message}"
                ) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ToolError(f"cannot read {config_path!r}: {exc}") from None

        return await trio.to_thread.run_sync(read)

    # -- sys_cancel_task -------------------------------------------------------------------

    async def cancel_task(self, tools: SessionTools, raw: Any) -> str:
        """``sys_cancel_task``: stop a sub-agent's work (or a background task)."""
        try:
            task_id = parse_cancel(raw)
        except ToolError as exc:
            return exc.render()
        dispatch = self.host.subagents.open_for(task_id)
        if dispatch is not None and dispatch.row.parent_session_id == tools.session_id:
            return await self._cancel(dispatch, task_id)
        if tools.cancel_background(task_id):
            return json.dumps({"cancelled": True, "task_id": task_id, "status": "cancelled"})
        done = await self.store.list_work(
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

    async def _cancel(self, dispatch: Dispatch, task_id: str) -> str:
        self.host.subagents.cancel(dispatch)
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

    # -- sys_session_close -------------------------------------------------------------------

    async def close(self, tools: SessionTools, raw: Any) -> str:
        """``sys_session_close``: retire a sub-agent session in the caller's tree."""
        try:
            caller = await self.caller(tools)
            target = await self.tree_target(caller, raw, "sys_session_close")
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
            actor = self.host.actors.get(target.id)
            if self.host.subagents.open_for(target.id) is not None or (
                actor is not None and actor.busy
            ):
                raise TypedError(
                    "sub_agent_busy",
                    f"{target.id!r} is still working; wait for its result or stop it with "
                    "sys_cancel_task, then close it",
                )
            await self.store.update_session(
                target.id,
                title=closed_title(target.title, target.id),
                labels={**target.labels, CLOSED_LABEL: "true"},
            )
            await self.host.turn_changed(target.id)
            return json.dumps(answer)
        except ToolError as exc:
            return exc.render()

    async def tree_target(self, caller: SessionRow, raw: Any, tool: str) -> SessionRow:
        """The session ``raw["conversation_id"]`` names, if it is in the caller's tree.

        Raises:
            ToolError: bad arguments; TypedError ``session_not_found`` or
            ``session_out_of_tree``.
        """
        from ..tools._args import ArgField, check_args, non_empty_string

        args = check_args(tool, raw, (ArgField("conversation_id", non_empty_string, True),))
        target_id: str = args["conversation_id"]
        target = await self.store.get_session(target_id)
        if target is None or target_id in self.host.deleting:
            raise TypedError("session_not_found", f"no session {target_id!r}")
        if target.root_session_id != caller.root_session_id:
            raise TypedError(
                "session_out_of_tree",
                f"{target_id!r} is not part of the calling session's tree",
            )
        return target


def granted_sub_agents(spec: AgentSpec) -> dict[str, AgentSpec]:
    """The sub-agents a spec may dispatch to by name (its ``tools.agents``), in order."""
    by_name = {sub.name: sub for sub in spec.sub_agents}
    return {name: by_name[name] for name in spec.tools.agents if name in by_name}
