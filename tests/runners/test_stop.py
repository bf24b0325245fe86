"""A runner told to stop closes its connection before it cancels the task that reads it.

Regression: ``omnigent runner`` took a second to exit after SIGTERM. It said goodbye
(``$/close``) and then cancelled its dialer's whole nursery — with it the WebSocket's
own reader task — before closing the WebSocket; the close frame went out, but nothing
was left to read the server's answer, so the close waited out its whole timeout (1 s).
The server answered within milliseconds all along.

Here the peer is a WebSocket server on loopback that answers ``initialize`` and the
close frame, and nothing else (it does not close on ``$/close``, as the real server
does when it is quick enough to race the runner): the runner's stop must come back
well inside that timeout. ``tests/runners/test_connect.py`` times a real runner
process against a real server.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio_websocket

from omnigent._ids import new_id
from omnigent.link import Welcome
from omnigent.runner import RunnerOptions, serve_runner

_BOUND = 0.5
"""Seconds a stop may take here: the old stop took the close timeout (1 s) at least."""


async def _peer(request: trio_websocket.WebSocketRequest) -> None:
    """Answer ``initialize``, then read until the runner closes; the close frame is
    answered by trio-websocket's own reader."""
    ws = await request.accept()
    hello = json.loads(await ws.get_message())
    welcome = Welcome(
        runner_id=hello["params"]["name"], link=new_id("link"), resumed=False, received=0
    )
    answer = {"jsonrpc": "2.0", "id": hello["id"], "result": welcome.to_result()}
    await ws.send_message(json.dumps(answer))
    try:
        while True:
            await ws.get_message()  # $/ack, $/close: neither ends the connection here
    except trio_websocket.ConnectionClosed:
        pass


async def test_a_stopped_runner_reads_the_answer_to_its_close_frame(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                trio_websocket.serve_websocket, _peer, "127.0.0.1", 0, None
            )
            port = server.port
            options = RunnerOptions(
                server=f"http://127.0.0.1:{port}",
                token="token",
                name="stopper",
                workspace=tmp_path / "workspace",
                home=tmp_path / "home",
            )
            stop = trio.Event()
            lines: list[str] = []
            runner_done = trio.Event()

            async def run_runner(*, task_status: trio.TaskStatus[None]) -> None:
                try:
                    await serve_runner(
                        options, say=lines.append, stop=stop, task_status=task_status
                    )
                finally:
                    runner_done.set()

            await nursery.start(run_runner)
            assert lines[-1].startswith("runner stopper: connected to"), lines
            stop.set()
            with trio.fail_after(_BOUND):
                await runner_done.wait()
            assert lines[-1] == "runner stopper: stopped", lines
            nursery.cancel_scope.cancel()
