"""The native harnesses driven over HTTP: a turn streamed with ``?stream=true``, its
approval answered through the resolve route, and — with a real ``omnigent serve``
process — the conversation continued after the server restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from omnigent.testing import FakeAnthropic, FakeResponses, FakeShell, FakeTurn

from .http_helpers import HTTPX_GENERATORS, Frame, open_server, open_stream
from .native_helpers import claude_binary, codex_binary, require
from .native_session_helpers import native_spec, private_home

pytestmark = HTTPX_GENERATORS
TIMEOUT = 60

__all__ = ["private_home"]


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "data": {"content": [{"type": "input_text", "text": text}]}}


async def streamed_turn(
    client: httpx.AsyncClient, session_id: str, text: str, action: str = "accept"
) -> list[Frame]:
    """POST a message with ``?stream=true``; answer each elicitation over HTTP with
    ``action``; the frames up to the turn's terminal ``response.*`` event."""
    frames: list[Frame] = []
    path = f"/v1/sessions/{session_id}/events?stream=true"
    async with open_stream(client, "POST", path, json=message(text)) as reader:
        assert reader.response.status_code == 200
        while (frame := await reader.next()) is not None:
            frames.append(frame)
            if frame.event == "response.elicitation_request":
                eid = frame.data["elicitation_id"]
                answer = await client.post(
                    f"/v1/sessions/{session_id}/elicitations/{eid}/resolve",
                    json={"action": action},
                )
                assert answer.json() == {"resolved": True}
            if frame.event in ("response.completed", "response.failed", "response.cancelled"):
                break
    return frames


def texts(frames: list[Frame]) -> str:
    return "".join(f.data["delta"] for f in frames if f.event == "response.output_text.delta")


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
async def test_a_turn_with_an_approval_over_http(harness: str, tmp_path: Path) -> None:
    binary = claude_binary() if harness == "claude-code" else codex_binary()
    require(binary, harness, "claude" if harness == "claude-code" else "codex")
    if binary is None:
        pytest.skip(f"{harness} is not installed")
    fake: FakeAnthropic | FakeResponses = (
        FakeAnthropic() if harness == "claude-code" else FakeResponses()
    )
    fake.reply(FakeTurn("Making it.", [FakeShell("touch over-http.txt && pwd")]))
    fake.reply_text("Made over HTTP.")
    work = tmp_path / "work"
    work.mkdir()
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, open_server() as server:
            spec = native_spec(harness, url, cwd=work)
            sid = await server.session(spec, by_operator=True)  # an absolute cwd
            snapshot = (await server.client.get(f"/v1/sessions/{sid}")).json()
            assert snapshot["harness"] == harness
            frames = await streamed_turn(server.client, sid, "make a file over http")
            assert frames[-1].event == "response.completed"
            [asked] = [f for f in frames if f.event == "response.elicitation_request"]
            phase = "permission_request" if harness == "claude-code" else "codex_command_approval"
            assert asked.data["params"]["phase"] == phase
            assert asked.data["params"]["url"].startswith(f"/approve/{sid}/")
            assert texts(frames) == "Making it.Made over HTTP."
            assert (work / "over-http.txt").exists()
            assert str(work) in fake.tool_results()[0].output
            items = (await server.client.get(f"/v1/sessions/{sid}/items")).json()["data"]
            kinds = [i["type"] for i in items]
            assert kinds.count("function_call") == 1 and "function_call_output" in kinds


async def test_a_wrong_model_is_refused_over_http_naming_the_rule() -> None:
    async with open_server(
        runtime_options={"allowed_model_urls": ["http://127.0.0.1:9"]}
    ) as server:
        spec = native_spec("claude", "http://127.0.0.1:9")
        spec["executor"]["config"]["model"] = "gpt-4o"
        answer = await server.client.post("/v1/agents", json=spec)
        assert answer.status_code == 422
        detail = answer.json()["error"]["details"][0]
        assert detail["loc"] == "executor.config.model"
        assert "only runs Claude models" in detail["msg"]
        spec["executor"]["config"]["model"] = "sonnet"
        agent_id = await server.agent(spec)
        answer = await server.client.post(
            "/v1/sessions", json={"agent_id": agent_id, "model_override": "gpt-4o"}
        )
        assert answer.status_code == 422
        assert answer.json()["error"]["details"][0]["loc"] == "model_override"
        answer = await server.client.post(
            "/v1/sessions", json={"agent_id": agent_id, "harness_override": "claude-native"}
        )
        assert answer.status_code == 201 and answer.json()["harness"] == "claude-native"
        assert answer.json()["harness_override"] == "claude-native"
        answer = await server.client.post(
            "/v1/sessions", json={"agent_id": agent_id, "harness_override": "claude-cod"}
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "unknown_harness"
        assert "'claude-cod'" in answer.json()["error"]["message"]
        listed = (await server.client.get("/v1/sessions")).json()["data"]
        assert len(listed) == 1  # the refused one left no row


async def _serve(db: Path, env: dict[str, str], model_url: str) -> tuple[trio.Process, str]:
    # The fake model server is on loopback: its URL is one the operator allows clients.
    command = [
        sys.executable,
        "-m",
        "omnigent",
        "serve",
        "--port",
        "0",
        "--db",
        f"sqlite:///{db}",
        "--allow-model-url",
        model_url,
    ]
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        chunk = await process.stdout.receive_some(1)
        assert chunk, f"the server exited before printing its URL: {line!r}"
        line += chunk
    return process, line.decode().split(" on ", 1)[1].strip()


async def _stop(process: trio.Process) -> None:
    process.send_signal(signal.SIGINT)
    with trio.fail_after(15):
        assert await process.wait() == 0


@pytest.mark.skipif(claude_binary() is None, reason="the claude CLI is not installed")
async def test_omnigent_serve_continues_a_claude_conversation_after_a_restart(
    tmp_path: Path,
) -> None:
    fake = FakeAnthropic()
    fake.reply_text("I will remember blue.")
    fake.reply_text("You said blue.")
    env = dict(os.environ, OMNIGENT_HOME=str(tmp_path / "home"))
    db = tmp_path / "omnigent.db"
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url:
            process, base = await _serve(db, env, url)
            try:
                async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                    agent = await client.post("/v1/agents", json=native_spec("claude", url))
                    created = await client.post(
                        "/v1/sessions", json={"agent_id": agent.json()["id"]}
                    )
                    sid = created.json()["id"]
                    first = await streamed_turn(client, sid, "remember blue")
                    assert texts(first) == "I will remember blue."
                await _stop(process)
                process, base = await _serve(db, env, url)
                async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                    second = await streamed_turn(client, sid, "what did I say?")
                    assert second[-1].event == "response.completed"
                    assert texts(second) == "You said blue."
                await _stop(process)
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    history = [m for m in fake.requests[1]["messages"] if m["role"] == "assistant"]
    assert "I will remember blue." in str(history)
    # Each clean shutdown ended its Claude Code process (and removed its pid file).
    assert list((tmp_path / "home" / "run" / "processes").glob("*.json")) == []
