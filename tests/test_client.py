"""``omnigent.client`` against a real ``omnigent serve`` on loopback.

A small TCP proxy sits between the client and the server so a test can cut every
connection mid-stream, as a flaky network would, and watch the SSE stream resume.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

from omnigent.client import (
    ApiError,
    OmnigentClient,
    StreamError,
    open_acp_process,
    open_acp_websocket,
)
from omnigent.model import (
    MessageItem,
    OutputTextDelta,
    ResponseCompleted,
    SessionStatusChanged,
)
from omnigent.testing import scripted_agent
from omnigent.transports.http._serve import serve

from .http_helpers import HTTPX_GENERATORS

pytestmark = HTTPX_GENERATORS


class Proxy:
    """Forwards TCP connections to ``target``; :meth:`cut` drops every open one."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.accepted = 0
        self._scopes: set[trio.CancelScope] = set()

    def cut(self) -> None:
        for scope in list(self._scopes):
            scope.cancel()

    async def _handle(self, client: trio.SocketStream) -> None:
        self.accepted += 1
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                upstream = await trio.open_tcp_stream(*self.target)
                async with client, upstream, trio.open_nursery() as nursery:
                    nursery.start_soon(self._pipe, client, upstream, nursery.cancel_scope)
                    nursery.start_soon(self._pipe, upstream, client, nursery.cancel_scope)
            finally:
                self._scopes.discard(scope)

    @staticmethod
    async def _pipe(
        source: trio.SocketStream, sink: trio.SocketStream, scope: trio.CancelScope
    ) -> None:
        try:
            async for chunk in source:
                await sink.send_all(chunk)
        except trio.BrokenResourceError:
            pass
        scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)


@asynccontextmanager
async def running_server(tmp_path: Path) -> AsyncIterator[tuple[str, Proxy]]:
    """``omnigent serve`` (Hypercorn, loopback, port 0) behind a cuttable proxy."""
    db = f"sqlite:///{tmp_path / 'client.db'}"
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        run = partial(
            serve, db, "127.0.0.1", 0, None, "none", stop=stop, workspace_roots=[tmp_path]
        )
        url = await nursery.start(run)
        host, port = url.removeprefix("http://").split(":")
        proxy = Proxy((host, int(port)))
        await nursery.start(proxy.run)
        try:
            yield f"http://127.0.0.1:{proxy.port}", proxy
        finally:
            stop.set()
            nursery.cancel_scope.cancel()


async def test_http_calls_answer_typed_records_and_errors(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with running_server(tmp_path) as (url, _), OmnigentClient(url) as client:
            assert await client.health()
            agent = await client.create_agent(scripted_agent("greeter", [{"say": "hello you"}]))
            assert (agent.name, agent.version, agent.harness) == ("greeter", 1, "scripted")
            again = await client.create_agent(
                yaml.safe_dump(scripted_agent("greeter", [{"say": "hello again"}]))
            )
            assert (again.id, again.version) == (agent.id, 2)
            assert [a.name for a in await client.list_agents()] == ["greeter"]
            assert (await client.get_agent(agent.id)).version == 2
            session = await client.create_session(agent_name="greeter", title="demo")
            assert (session.agent_name, session.title, session.status) == (
                "greeter",
                "demo",
                "idle",
            )
            async with client.events(session.id) as events:
                accepted = await client.send_message(session.id, "hi")
                assert accepted.status == "accepted"
                async for event in events:
                    if isinstance(event, SessionStatusChanged) and event.status == "idle":
                        break
            items = await client.list_items(session.id)
            assert [type(i) for i in items] == [MessageItem, MessageItem]
            assert items[1].content[0].text == "hello again"  # type: ignore[union-attr]
            renamed = await client.update_session(session.id, title="renamed")
            assert renamed.title == "renamed"
            sessions, more = await client.list_sessions(agent_name="greeter")
            assert [s.id for s in sessions] == [session.id] and not more
            with pytest.raises(ApiError) as missing:
                await client.get_session("conv_missing")
            assert (missing.value.status, missing.value.code) == (404, "session_not_found")
            with pytest.raises(ApiError) as invalid:
                await client.create_agent({"name": "BAD"})
            assert invalid.value.status == 422
            assert invalid.value.details[0]["loc"] == "name"
            await client.delete_session(session.id)
            with pytest.raises(ApiError):
                await client.get_session(session.id)


async def test_the_event_stream_resumes_after_a_dropped_connection(tmp_path: Path) -> None:
    words = " ".join(f"w{i}" for i in range(400))
    spec = scripted_agent("talker", [{"say": words}, {"sleep": 0.05}, {"say": words}])
    with trio.fail_after(30):
        async with running_server(tmp_path) as (url, proxy), OmnigentClient(url) as client:
            agent = await client.create_agent(spec)
            session = await client.create_session(agent.id)
            seen: list[int] = []
            deltas = 0
            async with client.events(session.id, after=0, backoff=0.01) as events:
                await client.send_message(session.id, "talk")
                async for event in events:
                    seen.append(event.event_id)
                    if isinstance(event, OutputTextDelta):
                        deltas += 1
                        if deltas in (100, 500):
                            proxy.cut()  # mid-stream, twice
                    if isinstance(event, SessionStatusChanged) and event.status == "idle":
                        break
                assert events.reconnects >= 2
            assert deltas == 800
            assert seen == list(range(1, len(seen) + 1))  # no gap, no duplicate
            assert proxy.accepted >= 3


async def test_the_event_stream_ends_with_an_error_when_the_session_goes(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with running_server(tmp_path) as (url, _), OmnigentClient(url) as client:
            agent = await client.create_agent(scripted_agent("quiet", [{"say": "hi"}]))
            session = await client.create_session(agent.id)
            with pytest.raises(StreamError) as refused:
                async with client.events("conv_missing", after=0) as events:
                    await events.__anext__()
            assert refused.value.status == 404
            async with client.events(session.id) as events:
                await client.send_message(session.id, "hi")
                async for event in events:
                    if isinstance(event, ResponseCompleted):
                        break
                await client.delete_session(session.id)
                with pytest.raises(StreamError) as gone:
                    async for event in events:
                        assert isinstance(event, SessionStatusChanged)  # the turn's last event
                assert gone.value.status == 404


async def test_acp_over_the_websocket_with_permissions(tmp_path: Path) -> None:
    spec = scripted_agent("asker", [{"call": "sys_os_shell", "args": {"command": "echo hi"}}])
    spec["policies"] = [{"name": "ask", "type": "ask_tools", "tools": ["sys_os_shell"]}]
    asked: list[dict[str, Any]] = []

    async def approve(params: dict[str, Any]) -> str | None:
        asked.append(params)
        return "allow_once"

    with trio.fail_after(20):
        async with running_server(tmp_path) as (url, _):
            async with OmnigentClient(url) as client:
                await client.create_agent(spec)
            async with open_acp_websocket(f"{url}", on_permission=approve) as acp:
                assert acp.agent_info["name"] == "omnigent"
                sid = await acp.new_session(str(tmp_path))
                result = await acp.prompt(sid, "run it")
                assert result.stop_reason == "end_turn"
                [call] = [u for u in result.updates if u["sessionUpdate"] == "tool_call"]
                assert call["title"] == "Run: echo hi"
                assert asked[0]["toolCall"]["toolCallId"] == call["toolCallId"]
                options = await acp.set_model(sid, "other-model")
                assert options[0]["currentValue"] == "other-model"
                info = await acp.call("_omnigent/session/info", {"sessionId": sid})
                assert info["model_override"] == "other-model"


async def test_acp_over_a_process_with_omnigent_stdio(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(scripted_agent("local", [{"say": "from a process"}])))
    command = [sys.executable, "-m", "omnigent", "stdio", "--agent", str(path)]
    command += ["--db", f"sqlite:///{tmp_path / 'stdio.db'}"]
    with trio.fail_after(30):
        async with open_acp_process(command) as acp:
            sid = await acp.new_session(str(tmp_path))
            assert (await acp.prompt(sid, "hi")).text == "from a process"
            listed = await acp.list_sessions(cwd=str(tmp_path))
            assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        async with open_acp_process(command) as acp:  # a new process: the session is kept
            replayed = await acp.load_session(sid, str(tmp_path))
            assert [u["sessionUpdate"] for u in replayed] == [
                "user_message_chunk",
                "agent_message_chunk",
            ]
