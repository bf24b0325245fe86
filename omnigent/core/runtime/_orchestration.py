"""The runtime's side of the orchestration tools: :class:`Orchestration`.

It implements :class:`~omnigent.core.tools.SessionControl`, the narrow interface the
orchestration tools (``omnigent.core.tools``) act through, over the runtime's own
parts: the session and agent catalogs, the spec cache, the live work, the dispatches
watched, permissions and elicitations. The tools' rules and output strings are theirs;
each method here is one typed step they cannot take alone.

A tool runs inside its caller's turn, so its caller's tree is held here: the sessions
it creates, messages and closes are in that tree (or it only reads them), and every
step runs here, without a routed call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Protocol

import trio

from ..._ids import new_id, now
from ...harnesses.registry import HarnessRegistry
from ...model import (
    Agent,
    ElicitationRequest,
    InputText,
    Item,
    MessageAccepted,
    MessageItem,
    SessionPage,
    SessionSnapshot,
    structure,
)
from ...providers import ProviderConfig, load_provider_config
from ...spec import AgentSpec
from ...stores import SessionRow, Store, WorkRow
from ..asking import Elicitations, Grant, Permissions
from ..cluster import RunnerDirectory
from ..session import HistoryCache
from ..work import ChildWork, Dispatch, SubAgents, new_work_id
from ._agent_catalog import AgentCatalog
from ._live import LiveSessions
from ._session_catalog import SessionCatalog
from ._specs import AgentSpecs, sub_agent_spec

__all__ = ["HandOver", "Orchestration"]

log = logging.getLogger(__name__)

SCAN_LIMIT = 1000
"""The most sessions ``sys_session_list {agent_name}`` reads to find the newest of one
agent (the rows past it are reported as ``has_more``)."""


class HandOver(Protocol):
    """Stores a message and hands it to its session's actor, as one step
    (:meth:`~._messages.Messages.hand_over`)."""

    async def __call__(
        self, session_id: str, item: MessageItem, *, before: Callable[[], None] | None = None
    ) -> MessageAccepted: ...


class Orchestration:
    """What the orchestration tools act through (a :class:`~omnigent.core.tools.SessionControl`).

    Owned by the runtime; no state of its own.

    Args:
        store: session rows, items and dispatch rows.
        sessions, agents: the catalogs.
        specs: the spec cache and harness names.
        live: the live work of this process.
        subagents: the dispatches watched.
        permissions: owners and grants.
        elicitations: what sessions wait on a person for.
        hand_over: stores a message and gives it to its session's actor.
        histories: the kept histories (who sent a session's messages).
        home: where ``config.yaml`` (the model providers) is.
    """

    def __init__(
        self,
        *,
        store: Store,
        sessions: SessionCatalog,
        agents: AgentCatalog,
        specs: AgentSpecs,
        live: LiveSessions,
        subagents: SubAgents,
        permissions: Permissions,
        elicitations: Elicitations,
        hand_over: HandOver,
        histories: HistoryCache,
        home: Path,
        runners: RunnerDirectory | None = None,
    ) -> None:
        self._runners = runners
        self._store = store
        self._sessions = sessions
        self._agents = agents
        self._specs = specs
        self._live = live
        self._subagents = subagents
        self._permissions = permissions
        self._elicitations = elicitations
        self._hand_over = hand_over
        self._histories = histories
        self._home = home

    @property
    def harnesses(self) -> HarnessRegistry:
        return self._specs.harnesses

    # -- sessions ------------------------------------------------------------------------

    async def row(self, session_id: str) -> SessionRow:
        return await self._sessions.row(session_id)

    async def find_session(self, session_id: str) -> SessionRow | None:
        return await self._sessions.find(session_id)

    async def children(self, parent_id: str, *, limit: int = 1000) -> list[SessionRow]:
        rows: list[SessionRow] = []
        after: str | None = None
        while len(rows) < limit:
            page = await self._store.list_sessions(
                parent_session_id=parent_id, limit=100, after=after
            )
            rows.extend(r for r in page.rows if r.id not in self._live.deleting)
            if not page.has_more or not page.rows:
                break
            after = page.rows[-1].id
        return rows[:limit]

    async def descendant_ids(self, session_id: str) -> list[str]:
        return await self._store.descendant_ids(session_id)

    async def snapshot(self, row: SessionRow) -> SessionSnapshot:
        return await self._sessions.snapshot(row)

    async def list_sessions(
        self, *, viewer: str, agent_name: str | None, limit: int
    ) -> SessionPage:
        if agent_name is None:
            return await self._sessions.list(
                agent_name=None, parent_session_id=None, limit=limit, after=None, viewer=viewer
            )
        # The name a session is listed with: its sub-agent's, for a sub-agent's session
        # (its agent is its parent's). Matched on the rows, newest first, so that the
        # filter and the rows' ``agent_name`` agree; at most SCAN_LIMIT rows are read.
        names: dict[str, str | None] = {}
        matched: list[SessionRow] = []
        after: str | None = None
        scanned = 0
        while True:
            page = await self._store.list_sessions(
                limit=min(100, SCAN_LIMIT), after=after, viewer=viewer
            )
            for row in page.rows:
                if await self._listed_name(row, names) != agent_name:
                    continue
                if len(matched) == limit:
                    return await self._page(matched, has_more=True)
                matched.append(row)
            scanned += len(page.rows)
            if not page.has_more or not page.rows:
                return await self._page(matched, has_more=False)
            if scanned >= SCAN_LIMIT:
                return await self._page(matched, has_more=True)
            after = page.rows[-1].id

    async def _listed_name(self, row: SessionRow, names: dict[str, str | None]) -> str | None:
        """The agent name a session is listed with (``names``: agent names read so far)."""
        if row.sub_agent is not None:
            return row.sub_agent.rpartition("/")[2]
        if row.agent_id not in names:
            agent = await self._store.get_agent(row.agent_id)
            names[row.agent_id] = None if agent is None else agent.name
        return names[row.agent_id]

    async def _page(self, rows: Sequence[SessionRow], *, has_more: bool) -> SessionPage:
        return SessionPage(tuple([await self._sessions.snapshot(r) for r in rows]), has_more)

    async def latest_items(self, session_id: str, limit: int) -> list[Item]:
        page = await self._store.list_items(session_id, order="desc", limit=limit)
        return [structure(row, Item) for row in reversed(page.rows)]

    def pending_elicitations(self, session_id: str) -> Sequence[ElicitationRequest]:
        return self._elicitations.pending_for(session_id)

    def busy(self, session_id: str) -> bool:
        return self._live.busy(session_id)

    async def runners_online(self, runner_ids: Collection[str]) -> dict[str, bool]:
        if self._runners is None:
            return dict.fromkeys(runner_ids, False)
        return await self._runners.online(runner_ids)

    async def access_level(self, row: SessionRow, user_id: str) -> int:
        return await self._permissions.level(row, user_id)

    async def acting_users(self, row: SessionRow) -> frozenset[str]:
        users = {row.owner}
        for session_id in (row.id, *await self._store.ancestor_ids(row.id)):
            users |= await self._authors(session_id)
        return frozenset(users)

    async def _authors(self, session_id: str) -> frozenset[str]:
        """Who sent the session's messages: from its kept history, else the store (its
        pending messages included), never loading a history into the cache (only a
        session's actor does, so that a turn's own input is not in it twice)."""
        kept = self._histories.kept(session_id)
        if kept is not None:
            return kept.authors
        page = await self._store.list_items(session_id)
        return frozenset(
            author
            for data in page.rows
            if data.get("type") == "message" and isinstance(author := data.get("created_by"), str)
        )

    async def grant(self, session_id: str, user_id: str, level: int) -> Grant:
        return await self._permissions.grant(session_id, user_id, level)

    async def create_child(
        self,
        parent: SessionRow,
        agent_id: str,
        agent_version: int,
        *,
        title: str | None,
        model_override: str | None,
        cwd: str | None,
        sub_agent: str | None = None,
    ) -> SessionRow:
        row = await self._sessions.create(
            agent_id,
            title=title,
            parent_session_id=parent.id,
            harness_override=None,
            model_override=model_override,
            labels=None,
            initial_items=(),
            owner=parent.owner,
            viewer=None,
            agent_version=agent_version,
            sub_agent=sub_agent,
            cwd=cwd,
        )
        await self._sessions.announce_to_parent(row.id)
        return row

    async def retitle(self, row: SessionRow, title: str, labels: dict[str, str]) -> None:
        await self._store.update_session(row.id, title=title, labels=labels)
        await self._sessions.announce_to_parent(row.id)

    # -- agents --------------------------------------------------------------------------

    async def find_agent(self, ref: str) -> Agent | None:
        return await self._agents.find(ref)

    async def list_agents(self) -> list[Agent]:
        return await self._agents.list()

    async def agent_owner(self, agent_id: str) -> str | None:
        return await self._agents.owner_of(agent_id)

    async def agent_spec(self, agent: Agent) -> AgentSpec:
        return await self._specs.agent_spec(agent.id, agent.version)

    async def session_agent(self, row: SessionRow) -> tuple[Agent, AgentSpec]:
        stored = await self._store.get_agent(row.agent_id, row.agent_version)
        agent = self._agents.view(stored, row.agent_id)
        spec = await self._specs.agent_spec(agent.id, agent.version)
        if row.sub_agent is not None:
            spec = sub_agent_spec(spec, row.sub_agent, agent.id)
        return agent, spec

    async def register_agent(self, spec: AgentSpec, owner: str) -> Agent:
        return await self._agents.create(spec, owner, from_client=True)

    def harness_of(self, spec: AgentSpec, *, strict: bool = True) -> str:
        return self._specs.harness_of(spec, None, strict=strict)

    async def provider_config(self) -> ProviderConfig:
        return await trio.to_thread.run_sync(load_provider_config, self._home)

    # -- dispatches ----------------------------------------------------------------------

    def open_dispatch(self, child_id: str) -> Dispatch | None:
        return self._subagents.open_for(child_id)

    async def dispatch(
        self,
        work: ChildWork,
        parent: SessionRow,
        child: SessionRow,
        *,
        agent: str,
        title: str,
        message: str,
    ) -> WorkRow:
        message_id = new_id("item")
        row = WorkRow(
            work_id=new_work_id(),
            parent_session_id=parent.id,
            child_session_id=child.id,
            agent=agent,
            title=title,
            message_id=message_id,
            status="launching",
            output=None,
            created_at=now(),
        )
        await self._store.insert_work(row)
        handed = False
        try:
            # The parent hears first that work is on its way to the child — launching,
            # not busy — before the child can start on it (the original's honest
            # pre-start state); the child's turn then announces itself.
            await self._announce(child.id, launching=True)
            # The tool checked the message (a bounded string): one input_text block.
            item = MessageItem(role="user", content=(InputText(message),), id=message_id)
            dispatch = Dispatch(row)

            def watch() -> None:
                # Just before the enqueue, with no checkpoint between: no turn of the
                # child can take the message before the dispatch is watched.
                self._subagents.watch(dispatch)
                work.start(dispatch)

            # A message not handed over is not stored (hand_over takes it back).
            await self._hand_over(child.id, item, before=watch)
            handed = True
        finally:
            if not handed:  # never handed out: the entry must not linger as open
                with trio.move_on_after(5, shield=True):
                    await self._store.drop_work(row.work_id)
                    await self._announce(child.id)  # no longer launching
        return row

    async def _announce(self, session_id: str, *, launching: bool = False) -> None:
        try:
            await self._sessions.announce_to_parent(session_id, launching=launching)
        except Exception:
            log.warning("could not announce %s to its parent", session_id, exc_info=True)

    def cancel_dispatch(self, dispatch: Dispatch) -> None:
        self._subagents.cancel(dispatch)

    async def dispatches(self, parent_id: str, child_id: str) -> list[WorkRow]:
        return await self._store.list_work(
            parent_session_id=parent_id, child_session_id=child_id, open_only=False
        )
