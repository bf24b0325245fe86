"""A link: one runner's conversation with a server, across dropped connections.

:class:`Link` is a message stream (:class:`omnigent.rpc.MessageStream`) that a
:class:`~omnigent.rpc.RpcConnection` runs over. Underneath it, WebSocket connections
(:class:`Transport`) come and go: :meth:`Link.attach` carries the link over one until it
drops. Each side counts the messages it sends and keeps them until the peer acknowledges
them (:class:`~._resume.Outbox`), so a new connection starts by sending again what the
peer had not received — the RPC layer above never sees the drop.

Heartbeats: while attached, each side sends ``$/ack {received}`` every ``heartbeat``
seconds (and after every 64 messages it receives). A connection that brings nothing for
``timeout`` seconds is dead; a link with no connection for ``timeout`` seconds since it
last heard from the peer ends (:meth:`Link.run`): ``receive`` then answers ``None``, so
the RPC connection ends and everything it ran is cancelled.

Lifetimes: :meth:`Link.run` is the link's life, run in its owner's nursery; each
:meth:`Link.attach` runs in the task that holds the connection (the server's WebSocket
handler, the runner's dialer) and returns when that connection is done with. Nothing
here starts a task of its own beyond the heartbeat, which lives inside ``attach``.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import trio

from ._protocol import ACK, CLOSE, DEFAULT_HEARTBEAT, DEFAULT_TIMEOUT
from ._resume import MAX_UNACKED_BYTES, MAX_UNACKED_MESSAGES, Outbox, ResumeRefused

if TYPE_CHECKING:
    from ..rpc import ConnectionClosed

__all__ = ["ACK_EVERY", "Link", "LinkState", "Transport"]

log = logging.getLogger("omnigent.runner")

ACK_EVERY = 64
"""Messages received between two acknowledgements (besides the heartbeat's)."""
_INBOUND = 64
_CLOSE_TIMEOUT = 1.0


def _ended() -> ConnectionClosed:
    """:class:`~omnigent.rpc.ConnectionClosed` for a link that has ended. JSON-RPC is
    imported here, by the first link to end, not with the link's module: the link's
    package is the runner protocol's front, which a server loads before its first
    answer and JSON-RPC is not (issue 32)."""
    from ..rpc import ConnectionClosed

    return ConnectionClosed("the runner link has ended")


class Transport(Protocol):
    """One connection under a link: whole text messages both ways."""

    async def receive(self) -> str | bytes | None:
        """The next message; ``None`` once the connection is closed."""
        ...

    async def send(self, text: str) -> None:
        """Send one message. Raises anything once the connection is broken."""
        ...

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        ...


class LinkState(enum.Enum):
    """Where a link stands."""

    DETACHED = "detached"
    """No connection: waiting (at most ``timeout``) for one."""
    ATTACHED = "attached"
    CLOSED = "closed"


class _Broken(Exception):
    """A connection's send failed or stalled: the connection is done with."""


_CLOSED = -2


def _is_ack(text: str) -> int | None:
    """The count of an acknowledgement frame (:data:`_CLOSED` for a goodbye), or
    ``None`` for any other message."""
    head = text[:64]
    if ACK not in head and CLOSE not in head:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("method") not in (ACK, CLOSE):
        return None
    if data["method"] == CLOSE:
        return _CLOSED
    params = data.get("params")
    received = params.get("received") if isinstance(params, dict) else None
    if isinstance(received, int) and not isinstance(received, bool):
        return received
    return -1  # an ack we cannot read: not counted, ignored


class Link:
    """A resumable message stream between a runner and a server (module docstring).

    Args:
        link_id: its name on both sides (``link_…``).
        heartbeat, timeout: seconds between acknowledgements; seconds of silence that
            end a connection, and of disconnection that end the link.
        max_unacked_messages, max_unacked_bytes: how much it keeps for the peer; a
            sender waits for room.
    """

    def __init__(
        self,
        link_id: str,
        *,
        heartbeat: float = DEFAULT_HEARTBEAT,
        timeout: float = DEFAULT_TIMEOUT,
        max_unacked_messages: int = MAX_UNACKED_MESSAGES,
        max_unacked_bytes: int = MAX_UNACKED_BYTES,
    ) -> None:
        self.id = link_id
        self.heartbeat = heartbeat
        self.timeout = timeout
        self._outbox = Outbox(max_unacked_messages, max_unacked_bytes)
        self.received = 0
        """How many of the peer's messages have arrived (and are queued to be read)."""
        self._acked_sent = 0
        self._inbound_send, self._inbound = trio.open_memory_channel[str](_INBOUND)
        self._wire = trio.StrictFIFOLock()
        # The connection attached (its pump's scope, to drop it), and the one sends
        # write to: set only once what the peer missed has been sent again on it.
        self._attached: tuple[Transport, trio.CancelScope] | None = None
        self._wired: Transport | None = None
        self._detached = trio.Event()
        self._detached.set()
        self._changed = trio.Event()
        self._room = trio.Event()
        self.last_heard = trio.current_time()
        self.state = LinkState.DETACHED
        self.attachments = 0
        """How many connections have carried the link (for logs and tests)."""

    @property
    def closed(self) -> bool:
        return self.state is LinkState.CLOSED

    @property
    def connected(self) -> bool:
        """Whether a connection carries the link (or is being attached to it)."""
        return self._attached is not None

    def statistics(self) -> dict[str, int]:
        return {
            "sent": self._outbox.sent,
            "unacked": len(self._outbox),
            "received": self.received,
            "attachments": self.attachments,
        }

    # -- the message stream an RpcConnection runs over ---------------------------------

    async def receive(self) -> str | None:
        """The peer's next message; ``None`` once the link has ended."""
        try:
            return await self._inbound.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return None

    async def send(self, text: str) -> None:
        """Send one message on the link (kept until the peer acknowledges it).

        Waits for room while the peer has not acknowledged enough; a detached link
        only keeps the message (it is sent when a connection attaches).

        Raises:
            ConnectionClosed: the link has ended.
        """
        while True:
            if self.closed:
                raise _ended()
            if self._outbox.has_room():
                break
            self._room = trio.Event() if self._room.is_set() else self._room
            await self._room.wait()
        async with self._wire:
            if self.closed:
                raise _ended()
            self._outbox.push(text)
            wired = self._wired
            if wired is not None:
                try:
                    await self._write(wired, text)
                except _Broken:
                    self._drop(wired)

    # -- connections ---------------------------------------------------------------------

    async def attach(
        self,
        transport: Transport,
        peer_received: int,
        *,
        welcome: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        """Carry the link over ``transport`` until it drops, stalls or the link ends.

        A connection still attached is dropped first (and waited for). Then
        ``welcome(received)``, if given, answers the peer's handshake with this side's
        count; then what the peer has not received (``peer_received`` of what was sent)
        is sent again, and messages flow.

        Raises:
            ConnectionClosed: the link has ended (the transport is closed).

        Cancellation: the transport is closed (bounded), the link stays detached.
        """
        if self.closed:
            await _close_quietly(transport)
            raise _ended()
        previous = self._attached
        if previous is not None:
            previous[1].cancel()
        await self._detached.wait()  # the old connection's pump has stopped counting
        scope = trio.CancelScope()
        self._attached = (transport, scope)
        self._detached = trio.Event()
        try:
            with scope:
                if welcome is not None:
                    await welcome(self.received)
                await self._start(transport, peer_received)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._beat, transport)
                    await self._pump(transport)
                    nursery.cancel_scope.cancel()
        finally:
            if self._wired is transport:
                self._wired = None
            if self._attached is not None and self._attached[0] is transport:
                self._attached = None
                if not self.closed:
                    self.state = LinkState.DETACHED
                self._notify()
            self._detached.set()
            with trio.CancelScope(shield=True):
                await _close_quietly(transport)
        if self.closed:
            raise _ended()

    async def _start(self, transport: Transport, peer_received: int) -> None:
        async with self._wire:
            try:
                resend = self._outbox.resume(peer_received)
            except ResumeRefused as exc:
                log.warning("link %s cannot resume: %s", self.id, exc)
                self.close()
                return
            self._room.set()
            try:
                for text in resend:
                    await self._write(transport, text)
            except _Broken:
                return
            self._wired = transport
            self.last_heard = trio.current_time()
            self.state = LinkState.ATTACHED
            self.attachments += 1
            self._notify()

    async def _pump(self, transport: Transport) -> None:
        """Read the connection into the link until it ends or says nothing for ``timeout``."""
        if self.state is not LinkState.ATTACHED:
            return
        while True:
            frame: str | bytes | None = None
            with trio.move_on_after(self.timeout) as silent:
                try:
                    frame = await transport.receive()
                except trio.Cancelled:
                    raise
                except Exception as exc:
                    log.debug("link %s: the connection failed: %r", self.id, exc)
                    return
            if silent.cancelled_caught:
                log.warning(
                    "link %s: nothing heard for %s s: dropping the connection",
                    self.id,
                    self.timeout,
                )
                return
            if frame is None:
                return
            self.last_heard = trio.current_time()
            text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
            count = _is_ack(text)
            if count == _CLOSED:
                log.info("link %s: the peer ended it", self.id)
                self.close()
                return
            if count is not None:
                if count >= 0 and self._outbox.ack(count):
                    self._room.set()
                continue
            self.received += 1
            try:
                await self._inbound_send.send(text)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            if self.received - self._acked_sent >= ACK_EVERY:
                await self._ack(transport)

    async def _beat(self, transport: Transport) -> None:
        while True:
            await trio.sleep(self.heartbeat)
            await self._ack(transport)

    async def _ack(self, transport: Transport) -> None:
        received = self.received
        text = json.dumps({"jsonrpc": "2.0", "method": ACK, "params": {"received": received}})
        async with self._wire:
            if self._wired is not transport:
                return
            try:
                await self._write(transport, text)
            except _Broken:
                self._drop(transport)
                return
        self._acked_sent = max(self._acked_sent, received)

    async def _write(self, transport: Transport, text: str) -> None:
        with trio.move_on_after(self.timeout) as stalled:
            try:
                await transport.send(text)
            except trio.Cancelled:
                raise
            except Exception as exc:
                raise _Broken() from exc
        if stalled.cancelled_caught:
            log.warning("link %s: the peer read nothing for %s s", self.id, self.timeout)
            raise _Broken()

    def _drop(self, transport: Transport) -> None:
        attached = self._attached
        if attached is not None and attached[0] is transport:
            attached[1].cancel()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- the link's life ---------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Live until the link ends: ended by :meth:`close`, or after ``timeout``
        seconds without a connection since the peer was last heard.

        Cancellation: closes the link.
        """
        task_status.started()
        try:
            while not self.closed:
                changed = self._changed
                if self._attached is None:
                    deadline = self.last_heard + self.timeout
                    with trio.move_on_at(deadline):
                        await changed.wait()
                    if self._attached is None and trio.current_time() >= deadline:
                        log.info("link %s: no connection for %s s: it ends", self.id, self.timeout)
                        self.close()
                else:
                    await changed.wait()
        finally:
            self.close()

    async def goodbye(self) -> None:
        """Tell the peer this side ends the link (``$/close``, best effort, bounded by
        ``heartbeat``), then end it.

        Cancellation: the link is ended all the same.
        """
        try:
            with trio.move_on_after(self.heartbeat):
                async with self._wire:
                    wired = self._wired
                    if wired is not None and not self.closed:
                        text = json.dumps({"jsonrpc": "2.0", "method": CLOSE})
                        with contextlib.suppress(_Broken):
                            await self._write(wired, text)
        finally:
            self.close()

    def close(self) -> None:
        """End the link (idempotent): its reader gets ``None``, senders ConnectionClosed."""
        if self.closed:
            return
        self.state = LinkState.CLOSED
        self._inbound_send.close()
        if self._attached is not None:
            self._attached[1].cancel()
        self._room.set()
        self._notify()


async def _close_quietly(transport: Transport) -> None:
    with trio.move_on_after(_CLOSE_TIMEOUT):
        try:
            await transport.aclose()
        except trio.Cancelled:
            raise
        except Exception:
            log.debug("closing a runner connection failed", exc_info=True)
