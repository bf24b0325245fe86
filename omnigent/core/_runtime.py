"""The runtime: the library's API, and the owner of every session's work.

A :class:`Runtime` is made by :func:`~omnigent.core._open.open_runtime`, which owns its
lifetime.

Lifetimes nest ``Runtime ⊃ SessionActor ⊃ Turn ⊃ tool call``; transports call the
methods here and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import trio

from ..errors import (
    InvalidInput,
    RuntimeClosed,
    SessionNotFound,
)
from ..harnesses.base import HarnessFactory
from ..harnesses.registry import HarnessRegistry
from ..model import (
    ChildSessionSummary,
    ElicitationParams,
    Event,
    Item,
    MessageItem,
    structure,
)
from ..model._wire import unstructure
from ..spec import AgentSpec, PolicySpec
from ..stores import SessionRow, Store
from . import _agents as agents_api
from . import _asking as asking
from . import _sessions as sessions_api
from ._bus import EventBus, Subscription
from ._dispatch import ToolPlace
from ._elicitations import ACTIONS, Elicitations, Resolution
from ._files import FileService
from ._host import ActorHost
from ._inputs import ApprovalData, McpElicitationData, parse_event, parse_message_content
from ._permissions import Permissions
from ._policies import Verdict
from ._records import (
    Agent,
    FileInfo,
    ItemPage,
    MessageAccepted,
    SessionPage,
    SessionSnapshot,
)
from ._session import SessionActor
from ._streams import open_turn_stream
from ._tools import Tool, ToolRegistry

__all__ = ["Runtime"]

log = logging.getLogger(__name__)

_UNFINISHED = ("launching", "running", "waiting")


class Runtime:
    """Sessions, agents, tools and harnesses behind one store. Made by ``open_runtime``."""

    def __init__(
        self,
        *,
        store: Store,
        bus: EventBus,
        nursery: trio.Nursery,
        http: httpx.AsyncClient,
        harnesses: HarnessRegistry,
        place: ToolPlace,
        default_policies: Sequence[PolicySpec] = (),
    ) -> None:
        self.store = store
        self.bus = bus
        self.http = http
        self.harnesses = harnesses
        self.tools = ToolRegistry()
        self.files = FileService(store)
        self.elicitations = Elicitations(store, bus)
        self.permissions = Permissions(store)
        self.host = ActorHost(
            nursery=nursery,
            store=store,
            bus=bus,
            http=http,
            harnesses=harnesses,
            tools=self.tools,
            files=self.files,
            elicitations=self.elicitations,
            place=place,
            default_policies=default_policies,
            permissions=self.permissions,
        )
        self.host.on_turn_changed = lambda session_id: sessions_api.announce_to_parent(
            self, session_id
        )

    @property
    def closing(self) -> bool:
        """Whether the runtime is shutting down (no new work is accepted)."""
        return self.host.closing

    # -- agents ------------------------------------------------------------------------

    async def create_agent(
        self, spec: AgentSpec | Mapping[str, Any], *, owner: str = "local"
    ) -> Agent:
        """Register an agent, or a new version of the agent with the same name.

        Raises:
            SpecError: the spec is invalid (a bad function policy reference included).
            UnknownHarness: it names no known harness. Forbidden: another user owns
            the name.
        """
        return await agents_api.create_agent(self, spec, owner)

    async def get_agent(self, agent_id: str) -> Agent:
        """The latest version of an agent. Raises AgentNotFound."""
        return await agents_api.agent_view(self, await self.store.get_agent(agent_id), agent_id)

    async def get_agent_by_name(self, name: str) -> Agent:
        """The latest version of the agent called ``name``. Raises AgentNotFound."""
        return await agents_api.agent_view(self, await self.store.get_agent_by_name(name), name)

    async def list_agents(self) -> list[Agent]:
        return [await agents_api.agent_view(self, r, r.id) for r in await self.store.list_agents()]

    async def get_agent_spec(self, agent_id: str, version: int | None = None) -> AgentSpec:
        """The spec of an agent version (the latest by default). Raises AgentNotFound."""
        return await self.host.agent_spec(agent_id, version)

    # -- sessions ----------------------------------------------------------------------

    async def create_session(
        self,
        agent_id: str,
        *,
        title: str | None = None,
        parent_session_id: str | None = None,
        harness_override: str | None = None,
        model_override: str | None = None,
        labels: Mapping[str, str] | None = None,
        initial_items: Sequence[Any] = (),
        owner: str = "local",
    ) -> SessionSnapshot:
        """Create a session of an agent (its current version).

        Raises:
            AgentNotFound, SessionNotFound (parent), BadRequest / UnknownHarness
            (override), InvalidInput (model override, labels, initial items).
        """
        return await sessions_api.create_session(
            self,
            agent_id,
            title=title,
            parent_session_id=parent_session_id,
            harness_override=harness_override,
            model_override=model_override,
            labels=labels,
            initial_items=initial_items,
            owner=owner,
        )

    async def child_summary(self, session_id: str) -> ChildSessionSummary:
        """A session as its parent lists it (``child_sessions``). Raises SessionNotFound."""
        return await sessions_api.child_summary(self, await self.get_session(session_id))

    async def get_session(self, session_id: str) -> SessionSnapshot:
        """The session's snapshot. Raises SessionNotFound."""
        return await self.snapshot(await self.session_row(session_id))

    async def session_row(self, session_id: str) -> SessionRow:
        row = await self.store.get_session(session_id)
        if row is None:
            raise SessionNotFound(session_id)
        return row

    async def snapshot(self, row: SessionRow) -> SessionSnapshot:
        return await sessions_api.snapshot(self, row)

    async def list_sessions(
        self,
        *,
        agent_name: str | None = None,
        parent_session_id: str | None = None,
        limit: int = 20,
        after: str | None = None,
        viewer: str | None = None,
    ) -> SessionPage:
        """Sessions, newest first, ``limit`` at a time; ``after`` is the previous last id.

        ``viewer`` limits the list to sessions that user may read.
        """
        return await sessions_api.list_sessions(
            self,
            agent_name=agent_name,
            parent_session_id=parent_session_id,
            limit=limit,
            after=after,
            viewer=viewer,
        )

    async def update_session(self, session_id: str, **changes: Any) -> SessionSnapshot:
        """Change ``title``, ``labels`` or ``model_override`` (``None`` clears)."""
        return await sessions_api.update_session(self, session_id, changes)

    async def delete_session(self, session_id: str) -> None:
        """Cancel all work of the session and its descendants, then delete them all."""
        await self.session_row(session_id)
        doomed = [session_id, *await self.store.descendant_ids(session_id)]
        self.host.deleting.update(doomed)  # from here no new work starts on them
        try:
            for sid in doomed:
                await self._stop_and_wait(sid)
            await self.bus.flush()
            await self.store.delete_sessions(doomed)
            for sid in doomed:
                self.bus.forget_session(sid)
        finally:
            self.host.deleting.difference_update(doomed)

    async def list_items(
        self,
        session_id: str,
        *,
        order: str = "asc",
        limit: int | None = None,
        after: str | None = None,
    ) -> ItemPage:
        """A session's history. ``after`` is an item id (exclusive)."""
        await self.session_row(session_id)
        if order not in ("asc", "desc"):
            raise InvalidInput.at("order", "must be 'asc' or 'desc'")
        if limit is not None and not 1 <= limit <= 1000:
            raise InvalidInput.at("limit", "must be between 1 and 1000")
        try:
            page = await self.store.list_items(session_id, order=order, limit=limit, after=after)
        except LookupError:
            raise InvalidInput.at("after", f"{after!r} is not an item of this session") from None
        items: tuple[Item, ...] = tuple(structure(i, Item) for i in page.rows)
        return ItemPage(
            items,
            items[0].id if items else None,
            items[-1].id if items else None,
            page.has_more,
        )

    # -- events in -----------------------------------------------------------------------

    async def send_message(
        self, session_id: str, content: str | Sequence[Any], *, role: str = "user"
    ) -> MessageAccepted:
        """Post a user message: starts a turn, or is buffered for the running one.

        The message is persisted before this returns.

        Raises:
            SessionNotFound; InvalidInput naming the bad block; RuntimeClosed.
        """
        item = await self.accept_message(session_id, content, role)
        status = self.host.actor(session_id).enqueue(item)
        return MessageAccepted(status, item.id)  # type: ignore[arg-type]

    async def accept_message(self, session_id: str, content: Any, role: str) -> MessageItem:
        """Validate and persist a message; nothing is stored if it is invalid."""
        if self.closing:
            raise RuntimeClosed()
        await self.session_row(session_id)
        blocks = parse_message_content(content, root="content")
        await self.files.check_references(blocks, root="content")
        item = MessageItem(role=role, content=blocks)  # type: ignore[arg-type]
        if session_id in self.host.deleting:
            raise SessionNotFound(session_id)
        await self.store.put_items(session_id, [unstructure(item, Item)])
        return item

    def open_turn_stream(
        self, session_id: str, content: str | Sequence[Any], *, role: str = "user"
    ) -> AbstractAsyncContextManager[tuple[MessageAccepted, AsyncIterator[Event]]]:
        """Send a message and stream the events of the turn that answers it.

        Yields the acceptance and an iterator over the session's events from now on,
        which ends with the terminal ``response.*`` event of the turn that handles
        the message (a new turn, the running turn if it took the message as an
        injection, or a continuation turn), or with the session's terminal status if
        a stop dropped the message.

        Resource handling: the subscription is released when the block exits.
        """
        return open_turn_stream(self, session_id, content, role)

    async def post_event(self, session_id: str, type: str, data: Any) -> dict[str, Any]:
        """Handle one ``{type, data}`` event as the HTTP and WebSocket routes do.

        Returns the answer body (``{"status": ..., "item_id": ...}`` for a message).

        Raises:
            InvalidInput naming ``type`` or the bad ``data`` field; SessionNotFound.
        """
        event = parse_event(type, data)
        if event.type == "message":
            accepted = await self.send_message(session_id, event.content, role=event.role)
            return accepted.to_dict()
        if isinstance(event.data, ApprovalData):
            approval = event.data
            resolved = await self.resolve_elicitation(
                session_id, approval.elicitation_id, approval.action, approval.content
            )
            return {"resolved": resolved}
        if isinstance(event.data, McpElicitationData):
            params = self.elicitations.params(
                event.data.message, "mcp_elicitation", requestedSchema=event.data.requestedSchema
            )
            return {"elicitation_id": await self.hold_elicitation(session_id, params)}
        if event.type == "interrupt":
            await self.interrupt(session_id)
        elif event.type == "stop_session":
            await self.stop_session(session_id)
        return {"status": "accepted"}

    async def interrupt(self, session_id: str) -> bool:
        """Cancel the running turn, which ends ``cancelled``. False if none was running."""
        await self.session_row(session_id)
        actor = self.host.actors.get(session_id)
        return actor.interrupt() if actor is not None else False

    async def stop_session(self, session_id: str) -> None:
        """Cancel the turn and everything else the session runs, and wait for it to end."""
        await self.session_row(session_id)
        await self._stop_and_wait(session_id)

    async def _stop_and_wait(self, session_id: str) -> None:
        actor = self.host.actors.get(session_id)
        if actor is not None:
            actor.stop()
            await actor.done.wait()

    # -- events out ----------------------------------------------------------------------

    @asynccontextmanager
    async def subscribe(
        self, session_id: str, after: int | None = None
    ) -> AsyncIterator[Subscription]:
        """The session's events with ``event_id > after`` (``None``: from now on).

        Resource handling: the subscription is released when the block exits.
        Raises SessionNotFound.
        """
        await self.session_row(session_id)
        async with self.bus.subscribe(session_id, after) as subscription:
            yield subscription

    # -- files ---------------------------------------------------------------------------

    async def upload_file(
        self,
        content: bytes,
        *,
        filename: str,
        content_type: str | None = None,
        owner: str = "local",
    ) -> FileInfo:
        """Store a file; its id can be used in ``input_image`` blocks."""
        return await self.files.upload(content, filename, content_type, owner)

    async def get_file(self, file_id: str) -> FileInfo:
        return await self.files.info(file_id)

    async def read_file(self, file_id: str) -> bytes:
        return await self.files.content(file_id)

    # -- extension points ----------------------------------------------------------------

    def register_tool(self, fn: Any, **options: Any) -> Tool:
        """Offer a Python callable (sync or async) as a tool to every session.

        See :meth:`omnigent.core._tools.ToolRegistry.register` for the options.
        """
        return self.tools.register(fn, **options)

    def register_harness(
        self, name: str, factory: HarnessFactory, *, aliases: Sequence[str] = ()
    ) -> None:
        """Make a harness available under ``name`` and ``aliases``."""
        self.harnesses.register(name, factory, aliases=aliases)

    # -- elicitations and policies --------------------------------------------------

    async def resolve_elicitation(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool:
        """Answer a pending elicitation owned by ``session_id``.

        Returns False (touching nothing) when ``session_id`` does not own it, or it is
        not pending.

        Raises:
            SessionNotFound; InvalidInput at ``action`` for anything but accept,
            decline or cancel.
        """
        await self.session_row(session_id)
        if action not in ACTIONS:
            raise InvalidInput.at("action", "must be one of 'accept', 'decline', 'cancel'")
        return self.elicitations.resolve(session_id, elicitation_id, action, content)

    async def elicit(
        self, session_id: str, params: ElicitationParams, *, mark_waiting: bool = False
    ) -> Resolution:
        """Ask the person behind ``session_id`` and wait for the answer.

        The caller's task holds the elicitation (a hook request, say): if it is
        cancelled — the caller went away — the elicitation is withdrawn.

        Raises:
            SessionNotFound.
        """
        await self.session_row(session_id)
        return await self.elicitations.ask(session_id, params, mark_waiting=mark_waiting)

    async def hold_elicitation(self, session_id: str, params: ElicitationParams) -> str:
        """Publish an elicitation the *session* holds until answered; returns its id.

        Unlike :meth:`elicit` this returns at once: the session's nursery keeps the
        elicitation open, and a stop (or delete, or shutdown) withdraws it.

        Raises:
            SessionNotFound; RuntimeClosed; Conflict if the session was stopped first.
        """
        return await asking.hold_elicitation(self, session_id, params)

    async def evaluate_policy(self, session_id: str, event: Any) -> Verdict:
        """Evaluate the session's policies (and the runtime defaults) on ``event``.

        ``event`` is a :class:`PolicyEvent` or its wire form ``{type, data,
        request_data?, context?}``. An ASK parks an elicitation on the session
        (``params.message = "<policy>: <reason>"``, phase ``tool_call``) and answers
        ALLOW on accept, DENY otherwise.

        Cancellation: withdraws a pending ASK.
        """
        return await asking.evaluate_policy(self, session_id, event)

    # -- state -----------------------------------------------------------------------

    def statistics(self) -> dict[str, int]:
        """Live work: sessions with an actor, tasks in the runtime nursery, subscribers."""
        return {
            "active_sessions": len(self.host.actors),
            "tasks": self.host.task_count,
            "subscribers": self.bus.statistics()["subscribers"],
        }

    def actor_if_running(self, session_id: str) -> SessionActor | None:
        return self.host.actors.get(session_id)
