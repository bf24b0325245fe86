"""MockLLM: the wire format it speaks, its script, and its server's lifetime."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio

import omnigent.testing
from omnigent.testing import ErrorReply, MockLLM, TextReply, Writes


@pytest.fixture
async def mock_http() -> AsyncIterator[tuple[MockLLM, httpx.AsyncClient]]:
    mock = MockLLM()
    async with httpx.AsyncClient(transport=mock.transport(), base_url="http://mock") as http:
        yield mock, http


def chat(stream: bool = True) -> dict[str, Any]:
    return {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}], "stream": stream}


def sse_payloads(body: bytes) -> list[Any]:
    frames = [f for f in body.decode().split("\n\n") if f]
    assert all(f.startswith("data: ") for f in frames)
    return [f[6:] if f == "data: [DONE]" else json.loads(f[6:]) for f in frames]


def test_public_names() -> None:
    assert omnigent.testing.__all__ == sorted(omnigent.testing.__all__)
    for name in omnigent.testing.__all__:
        assert getattr(omnigent.testing, name) is not None


async def test_stream_is_real_openai_chunks(mock_http: tuple[MockLLM, httpx.AsyncClient]) -> None:
    mock, http = mock_http
    mock.reply_text("Hello", chunk_size=2)
    response = await http.post("/v1/chat/completions", json=chat())
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    *chunks, done = sse_payloads(response.content)
    assert done == "[DONE]"
    for chunk in chunks:
        assert chunk.keys() == {"id", "object", "created", "model", "choices"}
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "gpt-x"
        assert chunk["id"] == chunks[0]["id"]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {"content": "He"},
        {"content": "ll"},
        {"content": "o"},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 4 + ["stop"]


async def test_tool_call_arguments_come_in_fragments(
    mock_http: tuple[MockLLM, httpx.AsyncClient],
) -> None:
    mock, http = mock_http
    mock.reply_tool_call("add", {"a": 1, "b": 2}, call_id="call_9")
    response = await http.post("/v1/chat/completions", json=chat())
    *chunks, _ = sse_payloads(response.content)
    tool_deltas = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert tool_deltas[0] == {
        "index": 0,
        "id": "call_9",
        "type": "function",
        "function": {"name": "add", "arguments": ""},
    }
    fragments = [d["function"]["arguments"] for d in tool_deltas[1:]]
    assert len(fragments) == 3
    assert json.loads("".join(fragments)) == {"a": 1, "b": 2}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_non_streaming_request_gets_one_json_completion(
    mock_http: tuple[MockLLM, httpx.AsyncClient],
) -> None:
    mock, http = mock_http
    mock.reply_text("Hi there")
    mock.reply_tool_calls([("a", {}), ("b", '{"raw": true}')])
    first = (await http.post("/v1/chat/completions", json=chat(stream=False))).json()
    assert first["object"] == "chat.completion"
    assert first["choices"][0]["message"] == {"role": "assistant", "content": "Hi there"}
    assert first["choices"][0]["finish_reason"] == "stop"
    second = (await http.post("/v1/chat/completions", json=chat(stream=False))).json()
    calls = second["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("a", "{}"),
        ("b", '{"raw": true}'),
    ]


async def test_errors_have_openai_bodies(mock_http: tuple[MockLLM, httpx.AsyncClient]) -> None:
    mock, http = mock_http
    mock.reply_error(429, "slow down", retry_after=1.5)
    response = await http.post("/v1/chat/completions", json=chat())
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1.5"
    error = response.json()["error"]
    assert error == {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_error"}


async def test_empty_script_answers_500(mock_http: tuple[MockLLM, httpx.AsyncClient]) -> None:
    _, http = mock_http
    response = await http.post("/v1/chat/completions", json=chat())
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "MockLLM: no scripted reply left"


async def test_routes(mock_http: tuple[MockLLM, httpx.AsyncClient]) -> None:
    mock, http = mock_http
    models = (await http.get("/v1/models")).json()
    assert [m["id"] for m in models["data"]] == ["mock-model"]
    assert (await http.get("/v1/chat/completions")).status_code == 404
    assert (await http.post("/v1/completions", json={})).status_code == 404
    assert (await http.post("/v1/chat/completions", content=b"{nope")).status_code == 400
    assert mock.requests == []


async def test_script_is_consumed_in_order_and_requests_recorded(
    mock_http: tuple[MockLLM, httpx.AsyncClient],
) -> None:
    mock, http = mock_http
    seen: list[dict[str, Any]] = []

    def echo(body: dict[str, Any]) -> TextReply | ErrorReply:
        seen.append(body)
        return TextReply(body["messages"][-1]["content"].upper())

    mock.reply(echo)
    mock.reply_error(400, "bad")
    assert mock.pending == 2
    first = await http.post("/v1/chat/completions", json=chat(stream=False))
    assert first.json()["choices"][0]["message"]["content"] == "HI"
    assert mock.pending == 1
    assert (await http.post("/v1/chat/completions", json=chat())).status_code == 400
    assert mock.pending == 0
    assert mock.requests == [chat(stream=False), chat()]
    assert seen == [chat(stream=False)]


async def test_delays_pace_the_stream(autojump_clock: trio.abc.Clock) -> None:
    mock = MockLLM()
    mock.reply_text("abcdef", chunk_size=2, delay=1.0)
    arrivals: list[float] = []
    async with (
        httpx.AsyncClient(transport=mock.transport()) as http,
        http.stream("POST", "http://m/v1/chat/completions", json=chat()) as response,
    ):
        start = trio.current_time()
        async for _ in response.aiter_raw():
            arrivals.append(trio.current_time() - start)
    assert arrivals == [0.0, 1.0, 2.0]


async def test_hang_blocks_until_cancelled(mock_http: tuple[MockLLM, httpx.AsyncClient]) -> None:
    mock, http = mock_http
    mock.reply_hang()
    with trio.move_on_after(0.1) as scope:
        async with http.stream("POST", "/v1/chat/completions", json=chat()) as response:
            assert response.status_code == 200
            await response.aread()
    assert scope.cancelled_caught


async def test_serve_answers_over_loopback() -> None:
    mock = MockLLM()
    mock.reply_text("over the wire")
    with trio.fail_after(5):
        async with mock.serve() as base_url, httpx.AsyncClient() as http:
            assert base_url.startswith("http://127.0.0.1:")
            assert base_url.endswith("/v1")
            assert (await http.get(f"{base_url}/models")).status_code == 200
            response = await http.post(f"{base_url}/chat/completions", json=chat())
            *chunks, done = sse_payloads(response.content)
    assert done == "[DONE]"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "over the wire"


async def test_serve_closes_quickly_with_a_hanging_stream_open() -> None:
    mock = MockLLM()
    mock.reply_hang()
    root = trio.lowlevel.current_root_task()
    assert root is not None
    before = _count_tasks(root)
    with trio.fail_after(5):
        async with httpx.AsyncClient() as http:
            async with trio.open_nursery() as nursery:
                async with mock.serve() as base_url:
                    url = f"{base_url}/chat/completions"

                    async def hang(task_status: trio.TaskStatus[None]) -> None:
                        async with http.stream("POST", url, json=chat()) as response:
                            task_status.started()
                            with pytest.raises(httpx.RemoteProtocolError):
                                await response.aread()

                    await nursery.start(hang)
                    leaving = trio.current_time()
                # The server is gone and took the hanging stream with it.
                assert trio.current_time() - leaving < 0.5
            assert not nursery.child_tasks
    assert _count_tasks(root) == before


def _count_tasks(task: trio.lowlevel.Task) -> int:
    return 1 + sum(_count_tasks(t) for n in task.child_nurseries for t in n.child_tasks)


@pytest.mark.parametrize(("writes", "expected"), [(Writes.PACKED, 1), (Writes.DELTA, 3)])
async def test_writes_one_network_write_per_delta_or_all_at_once(
    writes: Writes, expected: int
) -> None:
    # DELTA: one write per content delta (the role frame rides with the first, the
    # finish frame and [DONE] with the last); PACKED: everything in one write.
    mock = MockLLM(writes=writes)
    mock.reply_text("Hello", chunk_size=2)
    with trio.fail_after(10):
        async with (
            httpx.AsyncClient(transport=mock.transport(), base_url="http://m") as http,
            http.stream("POST", "/v1/chat/completions", json=chat()) as response,
        ):
            written = [chunk async for chunk in response.aiter_raw()]
    assert len(written) == expected
    *chunks, done = sse_payloads(b"".join(written))
    assert done == "[DONE]"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Hello"
