"""A runner connects to a real server, and is refused what it must be refused."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import trio

from ..reliability.serve_rig import stop
from .rig import open_runners, start_server

STOP_BOUND = 0.75
"""Seconds from SIGTERM to a runner's exit: the close timeout alone used to take 1."""


async def test_a_runner_connects_and_the_server_lists_it(tmp_path: Path) -> None:
    with trio.fail_after(60):
        served = await start_server(tmp_path / "server")
        try:
            async with open_runners() as runners:
                runner = await runners.start(tmp_path / "r1", served.url, "r1")
                async with httpx.AsyncClient(base_url=served.url) as http:
                    status = (await http.get("/v1/runners/r1/status")).json()
                    assert status == {"runner_id": "r1", "online": True}
                    listed = (await http.get("/v1/runners")).json()["data"]
                    assert [(r["runner_id"], r["online"]) for r in listed] == [("r1", True)]
                    assert (await http.get("/v1/runners/nobody/status")).json() == {
                        "runner_id": "nobody",
                        "online": False,
                    }
                    # A second runner claiming the name is refused, not swapped in.
                    second = await runners.start(tmp_path / "r1b", served.url, "r1", wait=False)
                    assert await second.exit_code() == 1
                    errors = [line for line in second.lines if line.startswith("Error: ")]
                    assert len(errors) == 1 and "already connected" in errors[0], second.lines
                    assert (await http.get("/v1/runners/r1/status")).json()["online"]
                    # A wrong token: 401, one Error: line, exit 1.
                    wrong = await runners.start(
                        tmp_path / "r2", served.url, "r2", token="wrong", wait=False
                    )
                    assert await wrong.exit_code() == 1
                    errors = [line for line in wrong.lines if line.startswith("Error: ")]
                    assert errors == ["Error: the runner token is missing or wrong"], wrong.lines
                # SIGTERM ends it promptly. Regression: it took a second (its WebSocket's
                # reader was cancelled before the close frame went out, so the server's
                # answer went unread until the close timed out; tests/runners/test_stop.py).
                with trio.fail_after(STOP_BOUND):
                    await runner.stop(how=signal.SIGTERM)
                assert await runner.exit_code() == 0
                # It said goodbye: offline at once, not after the link's timeout.
                async with httpx.AsyncClient(base_url=served.url) as http:
                    status = (await http.get("/v1/runners/r1/status")).json()
                assert status == {"runner_id": "r1", "online": False}
        finally:
            await stop(served)
