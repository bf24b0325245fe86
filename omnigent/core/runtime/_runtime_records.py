"""The runtime's API over records: agents, sessions, their items, resources and files.

A mixin of :class:`~._runtime.Runtime` (see :mod:`._runtime_base`); the work is done
by :class:`~._agents.AgentCatalog`, :class:`~._sessions.SessionRecords` and
:class:`~._files.FileService`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs

from ...errors import (
    InvalidInput,
    ResourceNotFound,
    SessionNotFound,
)
from ...model import (
    Agent,
    ChildSessionSummary,
    FileInfo,
    ItemPage,
    Resource,
    ResourceScreen,
    SessionPage,
    SessionSnapshot,
)
from ...spec import AgentSpec
from ...tools.terminals import HISTORY_LIMIT
from ..bus import SessionWatch
from ._runtime_base import RuntimeBase

__all__ = ["RecordsAPI"]


class RecordsAPI(RuntimeBase):
    """Agents, sessions, items, live resources and files."""

    # -- agents ------------------------------------------------------------------------

    async def create_agent(
        self,
        spec: AgentSpec | Mapping[str, Any],
        *,
        owner: str = "local",
        from_client: bool = False,
    ) -> Agent:
        """Register an agent, or a new version of the agent with the same name.

        An unchanged spec keeps its version.

        Args:
            spec: the spec (or its dict form).
            owner: who owns the agent's name.
            from_client: the spec came from a client of a server (the HTTP API does
                this), not from the operator: it may name no program to run that
                ``open_runtime(allowed_commands=...)`` does not list, and no working
                directory outside the workspace.

        Raises:
            SpecError: the spec is invalid (a bad function policy reference, or what a
            client may not ask for, included). UnknownHarness: it names no known
            harness. Forbidden: another user owns the name.
        """
        self._open()
        return await self._agents.create(spec, owner, from_client=from_client)

    async def get_agent(self, agent_id: str) -> Agent:
        """The latest version of an agent. Raises AgentNotFound."""
        self._open()
        return await self._agents.get(agent_id)

    async def get_agent_by_name(self, name: str) -> Agent:
        """The latest version of the agent called ``name``. Raises AgentNotFound."""
        self._open()
        return await self._agents.get_by_name(name)

    async def list_agents(self) -> list[Agent]:
        """Every agent at its latest version, oldest first."""
        self._open()
        return await self._agents.list()

    async def get_agent_spec(self, agent_id: str, version: int | None = None) -> AgentSpec:
        """The spec of an agent version (the latest by default). Raises AgentNotFound."""
        self._open()
        return await self._host.agent_spec(agent_id, version)

    # -- sessions ----------------------------------------------------------------------

    async def create_session(
        self,
        agent_id: str | None = None,
        *,
        agent_name: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
        harness_override: str | None = None,
        model_override: str | None = None,
        labels: Mapping[str, str] | None = None,
        initial_items: Sequence[Any] = (),
        owner: str = "local",
        viewer: str | None = None,
        cwd: str | None = None,
    ) -> SessionSnapshot:
        """Create a session of an agent (its current version).

        Args:
            agent_id: the agent, by id; or
            agent_name: the agent, by name (exactly one of the two).
            owner: who owns the new session (level manage).
            viewer: when set, ``input_image`` blocks in ``initial_items`` may name
                only files this user uploaded (others are refused as unknown).
            cwd: the absolute directory the session's client works in (an editor's
                project): the OS tools act there unless the spec pins an absolute
                ``os_env.cwd``, and a relative one is taken from it. A child session
                works in its parent's directory unless given its own. Never created.

        Raises:
            AgentNotFound, SessionNotFound (parent), BadRequest / UnknownHarness
            (override), InvalidInput (model override, labels, initial items; both or
            neither of ``agent_id`` and ``agent_name``).
        """
        if parent_session_id is not None:
            await self._working()  # the parent hears of its new child (an event)
        else:
            self._open()
        if (agent_id is None) == (agent_name is None):
            raise InvalidInput.at("agent_id", "give agent_id or agent_name (exactly one)")
        if agent_name is not None:
            agent_id = (await self._agents.get_by_name(agent_name)).id
        assert agent_id is not None
        created = await self._sessions.create(
            agent_id,
            title=title,
            parent_session_id=parent_session_id,
            harness_override=harness_override,
            model_override=model_override,
            labels=labels,
            initial_items=initial_items,
            owner=owner,
            viewer=viewer,
            cwd=cwd,
        )
        self._changes.touched([created.id])  # the sessions feed
        return created

    async def get_session(self, session_id: str, *, viewer: str | None = None) -> SessionSnapshot:
        """The session's snapshot. Raises SessionNotFound.

        With ``viewer``, ``pending_elicitations`` holds only what that user may read
        (a descendant's mirrored request only if they may read the descendant). The
        caller checks the viewer's access to ``session_id`` itself.
        """
        self._open()
        snapshot = await self._sessions.snapshot(await self._sessions.row(session_id))
        return await self._seen_by(snapshot, viewer)

    async def _seen_by(self, snapshot: SessionSnapshot, viewer: str | None) -> SessionSnapshot:
        if viewer is None or not snapshot.pending_elicitations:
            return snapshot
        pending = await self._visibility.requests(snapshot.pending_elicitations, viewer)
        return attrs.evolve(snapshot, pending_elicitations=pending)

    async def child_summary(
        self, session_id: str, *, viewer: str | None = None
    ) -> ChildSessionSummary:
        """A session as its parent lists it (``child_sessions``).

        Raises:
            SessionNotFound: also when ``viewer`` is given and may not read it.
        """
        if not await self._visibility.may_read(session_id, viewer):
            raise SessionNotFound(session_id)
        return await self._sessions.child_summary(await self.get_session(session_id))

    async def list_sessions(
        self,
        *,
        agent_name: str | None = None,
        parent_session_id: str | None = None,
        limit: int = 20,
        after: str | None = None,
        viewer: str | None = None,
        cwd: str | None = None,
    ) -> SessionPage:
        """Sessions, newest first, ``limit`` at a time; ``after`` is the previous last id.

        ``viewer`` limits the list to sessions that user may read (and each
        snapshot's ``pending_elicitations`` as :meth:`get_session` does); ``cwd`` to
        sessions created with exactly that working directory.

        Raises:
            InvalidInput: at ``after`` when it names no session ``viewer`` may read —
                whether it does not exist or is not theirs is not told apart.
        """
        self._open()
        page = await self._sessions.list(
            agent_name=agent_name,
            parent_session_id=parent_session_id,
            limit=limit,
            after=after,
            viewer=viewer,
            cwd=cwd,
        )
        if viewer is None:
            return page
        seen = tuple([await self._seen_by(snapshot, viewer) for snapshot in page.data])
        return SessionPage(seen, page.has_more)

    @asynccontextmanager
    async def watch_sessions(self, *, viewer: str | None = None) -> AsyncIterator[SessionWatch]:
        """Every session ``viewer`` may read, then every change to them, as it happens.

        The watch starts with a snapshot (``feed.snapshot``, one ``session.updated``
        per session, newest first, ``feed.synced``) and then yields each changed
        session's snapshot (or ``session.deleted``) — coalesced: a session that changed
        several times while the watcher was busy is read once, as it is now. It may
        take a fresh snapshot again (after a change of grants, or when it fell far
        behind); see :mod:`~omnigent.core.bus._session_changes`.

        Cancellation: the watch is cancel-safe (a cancelled ``next`` loses nothing);
        leaving the block stops collecting.
        """
        self._open()
        with self._changes.listen() as pending:
            yield SessionWatch(pending, _ViewerReads(self, viewer))

    async def update_session(
        self, session_id: str, *, viewer: str | None = None, **changes: Any
    ) -> SessionSnapshot:
        """Change ``title``, ``labels`` or ``model_override`` (``None`` clears).

        Returns the new snapshot, as :meth:`get_session` shows it to ``viewer``.
        """
        self._open()
        updated = await self._sessions.update(session_id, changes)
        self._changes.touched([session_id])
        return await self._seen_by(updated, viewer)

    async def delete_session(self, session_id: str) -> None:
        """Cancel all work of the session and its descendants, then delete them all.

        Whatever is pending on them — their turns' questions, and hook requests or
        policy ASKs held by callers outside — is withdrawn first (those callers get
        ``cancel``), and from then on nothing is published into them.
        """
        await self._working()
        row = await self._sessions.row(session_id)
        host = self._host
        host.deleting.add(session_id)  # from here no new work (or child) starts on it
        doomed = [session_id]
        try:
            doomed.extend(await self._store.descendant_ids(session_id))
            host.deleting.update(doomed)
            # Where the tree is held: here, or the server that runs it.
            await self._placed.stop_tree(row, doomed)
            self._bus.seal(doomed)
            await self._bus.flush()
            await self._store.delete_sessions(doomed)
            self._changes.touched(doomed, deleted=True)
            for sid in doomed:
                self._bus.forget_session(sid)
                self._elicitations.forget_session(sid)
                host.histories.drop(sid)
        finally:
            self._bus.unseal(doomed)
            host.deleting.difference_update(doomed)

    async def list_items(
        self,
        session_id: str,
        *,
        order: str = "asc",
        limit: int | None = None,
        after: str | None = None,
    ) -> ItemPage:
        """A session's history. ``after`` is an item id (exclusive)."""
        self._open()
        return await self._sessions.items(session_id, order=order, limit=limit, after=after)

    # -- resources (live terminals) ------------------------------------------------------

    async def list_resources(self, session_id: str) -> list[Resource]:
        """The session's live resources: its running terminals, in launch order.

        A terminal belongs to its session's work, so a session without work has none.

        Raises:
            SessionNotFound.
        """
        self._open()
        await self._sessions.row(session_id)
        return self._host.resources_of(session_id)

    async def read_resource_screen(
        self, session_id: str, resource_id: str, *, scrollback: int = 0
    ) -> ResourceScreen:
        """What a live terminal of the session shows now, with ``scrollback`` lines above.

        Reading it here does not count as the agent having seen it (its idle notices
        are unaffected).

        Raises:
            SessionNotFound; ResourceNotFound (no running terminal has that id);
            InvalidInput at ``scrollback`` (not an integer from 0 to the history limit).
        """
        self._open()
        await self._sessions.row(session_id)
        if isinstance(scrollback, bool) or not isinstance(scrollback, int):
            raise InvalidInput.at("scrollback", "must be an integer")
        if not 0 <= scrollback <= HISTORY_LIMIT:
            raise InvalidInput.at("scrollback", f"must be between 0 and {HISTORY_LIMIT}")
        terminals = self._host.terminals_of(session_id)
        if terminals is None:
            raise ResourceNotFound(resource_id)
        return await terminals.screen(resource_id, scrollback)

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
        self._open()
        return await self._files.upload(content, filename, content_type, owner)

    async def get_file(self, file_id: str, *, viewer: str | None = None) -> FileInfo:
        """A file's record. To a ``viewer`` other than its uploader it does not exist.

        Raises:
            FileNotFound.
        """
        self._open()
        return await self._files.info(file_id, viewer)

    async def read_file(self, file_id: str, *, viewer: str | None = None) -> bytes:
        """A file's bytes (see :meth:`get_file`). Raises FileNotFound."""
        self._open()
        return await self._files.content(file_id, viewer)


class _ViewerReads:
    """How a session watch reads sessions: as :meth:`RecordsAPI.get_session` and
    :meth:`RecordsAPI.list_sessions` show them to ``viewer``."""

    def __init__(self, runtime: RecordsAPI, viewer: str | None) -> None:
        self._runtime = runtime
        self._viewer = viewer

    async def page(self, after: str | None, limit: int) -> SessionPage:
        return await self._runtime.list_sessions(limit=limit, after=after, viewer=self._viewer)

    async def read(self, session_id: str) -> SessionSnapshot | None:
        runtime = self._runtime
        if not await runtime._visibility.may_read(session_id, self._viewer):
            return None
        try:
            return await runtime.get_session(session_id, viewer=self._viewer)
        except SessionNotFound:
            return None
