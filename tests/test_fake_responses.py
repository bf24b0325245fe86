"""FakeResponses: the Responses wire format it speaks, its script, and what it records."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio

from omnigent.testing import FakeResponses, FakeShell, FakeToolUse, FakeTurn

EXEC_COMMAND = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}


@pytest.fixture
async def fake_http() -> AsyncIterator[tuple[FakeResponses, httpx.AsyncClient]]:
    fake = FakeResponses()
    async with httpx.AsyncClient(transport=fake.transport(), base_url="http://fake") as http:
        yield fake, http


def request(stream: bool = True, **extra: Any) -> dict[str, Any]:
    body = {
        "model": "gpt-x",
        "input": [{"type": "message", "role": "user", "content": "hi"}],
        "stream": stream,
        "tools": [EXEC_COMMAND, APPLY_PATCH, {"type": "web_search"}],
    }
    return {**body, **extra}


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """Parses SSE frames, checking each frame's `event:` and the sequence numbers."""
    events = []
    for frame in body.decode().split("\n\n"):
        if not frame:
            continue
        event_line, data_line = frame.split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {data['type']}"
        events.append(data)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


async def test_text_streams_as_the_real_event_sequence(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_text("Hello world", chunk_size=6)
    response = await http.post("/v1/responses", json=request())
    assert response.headers["content-type"] == "text/event-stream"
    events = sse_events(response.content)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    created = events[0]["response"]
    assert created["status"] == "in_progress"
    assert created["output"] == []
    assert created["model"] == "gpt-x"
    added = events[2]["item"]
    assert added["type"] == "message"
    assert added["status"] == "in_progress"
    assert added["content"] == []
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert [d["delta"] for d in deltas] == ["Hello ", "world"]
    assert all(d["item_id"] == added["id"] for d in deltas)
    assert all((d["output_index"], d["content_index"]) == (0, 0) for d in deltas)
    done = events[-1]["response"]
    assert done["status"] == "completed"
    assert done["id"] == created["id"]
    assert done["output"] == [events[-2]["item"]]
    assert done["output"][0]["content"] == [
        {"type": "output_text", "text": "Hello world", "annotations": []}
    ]
    assert done["usage"]["total_tokens"] == (
        done["usage"]["input_tokens"] + done["usage"]["output_tokens"]
    )


async def test_function_call_streams_its_arguments(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply(FakeTurn("Checking.", (FakeToolUse("lookup", {"q": "trio"}, "call_7"),)))
    events = sse_events((await http.post("/v1/responses", json=request())).content)
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    assert [item["type"] for item in added] == ["message", "function_call"]
    call = added[1]
    assert call["call_id"] == "call_7"
    assert call["name"] == "lookup"
    assert call["arguments"] == ""
    deltas = [e for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) == 3
    assert all((d["item_id"], d["output_index"]) == (call["id"], 1) for d in deltas)
    assert json.loads("".join(d["delta"] for d in deltas)) == {"q": "trio"}
    [args_done] = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    assert json.loads(args_done["arguments"]) == {"q": "trio"}
    final = events[-1]["response"]["output"][1]
    assert final == {**call, "arguments": args_done["arguments"], "status": "completed"}


async def test_custom_tool_gets_a_custom_tool_call(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
    fake.reply_tool_use("apply_patch", patch)
    events = sse_events((await http.post("/v1/responses", json=request())).content)
    item = events[-1]["response"]["output"][0]
    assert item["type"] == "custom_tool_call"
    assert item["name"] == "apply_patch"
    assert item["input"] == patch
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert "".join(deltas) == patch
    [done] = [e for e in events if e["type"] == "response.custom_tool_call_input.done"]
    assert done["input"] == patch


@pytest.mark.parametrize(
    ("tools", "call"),
    [
        ([EXEC_COMMAND], ("exec_command", {"cmd": "ls -a"})),
        ([{"type": "function", "name": "shell_command"}], ("shell_command", {"command": "ls -a"})),
        ([{"type": "function", "name": "shell"}], ("shell", {"command": ["bash", "-lc", "ls -a"]})),
    ],
)
async def test_shell_picks_the_offered_shell_tool(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
    tools: list[dict[str, Any]],
    call: tuple[str, dict[str, Any]],
) -> None:
    fake, http = fake_http
    fake.reply(FakeTurn(tools=(FakeShell("ls -a"),)))
    body = (await http.post("/v1/responses", json=request(stream=False, tools=tools))).json()
    [item] = body["output"]
    assert item["type"] == "function_call"
    assert (item["name"], json.loads(item["arguments"])) == call


async def test_shell_without_a_shell_tool_is_refused(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_shell("ls")
    response = await http.post("/v1/responses", json=request(tools=[APPLY_PATCH]))
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "FakeResponses: FakeShell needs a shell tool; offered: ['apply_patch']"
    )


async def test_non_streaming_request_gets_one_response(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_text("Hi there")
    body = (await http.post("/v1/responses", json=request(stream=False))).json()
    assert body["object"] == "response"
    assert body["status"] == "completed"
    assert body["output"][0]["content"][0]["text"] == "Hi there"


async def test_routes_errors_and_an_empty_script(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    models = (await http.get("/v1/models")).json()
    assert [m["id"] for m in models["data"]] == list(FakeResponses.models)
    assert (await http.post("/v1/chat/completions", json={})).status_code == 404
    assert (await http.post("/v1/responses", content=b"[")).status_code == 400
    assert fake.requests == []
    fake.reply_error(503, "try later", retry_after=1)
    unavailable = await http.post("/v1/responses", json=request())
    assert unavailable.status_code == 503
    assert unavailable.headers["retry-after"] == "1"
    assert unavailable.json()["error"]["type"] == "server_error"
    empty = await http.post("/v1/responses", json=request())
    assert empty.status_code == 400
    assert empty.json()["error"]["message"] == "FakeResponses: no scripted reply left"
    assert len(fake.requests) == 2


async def test_tool_results_are_collected_once_each(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply_text("one")
    fake.reply_text("two")
    history: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "exit 0\nhi\n"},
    ]
    await http.post("/v1/responses", json=request(input=history))
    history += [
        {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "x"},
        {
            "type": "custom_tool_call_output",
            "call_id": "call_2",
            "output": [{"type": "input_text", "text": "Success."}],
        },
    ]
    await http.post("/v1/responses", json=request(input=history))
    assert [(r.call_id, r.output, r.is_error) for r in fake.tool_results()] == [
        ("call_1", "exit 0\nhi\n", False),
        ("call_2", "Success.", False),
    ]


async def test_stall_holds_the_stream_before_completing() -> None:
    fake = FakeResponses([FakeTurn("partial", stall=True)])
    received = b""
    async with httpx.AsyncClient(transport=fake.transport()) as http:
        with trio.move_on_after(1) as scope:
            async with http.stream("POST", "http://f/v1/responses", json=request()) as response:
                async for chunk in response.aiter_raw():
                    received += chunk
    assert scope.cancelled_caught
    types = [e["type"] for e in sse_events(received)]
    assert types[-1] == "response.output_item.done"
    assert "response.completed" not in types


async def test_serve_answers_over_loopback() -> None:
    fake = FakeResponses([FakeTurn("over the wire")])
    with trio.fail_after(5):
        async with fake.serve() as base_url, httpx.AsyncClient() as http:
            assert base_url.startswith("http://127.0.0.1:")
            assert base_url.endswith("/v1")  # a Codex provider's base_url ends in /v1
            response = await http.post(f"{base_url}/responses", json=request())
    events = sse_events(response.content)
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "over the wire"


async def test_a_tool_behind_tool_search_is_searched_for_then_called_in_its_namespace(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    """Codex keeps MCP tools behind ``tool_search``: the fake finds one the way a model
    does, one extra request, then calls it in the namespace the search loaded."""
    fake, http = fake_http
    fake.reply(FakeTurn("Sending.", [FakeToolUse("sys_session_send", {"args": "go"})]))
    search_tool = {"type": "tool_search", "execution": "client", "parameters": {}}
    body = request(stream=False, tools=[EXEC_COMMAND, search_tool])
    first = (await http.post("/v1/responses", json=body)).json()
    [search] = first["output"]
    assert search["type"] == "tool_search_call" and search["execution"] == "client"
    assert search["arguments"] == {"query": "sys_session_send", "limit": 8}
    assert fake.pending == 1  # the same turn answers the next request
    loaded = {
        "type": "tool_search_output",
        "call_id": search["call_id"],
        "execution": "client",
        "tools": [
            {
                "type": "namespace",
                "name": "mcp__omnigent",
                "tools": [{"type": "function", "name": "sys_session_send", "parameters": {}}],
            }
        ],
    }
    body["input"] = [*body["input"], search, loaded]
    second = (await http.post("/v1/responses", json=body)).json()
    message, call = second["output"]
    assert message["content"][0]["text"] == "Sending."
    assert call["type"] == "function_call" and call["namespace"] == "mcp__omnigent"
    assert call["name"] == "sys_session_send" and json.loads(call["arguments"]) == {"args": "go"}
    assert fake.pending == 0


async def test_a_search_that_finds_nothing_is_not_repeated(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply(FakeTurn(None, [FakeToolUse("nowhere", {})]))
    search_tool = {"type": "tool_search", "execution": "client", "parameters": {}}
    body = request(stream=True, tools=[search_tool])
    first = sse_events((await http.post("/v1/responses", json=body)).content)
    [search] = [e["item"] for e in first if e["type"] == "response.output_item.done"]
    assert search["type"] == "tool_search_call"
    body["input"] = [*body["input"], search]
    second = (await http.post("/v1/responses", json={**body, "stream": False})).json()
    [call] = second["output"]
    assert call["type"] == "function_call" and call["name"] == "nowhere"
    assert "namespace" not in call


async def test_a_bare_name_calls_the_mcp_tool_offered_under_it(
    fake_http: tuple[FakeResponses, httpx.AsyncClient],
) -> None:
    fake, http = fake_http
    fake.reply(FakeTurn(None, [FakeToolUse("sys_read_inbox", {})]))
    offered = {"type": "function", "name": "mcp__omnigent__sys_read_inbox", "parameters": {}}
    body = request(stream=False, tools=[EXEC_COMMAND, offered])
    [call] = (await http.post("/v1/responses", json=body)).json()["output"]
    assert call["name"] == "mcp__omnigent__sys_read_inbox"
