"""The orchestration tools' shared ground, and ``sys_session_send``.

:class:`Orchestration` is built once by the runtime and reached by a session's tools
(``SessionTools.orchestration``). It holds what the tools act through and the steps
they share — finding a caller's children, checking a new child's harness and model,
dispatching a message to a child — and implements ``sys_session_send``. Arguments are
checked first (:mod:`omnigent.core.tools._agent_args`), then everything that can be known
before a child is created or messaged, so a refused call changes nothing.

The other tools are functions over it: :mod:`omnigent.core.tools._orchestration_manage`
(create, cancel, close, share), :mod:`omnigent.core.tools._orchestration_reads` (list,
history, info) and :mod:`omnigent.core.tools._orchestration_agents` (the agent lookups,
the model list).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..._ids import new_id, now
from ...errors import ConfigError, OmnigentError
from ...providers import load_provider_config, localise_model
from ...spec import AgentSpec
from ...stores import SessionRow, Store, WorkRow
from ...tools import ToolError
from ..tools import (
    SendArgs,
    TypedError,
    is_closed,
    parse_send,
    split_title,
)
from ..work import Dispatch, new_work_id
from ._agents import AgentCatalog
from ._host import ActorHost
from ._messages import Messages
from ._sessions import SessionRecords

if TYPE_CHECKING:
    from ..tools import SessionTools

__all__ = ["Orchestration"]

log = logging.getLogger(__name__)


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
        # Named sends find-or-create one at a time, and a child being sent to is
        # reserved until its dispatch is watched: two sends never make twin children
        # or two dispatches to one child, even from concurrent tool calls.
        self._naming = trio.Lock()
        self._reserved: set[str] = set()

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
        granted = tools.spec.granted_sub_agents()
        sub = granted.get(args.agent)
        if sub is None:
            known = ", ".join(granted) or "none (the spec's tools.agents is empty)"
            raise ToolError(
                f"sub-agent {args.agent!r} not found in agent spec (you may dispatch to: {known})"
            )
        async with self._naming:  # one find-or-create at a time: no twin children
            child, title = await self._named_child(tools, caller, args, sub)
            self._reserved.add(child.id)
        try:
            return await self.dispatch(tools, caller, child, args.agent, title, args.message)
        finally:
            self._reserved.discard(child.id)

    async def _named_child(
        self, tools: SessionTools, caller: SessionRow, args: SendArgs, sub: AgentSpec
    ) -> tuple[SessionRow, str]:
        """The open child ``agent:title`` of the caller (free to take work), or a new one."""
        assert args.agent is not None
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
            self.refuse_busy(existing.id, f"sub-agent {args.agent!r} title {title!r}")
            return existing, title
        model_override = await self.model_for(args.agent, sub, args.model)
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
        return await self.sessions.row(snapshot.id), title

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
        agent, title = split_title(target.title)
        if agent is None:
            agent = (await self.sessions.snapshot(target)).agent_name
        self.refuse_busy(target.id, f"session {target.id!r}")
        self._reserved.add(target.id)
        try:
            return await self.dispatch(tools, caller, target, agent, title or "", args.message)
        finally:
            self._reserved.discard(target.id)

    def refuse_busy(self, child_id: str, what: str) -> None:
        """Refuse a child that has a dispatch in flight (or one being sent right now).

        Raises:
            ToolError: it has.
        """
        dispatch = self.host.subagents.open_for(child_id)
        if dispatch is not None or child_id in self._reserved:
            work = f" ({dispatch.row.work_id})" if dispatch is not None else ""
            raise ToolError(
                f"{what} already has a launching or running turn{work}; "
                "wait for its result in your inbox, or stop it with sys_cancel_task, "
                "before sending again"
            )

    async def model_for(self, agent: str, sub: AgentSpec, model: str | None) -> str | None:
        """Check that a new child of ``sub`` can start, and spell ``model`` for it."""
        try:
            harness = self.host.harness_of(sub, None)
            info = self.host.harnesses.info(harness)
        except OmnigentError as exc:
            raise ToolError(f"sub-agent {agent!r} cannot start: {exc.message}") from None
        missing = self.host.harnesses.unavailable_reason(harness)
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
        mismatch = self.host.harnesses.model_problem(harness, model)
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

    async def dispatch(
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
            item = await self.messages.compose(child.id, message, "user", item_id=row.message_id)
            dispatch = Dispatch(row)

            def watch() -> None:
                # Just before the enqueue, with no checkpoint between: no turn of the
                # child can take the message before the dispatch is watched.
                self.host.subagents.watch(dispatch)
                work.start(dispatch)

            # A message not handed over is not stored (hand_over takes it back).
            await self.messages.hand_over(child.id, item, before=watch)
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

    async def tree_target(self, caller: SessionRow, raw: Any, tool: str) -> SessionRow:
        """The session ``raw["conversation_id"]`` names, if it is in the caller's tree.

        Raises:
            ToolError: bad arguments; TypedError ``session_not_found`` or
            ``session_out_of_tree``.
        """
        from ...tools import ArgField, check_args, non_empty_string

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
