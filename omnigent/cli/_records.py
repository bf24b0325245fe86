"""Where the command line reads and changes records: a local store, or the server that
holds it.

A SQLite store is held by one runtime at a time — an ``omnigent serve``, an
``omnigent run``, an editor's ``omnigent stdio`` — and its lock file says who
(:class:`~omnigent.stores.LockHolder`; a server adds the address it answers on).
:func:`open_records` picks the way in:

* ``--server URL`` given: that server, over HTTP.
* the store is held by a server that wrote its address: that server, over HTTP — so
  ``sessions list`` shows live state (``busy``, a running turn) and ``sessions delete``
  stops the work first, as the server does it;
* otherwise the store itself, through a records-only runtime beside whoever holds it
  (reads), or one that owns it (``write=True``; refused while anyone else holds it,
  naming them).

Both ways answer the same things in the same shapes — agents and sessions as their wire
dicts (what ``GET /v1/…`` answers, what ``--json`` prints), items and events typed — so
the commands above are written once. A refusal from a server becomes an
:class:`~omnigent.errors.OmnigentError` with the server's status and message.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any, ParamSpec, Protocol, TypeVar

import trio

from .._config import default_db_url
from ..client import ApiError, ClientError, OmnigentClient, ServerUnreachable
from ..core import Runtime, open_runtime
from ..errors import AgentNotFound, BadRequest, Conflict, OmnigentError
from ..model import Event, Item
from ..stores import LockHolder
from ._holders import busy_message, held_by

__all__ = [
    "Records",
    "ServerRefused",
    "open_records",
]

log = logging.getLogger("omnigent.cli")

P = ParamSpec("P")
T = TypeVar("T")

FOLLOW_POLL = 0.5
"""Seconds between two reads of a store another process writes (``sessions tail``)."""


class ServerRefused(OmnigentError):
    """What a server answered when it refused a request of the command line."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Records(Protocol):
    """Agents, sessions, their items and events: from a store, or from a server."""

    where: str
    """``the store sqlite:///…`` or ``the server at http://…``, for messages."""

    async def list_agents(self) -> list[dict[str, Any]]: ...

    async def find_agent(self, ref: str) -> dict[str, Any]:
        """An agent by id (``agent_…``) or by name. Raises AgentNotFound."""
        ...

    async def agent_spec(self, agent_id: str, version: int | None) -> dict[str, Any]:
        """A version's spec as a dict (the latest with ``None``)."""
        ...

    async def list_sessions(
        self,
        *,
        agent_name: str | None,
        parent: str | None,
        limit: int,
        after: str | None,
        top_level: bool = False,
    ) -> tuple[list[dict[str, Any]], bool]:
        """One page of sessions, newest first, and whether there are more."""
        ...

    async def get_session(self, session_id: str) -> dict[str, Any]: ...

    async def items(self, session_id: str) -> list[Item]:
        """The whole history, oldest first."""
        ...

    async def replay(self, session_id: str, until: int) -> list[Event]:
        """The session's events up to id ``until`` (its ``last_event_id`` when read)."""
        ...

    def follow(self, session_id: str, after: int) -> AsyncGenerator[Event, None]:
        """The session's events after id ``after``, then each new one, until cancelled.

        An async generator: iterate it inside ``contextlib.aclosing``.
        """
        ...

    async def delete_session(self, session_id: str, *, purge: bool = False) -> None:
        """Delete the session and its sub-sessions; ``purge``: their workspaces too
        (a local store only: a server purges as its operator set it up).

        Raises:
            BadRequest: ``purge`` through a server.
        """
        ...

    async def resolve(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool: ...


def _no_server(db: str, holder: LockHolder | None) -> str:
    if holder is None:
        return (
            f"no omnigent server holds the store {db}, and nothing runs its sessions: "
            "name a server with --server URL"
        )
    return (
        f"the store {db} is held by {holder.describe()}, which serves no HTTP: answer it "
        "where it runs (omnigent run asks on its own terminal), or name a server with "
        "--server URL"
    )


@asynccontextmanager
async def open_records(
    db: str | None, server: str | None, *, write: bool = False, require_server: bool = False
) -> AsyncIterator[Records]:
    """The records of ``--server`` (if given), else of the store ``db`` (default: the
    default store) or the server holding it (see the module docstring).

    Args:
        write: the command changes records (``sessions delete``): without a server, the
            store must be nobody else's.
        require_server: the command needs the process that runs the sessions
            (``approve``): a server, given or found.

    Raises:
        Conflict: ``write``, no server, and someone else holds the store.
        BadRequest: ``require_server``, and no server was given or found.
        ServerRefused: the server cannot be reached.
    """
    if server is None:
        db = db or default_db_url()
        holder = await trio.to_thread.run_sync(held_by, db)
        if holder is not None and holder.url:
            log.info("the store %s is held by the server at %s: asking it", db, holder.url)
            server = holder.url
        elif holder is not None and write:
            raise Conflict(busy_message(db, holder, "a change to its records"))
        elif require_server:
            raise BadRequest(_no_server(db, holder))
    if server is not None:
        async with OmnigentClient(server) as client:
            if not await client.health():
                raise ServerRefused(
                    503, "server_unreachable", f"no omnigent server answers at {server}"
                )
            yield _ServerRecords(client)
        return
    assert db is not None
    async with open_runtime(db=db, exclusive=write) as rt:
        yield _LocalRecords(rt, db)


class _LocalRecords:
    """Records of a store opened here."""

    def __init__(self, rt: Runtime, db: str) -> None:
        self._rt = rt
        self.where = f"the store {db}"

    async def list_agents(self) -> list[dict[str, Any]]:
        return [agent.to_dict() for agent in await self._rt.list_agents()]

    async def find_agent(self, ref: str) -> dict[str, Any]:
        if ref.startswith("agent_"):
            return (await self._rt.get_agent(ref)).to_dict()
        return (await self._rt.get_agent_by_name(ref)).to_dict()

    async def agent_spec(self, agent_id: str, version: int | None) -> dict[str, Any]:
        return (await self._rt.get_agent_spec(agent_id, version)).to_dict()

    async def list_sessions(
        self,
        *,
        agent_name: str | None,
        parent: str | None,
        limit: int,
        after: str | None,
        top_level: bool = False,
    ) -> tuple[list[dict[str, Any]], bool]:
        page = await self._rt.list_sessions(
            agent_name=agent_name,
            parent_session_id=parent,
            limit=limit,
            after=after,
            top_level=top_level,
        )
        return [s.to_dict() for s in page.data], page.has_more

    async def get_session(self, session_id: str) -> dict[str, Any]:
        return (await self._rt.get_session(session_id)).to_dict()

    async def items(self, session_id: str) -> list[Item]:
        items: list[Item] = []
        after: str | None = None
        while True:
            page = await self._rt.list_items(session_id, limit=1000, after=after)
            items.extend(page.data)
            if not page.has_more:
                return items
            after = page.last_id

    async def replay(self, session_id: str, until: int) -> list[Event]:
        events: list[Event] = []
        if until <= 0:
            return events
        async with self._rt.subscribe(session_id, after=0) as subscription:
            async for event in subscription:
                events.append(event)
                if event.event_id >= until:
                    break
        return events

    async def follow(self, session_id: str, after: int) -> AsyncGenerator[Event, None]:
        # Another process (an `omnigent run`) writes this store: its events reach us
        # only through the file, so it is read again every FOLLOW_POLL seconds.
        while True:
            async with self._rt.subscribe(session_id, after=after) as subscription:
                while (event := await subscription.next_ready()) is not None:
                    after = event.event_id
                    yield event
            await trio.sleep(FOLLOW_POLL)

    async def delete_session(self, session_id: str, *, purge: bool = False) -> None:
        await self._rt.delete_session(session_id, purge_workspace=True if purge else None)

    async def resolve(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool:
        return await self._rt.resolve_elicitation(session_id, elicitation_id, action, content)


class _ServerRecords:
    """Records of a server, over its HTTP API; its refusals as :class:`ServerRefused`."""

    def __init__(self, client: OmnigentClient) -> None:
        self._client = client
        self.where = f"the server at {client.base_url}"

    async def list_agents(self) -> list[dict[str, Any]]:
        return [agent.raw for agent in await _asking(self._client.list_agents)]

    async def find_agent(self, ref: str) -> dict[str, Any]:
        if ref.startswith("agent_"):
            return (await _asking(self._client.get_agent, ref)).raw
        for agent in await self.list_agents():
            if agent["name"] == ref:
                return agent
        raise AgentNotFound(ref)

    async def agent_spec(self, agent_id: str, version: int | None) -> dict[str, Any]:
        return await _asking(self._client.get_agent_spec, agent_id, version)

    async def list_sessions(
        self,
        *,
        agent_name: str | None,
        parent: str | None,
        limit: int,
        after: str | None,
        top_level: bool = False,
    ) -> tuple[list[dict[str, Any]], bool]:
        sessions, more = await _asking(
            self._client.list_sessions,
            agent_name=agent_name,
            parent_session_id=parent,
            limit=limit,
            after=after,
            top_level=top_level,
        )
        return [s.raw for s in sessions], more

    async def get_session(self, session_id: str) -> dict[str, Any]:
        return (await _asking(self._client.get_session, session_id)).raw

    async def items(self, session_id: str) -> list[Item]:
        return await _asking(self._client.list_items, session_id)

    async def replay(self, session_id: str, until: int) -> list[Event]:
        events: list[Event] = []
        if until <= 0:
            return events
        async with aclosing(self.follow(session_id, 0)) as following:
            async for event in following:
                events.append(event)
                if event.event_id >= until:
                    break
        return events

    async def follow(self, session_id: str, after: int) -> AsyncGenerator[Event, None]:
        try:
            async with self._client.events(session_id, after=after, retries=3) as stream:
                async for event in stream:
                    yield event
        except ClientError as exc:
            raise _refused(exc) from exc

    async def delete_session(self, session_id: str, *, purge: bool = False) -> None:
        if purge:
            raise BadRequest(
                f"--purge needs the store itself; {self.where} deletes workspaces only "
                "when it runs with serve --purge-workspaces"
            )
        await _asking(self._client.delete_session, session_id)

    async def resolve(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool:
        return await _asking(
            self._client.resolve_elicitation, session_id, elicitation_id, action, content
        )


async def _asking(call: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return await call(*args, **kwargs)
    except ClientError as exc:
        raise _refused(exc) from exc


def _refused(exc: ClientError) -> ServerRefused:
    if isinstance(exc, ApiError):
        return ServerRefused(exc.status, exc.code, exc.message)
    if isinstance(exc, ServerUnreachable):
        return ServerRefused(503, "server_unreachable", str(exc))
    return ServerRefused(500, "client_error", str(exc))
