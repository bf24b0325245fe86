"""A runner's turn is one trace with the server's: the runner continues the server's
``invoke_agent`` span (``turn/run`` carries it as W3C trace context), so the ``chat``
spans the ``loop`` harness opens on the runner are its children, as are the
``execute_tool`` spans of the calls the server serves for it — and a sub-agent's turn,
on the runner too, is a child of the call that dispatched it."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from omnigent.client import OmnigentClient
from omnigent.testing import MockLLM

from ..reliability.serve_rig import Watch, stop, terminal_count, write_agents
from ..test_observability import otlp_receiver
from .rig import open_runners, start_server

pytest.importorskip("opentelemetry.sdk")


async def test_a_turn_on_a_runner_is_one_trace_with_the_server(tmp_path: Path) -> None:
    mock = MockLLM()
    mock.reply_tool_call("sys_os_shell", {"command": "echo traced"})
    mock.reply_tool_call("sys_session_send", {"agent": "helper", "title": "t", "args": "hi"})
    for _ in range(3):
        mock.reply_text("done")
    server_root = tmp_path / "server"
    with otlp_receiver() as (endpoint, spans), trio.fail_after(60):
        async with mock.serve() as model_url:
            loop = {
                "name": "looper",
                "executor": {
                    "type": "omnigent",
                    "config": {"harness": "loop", "model": "m", "base_url": model_url},
                },
                "tools": {"agents": ["helper"]},
                "sub_agents": [
                    {
                        "name": "helper",
                        "executor": {
                            "config": {"harness": "scripted", "script": [{"say": "hello"}]}
                        },
                    }
                ],
            }
            write_agents(server_root, [loop])
            otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
            served = await start_server(server_root, env={**otel, "OTEL_SERVICE_NAME": "srv"})
            try:
                async with open_runners() as runners, OmnigentClient(served.url) as client:
                    allow = ["--allow-model-url", model_url]
                    runner = await runners.start(
                        tmp_path / "laptop",
                        served.url,
                        "laptop",
                        *allow,
                        env={**otel, "OTEL_SERVICE_NAME": "laptop"},
                    )
                    session = await client.create_session(agent_name="looper", runner_id="laptop")
                    async with trio.open_nursery() as nursery:
                        watch = Watch(client, session.id)
                        await nursery.start(watch.run)
                        await client.send_message(session.id, "go")
                        # The turn, then the one its child's result wakes up.
                        await watch.wait_for(lambda ev: terminal_count(ev) == 2, "the turns")
                        nursery.cancel_scope.cancel()
                    await runner.stop()  # flushes the runner's spans
            finally:
                await stop(served)  # flushes the server's
    turns = [s for s in spans if s.name == "invoke_agent looper"]
    turn = min(turns, key=lambda s: s.start_time_unix_nano)  # the first turn
    # The first turn's spans: its model calls on the runner, its tool calls here.
    ours = [s for s in spans if bytes(s.trace_id) == bytes(turn.trace_id)]
    chats = [s for s in ours if s.name.startswith("chat ")]
    shell = next(s for s in ours if s.name == "execute_tool sys_os_shell")
    send = next(s for s in ours if s.name == "execute_tool sys_session_send")
    assert len(chats) == 3, [s.name for s in spans]
    for child in (*chats, shell, send):
        assert bytes(child.parent_span_id) == bytes(turn.span_id), child.name
    # The sub-agent's turn (on the runner too) is a child of the call that sent it.
    helper = next(s for s in ours if s.name == "invoke_agent helper")
    assert bytes(helper.parent_span_id) == bytes(send.span_id)
