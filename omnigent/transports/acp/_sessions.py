"""The sessions open on one ACP connection, and the requests that open and close them.

:class:`OpenSessions` keeps each open session's :class:`~._session.SessionRelay`
(at most 256 a connection) and answers the lifecycle requests of ACP v1:

===========================  ===========================================================
ACP                          omnigent
===========================  ===========================================================
``session/new``              ``create_session`` of the connection's agent in ``cwd``
``session/load``             the history replayed as updates, then the session relayed
``session/resume``           relayed from now on, nothing replayed
``session/fork`` (unstable)  ``fork_session`` (up to ``_meta.omnigent.upToItemId``), the
                             fork relayed
``session/close``            the session's work stopped (``stop_session``: its turn, its
                             background work, its sub-agents' turns), then its relay, the
                             client's MCP servers and tools withdrawn; its history stays
``session/delete``           ``delete_session``; a session that does not exist (or that
                             the user cannot see) is deleted already: success
===========================  ===========================================================

Every answer that opens a session carries its ``configOptions``
(:mod:`._records`) and the note on the client's MCP servers (:mod:`._mcp_servers`).
Access: load, resume and fork need read; close needs edit; delete needs manage.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, Protocol

import trio

from ...core import EDIT, MANAGE, READ, Agent, Runtime, SessionSnapshot
from ...errors import NotFound
from ...rpc import RESOURCE_NOT_FOUND, SERVER_BUSY, RpcConnection, RpcError
from ._client_tools import client_tools
from ._handshake import ClientCapabilities
from ._mcp_servers import ClientMcpMode, McpOffer, mcp_notice, offered_servers
from ._params import Params
from ._records import config_options, history
from ._session import RelayContext, SessionRelay
from ._updates import replay_items

__all__ = ["MAX_SESSIONS", "OpenSessions", "SessionsContext"]

log = logging.getLogger("omnigent.transports.acp")

MAX_SESSIONS = 256
# How long a closed session's relay gets to pass on the end of its work.
_CLOSE_TIMEOUT = 5.0


class SessionsContext(RelayContext, Protocol):
    """What the open sessions need from their connection's agent."""

    user: str
    client_mcp: ClientMcpMode
    runner_id: str | None
    """The runner new sessions run on (their directory is on its machine), or ``None``."""

    @property
    def connection(self) -> RpcConnection: ...

    @property
    def client(self) -> ClientCapabilities: ...

    def resolve_agent(self) -> Awaitable[Agent]: ...

    async def require(self, session_id: str, need: int) -> SessionSnapshot:
        """The session's snapshot, if the user has ``need`` on it (else an RpcError)."""
        ...


class OpenSessions:
    """One connection's open sessions; see the module docstring."""

    def __init__(self, ctx: SessionsContext) -> None:
        self._ctx = ctx
        self._relays: dict[str, SessionRelay] = {}

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._relays

    def relay(self, session_id: str) -> SessionRelay:
        """The open session's relay.

        Raises:
            RpcError: ``-32002`` when it is not open on this connection.
        """
        relay = self._relays.get(session_id)
        if relay is None:
            raise RpcError(
                RESOURCE_NOT_FOUND,
                f"session {session_id!r} is not open on this connection: "
                "call session/new, session/load or session/resume first",
                {"code": "session_not_open"},
            )
        return relay

    @property
    def _runtime(self) -> Runtime:
        return self._ctx.runtime

    def _room(self, session_id: str | None = None) -> None:
        if session_id not in self._relays and len(self._relays) >= MAX_SESSIONS:
            raise RpcError(SERVER_BUSY, f"{MAX_SESSIONS} sessions are open on this connection")

    async def _opened(
        self, snapshot: SessionSnapshot, offer: McpOffer, cwd: str | None = None
    ) -> dict[str, Any]:
        """Relay ``snapshot``'s session here (if not yet); the answer's common part.

        A new relay connects the client's MCP servers of ``offer`` for as long as it
        runs; a session already open here keeps the servers it was opened with.
        """
        relay = self._relays.get(snapshot.id)
        opened = relay is None
        if relay is None:
            ctx = self._ctx
            relay = SessionRelay(ctx, snapshot.id, snapshot.cwd or cwd, snapshot.model_override)
            providers = client_tools(ctx.connection, relay, ctx.client)
            servers = offer.servers, ctx.client_mcp == "client"
            await ctx.connection.nursery.start(
                relay.run, snapshot.last_event_id, providers, servers
            )
            self._relays[snapshot.id] = relay
            for request in snapshot.pending_elicitations:
                await relay.ask(request)
            await relay.send_usage(snapshot)  # what the client shows before a prompt
        options = await config_options(self._runtime, snapshot, self._ctx.client)
        return {
            "configOptions": options,
            **mcp_notice(offer, relay.mcp_report if opened else None),
        }

    # -- opening -----------------------------------------------------------------------

    async def new(self, params: Params) -> dict[str, Any]:
        cwd = params.absolute_path("cwd")
        offer = offered_servers(params, self._ctx.client_mcp)
        self._room()
        agent = await self._ctx.resolve_agent()
        runner = self._ctx.runner_id
        if runner is None:
            await self._runtime.check_session_directory(cwd)  # the server's workspace fence
        # else its work runs on the runner, inside the runner's workspace: the client's
        # directory is on that machine, and this server never acts in it (recorded for
        # session/list and for paths shown; the session's tools need the runner).
        session = await self._runtime.create_session(
            agent.id, owner=self._ctx.user, cwd=cwd, runner_id=runner
        )
        return {"sessionId": session.id, **await self._opened(session, offer)}

    async def load(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        cwd = params.absolute_path("cwd")
        offer = offered_servers(params, self._ctx.client_mcp)
        snapshot = await self._ctx.require(session_id, READ)
        await self._fence(snapshot, cwd)
        self._room(session_id)
        items = await history(self._runtime, session_id)
        for update in replay_items(items, snapshot.cwd or cwd):
            await self._ctx.connection.notify(
                "session/update", {"sessionId": session_id, "update": update}
            )
        return await self._opened(snapshot, offer, cwd)

    async def resume(self, params: Params) -> dict[str, Any]:
        """``session/resume``: relayed from its newest event on; no history replayed."""
        session_id = params.session_id()
        cwd = params.absolute_path("cwd")
        offer = offered_servers(params, self._ctx.client_mcp)
        snapshot = await self._ctx.require(session_id, READ)
        await self._fence(snapshot, cwd)
        self._room(session_id)
        return await self._opened(snapshot, offer, cwd)

    async def _fence(self, snapshot: SessionSnapshot, cwd: str | None) -> None:
        """The fence ``session/new`` applies to the client's directory, unless the
        session works on a runner (its directory is on the runner's machine)."""
        if snapshot.runner_id is None:
            await self._runtime.check_session_directory(cwd)

    async def fork(self, params: Params) -> dict[str, Any]:
        """``session/fork``: a fork of the session, opened here (the source is untouched)."""
        session_id = params.session_id()
        cwd = params.absolute_path("cwd")
        offer = offered_servers(params, self._ctx.client_mcp)
        meta = params.object("_meta").object("omnigent")
        up_to = meta.optional_string("upToItemId", max_len=200)
        await self._ctx.require(session_id, READ)
        await self._runtime.check_session_directory(cwd)  # the fork works there
        self._room()
        fork = await self._runtime.fork_session(
            session_id, up_to_item_id=up_to, owner=self._ctx.user, cwd=cwd
        )
        return {"sessionId": fork.id, **await self._opened(fork, offer, cwd)}

    # -- closing -----------------------------------------------------------------------

    async def close(self, params: Params) -> dict[str, Any]:
        """``session/close``: stop its work, then free what this connection holds for it.

        Cancellation: the relay is cancelled with the connection anyway.
        """
        session_id = params.session_id()
        relay = self.relay(session_id)
        await self._ctx.require(session_id, EDIT)
        await self._runtime.stop_session(session_id)
        # Let the relay pass on the end (the prompts' answers wait for it), then stop it.
        with trio.move_on_after(_CLOSE_TIMEOUT):
            await relay.catch_up()
        relay.close()
        await relay.done.wait()
        del self._relays[session_id]
        return {}

    async def delete(self, params: Params) -> dict[str, Any]:
        """``session/delete``: gone from ``session/list``; one already gone is success."""
        session_id = params.session_id()
        try:
            await self._ctx.require(session_id, MANAGE)
        except RpcError as error:
            if error.code != RESOURCE_NOT_FOUND:
                raise
            return {}  # never existed, deleted already, or not the user's to see
        except NotFound:
            return {}
        relay = self._relays.pop(session_id, None)
        await self._runtime.delete_session(session_id)
        if relay is not None:
            relay.close()
            await relay.done.wait()
        return {}
