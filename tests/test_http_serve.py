"""The server runner: a real subprocess, signals, restarts on the same SQLite file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from omnigent.transports.http._serve import serve

from .http_helpers import HTTPX_GENERATORS, is_terminal_status, open_server, open_stream, scripted

pytestmark = HTTPX_GENERATORS

AGENT_YAML = """
name: greeter
executor: {type: omnigent, config: {harness: scripted, script: [{say: hello there}]}}
"""


async def _read_line(stream: trio.abc.ReceiveStream) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        assert chunk, f"the server exited before printing its URL: {line!r}"
        line += chunk
    return line


async def test_run_serve_subprocess_prints_url_and_exits_0_on_sigint(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "greeter.yaml").write_text(AGENT_YAML)
    command = [
        sys.executable,
        "-m",
        "omnigent",
        "serve",
        "--port",
        "0",
        "--db",
        f"sqlite:///{tmp_path / 'o.db'}",
        "--agents",
        str(agents),
    ]
    with trio.fail_after(30):
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(os.environ)
        )
        try:
            assert process.stdout is not None
            line = (await _read_line(process.stdout)).decode()
            assert line.startswith("omnigent serving on http://127.0.0.1:")
            url = line.split(" on ", 1)[1].strip()
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                health = (await client.get("/health")).json()
                assert health == {
                    "status": "ok",
                    "server_id": health["server_id"],
                    "store": "sqlite",
                }
                agents_listed = (await client.get("/v1/agents")).json()["data"]
                assert [a["name"] for a in agents_listed] == ["greeter"]
                created = await client.post(
                    "/v1/sessions", json={"agent_id": agents_listed[0]["id"]}
                )
                sid = created.json()["id"]
                async with open_stream(client, "GET", f"/v1/sessions/{sid}/stream") as r:
                    process.send_signal(signal.SIGINT)
                    with trio.fail_after(5):
                        assert await r.read_until() == []  # the stream ends cleanly
            with trio.fail_after(10):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_serve_stops_on_event_and_on_cancel(tmp_path: Path) -> None:
    with trio.fail_after(20):
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            url = await nursery.start(
                lambda task_status: serve(
                    None, "127.0.0.1", 0, None, "none", stop=stop, task_status=task_status
                )
            )
            async with httpx.AsyncClient(base_url=url) as client:
                assert (await client.get("/health")).status_code == 200
            stop.set()
        with trio.move_on_after(5) as scope:
            async with trio.open_nursery() as nursery:
                url = await nursery.start(serve, None, "127.0.0.1", 0, None, "none")
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught


async def test_restart_on_the_same_sqlite_file_keeps_everything(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'keep.db'}"
    with trio.fail_after(20):
        async with open_server(db) as server:
            sid = await server.session(scripted("keeper", [{"say": "kept words"}]))
            url = f"/v1/sessions/{sid}/stream?after=0"
            async with open_stream(server.client, "GET", url) as r:
                await server.message(sid)
                before = [(f.id, f.data) for f in await r.read_until(is_terminal_status)]
            items_before = (await server.client.get(f"/v1/sessions/{sid}/items")).json()
            snapshot_before = (await server.client.get(f"/v1/sessions/{sid}")).json()
        async with open_server(db) as server:
            snapshot = (await server.client.get(f"/v1/sessions/{sid}")).json()
            assert snapshot == snapshot_before
            assert (await server.client.get(f"/v1/sessions/{sid}/items")).json() == items_before
            async with open_stream(server.client, "GET", url) as r:
                after = [(f.id, f.data) for f in await r.read_until(count=len(before))]
            assert after == before
            # And the session still works.
            await server.message(sid)
            async with open_stream(
                server.client, "GET", f"{url[: -len('after=0')]}after={before[-1][0]}"
            ) as r:
                more = await r.read_until(is_terminal_status)
            assert more[0].id == before[-1][0] + 1 and more[-1].data["status"] == "idle"
