"""``omnigent stdio`` beside a server: the editor's ACP relayed to the server's ``/v1/ws``.

When an ``omnigent serve`` holds the store (or ``stdio --server URL`` names one), the
editor's process does not run sessions itself — it could not open the store, and two
editors and a terminal could not share sessions live. It relays instead:

* the spec it would serve (``--agent PATH``, the project's ``.omnigent/agent.yaml``, or
  the built-in editor agent) is uploaded (``POST /v1/agents``; the server's rules for
  a client's spec apply);
* a runner inside this process serves the editor's directory
  (:func:`~._remote_turn.start_local_runner`, trusting that upload, connected with the
  server's local token or ``--token``);
* every line the editor writes goes to ``/v1/ws?agent=NAME&runner=RUNNER`` as one text
  frame, and every frame the server sends comes back as one line: the server speaks ACP
  (sessions, permissions, the editor's own ``fs/*`` calls), the runner does the work
  here. Sessions are the server's: another editor, ``omnigent sessions list`` or the
  console see them live, and ``session/load`` finds one another editor created.

The end is ``stdio``'s: when the editor closes stdin (or on SIGINT/SIGTERM) nothing more
is read; each prompt still in flight is cancelled (``session/cancel``), and once every
request read has its answer the relay closes, the runner says goodbye and the process
exits 0. A second signal stops at once. A server that goes away ends the relay with
exit status 1 (one ``Error:`` line on stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import trio
import trio_websocket

from .._gc import settle_after_startup
from ..client import ApiError, OmnigentClient
from ..errors import OmnigentError
from ..rpc import NdjsonStream
from ..spec import AgentSpec, importable_beside
from ..transports.acp import default_agent_spec, load_agent_spec, protocol_fds
from ._holders import TurnServer
from ._remote_turn import ServerRefused, spec_hint, start_local_runner

__all__ = ["ServerGone", "relay_stdio", "run_relay"]

log = logging.getLogger("omnigent.cli")

_MAX_FRAME = 64 * 1024 * 1024
_CONNECT_TIMEOUT = 30.0


class ServerGone(OmnigentError):
    """The server closed the editor's connection while the editor was still there."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"the server at {server} closed the connection: {reason}")


def ws_url(server: str, **query: str) -> str:
    """``ws(s)://HOST:PORT/v1/ws?…`` of the server at ``http(s)://HOST:PORT``."""
    base = server.rstrip("/")
    if base.startswith(("http://", "https://")):
        base = "ws" + base.removeprefix("http")
    return f"{base}/v1/ws?{urlencode(query)}"


def run_relay(args: argparse.Namespace, server: TurnServer) -> int:
    """``omnigent stdio`` relayed to ``server`` until stdin closes or a signal comes.

    Raises:
        BadRequest, SpecError: the spec cannot be read or is invalid.
        ServerRefused: the server refused the spec.
        ServerGone: the server closed the connection.
    """
    spec = load_agent_spec(args.agent) if args.agent else default_agent_spec(Path.cwd())
    if args.agent:
        importable_beside(args.agent)
    workspace = Path.cwd().resolve()
    with protocol_fds() as (fd_in, fd_out):
        return trio.run(_main, spec, server, workspace, fd_in, fd_out)


async def _main(
    spec: AgentSpec, server: TurnServer, workspace: Path, fd_in: int, fd_out: int
) -> int:
    stdin = trio.lowlevel.FdStream(os.dup(fd_in))
    stdout = trio.lowlevel.FdStream(os.dup(fd_out))
    stop_reading = trio.Event()
    async with stdin, stdout, trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

            async def relay() -> None:
                await relay_stdio(
                    spec, server, stdin, stdout, workspace=workspace, stop_reading=stop_reading
                )
                nursery.cancel_scope.cancel()  # all answered: stop watching signals

            nursery.start_soon(relay)
            async for signum in signals:
                if not stop_reading.is_set():
                    log.info("signal %s: answering what is in flight, then exiting", signum)
                    stop_reading.set()
                    continue
                log.info("signal %s: exiting now", signum)
                nursery.cancel_scope.cancel()
                break
    return 0


async def relay_stdio(
    spec: AgentSpec,
    server: TurnServer,
    receive_stream: trio.abc.ReceiveStream,
    send_stream: trio.abc.SendStream,
    *,
    workspace: Path,
    stop_reading: trio.Event,
) -> None:
    """Relay ACP between the two streams and ``server``, with a runner on ``workspace``.

    Returns once the input ended (or ``stop_reading`` was set) and every request read
    was answered.

    Raises:
        ServerRefused: the server refused the spec.
        OmnigentError: the server refused the runner (a wrong token).
        ServerGone: the server closed the connection first.

    Cancellation: the connection and the runner end (the server cancels what the
    connection's prompts were running).
    """
    async with OmnigentClient(server.url) as client, trio.open_nursery() as nursery:
        try:
            agent = await client.create_agent(spec.to_dict())
        except ApiError as exc:
            raise ServerRefused(exc, spec_hint(server.url) if server.local else "") from None
        stop_runner = trio.Event()
        runner = await start_local_runner(
            nursery,
            server=server.url,
            token=server.token,
            workspace=workspace,
            trusted_agent=agent.id,
            stop=stop_runner,
        )
        url = ws_url(server.url, agent=agent.name, runner=runner)
        log.info("relaying ACP to %s (runner %s on %s)", url, runner, workspace)
        try:
            async with trio_websocket.open_websocket_url(
                url, max_message_size=_MAX_FRAME, connect_timeout=_CONNECT_TIMEOUT
            ) as ws:
                settle_after_startup()  # a server from now on: see omnigent._gc
                await _Relay(server.url, ws, NdjsonStream(receive_stream, send_stream)).run(
                    stop_reading
                )
        except trio_websocket.HandshakeError as exc:
            raise ServerGone(server.url, str(exc) or type(exc).__name__) from None
        finally:
            stop_runner.set()


class _Relay:
    """One editor's lines and one WebSocket's frames, and what is still to be answered."""

    def __init__(
        self, server: str, ws: trio_websocket.WebSocketConnection, editor: NdjsonStream
    ) -> None:
        self._server = server
        self._ws = ws
        self._editor = editor
        self._pending: set[str] = set()  # the editor's requests not yet answered (ids)
        self._prompts: dict[str, Any] = {}  # a prompt's id → its session
        self._input_ended = trio.Event()
        self._settled = trio.Event()

    async def run(self, stop_reading: trio.Event) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._from_server, nursery.cancel_scope)
            with trio.CancelScope() as reading:
                nursery.start_soon(self._stop_on, stop_reading, reading)
                await self._from_editor()
            await self._wind_down()
            await self._settled.wait()
            nursery.cancel_scope.cancel()

    @staticmethod
    async def _stop_on(event: trio.Event, scope: trio.CancelScope) -> None:
        await event.wait()
        scope.cancel()

    async def _from_editor(self) -> None:
        while (line := await self._editor.receive()) is not None:
            if not isinstance(line, bytes):
                log.warning("a line from the editor was too large: skipped")
                continue
            self._note_request(line)
            try:
                await self._ws.send_message(line.decode("utf-8", "replace"))
            except trio_websocket.ConnectionClosed:
                return

    def _note_request(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return  # the server answers it (-32700) without an id to wait for
        if isinstance(message, dict) and "method" in message and "id" in message:
            key = json.dumps(message["id"])
            self._pending.add(key)
            params = message.get("params")
            if message["method"] == "session/prompt" and isinstance(params, dict):
                self._prompts[key] = params.get("sessionId")

    async def _wind_down(self) -> None:
        """Nothing more is read: the prompts in flight are cancelled, as stdio does."""
        self._input_ended.set()
        for session_id in dict.fromkeys(self._prompts.values()):
            cancel = {
                "jsonrpc": "2.0",
                "method": "session/cancel",
                "params": {"sessionId": session_id},
            }
            try:
                await self._ws.send_message(json.dumps(cancel))
            except trio_websocket.ConnectionClosed:
                break
        self._check_settled()

    def _check_settled(self) -> None:
        if self._input_ended.is_set() and not self._pending:
            self._settled.set()

    async def _from_server(self, everything: trio.CancelScope) -> None:
        while True:
            try:
                frame = await self._ws.get_message()
            except trio_websocket.ConnectionClosed as exc:
                if self._input_ended.is_set():
                    self._settled.set()  # nothing more can be answered
                    return
                raise ServerGone(self._server, str(exc.reason)) from None
            text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
            self._note_answer(text)
            await self._editor.send(text)
            self._check_settled()

    def _note_answer(self, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            return
        if isinstance(message, dict) and "id" in message and "method" not in message:
            key = json.dumps(message["id"])
            self._pending.discard(key)
            self._prompts.pop(key, None)
