"""The runners connected to this server: :class:`RunnerHub`, one link per name.

A runner's first connection makes a :class:`~omnigent.runner.Link` and a JSON-RPC
connection over it (a :class:`ConnectedRunner`), both run in the hub's nursery for as
long as the link lives; the WebSocket handler that brought the connection only carries
the link (:meth:`RunnerHub.attach`) while that connection is up. A later connection
with the link's id *resumes* it; one without takes the name over only if the old link
has no connection left (a runner restarted after ``kill -9``: its old link is ended,
and its turns fail ``runner_disconnected``); while the old link is connected the
newcomer is refused (:class:`~omnigent.errors.RunnerNameTaken`, ``409``).

Lifetimes: :func:`open_runner_hub` owns the nursery; leaving it ends every link (and
with them every request in flight to or from a runner). A session's turn reaches its
runner with :meth:`RunnerHub.wait_for`, bounded by ``wait`` (``serve --runner-wait``).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

from ..._cancellation import only_exceptions, split_cancellation
from ..._ids import new_id, now
from ...errors import RunnerNameTaken, RunnerOffline
from ...harnesses.base import Harness, HarnessEnv
from ...link import DEFAULT_HEARTBEAT, DEFAULT_TIMEOUT, Hello, Link, Transport, Welcome
from ...spec import AgentSpec

if TYPE_CHECKING:
    from ...rpc import RpcConnection
    from .remote import RemoteMcp, RunnerPeer, RunnerWorkplace

__all__ = [
    "DEFAULT_RUNNER_WAIT",
    "ConnectedRunner",
    "RunnerHub",
    "RunnerSettings",
    "open_runner_hub",
]

log = logging.getLogger("omnigent.transports.runner")

DEFAULT_RUNNER_WAIT = 60.0
"""Seconds a turn waits for its session's runner to connect (``serve --runner-wait``)."""
_MAX_IN_FLIGHT = 1024


@attrs.frozen
class RunnerSettings:
    """How a server admits and waits for runners (``serve --runner-*``).

    Attributes:
        tokens: the tokens runners may present (none: every runner is refused, but
            for ``local_token``'s).
        wait: seconds a turn waits for its runner to connect.
        timeout: seconds of silence that end a runner's connection, and of
            disconnection that end its link.
    """

    tokens: tuple[str, ...] = ()
    wait: float = DEFAULT_RUNNER_WAIT
    timeout: float = DEFAULT_TIMEOUT
    local_token: str | None = None
    """A token of the server's own making for its own user's command line (written
    beside a SQLite store's lock, ``0600``); admitted besides ``tokens``."""

    @property
    def heartbeat(self) -> float:
        """Seconds between acknowledgements: a fifth of the timeout, at most 2."""
        return min(DEFAULT_HEARTBEAT, self.timeout / 5)


@attrs.define(eq=False)
class ConnectedRunner:
    """One runner's link on this server, and the JSON-RPC connection over it."""

    id: str
    link: Link
    connection: RpcConnection
    peer: RunnerPeer
    connected_at: float

    @property
    def online(self) -> bool:
        return not self.link.closed


class RunnerHub:
    """The runners of this server (see the module docstring). Made by
    :func:`open_runner_hub`.

    Args:
        tokens: the tokens a runner may present (``serve --runner-token``); none: every
            runner is refused (but for ``local_token``'s).
        local_token: the server's own token for its user's command line.
        heartbeat, timeout: the links' timing (``serve --runner-timeout``).
        wait: how long a turn waits for its runner to connect.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        tokens: Collection[str] = (),
        local_token: str | None = None,
        heartbeat: float = DEFAULT_HEARTBEAT,
        timeout: float = DEFAULT_TIMEOUT,
        wait: float = DEFAULT_RUNNER_WAIT,
    ) -> None:
        self._nursery = nursery
        self._tokens = tuple(t.encode() for t in tokens)
        self._admitted = self._tokens + (() if local_token is None else (local_token.encode(),))
        self.heartbeat = heartbeat
        self.timeout = timeout
        self.wait = wait
        self._runners: dict[str, ConnectedRunner] = {}
        # The sessions whose stdio MCP servers a runner holds (their elicitations
        # come back to them); each entry lives as long as its holding task.
        self.mcp_sessions: dict[str, RemoteMcp] = {}
        self._changed = trio.Event()
        self._version = 0
        self.closing = False

    @property
    def enabled(self) -> bool:
        """Whether runners of other users can be admitted (an operator's token was set)."""
        return bool(self._tokens)

    def accepts(self, token: str | None) -> bool:
        """Whether ``token`` is one the operator set, or the server's local one
        (compared in constant time)."""
        if token is None:
            return False
        given = token.encode()
        return any(hmac.compare_digest(given, known) for known in self._admitted)

    def get(self, runner_id: str) -> ConnectedRunner | None:
        """The runner's live link here, or ``None``."""
        runner = self._runners.get(runner_id)
        return runner if runner is not None and runner.online else None

    def online_here(self, runner_id: str) -> bool:
        """Whether the runner has a live link to this server."""
        return self.get(runner_id) is not None

    def runners(self) -> list[ConnectedRunner]:
        """The runners with a live link here, by name."""
        return sorted((r for r in self._runners.values() if r.online), key=lambda r: r.id)

    def check_name(self, runner_id: str, link: str | None) -> None:
        """Whether a connection as ``runner_id`` (resuming ``link``) may proceed.

        Raises:
            RunnerNameTaken: a runner of that name is connected right now, on another
                link.
        """
        runner = self.get(runner_id)
        if runner is None or runner.link.id == link:
            return
        if runner.link.connected:
            raise RunnerNameTaken(runner_id)

    async def wait_for(
        self, runner_id: str, *, on_wait: Callable[[], Awaitable[None]] | None = None
    ) -> ConnectedRunner:
        """The runner's live link, waiting at most :attr:`wait` seconds for it.

        ``on_wait`` is awaited once, before waiting, if the runner is not there.

        Raises:
            RunnerOffline: it did not connect in time.
        """
        runner = self.get(runner_id)
        if runner is not None:
            return runner
        if on_wait is not None:
            await on_wait()
        with trio.move_on_after(self.wait):
            while (runner := self.get(runner_id)) is None:
                await self._changed.wait()
            return runner
        raise RunnerOffline(runner_id, self.wait)

    async def attach(
        self,
        hello: Hello,
        transport: Transport,
        reply: Callable[[Welcome], Awaitable[None]],
    ) -> None:
        """Carry the runner's link over ``transport`` (a new link, or the one it
        resumes) until the connection drops; ``reply`` answers its ``initialize``.

        Raises:
            RunnerNameTaken: another connected runner has the name.
            ConnectionClosed: the link ended (the server is stopping, say).
        """
        self.check_name(hello.name, hello.link)
        runner = self.get(hello.name)
        resumed = runner is not None and runner.link.id == hello.link
        if runner is None or not resumed:
            if runner is not None:
                log.warning(
                    "runner %s: a new process took the name over; its old link ends", hello.name
                )
                runner.link.close()
            runner = self._start(hello.name)
        link = runner.link
        log.info("runner %s: %s link %s", hello.name, "resumed" if resumed else "new", link.id)

        async def welcome(received: int) -> None:
            await reply(
                Welcome(
                    runner_id=hello.name,
                    link=link.id,
                    resumed=resumed,
                    received=received,
                    heartbeat=self.heartbeat,
                    timeout=self.timeout,
                )
            )

        await link.attach(transport, hello.received if resumed else 0, welcome=welcome)

    def _start(self, runner_id: str) -> ConnectedRunner:
        # The runner's side of the work, and JSON-RPC under it, are imported by the first
        # runner that connects: a server no runner reaches answers without them (issue 32).
        from ...rpc import RpcConnection
        from .remote import RunnerPeer

        link = Link(new_id("link"), heartbeat=self.heartbeat, timeout=self.timeout)
        peer = RunnerPeer(runner_id, self._mcp_session)
        connection = RpcConnection(
            link, peer, max_in_flight=_MAX_IN_FLIGHT, drain_timeout=0.0
        )  # a link that ended cannot carry an answer: nothing to drain
        runner = ConnectedRunner(runner_id, link, connection, peer, now())
        self._runners[runner_id] = runner
        self._nursery.start_soon(self._serve, runner, name=f"runner {runner_id}")
        self._notify()
        return runner

    async def _serve(self, runner: ConnectedRunner) -> None:
        """The link's life: its watchdog and the JSON-RPC connection over it.

        An error boundary: a bug in one runner's link ends that link (logged), never
        the hub or the server.
        """
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(runner.link.run)
                await runner.connection.run()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            cancel, failure = split_cancellation(exc)
            if failure is None or not only_exceptions(failure):
                raise
            log.exception("runner %s: its link failed", runner.id, exc_info=failure)
            if cancel is not None:
                raise cancel from None
        finally:
            runner.link.close()
            if self._runners.get(runner.id) is runner:
                del self._runners[runner.id]
            log.info("runner %s: link %s ended", runner.id, runner.link.id)
            self._notify()

    def _mcp_session(self, runner_id: str, session_id: str) -> RemoteMcp | None:
        """The MCP servers ``runner_id`` holds for ``session_id``, if it holds them."""
        held = self.mcp_sessions.get(session_id)
        return held if held is not None and held.runner_id == runner_id else None

    def _notify(self) -> None:
        self._version += 1
        self._changed.set()
        self._changed = trio.Event()

    # -- what the core asks of runners (omnigent.core.tools.Runners) --------------------

    def harness(self, runner_id: str, env: HarnessEnv, agent_id: str) -> Harness:
        """The server-side harness of a session bound to ``runner_id``."""
        from .remote import RunnerHarness

        return RunnerHarness(self, runner_id, env, agent_id)

    def workplace(
        self, runner_id: str, session_id: str, spec: AgentSpec, agent_id: str | None = None
    ) -> RunnerWorkplace:
        """Where that session's OS tools, terminals and stdio MCP servers run: on its
        runner."""
        from .remote import RunnerWorkplace

        return RunnerWorkplace(self, runner_id, session_id, spec, agent_id)

    @property
    def version(self) -> int:
        """Changes whenever a link starts or ends (see :meth:`wait_changed`)."""
        return self._version

    def linked(self) -> dict[str, float]:
        """The runners with a live link here, and when each link began."""
        return {r.id: r.connected_at for r in self._runners.values() if r.online}

    async def wait_changed(self, since: int) -> None:
        """Return once :attr:`version` is not ``since``."""
        while self._version == since:
            await self._changed.wait()

    def drop(self, runner_id: str, reason: str) -> None:
        """End the runner's link here: ``reason`` says why (another server has it)."""
        runner = self.get(runner_id)
        if runner is not None:
            log.warning("runner %s: its link here ends: %s", runner_id, reason)
            runner.link.close()

    def close(self) -> None:
        """End every link (the server is stopping)."""
        self.closing = True
        for runner in list(self._runners.values()):
            runner.link.close()


@asynccontextmanager
async def open_runner_hub(settings: RunnerSettings | None = None) -> AsyncIterator[RunnerHub]:
    """A hub for the length of the block; leaving it ends every runner's link."""
    settings = settings or RunnerSettings()
    async with trio.open_nursery() as nursery:
        hub = RunnerHub(
            nursery,
            tokens=settings.tokens,
            local_token=settings.local_token,
            heartbeat=settings.heartbeat,
            timeout=settings.timeout,
            wait=settings.wait,
        )
        try:
            yield hub
        finally:
            hub.close()
