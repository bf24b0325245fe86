"""ACP ``usage_update`` after each turn (issues 29 and 30; docs/acp.md, "Usage").

MockLLM reports usage (4 characters a token) and keeps what it reported
(``MockLLM.usages``), so ``used`` and ``cost`` are checked exactly. In process, then over
a real ``omnigent stdio`` and a real ``/v1/ws`` socket, every message the agent sends
checked against the vendored ACP schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio_websocket

import omnigent
from omnigent.testing import MockLLM

from .acp_helpers import Editor, open_acp
from .acp_schema import AcpSchema
from .acp_stdio_raw import INITIALIZE, open_stdio, request
from .http_helpers import open_server

WINDOW = 128_000
CONFIG = (
    "prices:\n  mock-model: {input_per_mtok: 1.5, output_per_mtok: 4}\n"
    f"context_windows:\n  mock-model: {WINDOW}\n"
)


def loop_spec(name: str = "looped", model: str = "mock-model", base_url: str = "http://mock/v1"):
    config = {"harness": "loop", "model": model, "base_url": base_url, "api_key": "sk-test"}
    return {"name": name, "executor": {"type": "omnigent", "config": config}}


def cost(*usages: tuple[int, int]) -> float:
    return sum(prompt * 1.5 + completion * 4 for prompt, completion in usages) / 1e6


def usage_updates(editor: Editor, session_id: str) -> list[dict[str, Any]]:
    return editor.session_updates(session_id, "usage_update")


async def test_each_turn_sends_the_sessions_usage_and_a_load_sends_it_at_once(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    mock = MockLLM()
    mock.reply_text("first answer")
    mock.reply_text("the second answer, longer")
    with trio.fail_after(20):
        async with (
            httpx.AsyncClient(transport=mock.transport()) as http,
            omnigent.open_runtime(http_client=http, home=tmp_path, workspace=tmp_path) as rt,
        ):
            await rt.create_agent(loop_spec())
            async with open_acp(rt, "looped") as editor:
                sid = await editor.new_session(str(tmp_path))
                assert usage_updates(editor, sid) == []  # nothing used yet: nothing sent
                assert await editor.prompt(sid, "one") == {"stopReason": "end_turn"}
                # Sent before the prompt's answer (after the turn's last chunk).
                (first,) = usage_updates(editor, sid)
                assert editor.updates[-1]["update"] == first
                (p1, c1) = mock.usages[0]
                assert first == {
                    "sessionUpdate": "usage_update",
                    "used": p1 + c1,
                    "size": WINDOW,
                    "cost": {"amount": pytest.approx(cost((p1, c1))), "currency": "USD"},
                }
                await editor.prompt(sid, "two")
                (p2, c2) = mock.usages[1]
                second = usage_updates(editor, sid)[-1]
                # ``used``: what the last call left in context; ``cost``: cumulative.
                assert (second["used"], second["size"]) == (p2 + c2, WINDOW)
                assert second["cost"]["amount"] == pytest.approx(cost((p1, c1), (p2, c2)))
            async with open_acp(rt, "looped") as other:
                params = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
                await other.call("session/load", params)
                assert usage_updates(other, sid) == [second]
            async with open_acp(rt, "looped") as other:
                await other.call("session/resume", params)
                assert usage_updates(other, sid) == [second]


async def test_a_model_without_a_configured_window_gets_no_usage_update(tmp_path: Path) -> None:
    """ACP's ``size`` is required; its RFD says to send nothing rather than invent one."""
    (tmp_path / "config.yaml").write_text(CONFIG)
    mock = MockLLM()
    mock.reply_text("hello")
    with trio.fail_after(20):
        async with (
            httpx.AsyncClient(transport=mock.transport()) as http,
            omnigent.open_runtime(http_client=http, home=tmp_path, workspace=tmp_path) as rt,
        ):
            await rt.create_agent(loop_spec(model="unknown-model"))
            async with open_acp(rt, "looped") as editor:
                sid = await editor.new_session(str(tmp_path))
                await editor.prompt(sid)
                assert editor.text(sid) == "hello"
                assert usage_updates(editor, sid) == []
            assert (await rt.get_session(sid)).usage.model_calls == 1  # usage was reported


def test_the_context_windows_table_is_checked() -> None:
    from omnigent.errors import ConfigError
    from omnigent.model import ContextWindows

    table = ContextWindows.from_config({"gpt-4o-mini": 128_000})
    assert table.for_model("openai/gpt-4o-mini") == 128_000  # a gateway's spelling
    assert table.for_model("gpt-4o") is None
    for raw, where in (
        ({"m": 0}, "context_windows.m"),
        ({"m": "128k"}, "context_windows.m"),
        ({"m": True}, "context_windows.m"),
        ([1], "context_windows"),
    ):
        with pytest.raises(ConfigError) as caught:
            ContextWindows.from_config(raw)
        assert caught.value.details[0].loc == where


async def test_usage_update_over_a_real_stdio(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    mock = MockLLM()
    mock.reply_text("over stdio")
    with trio.fail_after(60):
        async with (
            mock.serve() as base_url,
            open_stdio(tmp_path, loop_spec(base_url=base_url)) as agent,
        ):
            new = request(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
            await agent.send(INITIALIZE, new)
            sid = (await agent.answer(1))["result"]["sessionId"]
            text = [{"type": "text", "text": "hi"}]
            await agent.send(request(2, "session/prompt", {"sessionId": sid, "prompt": text}))
            assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
    updates = [m["params"]["update"] for m in agent.received if m.get("method")]
    (usage,) = [u for u in updates if u["sessionUpdate"] == "usage_update"]
    (p1, c1) = mock.usages[0]
    assert (usage["used"], usage["size"], usage["cost"]["currency"]) == (p1 + c1, WINDOW, "USD")
    assert usage["cost"]["amount"] == pytest.approx(cost((p1, c1)))


async def test_usage_update_over_a_real_websocket(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    mock = MockLLM()
    mock.reply_text("over the socket")
    schema = AcpSchema()
    with trio.fail_after(30):
        async with (
            httpx.AsyncClient(transport=mock.transport()) as http,
            open_server(
                runtime_options={"http_client": http, "home": tmp_path, "workspace": tmp_path}
            ) as server,
        ):
            await server.runtime.create_agent(loop_spec())
            url = "ws://" + server.url.removeprefix("http://") + "/v1/ws?agent=looped"
            async with trio_websocket.open_websocket_url(url) as socket:

                async def send(message: dict[str, Any]) -> None:
                    schema.client_sent(message)
                    await socket.send_message(json.dumps(message))

                async def until_answer(request_id: int) -> dict[str, Any]:
                    while True:
                        message = json.loads(await socket.get_message())
                        schema.agent_sent(message)
                        received.append(message)
                        if message.get("id") == request_id and "method" not in message:
                            return message

                received: list[dict[str, Any]] = []
                await send(INITIALIZE)
                await until_answer(0)
                await send(request(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
                sid = (await until_answer(1))["result"]["sessionId"]
                text = [{"type": "text", "text": "hi"}]
                await send(request(2, "session/prompt", {"sessionId": sid, "prompt": text}))
                assert (await until_answer(2))["result"] == {"stopReason": "end_turn"}
    updates = [m["params"]["update"] for m in received if m.get("method") == "session/update"]
    (usage,) = [u for u in updates if u["sessionUpdate"] == "usage_update"]
    (p1, c1) = mock.usages[0]
    assert (usage["used"], usage["size"]) == (p1 + c1, WINDOW)
    assert usage["cost"]["amount"] == pytest.approx(cost((p1, c1)))
