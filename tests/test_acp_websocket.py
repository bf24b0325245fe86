"""ACP over ``GET /v1/ws``: the official client against ``omnigent serve``, then in process.

The official client runs against a real ``omnigent serve`` subprocess (once for the
module, like the stdio tests); the in-process tests use ``omnigent.client`` over
trio-websocket against a server on loopback, where the runtime's tasks can be counted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio_websocket

import omnigent.rpc as rpc
from omnigent.client import ConnectionClosed, RpcError, open_acp_websocket
from omnigent.model import SessionStatusChanged
from omnigent.testing import scripted_agent
from omnigent.transports.http._websocket import origin_allowed

from .conftest import all_tasks, wait_quiet
from .external_helpers import wait_gone
from .http_helpers import open_server
from .test_acp_stdio import run_driver, write_specs

ASK_SHELL = [{"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"], "reason": "ok?"}]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("acp-ws")
    agents = root / "agents"
    agents.mkdir()
    write_specs(agents)
    work = root / "project"
    work.mkdir()
    home = root / "home"
    command = [
        sys.executable,
        "-m",
        "omnigent",
        "serve",
        "--port",
        "0",
        "--db",
        f"sqlite:///{root / 'ws.db'}",
        "--agents",
        str(agents),
        "--workspace-root",
        str(work),
    ]
    server = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        env={**os.environ, "OMNIGENT_HOME": str(home)},
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline().decode()
        assert line.startswith("omnigent serving on http://"), line
        url = "ws://" + line.split("http://", 1)[1].strip() + "/v1/ws"
        config = {
            "specs": {"talker": "talker", "sleeper": "sleeper", "asker": "asker"},
            "url": url,
            "home": str(home),
            "cwd": str(work),
            "db": "",
        }
        return run_driver("ws", config)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            assert server.wait(timeout=20) == 0
        finally:
            if server.returncode is None:
                server.kill()
                server.wait()
            assert server.stdout is not None
            server.stdout.close()


def test_initialize_over_the_websocket(report: dict[str, Any]) -> None:
    assert report["initialize"]["protocolVersion"] == 1
    assert report["initialize"]["agentCapabilities"]["loadSession"] is True


def test_prompt_big_line_list_and_load_over_the_websocket(report: dict[str, Any]) -> None:
    assert report["prompt"] == {"stopReason": "end_turn", "text": "hello from omnigent"}
    assert report["big"] == {"stopReason": "end_turn"}
    assert report["list"] == [report["session"]]
    assert report["list_other_cwd"] == []
    assert report["load"]["user"] == ["hello", "y" * 20]
    assert report["load"]["after"] == "end_turn"


def test_cancel_and_permissions_over_the_websocket(report: dict[str, Any]) -> None:
    assert report["cancel"]["stopReason"] == "cancelled"
    assert report["cancel"]["seconds"] < 0.5, report["cancel"]
    tools = [o["tool"] for o in report["permissions"]["outcomes"]]
    assert tools == ["completed", "failed", "completed", "completed"]
    assert len(report["permissions"]["asked"]) == 3
    assert report["cancel_while_asking"]["stopReason"] == "cancelled"


# -- in process --------------------------------------------------------------------------


def _ws(url: str, query: str = "") -> str:
    return "ws://" + url.removeprefix("http://") + "/v1/ws" + query


async def test_a_client_that_disconnects_mid_turn_cancels_the_turn_and_leaves_no_task() -> None:
    async with open_server() as server:
        await server.agent(scripted_agent("slow", [{"say": "thinking"}, {"sleep": 30}]))
        before = all_tasks()
        chunk = trio.Event()

        def on_update(session_id: str, update: dict[str, Any]) -> None:
            if update["sessionUpdate"] == "agent_message_chunk":
                chunk.set()

        with trio.fail_after(15):
            with trio.CancelScope() as hang_up:
                async with open_acp_websocket(
                    _ws(server.url, "?agent=slow"), on_update=on_update
                ) as client:
                    sid = await client.new_session("/tmp")
                    async with trio.open_nursery() as nursery:
                        # A bare request: the client sends no session/cancel, it just goes.
                        params = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
                        nursery.start_soon(client.call, "session/prompt", params)
                        await chunk.wait()
                        hang_up.cancel()
            statuses = []
            async with server.runtime.subscribe(sid, after=0) as events:
                async for event in events:
                    if isinstance(event, SessionStatusChanged):
                        statuses.append(event.status)
                        if event.status in ("idle", "failed", "cancelled"):
                            break
            assert statuses == ["running", "cancelled"]
            await wait_quiet(server.runtime)
            while all_tasks() - before:  # the socket's handler winds down
                await trio.sleep(0.01)
        stats = server.runtime.statistics()
        assert (stats["active_sessions"], stats["tasks"], stats["subscribers"]) == (0, 0, 0)
        assert stats["elicitations"] == 0


async def _upgrade(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """A bare upgrade request (trio-websocket leaks its socket when one is refused)."""
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
        **(headers or {}),
    }
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.get(url, headers=upgrade)


async def test_a_foreign_origin_is_refused_and_allowed_origins_are_not() -> None:
    assert origin_allowed(None, "127.0.0.1:6767", ())
    assert origin_allowed("http://127.0.0.1:6767", "127.0.0.1:6767", ())
    assert not origin_allowed("http://evil.example", "127.0.0.1:6767", ())
    assert origin_allowed("https://app.example/", "127.0.0.1:6767", ["https://APP.example"])
    assert not origin_allowed("http://127.0.0.1:6767", None, ())
    async with open_server(allowed_origins=["https://app.example"]) as server:
        await server.agent(scripted_agent("default", [{"say": "hi"}]))
        host = server.url.removeprefix("http://")
        with trio.fail_after(10):
            for origin in ("http://evil.example", "null", "http://localhost:1"):
                refused = await _upgrade(f"{server.url}/v1/ws", {"Origin": origin})
                assert refused.status_code == 403
                assert refused.json()["error"]["code"] == "cross_site_request"
            for origin in (f"http://{host}", "https://app.example"):
                headers = [(b"Origin", origin.encode())]
                async with trio_websocket.open_websocket_url(
                    _ws(server.url), extra_headers=headers
                ) as ws:
                    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
                    await ws.send_message(json.dumps({**hello, "params": {"protocolVersion": 1}}))
                    assert json.loads(await ws.get_message())["id"] == 1


async def test_with_header_auth_the_upgrade_carries_the_identity() -> None:
    async with open_server(auth="header") as server:
        await server.runtime.create_agent(scripted_agent("default", [{"say": "hi"}]), owner="alice")
        with trio.fail_after(10):
            missing = await _upgrade(f"{server.url}/v1/ws")
            assert missing.status_code == 401
            async with open_acp_websocket(
                _ws(server.url), headers={"X-Forwarded-Email": "alice@example.com"}
            ) as alice:
                sid = await alice.new_session("/work")
                assert (await alice.prompt(sid, "hi")).stop_reason == "end_turn"
            snapshot = await server.runtime.get_session(sid)
            assert await server.runtime.access_level(sid, "alice@example.com") == 3
            assert snapshot.cwd == "/work"
            async with open_acp_websocket(
                _ws(server.url), headers={"X-Forwarded-Email": "bob@example.com"}
            ) as bob:
                with pytest.raises(RpcError) as hidden:
                    await bob.load_session(sid, "/work")
                assert hidden.value.code == rpc.RESOURCE_NOT_FOUND
                assert (await bob.list_sessions())["sessions"] == []


async def test_the_agent_comes_from_the_query_else_default_else_the_only_one() -> None:
    async with open_server() as server:
        with trio.fail_after(10):
            async with open_acp_websocket(_ws(server.url)) as client:
                with pytest.raises(RpcError) as none:
                    await client.new_session("/tmp")
                assert none.value.code == rpc.RESOURCE_NOT_FOUND
                assert "?agent=NAME" in none.value.message
                await server.agent(scripted_agent("only", [{"say": "from only"}]))
                sid = await client.new_session("/tmp")  # registered after connecting
                assert (await client.prompt(sid, "hi")).text == "from only"
                await server.agent(scripted_agent("other", [{"say": "from other"}]))
                with pytest.raises(RpcError) as two:
                    await client.new_session("/tmp")  # two agents, none is "default"
                # The message as it was written (not wrapped in "agent '…' not found").
                assert two.value.message == (
                    "no agent named 'default', and 2 to choose from: connect with "
                    "?agent=NAME (agents: only, other)"
                ) or two.value.message.endswith("(agents: other, only)")
                await server.agent(scripted_agent("default", [{"say": "from default"}]))
                sid = await client.new_session("/tmp")
                assert (await client.prompt(sid, "hi")).text == "from default"
            async with open_acp_websocket(_ws(server.url, "?agent=other")) as client:
                sid = await client.new_session("/tmp")
                assert (await client.prompt(sid, "hi")).text == "from other"
            bad = await _upgrade(f"{server.url}/v1/ws?agent=Bad!")
            assert bad.status_code == 422
            assert bad.json()["error"]["details"][0]["loc"] == "agent"
            bad = await _upgrade(f"{server.url}/v1/ws?runner=no%20spaces")
            assert bad.status_code == 422
            assert bad.json()["error"]["details"][0]["loc"] == "runner"


async def test_a_stopping_server_closes_its_sockets() -> None:
    async with open_server() as server:
        await server.agent(scripted_agent("default", [{"say": "hi"}]))
        with trio.fail_after(10):
            async with open_acp_websocket(_ws(server.url)) as client:
                await client.new_session("/tmp")
                server.stopping.set()
                with pytest.raises((ConnectionClosed, RpcError)):
                    while True:
                        await client.list_sessions()
                        await trio.sleep(0.01)


async def test_the_editors_mcp_servers_run_only_if_the_operator_listed_the_program(
    tmp_path: Path,
) -> None:
    server_script = str(Path(__file__).parent / "harnesses" / "mcp_server.py")
    pid_file = tmp_path / "pid"
    env = [{"name": "MCP_PID_FILE", "value": str(pid_file)}]
    listed = {"name": "calc", "command": sys.executable, "args": [server_script], "env": env}
    unlisted = {"name": "shell", "command": "/bin/sh", "args": ["-c", "true"], "env": []}
    script = [{"call": "mcp__calc__add", "args": {"a": 1, "b": 2}}]
    options = {"allowed_commands": [sys.executable], "allowed_env": ["MCP_PID_FILE"]}
    updates: list[dict[str, Any]] = []
    async with open_server(runtime_options=options) as server:
        await server.agent(scripted_agent("adder", script))
        with trio.fail_after(60):
            async with open_acp_websocket(
                _ws(server.url, "?agent=adder"), on_update=lambda _sid, u: updates.append(u)
            ) as client:
                params = {"cwd": str(tmp_path), "mcpServers": [listed, unlisted]}
                result = await client.call("session/new", params)
                assert result["_meta"] == {"omnigent": {"ignoredMcpServers": ["shell"]}}
                assert (await client.prompt(result["sessionId"], "add")).stop_reason == "end_turn"
                pid = int(pid_file.read_text())
            await wait_gone(pid)  # the socket closed: the server went with it
    outputs = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert '"3"' in json.dumps(outputs)
