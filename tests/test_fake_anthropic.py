"""FakeAnthropic: the Messages wire format it speaks, its script, and what it records."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio

from omnigent.testing import ErrorReply, FakeAnthropic, FakeShell, FakeToolUse, FakeTurn

BASH_TOOL = {"name": "Bash", "description": "run", "input_schema": {"type": "object"}}


@pytest.fixture
async def fake_http() -> AsyncIterator[tuple[FakeAnthropic, httpx.AsyncClient]]:
    fake = FakeAnthropic()
    async with httpx.AsyncClient(transport=fake.transport(), base_url="http://fake") as http:
        yield fake, http


def messages(stream: bool = True, **extra: Any) -> dict[str, Any]:
    body = {
        "model": "claude-x",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        "tools": [BASH_TOOL],
    }
    return {**body, **extra}


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """Parses SSE frames, checking that each frame's `event:` names its data's type."""
    events = []
    for frame in body.decode().split("\n\n"):
        if not frame:
            continue
        event_line, data_line = frame.split("\n")
        assert event_line.startswith("event: ")
        assert data_line.startswith("data: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert data["type"] == event_line.removeprefix("event: ")
        events.append(data)
    return events


async def test_text_streams_as_the_real_event_sequence(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_text("Hello world", chunk_size=4)
    response = await http.post("/v1/messages", json=messages())
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    events = sse_events(response.content)
    assert [e["type"] for e in events] == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0]["message"]
    assert start["role"] == "assistant"
    assert start["model"] == "claude-x"
    assert start["content"] == []
    assert start["stop_reason"] is None
    assert start["id"].startswith("msg_")
    assert events[2] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert deltas == [
        {"type": "text_delta", "text": "Hell"},
        {"type": "text_delta", "text": "o wo"},
        {"type": "text_delta", "text": "rld"},
    ]
    assert events[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert events[-2]["usage"]["output_tokens"] >= 1


async def test_tool_use_streams_its_input_as_json_fragments(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply(
        FakeTurn("Let me look.", (FakeToolUse("Read", {"file_path": "/a/b.txt"}, "toolu_9"),))
    )
    events = sse_events((await http.post("/v1/messages", json=messages())).content)
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1]
    assert starts[1]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_9",
        "name": "Read",
        "input": {},
    }
    fragments = [
        e["delta"]["partial_json"]
        for e in events
        if e["type"] == "content_block_delta" and e["index"] == 1
    ]
    assert fragments[0] == ""  # the real API opens with an empty fragment
    assert len(fragments) == 4
    assert json.loads("".join(fragments)) == {"file_path": "/a/b.txt"}
    block_1 = [e for e in events if e["type"] == "content_block_delta" and e["index"] == 1]
    assert all(e["delta"]["type"] == "input_json_delta" for e in block_1)
    assert [e["index"] for e in events if e["type"] == "content_block_stop"] == [0, 1]
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


async def test_shell_becomes_a_bash_tool_use(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_shell("echo hi")
    fake.reply_shell("echo hi")
    body = (await http.post("/v1/messages", json=messages(stream=False))).json()
    assert body["content"] == [
        {"type": "tool_use", "id": "toolu_fake01", "name": "Bash", "input": {"command": "echo hi"}}
    ]
    assert body["stop_reason"] == "tool_use"
    no_bash = messages(tools=[{"name": "Read", "input_schema": {}}])
    refused = await http.post("/v1/messages", json=no_bash)
    assert refused.status_code == 400
    assert refused.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "FakeAnthropic: FakeShell needs a Bash tool; offered: ['Read']",
        },
    }


async def test_non_streaming_request_gets_one_message(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_text("Hi there")
    response = await http.post("/v1/messages", json=messages(stream=False))
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["type"] == "message"
    assert body["content"] == [{"type": "text", "text": "Hi there"}]
    assert body["stop_reason"] == "end_turn"
    assert body["usage"]["input_tokens"] > 0


async def test_text_input_is_refused_for_the_messages_api(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_tool_use("apply_patch", "*** Begin Patch")
    response = await http.post("/v1/messages", json=messages())
    assert response.status_code == 400
    assert "Messages tool inputs are JSON objects" in response.json()["error"]["message"]


async def test_routes_beside_messages(fake_http: tuple[FakeAnthropic, httpx.AsyncClient]) -> None:
    fake, http = fake_http
    fake.reply_text("kept")
    counted = await http.post("/v1/messages/count_tokens", json=messages())
    assert counted.status_code == 200
    assert counted.json()["input_tokens"] > 0
    models = (await http.get("/v1/models")).json()
    assert [m["id"] for m in models["data"]] == list(FakeAnthropic.models)
    assert models["has_more"] is False
    assert models["first_id"] == FakeAnthropic.models[0]
    one = (await http.get(f"/v1/models/{FakeAnthropic.models[1]}")).json()
    assert one["type"] == "model"
    assert (await http.get("/v1/models/gpt-4")).status_code == 404
    missing = await http.post("/v1/complete", json={})
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
    assert (await http.post("/v1/messages", content=b"{nope")).status_code == 400
    assert (await http.post("/v1/messages", json=[1])).status_code == 400
    # none of that consumed the scripted reply or was logged as a model request
    assert fake.pending == 1
    assert fake.requests == []
    # Claude Code adds ?beta=true; the query string does not change the route
    assert (await http.post("/v1/messages?beta=true", json=messages())).status_code == 200
    assert fake.pending == 0


async def test_errors_and_an_empty_script(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_error(429, "slow down", retry_after=2)
    fake.reply(ErrorReply(529, "Overloaded"))
    limited = await http.post("/v1/messages", json=messages())
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "2"
    assert limited.json()["error"] == {"type": "rate_limit_error", "message": "slow down"}
    overloaded = await http.post("/v1/messages", json=messages())
    assert overloaded.json()["error"]["type"] == "overloaded_error"
    empty = await http.post("/v1/messages", json=messages())
    # 400, not 5xx: Claude Code retries server errors for a long time
    assert empty.status_code == 400
    assert empty.json()["error"]["message"] == "FakeAnthropic: no scripted reply left"
    assert len(fake.requests) == 3


async def test_callable_replies_see_the_request(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply(lambda body: FakeTurn(f"you said {body['messages'][-1]['content']}"))
    body = (await http.post("/v1/messages", json=messages(stream=False))).json()
    assert body["content"][0]["text"] == "you said hi"


async def test_tool_results_are_collected_once_each(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    for _ in range(2):
        fake.reply_text("ok")
    first_result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "line 1\n"}, {"type": "text", "text": "line 2"}],
    }
    second_result = {
        "type": "tool_result",
        "tool_use_id": "toolu_2",
        "content": "denied",
        "is_error": True,
    }
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1"}]},
        {"role": "user", "content": [first_result]},
    ]
    await http.post("/v1/messages", json=messages(messages=history))
    history += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2"}]},
        {"role": "user", "content": [second_result]},
    ]
    await http.post("/v1/messages", json=messages(messages=history))
    results = fake.tool_results()
    assert [(r.call_id, r.output, r.is_error) for r in results] == [
        ("toolu_1", "line 1\nline 2", False),
        ("toolu_2", "denied", True),
    ]


async def test_stall_streams_then_holds_the_stream_open() -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn("partial", (FakeShell("ls"),), stall=True))
    received = b""
    async with httpx.AsyncClient(transport=fake.transport()) as http:
        with trio.move_on_after(1) as scope:
            async with http.stream("POST", "http://f/v1/messages", json=messages()) as response:
                async for chunk in response.aiter_raw():
                    received += chunk
    assert scope.cancelled_caught
    types = [e["type"] for e in sse_events(received)]
    assert types[-1] == "content_block_stop"
    assert "message_delta" not in types
    assert "message_stop" not in types


async def test_delays_pace_the_stream(autojump_clock: trio.abc.Clock) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn("abcd", chunk_size=2, delay=1.0))
    arrivals: list[float] = []
    async with (
        httpx.AsyncClient(transport=fake.transport()) as http,
        http.stream("POST", "http://f/v1/messages", json=messages()) as response,
    ):
        start = trio.current_time()
        async for _ in response.aiter_raw():
            arrivals.append(trio.current_time() - start)
    # message_start, ping, block start, 2 deltas, block stop, message_delta, message_stop
    assert arrivals == [float(i) for i in range(8)]


async def test_wait_requests_wakes_when_a_request_arrives(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_text("ok")
    got: list[dict[str, Any]] = []
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                got.append(await fake.wait_requests(1))

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
            await http.post("/v1/messages", json=messages(stream=False))
    assert got == [messages(stream=False)]
    assert await fake.wait_requests(1) is fake.requests[0]  # already there: no wait


def test_turn_validation() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        FakeTurn("x", chunk_size=0)
    with pytest.raises(ValueError, match="delay"):
        FakeTurn("x", delay=-1)
    assert FakeTurn(tools=[FakeShell("ls")]).tools == (FakeShell("ls"),)


async def test_serve_answers_over_loopback() -> None:
    fake = FakeAnthropic([FakeTurn("over the wire")])
    with trio.fail_after(5):
        async with fake.serve() as base_url, httpx.AsyncClient() as http:
            assert base_url.startswith("http://127.0.0.1:")
            assert not base_url.endswith("/v1")  # ANTHROPIC_BASE_URL has no /v1
            response = await http.post(f"{base_url}/v1/messages", json=messages())
    events = sse_events(response.content)
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(deltas) == "over the wire"


async def test_serve_breaks_off_a_stalled_stream_when_closing() -> None:
    fake = FakeAnthropic([FakeTurn("partial", stall=True)])
    with trio.fail_after(5):
        async with httpx.AsyncClient() as http, trio.open_nursery() as nursery:
            async with fake.serve() as base_url:

                async def stalled(task_status: trio.TaskStatus[None]) -> None:
                    url = f"{base_url}/v1/messages"
                    async with http.stream("POST", url, json=messages()) as response:
                        task_status.started()
                        with pytest.raises(httpx.RemoteProtocolError):
                            await response.aread()

                await nursery.start(stalled)
                leaving = trio.current_time()
            assert trio.current_time() - leaving < 0.5


async def test_a_bare_name_calls_the_mcp_tool_offered_under_it(
    fake_http: tuple[FakeAnthropic, httpx.AsyncClient],
) -> None:
    """Claude Code offers an MCP server's tools as ``mcp__<server>__<tool>``: a script
    may name them bare; a name offered as is, or by no tool, is used as written."""
    fake, http = fake_http
    fake.reply(FakeTurn(None, [FakeToolUse("sys_session_send", {"args": "go"})]))
    fake.reply(FakeTurn(None, [FakeToolUse("Bash", {"command": "ls"})]))
    fake.reply(FakeTurn(None, [FakeToolUse("Unlisted", {})]))
    tools = [
        {"name": "Bash", "input_schema": {"type": "object"}},
        {"name": "mcp__omnigent__sys_session_send", "input_schema": {"type": "object"}},
    ]
    names = []
    for _ in range(3):
        answer = await http.post("/v1/messages", json=messages(stream=False, tools=tools))
        [block] = answer.json()["content"]
        names.append(block["name"])
    assert names == ["mcp__omnigent__sys_session_send", "Bash", "Unlisted"]
