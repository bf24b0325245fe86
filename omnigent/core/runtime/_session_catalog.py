"""The sessions' catalog: creation with its validation, snapshots, listing, updates, items.

:class:`SessionCatalog` is owned by the runtime. It reads and writes session rows (the
store's) and builds the views a client sees (snapshots, child summaries, item pages:
the API's records); it starts no work of its own. The checks on the fields a client
sends (title, labels, ``model_override``, ``cwd``, ``initial_items``) are pure and live
in :mod:`._session_input`.

What only the holder of a session's tree knows (its live status, whether a turn runs,
its pending elicitations, its terminals) is read from :class:`~._live.LiveSessions`
when the tree is held here, and — for its pending elicitations — asked of the holder
otherwise (``pending_elsewhere``, given by the runtime: a routed call).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from ..._ids import new_id, now
from ...errors import AgentNotFound, BadRequest, InvalidInput, SessionNotFound
from ...model import (
    ChildSessionSummary,
    ChildSessionUpdated,
    ElicitationRequest,
    Item,
    ItemPage,
    MessageItem,
    Resource,
    SessionInfoUpdated,
    SessionPage,
    SessionSnapshot,
    SessionStatus,
    TaskStatus,
    Usage,
    item_text,
    structure,
    unstructure,
)
from ...stores import SessionRow, Store
from ..asking import Elicitations
from ..bus import EventBus
from ..cluster import Ownership
from ..tools import split_title, visible_title
from ..work import SubAgents
from ._files import FileService
from ._fork import fork_items
from ._inputs import MAX_MESSAGE_BYTES, check_message_bytes
from ._live import LiveSessions
from ._session_input import (
    InitialItem,
    check_changes,
    check_cwd,
    check_labels,
    check_model_override,
    check_runner_id,
    check_title,
)
from ._specs import AgentSpecs, sub_agent_spec

__all__ = ["PREVIEW_CHARS", "SessionCatalog"]

PREVIEW_CHARS = 200

PendingElsewhere = Callable[[SessionRow], Awaitable[tuple[ElicitationRequest, ...]]]
"""The pending elicitations of a session whose tree another server holds (its holder's)."""


class SessionCatalog:
    """Session rows and the views built from them. Owned by the ``Runtime``.

    Args:
        store, bus: the rows, and the live status and newest event id of the
            sessions whose tree is held here.
        specs: which spec a session runs.
        live: the live work of this process.
        files: checks file references in initial items.
        elicitations: the pending elicitations of sessions held here.
        subagents: open dispatches (a child's task status).
        ownership: where session trees are held.
        pending_elsewhere: asks a tree's holder for a session's pending elicitations.
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: EventBus,
        specs: AgentSpecs,
        live: LiveSessions,
        files: FileService,
        elicitations: Elicitations,
        subagents: SubAgents,
        ownership: Ownership,
        pending_elsewhere: PendingElsewhere,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._max_bytes = max_message_bytes
        self._store = store
        self._bus = bus
        self._specs = specs
        self._live = live
        self._files = files
        self._elicitations = elicitations
        self._subagents = subagents
        self._ownership = ownership
        self._pending_elsewhere = pending_elsewhere

    async def row(self, session_id: str) -> SessionRow:
        """The session's row. Raises SessionNotFound (also while it is being deleted)."""
        row = await self.find(session_id)
        if row is None:
            raise SessionNotFound(session_id)
        return row

    async def find(self, session_id: str) -> SessionRow | None:
        """The session's row, or None (also while it is being deleted)."""
        row = await self._store.get_session(session_id)
        if row is None or session_id in self._live.deleting:
            return None
        return row

    async def create(
        self,
        agent_id: str,
        *,
        title: str | None,
        parent_session_id: str | None,
        harness_override: str | None,
        model_override: str | None,
        labels: Mapping[str, str] | None,
        initial_items: Sequence[Any],
        owner: str,
        viewer: str | None,
        cwd: str | None = None,
        agent_version: int | None = None,
        sub_agent: str | None = None,
        runner_id: str | None = None,
    ) -> SessionRow:
        """See :meth:`Runtime.create_session`; returns the new session's row.

        ``agent_version`` and ``sub_agent`` (a path into that version's spec) make a
        sub-agent's session: it runs that sub-agent of the exact version its parent
        runs. A child's parent is not told here: the caller announces the new row.
        """
        title = check_title(title)
        cwd = check_cwd(cwd)
        runner_id = check_runner_id(runner_id)
        model_override = check_model_override(model_override)
        checked_labels = check_labels(labels)
        initial: list[InitialItem] = structure(
            list(initial_items), list[InitialItem], root="initial_items"
        )
        messages = [MessageItem(role=i.data.role, content=i.data.content) for i in initial]
        for index, message in enumerate(messages):
            where = f"initial_items[{index}].data.content"
            check_message_bytes(message.content, self._max_bytes, root=where)
            await self._files.check_references(message.content, root=where, viewer=viewer)
        agent = await self._store.get_agent(agent_id, agent_version)
        if agent is None:
            raise AgentNotFound(agent_id)
        spec = await self._specs.agent_spec(agent.id, agent.version)
        if sub_agent is not None:
            spec = sub_agent_spec(spec, sub_agent, agent.id)
        if harness_override is not None:
            if spec.executor.type != "omnigent":
                raise BadRequest(
                    f"agent {spec.name!r} runs executor type {spec.executor.type!r}, "
                    "which takes no harness_override"
                )
            harness_override = self._specs.harnesses.canonical(harness_override)
        self._specs.check_runnable(spec, harness_override, model_override)
        root = None
        if parent_session_id is not None:
            parent = await self.row(parent_session_id)
            root = parent.root_session_id
            cwd = cwd or parent.cwd  # a sub-agent works where its parent works
            runner_id = runner_id or parent.runner_id  # … and on its parent's runner
        session_id = new_id("conv")
        created = now()
        row = SessionRow(
            id=session_id,
            agent_id=agent.id,
            agent_version=agent.version,
            owner=owner,
            title=title,
            parent_session_id=parent_session_id,
            root_session_id=root or session_id,
            harness_override=harness_override,
            model_override=model_override,
            labels=checked_labels,
            status=SessionStatus.IDLE,
            last_event_id=0,
            turn_count=0,
            created_at=created,
            cwd=cwd,
            updated_at=created,
            sub_agent=sub_agent,
            runner_id=runner_id,
        )
        try:
            await self._store.insert_session(row, [unstructure(m, Item) for m in messages])
        except LookupError:  # the parent was deleted meanwhile
            raise SessionNotFound(parent_session_id or session_id) from None
        self._ownership.note(row.id, row.root_session_id)
        if parent_session_id is not None and (
            parent_session_id in self._live.deleting
            or await self._store.get_session(session_id) is None
        ):
            # The parent's delete started (or even finished) while this child was
            # being stored: it may have listed the tree before the child existed, or
            # taken the child with it. Either way the child is refused.
            await self._store.delete_sessions([session_id])
            raise SessionNotFound(parent_session_id)
        return row

    async def fork(
        self,
        source_id: str,
        *,
        up_to_item_id: str | None,
        title: str | None,
        owner: str,
        cwd: str | None,
        keep_cwd: bool = True,
    ) -> SessionSnapshot:
        """See :meth:`Runtime.fork_session`; without ``keep_cwd`` a fork given no
        ``cwd`` does not take the source's (it works in its own workspace)."""
        source = await self.row(source_id)
        if up_to_item_id is not None and not isinstance(up_to_item_id, str):
            raise InvalidInput.at("up_to_item_id", "must be an item id")
        if title is None and source.title is not None:
            title = f"{source.title} (fork)"
        title = check_title(title)
        cwd = check_cwd(cwd) or (source.cwd if keep_cwd else None)
        page = await self._store.list_items(source_id, include_pending=False)
        taken: list[Item] = [structure(data, Item) for data in page.rows]
        items = fork_items(taken, up_to_item_id, source=source_id)
        session_id = new_id("conv")
        created = now()
        row = attrs.evolve(
            source,
            id=session_id,
            owner=owner,
            title=title,
            parent_session_id=None,
            root_session_id=session_id,
            status="idle",
            last_event_id=0,
            turn_count=0,
            created_at=created,
            updated_at=created,
            cwd=cwd,
        )
        await self._store.insert_session(row, [unstructure(i, Item) for i in items])
        self._ownership.note(row.id, row.root_session_id)
        return await self.snapshot(row)

    async def current(self, session_id: str) -> SessionSnapshot:
        """The session's snapshot now: its ``last_event_id`` covers every event
        published before this call, and its status is the status as of that id.
        Raises SessionNotFound.

        The newest id published here (and the status published with it) is read
        *before* the row: an event still on its way to the store is counted by the
        bus, and once the bus has let go of the session (stored, nothing in flight) the
        row read after it has it. Read the other way round, an event stored while the
        row was being read was in neither. Status and id are always taken as a pair
        (see :func:`_head`), never one from the bus and the other from the row.
        """
        published = (self._bus.known_last_id(session_id), self._bus.status_of(session_id))
        return await self.snapshot(await self.row(session_id), published=published)

    async def snapshot(
        self, row: SessionRow, *, published: tuple[int, str | None] = (0, None)
    ) -> SessionSnapshot:
        """The session's snapshot (see the module docstring for where each part is read;
        ``published``: the newest event id and status the bus had published before
        ``row`` was read)."""
        spec = await self._specs.row_spec(row)
        harness = self._specs.harness_of(spec, row.harness_override, strict=False)
        usage = (await self._store.usage_of([row.id])).get(row.id, (Usage(), Usage()))
        if not self._ownership.owns(row.id):
            # Not held here (by another server, or by none): what the store says, and
            # the holder's pending elicitations. What this process published before
            # the row was read is written now (or refused: a lost lease): read again,
            # the row has what was stored of it.
            if published[0] > row.last_event_id:
                row = await self.find(row.id) or row
            status = SessionStatus(row.status)
            return _snapshot(
                row,
                spec,
                status=status,
                harness=harness,
                busy=status.active,
                pending=await self._pending_elsewhere(row),
                last_event_id=row.last_event_id,
                resources=(),
                usage=usage,
            )
        live = (self._bus.known_last_id(row.id), self._bus.status_of(row.id))
        last_event_id, status = _head(row, published, live)
        return _snapshot(
            row,
            spec,
            status=status,
            harness=harness,
            busy=self._live.busy(row.id),
            pending=tuple(self._elicitations.pending_for(row.id)),
            last_event_id=last_event_id,
            resources=tuple(self._live.resources_of(row.id)),
            usage=usage,
        )

    async def list(
        self,
        *,
        agent_name: str | None,
        parent_session_id: str | None,
        limit: int,
        after: str | None,
        viewer: str | None = None,
        cwd: str | None = None,
        top_level: bool = False,
    ) -> SessionPage:
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
            raise InvalidInput.at("limit", "must be an integer between 1 and 100")
        agent_id = None
        if agent_name is not None:
            agent = await self._store.get_agent_by_name(agent_name)
            if agent is None:
                return SessionPage((), False)
            agent_id = agent.id
        try:
            page = await self._store.list_sessions(
                agent_id=agent_id,
                parent_session_id=parent_session_id,
                limit=limit,
                after=after,
                viewer=viewer,
                cwd=check_cwd(cwd),
                top_level=top_level,
            )
        except LookupError:
            raise InvalidInput.at("after", f"unknown session {after!r}") from None
        return SessionPage(tuple([await self.snapshot(r) for r in page.rows]), page.has_more)

    async def update(self, session_id: str, changes: Mapping[str, Any]) -> SessionSnapshot:
        await self.row(session_id)
        fields = check_changes(changes)
        if "model_override" in fields:
            row = await self.row(session_id)
            spec = await self._specs.agent_spec(row.agent_id, row.agent_version)
            self._specs.check_runnable(spec, row.harness_override, fields["model_override"])
        if fields:
            await self._store.update_session(session_id, **fields)
        return await self.snapshot(await self.row(session_id))

    async def items(
        self,
        session_id: str,
        *,
        order: str = "asc",
        limit: int | None = None,
        after: str | None = None,
    ) -> ItemPage:
        """See :meth:`Runtime.list_items`."""
        await self.row(session_id)
        if order not in ("asc", "desc"):
            raise InvalidInput.at("order", "must be 'asc' or 'desc'")
        if limit is not None and not 1 <= limit <= 1000:
            raise InvalidInput.at("limit", "must be between 1 and 1000")
        try:
            page = await self._store.list_items(session_id, order=order, limit=limit, after=after)
        except LookupError:
            raise InvalidInput.at("after", f"{after!r} is not an item of this session") from None
        items: tuple[Item, ...] = tuple(structure(i, Item) for i in page.rows)
        return ItemPage(
            items,
            items[0].id if items else None,
            items[-1].id if items else None,
            page.has_more,
        )

    async def child_summary(
        self, child: SessionSnapshot, *, launching: bool = False
    ) -> ChildSessionSummary:
        """A child session as its parent lists it (and ``session.child_session.updated``).

        A named sub-agent (titled ``<agent>:<title>``) shows its sub-agent as ``agent``
        and ``tool`` and the rest of its title as ``session_name``; another child
        shows its agent's name and its title. ``current_task_status`` is the state of
        the child's work (:class:`~omnigent.model.TaskStatus`): ``launching`` while work
        sent to it waits for a turn to take it, ``in_progress`` while it runs or waits,
        ``completed``, ``failed`` or ``cancelled`` after its last turn; ``None`` before
        its first. ``launching`` (work was just sent to it) shows it so whatever its
        actor did meanwhile: not busy yet.
        """
        agent, name = split_title(child.title)
        if agent is None:
            agent, name = child.agent_name, visible_title(child.title)
        return ChildSessionSummary(
            id=child.id,
            title=child.title,
            agent=agent,
            tool=agent,
            session_name=name,
            status=child.status,
            busy=False if launching else child.busy,
            current_task_status=(
                TaskStatus.LAUNCHING if launching else await self._task_status(child)
            ),
            preview=await self._preview(child.id),
            labels=child.labels,
        )

    async def _task_status(self, child: SessionSnapshot) -> TaskStatus | None:
        dispatch = self._subagents.open_for(child.id)
        if dispatch is not None and dispatch.result is None and not dispatch.taken:
            return TaskStatus.LAUNCHING
        if child.status is SessionStatus.LAUNCHING:
            return TaskStatus.LAUNCHING
        if child.busy or child.status.active:
            return TaskStatus.IN_PROGRESS
        if dispatch is not None and dispatch.result is None:
            return TaskStatus.IN_PROGRESS
        if child.status is SessionStatus.FAILED:
            return TaskStatus.FAILED
        if child.status is SessionStatus.CANCELLED:
            return TaskStatus.CANCELLED
        row = await self._store.get_session(child.id)
        return TaskStatus.COMPLETED if row is not None and row.turn_count > 0 else None

    async def _preview(self, session_id: str) -> str | None:
        """The last assistant text of a session, truncated; None if it has none.

        Read straight from the store (the caller holds the row: no second read of it),
        and only assistant messages are structured — every child's turn end and
        conclusion announces a summary, so a stop of ten children did this twenty times.
        """
        if session_id in self._live.deleting:
            raise SessionNotFound(session_id)
        page = await self._store.list_items(session_id, order="desc", limit=50)
        for data in page.rows:
            if not _assistant_message(data):
                continue
            item = structure(data, Item)
            if isinstance(item, MessageItem):
                text = item_text(item)
                if text:
                    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
        return None

    async def announce_to_parent(
        self, session_id: str, *, changed: bool = False, launching: bool = False
    ) -> None:
        """Publish ``session.child_session.updated`` on the session's parent, if any
        (``launching``: work was just sent to it, see :meth:`child_summary`).

        With ``changed`` (its title, labels or model override changed), publish
        ``session.info.updated`` on the session itself first.
        """
        row = await self._store.get_session(session_id)
        if row is not None and changed:
            update = SessionInfoUpdated(
                title=row.title, labels=dict(row.labels), model_override=row.model_override
            )
            await self._bus.publish(row.id, update)
        if row is None or row.parent_session_id is None:
            return
        summary = await self.child_summary(await self.snapshot(row), launching=launching)
        await self._bus.publish(row.parent_session_id, ChildSessionUpdated(child=summary))


def _assistant_message(data: Any) -> bool:
    """Whether a stored item's wire form is an assistant message (without structuring it)."""
    if not isinstance(data, dict):
        return False
    return data.get("type") == "message" and data.get("role") == "assistant"


def _head(
    row: SessionRow, published: tuple[int, str | None], live: tuple[int, str | None]
) -> tuple[int, SessionStatus]:
    """A snapshot's newest event id, with the session's status as of that id.

    A client follows the stream after that id: a status counted in the id but not
    shown (or shown but not counted) is one it never hears of. So each candidate is a
    pair that belongs together, and the newest pair wins: the row's (one transaction
    writes both); ``published``, what the bus had published before the row was read —
    its status, or the row's when none was published since the bus read the counter
    (the row, read after, holds every status before that); ``live``, what the bus
    holds now, only when it knows the status it published (an id without it could
    follow a status stored since the row was read).
    """
    last_event_id, status = row.last_event_id, row.status
    published_id, published_status = published
    if published_id > last_event_id:
        last_event_id, status = published_id, published_status or row.status
    live_id, live_status = live
    if live_status is not None and live_id >= last_event_id:
        last_event_id, status = live_id, live_status
    return last_event_id, SessionStatus(status)


def _snapshot(
    row: SessionRow,
    spec: Any,
    *,
    status: SessionStatus,
    harness: str,
    busy: bool,
    pending: tuple[ElicitationRequest, ...],
    last_event_id: int,
    resources: tuple[Resource, ...],
    usage: tuple[Usage, Usage],
) -> SessionSnapshot:
    """A session's snapshot: its row and agent spec, with what only its holder knows
    (live status, whether a turn runs, open elicitations, newest event, resources)."""
    return SessionSnapshot(
        id=row.id,
        agent_id=row.agent_id,
        agent_name=spec.name,
        title=row.title,
        status=status,
        harness=harness,
        model=row.model_override or spec.model,
        harness_override=row.harness_override,
        model_override=row.model_override,
        parent_session_id=row.parent_session_id,
        root_session_id=row.root_session_id,
        labels=row.labels,
        busy=busy,
        pending_elicitations=pending,
        last_event_id=last_event_id,
        created_at=row.created_at,
        resources=resources,
        cwd=row.cwd,
        updated_at=row.updated_at,
        usage=usage[0],
        tree_usage=usage[1],
        runner_id=row.runner_id,
    )
