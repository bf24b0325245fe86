"""Write an external harness in Python in a few lines: Trio, Hypercorn, a Unix socket.

::

    from omnigent.harnesses.scaffold import HarnessTurn, run

    async def turn(t: HarnessTurn) -> None:
        await t.say(f"you said: {t.text}")
        listing = await t.call_tool("sys_os_list", {"path": "."})   # the runtime runs it
        action, _ = await t.elicit("Go on?")                          # a person answers
        await t.say(listing if action == "accept" else "stopped")

    if __name__ == "__main__":
        run(turn)

:func:`run` reads ``--socket PATH --conversation-id ID`` (as the runtime starts every
external harness) and ``OMNIGENT_HARNESS_AUTH_TOKEN``, serves the protocol of
``API.md`` ("External harness protocol") on the socket with Hypercorn's Trio worker,
and calls the function once per turn with a :class:`HarnessTurn`. The turn ends
``completed`` when it returns, ``failed`` with the message when it raises, and
``cancelled`` on ``interrupt``. SIGTERM and SIGINT stop the server cleanly (a running
turn is cancelled first).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import hypercorn.trio
import trio
from hypercorn.config import Config

from .external import HarnessApp, HarnessTurn, MessageStream, TurnBody, TurnFailed

__all__ = ["HarnessApp", "HarnessTurn", "MessageStream", "TurnBody", "TurnFailed", "run", "serve"]

TOKEN_ENV = "OMNIGENT_HARNESS_AUTH_TOKEN"


async def serve(
    body: TurnBody,
    *,
    socket: str | Path,
    conversation_id: str,
    token: str | None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve one conversation's harness on the Unix socket ``socket`` until SIGTERM/SIGINT.

    Signals readiness (for ``nursery.start``) once the socket is listening.

    Raises:
        FileExistsError: a live server already answers on ``socket``.
    """
    path = trio.Path(socket)
    if await path.exists():
        if await _live(path):
            raise FileExistsError(f"a server is already listening on {path}")
        await path.unlink()
    app = HarnessApp(body, conversation_id=conversation_id, token=token)
    config = Config()
    config.bind = [f"unix:{path}"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 2.0
    stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_on_signals, stop, app)
            # HarnessApp is a plain ASGI 3 callable; Hypercorn's types are stricter.
            serve_app = partial(hypercorn.trio.serve, app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
            await nursery.start(serve_app)
            await path.chmod(0o600)
            task_status.started()
            await stop.wait()
            nursery.cancel_scope.deadline = trio.current_time() + 5
    finally:
        with trio.CancelScope(shield=True):
            await path.unlink(missing_ok=True)


async def _on_signals(stop: trio.Event, app: HarnessApp) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            app.stopping.set()  # cancels a running turn: its stream ends with it
            stop.set()
            return


async def _live(path: trio.Path) -> bool:
    try:
        stream = await trio.open_unix_socket(str(path))
    except OSError:
        return False
    await stream.aclose()
    return True


def run(body: TurnBody, argv: Sequence[str] | None = None) -> None:
    """Parse the runtime's arguments and :func:`serve` ``body`` until stopped."""
    parser = argparse.ArgumentParser(description="an omnigent external harness")
    parser.add_argument("--socket", required=True, help="the Unix socket to serve on")
    parser.add_argument("--conversation-id", required=True, help="the session this serves")
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    trio.run(
        partial(
            serve,
            body,
            socket=args.socket,
            conversation_id=args.conversation_id,
            token=os.environ.get(TOKEN_ENV),
        )
    )
