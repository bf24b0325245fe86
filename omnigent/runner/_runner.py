"""The runner process: dial the server, keep the link, reconnect forever.

:func:`serve_runner` is ``omnigent runner``'s whole life (and the in-process runner of
``omnigent run --server``). It opens the runner's machine (:func:`~._place.
open_runner_place`: the predecessor's leftovers are ended first), then loops: dial
``GET /v1/runners/connect``, say ``initialize``, and carry the link over the connection
until it drops; then dial again, with a backoff (0.2 s doubling to 5 s, jittered),
saying one line per attempt. The server's answer decides what a new connection is: the
same link resumed (nothing lost, nothing repeated), or a new one — then everything the
old link ran is ended first.

What the server refuses for good ends the runner with an :class:`~omnigent.errors.
OmnigentError` (the command line prints one ``Error:`` line and exits 1): a wrong token
(``401``), a name another runner holds (``409``), another protocol version, a request
the server calls malformed (``4xx``). Anything else — a server that is down, restarting,
answering ``5xx``, a network that drops — is retried for ever.

Lifetimes: each link's RPC connection and everything it runs (turns, tool calls) live in
a nursery of its own (:class:`_LinkWork`), inside the runner's; ending a link cancels
them, and the harness processes it started are closed. Leaving :func:`serve_runner`
ends them all and terminates every process the runner started.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import attrs
import trio
import trio_websocket

from .._cancellation import only_exceptions, split_cancellation
from .._version import __version__
from ..errors import BadRequest, OmnigentError, RunnerNameTaken, Unauthorized
from ..link import (
    CONNECT_PATH,
    ERROR_CODE,
    INITIALIZE,
    PROTOCOL_MISMATCH,
    Hello,
    Link,
    Welcome,
    check_name,
    parse_welcome,
)
from ..rpc import INVALID_PARAMS, RpcConnection, RpcError, decode, encode, request
from ..rpc import Response as RpcResponse
from ..spec import ClientTrust
from ._place import RunnerPlace, open_runner_place
from ._service import RunnerService

__all__ = ["RunnerOptions", "connect_url", "serve_runner"]

log = logging.getLogger("omnigent.runner")

_FIRST_BACKOFF = 0.2
_MAX_BACKOFF = 5.0
_HANDSHAKE_TIMEOUT = 15.0
_MAX_MESSAGE = 64 * 1024 * 1024
_MAX_IN_FLIGHT = 1024
_GOODBYE_GRACE = 5.0
"""Seconds a stopping runner gives its goodbye (``$/close``, bounded by the heartbeat)
and the WebSocket's close handshake before it cuts the connection (a handshake under
way then still takes up to its own 1 s bound)."""


@attrs.frozen
class RunnerOptions:
    """How a runner runs (``omnigent runner``'s options).

    Attributes:
        server: the server's URL (``http(s)://HOST:PORT``; ``ws(s)://`` too).
        token: the token the server's operator gave (``--runner-token``).
        name: the name sessions bind to (``runner_id``).
        workspace: where every session's paths stay.
        home: ``$OMNIGENT_HOME`` on this machine (pid files, process records,
            harness data).
        trust: what a spec the server sends may name here (``--allow-command``,
            ``--allow-env``, ``--allow-model-url``).
        trusted_agent: an agent whose specs may name anything (``run --server``'s).
    """

    server: str
    token: str
    name: str
    workspace: Path
    home: Path
    trust: ClientTrust = attrs.field(factory=ClientTrust)
    trusted_agent: str | None = None


def connect_url(server: str, name: str, link: str | None = None) -> str:
    """The WebSocket URL a runner dials (``ws(s)://HOST:PORT/v1/runners/connect?…``).

    Raises:
        BadRequest: ``server`` is not an http(s) or ws(s) URL.
    """
    parts = urlsplit(server)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise BadRequest(f"--server must be an http(s):// URL, got {server!r}")
    query = f"name={quote(name)}" + (f"&link={link}" if link else "")
    path = parts.path.rstrip("/") + CONNECT_PATH
    return urlunsplit((scheme, parts.netloc, path, query, ""))


class _Retry(Exception):
    """This attempt failed in a way worth trying again."""


class _WebSocket:
    """A trio-websocket connection as a link's transport."""

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self._ws = ws

    async def receive(self) -> str | bytes | None:
        try:
            message: str | bytes = await self._ws.get_message()
        except trio_websocket.ConnectionClosed:
            return None
        return message

    async def send(self, text: str) -> None:
        await self._ws.send_message(text)

    async def aclose(self) -> None:
        await self._ws.aclose()


def _refusal(status: int, body: bytes | None) -> OmnigentError:
    message = f"the server refused the runner ({status})"
    try:
        error = json.loads(body or b"{}").get("error", {})
        message = str(error.get("message") or message)
    except (ValueError, AttributeError):
        pass
    if status == 401:
        return Unauthorized(message)
    if status == 409:
        return RunnerNameTaken(None, message)
    return BadRequest(message)


@asynccontextmanager
async def _dial(
    options: RunnerOptions, hello: Hello
) -> AsyncIterator[tuple[trio_websocket.WebSocketConnection, Welcome]]:
    """A connection to the server that answered ``initialize``.

    Raises:
        OmnigentError: the server refused for good. _Retry: try again later.
    """
    url = connect_url(options.server, options.name, hello.link)
    headers = [(b"authorization", f"Bearer {options.token}".encode())]
    try:
        async with trio_websocket.open_websocket_url(
            url,
            extra_headers=headers,
            max_message_size=_MAX_MESSAGE,
            connect_timeout=_HANDSHAKE_TIMEOUT,
            receive_buffer_size=1 << 16,
            message_queue_size=64,
        ) as ws:
            try:
                welcome = await _initialize(ws, hello)
                yield ws, welcome
            finally:
                # trio-websocket 0.12 leaves the TCP stream open when the server
                # closed first: close it.
                stream = getattr(ws, "_stream", None)
                if stream is not None:
                    with trio.CancelScope(shield=True):
                        await stream.aclose()
    except trio_websocket.ConnectionRejected as exc:
        if 400 <= exc.status_code < 500 and exc.status_code != 429:
            raise _refusal(exc.status_code, exc.body) from None
        raise _Retry(f"the server answered {exc.status_code}") from None
    except trio_websocket.HandshakeError as exc:
        raise _Retry(str(exc) or type(exc).__name__) from None
    except OSError as exc:
        raise _Retry(exc.strerror or str(exc)) from None


async def _initialize(ws: trio_websocket.WebSocketConnection, hello: Hello) -> Welcome:
    """Say ``initialize`` and read the server's answer.

    Raises:
        OmnigentError: refused for good (another protocol, the name is taken).
        _Retry: the connection dropped, or the answer did not come in time.
    """
    try:
        with trio.fail_after(_HANDSHAKE_TIMEOUT):
            await ws.send_message(encode(request(0, INITIALIZE, hello.to_params())))
            answer = decode(await ws.get_message())
    except (trio_websocket.ConnectionClosed, trio.TooSlowError) as exc:
        raise _Retry("the server did not answer initialize") from exc
    if not isinstance(answer, RpcResponse):
        raise _Retry("the server's answer to initialize was not a response")
    if answer.error is not None:
        data = answer.error.get("data")
        code = data.get(ERROR_CODE) if isinstance(data, dict) else None
        message = str(answer.error.get("message", "refused"))
        if code == "runner_name_taken":
            raise _refusal(409, json.dumps({"error": {"message": message}}).encode())
        if answer.error.get("code") in (PROTOCOL_MISMATCH, INVALID_PARAMS):
            raise BadRequest(message)
        raise _Retry(message)
    try:
        return parse_welcome(answer.result)
    except RpcError as exc:
        raise BadRequest(f"the server's welcome is not understood: {exc.message}") from exc


@attrs.define(eq=False)
class _LinkWork:
    """One link's RPC connection and everything it runs, in a nursery of its own."""

    link: Link
    place: RunnerPlace

    async def run(self) -> None:
        """Serve the link until it ends; an error boundary (a bug ends this link, logged,
        and the runner connects afresh)."""
        service = RunnerService(self.place)
        connection = RpcConnection(
            self.link, service, max_in_flight=_MAX_IN_FLIGHT, drain_timeout=0.0
        )  # a link that ended cannot carry an answer: nothing to drain
        service.bind(connection)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.link.run)
                await connection.run()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            cancel, failure = split_cancellation(exc)
            if failure is None or not only_exceptions(failure):
                raise
            log.exception("link %s failed", self.link.id, exc_info=failure)
            if cancel is not None:
                raise cancel from None
        finally:
            self.link.close()
            await service.aclose()


async def serve_runner(
    options: RunnerOptions,
    *,
    say: Callable[[str], None] = lambda line: log.warning("%s", line),
    place: RunnerPlace | None = None,
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the runner until ``stop`` is set, or until cancelled (see the module docstring).

    Args:
        say: where the one-line reports go (connected, each failed attempt, lost).
        place: the machine to run on (default: opened here from ``options``).
        stop: set it to stop: the server is told the link ends (``$/close``), so it
            ends the runner's turns and shows it offline at once, instead of waiting
            the link's timeout for a reconnection; the WebSocket is closed (the
            server's answer to the close frame read) before the link's tasks are
            cancelled, all within :data:`_GOODBYE_GRACE`.
        task_status: started once the first connection is up.

    Raises:
        OmnigentError: the server refused the runner for good (a bad token, a taken
            name, another protocol), or the workspace is not a directory.

    Cancellation: ends every link and what it runs, and every process started (the
    server learns of it from the dropped connection, after its timeout).
    """
    if (problem := check_name(options.name)) is not None:
        raise BadRequest(f"--name {problem}, got {options.name!r}")
    connect_url(options.server, options.name)  # a bad URL is refused before anything
    if place is None:
        async with open_runner_place(
            options.workspace,
            options.home,
            trust=options.trust,
            trusted_agent=options.trusted_agent,
        ) as opened:
            await _Dialer(options, opened, say).run(stop, task_status)
    else:
        await _Dialer(options, place, say).run(stop, task_status)


class _Dialer:
    """The runner's connections, one after the other, and the link they carry."""

    def __init__(self, options: RunnerOptions, place: RunnerPlace, say: Callable[[str], None]):
        self._options = options
        self._place = place
        self._say = say
        self._prefix = f"runner {options.name}"
        self.work: _LinkWork | None = None
        self._stopping = False

    async def run(self, stop: trio.Event | None, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as dialing:
                if stop is not None:
                    nursery.start_soon(self._stop_when, stop, dialing)
                await self._loop(nursery, task_status)
            # Stopped: what the link ran ends with it (its cleanup is shielded, bounded).
            self._say(f"{self._prefix}: stopped")
            nursery.cancel_scope.cancel()

    async def _stop_when(self, stop: trio.Event, dialing: trio.CancelScope) -> None:
        """Stop the dialer once ``stop`` is set, connection first, then the tasks.

        The order matters: the WebSocket's own reader task lives under ``dialing``, and
        only it can read the server's answer to the close frame. Cancelling it first
        left the close handshake to wait out its whole timeout (a second at every
        stop); so the link says goodbye and ends, the dialer closes its connection
        while the reader still runs (:meth:`_loop` returns once it is closed), and
        ``dialing`` is cancelled only if that takes longer than :data:`_GOODBYE_GRACE`
        — or at once when no connection is up (between attempts, or dialing).
        """
        await stop.wait()
        self._stopping = True
        dialing.deadline = trio.current_time() + _GOODBYE_GRACE
        work = self.work
        if work is None or not work.link.connected:
            dialing.cancel()
        if work is not None:
            await work.link.goodbye()

    async def _loop(self, nursery: trio.Nursery, task_status: trio.TaskStatus[None]) -> None:
        options, place, say, prefix = self._options, self._place, self._say, self._prefix
        attempt, backoff, started = 0, _FIRST_BACKOFF, False
        while not self._stopping:
            work = self.work
            if work is not None and work.link.closed:
                work = self.work = None
            attempt += 1
            hello = Hello(
                options.name,
                link=work.link.id if work is not None else None,
                received=work.link.received if work is not None else 0,
                runner_version=__version__,
            )
            try:
                async with _dial(options, hello) as (ws, welcome):
                    if self._stopping:
                        return  # stopped while dialing: no new link
                    if work is None or not welcome.resumed or work.link.id != welcome.link:
                        if work is not None:
                            say(f"{prefix}: the server did not know the old link; its work ends")
                            work.link.close()
                        link = Link(
                            welcome.link, heartbeat=welcome.heartbeat, timeout=welcome.timeout
                        )
                        work = self.work = _LinkWork(link, place)
                        nursery.start_soon(work.run, name=f"runner link {link.id}")
                    how = "resumed the link" if welcome.resumed else "connected"
                    say(f"{prefix}: {how} to {options.server} (workspace {place.workspace})")
                    attempt, backoff = 0, _FIRST_BACKOFF
                    if not started:
                        started = True
                        task_status.started()
                    try:
                        await work.link.attach(_WebSocket(ws), welcome.received)
                    except OmnigentError:
                        raise
                    except Exception as exc:  # the link ended under the connection
                        log.debug("%s: %r", prefix, exc)
                if self._stopping:
                    return  # the connection closed after the goodbye
                say(f"{prefix}: the connection dropped; reconnecting")
                continue
            except _Retry as exc:
                delay = backoff * random.uniform(0.8, 1.2)
                say(
                    f"{prefix}: attempt {attempt} to reach {options.server} failed: {exc}; "
                    f"next in {delay:.1f} s"
                )
                await trio.sleep(delay)
                backoff = min(backoff * 2, _MAX_BACKOFF)
