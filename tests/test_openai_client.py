"""ChatCompletionsClient against MockLLM (in memory and over loopback) and hand-made
streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import attrs
import httpx
import pytest
import trio

from omnigent.errors import ModelEndpointError
from omnigent.harnesses.openai import (
    ChatCompletionsClient,
    ChatEvent,
    Completion,
    TextDelta,
    ToolCall,
)
from omnigent.model import Usage
from omnigent.testing import MockLLM, mock_tokens

MESSAGES = [{"role": "user", "content": "hi"}]


@attrs.frozen
class Endpoint:
    mock: MockLLM
    base_url: str
    http: httpx.AsyncClient

    def client(self, **kwargs: Any) -> ChatCompletionsClient:
        kwargs.setdefault("backoff_base", 0.001)
        kwargs.setdefault("backoff_max", 0.01)
        return ChatCompletionsClient(self.http, base_url=self.base_url, api_key="k", **kwargs)


@pytest.fixture(params=["memory", "loopback"])
async def endpoint(request: pytest.FixtureRequest) -> AsyncIterator[Endpoint]:
    mock = MockLLM()
    if request.param == "memory":
        async with httpx.AsyncClient(transport=mock.transport()) as http:
            yield Endpoint(mock, "http://mock/v1/", http)
    else:
        async with mock.serve() as base_url, httpx.AsyncClient() as http:
            yield Endpoint(mock, base_url, http)


async def collect(client: ChatCompletionsClient, **kwargs: Any) -> list[ChatEvent]:
    with trio.fail_after(5):
        async with client.open_stream(model="m", messages=MESSAGES, **kwargs) as stream:
            return [event async for event in stream]


async def test_text_streams_as_deltas_then_one_completion(endpoint: Endpoint) -> None:
    endpoint.mock.reply_text("Hello world", chunk_size=3)
    events = await collect(endpoint.client())
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo "),
        TextDelta("wor"),
        TextDelta("ld"),
        Completion("Hello world", (), "stop"),
    ]


async def test_the_deltas_that_arrived_together_can_be_taken_at_once() -> None:
    mock = MockLLM()
    mock.reply_text("Hello world", chunk_size=3)  # one write: every delta in one read
    async with httpx.AsyncClient(transport=mock.transport()) as http:
        client = ChatCompletionsClient(http, base_url="http://mock/v1", api_key=None)
        with trio.fail_after(5):
            async with client.open_stream(model="m", messages=MESSAGES) as stream:
                first = await stream.__anext__()
                assert first == TextDelta("Hel")
                assert stream.take_ready_text() == "lo world"
                assert stream.take_ready_text() == ""
                assert [event async for event in stream] == [Completion("Hello world", (), "stop")]


async def test_tool_calls_are_assembled_from_fragments(endpoint: Endpoint) -> None:
    endpoint.mock.reply_tool_calls([("add", {"a": 1, "b": 2}), ("mul", {"x": 3})], text="Sure")
    *deltas, completion = await collect(endpoint.client())
    assert deltas == [TextDelta("Sure")]
    assert completion == Completion(
        "Sure",
        (
            ToolCall("call_mock0", "add", '{"a": 1, "b": 2}'),
            ToolCall("call_mock1", "mul", '{"x": 3}'),
        ),
        "tool_calls",
    )


async def test_request_body_is_recorded(endpoint: Endpoint) -> None:
    endpoint.mock.reply_tool_call("add", {"a": 1}, call_id="call_1")
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    with trio.fail_after(5):
        completion = await endpoint.client().complete(
            model="m", messages=MESSAGES, tools=tools, temperature=0.5
        )
    assert completion.tool_calls == (ToolCall("call_1", "add", '{"a": 1}'),)
    assert endpoint.mock.requests == [
        {
            "model": "m",
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
            "tools": tools,
            "temperature": 0.5,
        }
    ]
    # The call's usage: MockLLM's counts (4 characters a token), as it reported them.
    prompt = sum(mock_tokens(m["content"]) for m in MESSAGES)
    assert endpoint.mock.usages == [(prompt, mock_tokens('{"a": 1}'))]
    assert completion.usage == Usage.of_call(prompt, mock_tokens('{"a": 1}'))


async def test_a_stream_without_usage_reports_none() -> None:
    # An endpoint that ignores stream_options sends no usage chunk: nothing is made up.
    mock = MockLLM()
    mock.reply_text("plain")

    async def no_usage(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        body.pop("stream_options")
        forwarded = httpx.Request("POST", request.url, json=body)
        return await transport.handle_async_request(forwarded)

    transport = mock.transport()
    async with httpx.AsyncClient(transport=httpx.MockTransport(no_usage)) as http:
        client = ChatCompletionsClient(http, base_url="http://mock/v1", api_key=None)
        with trio.fail_after(5):
            first = await client.complete(model="m", messages=MESSAGES)
    assert first.text == "plain"
    assert first.usage is None


async def test_429_is_retried_then_succeeds(endpoint: Endpoint) -> None:
    endpoint.mock.reply_error(429, "slow down", retry_after=0.01)
    endpoint.mock.reply_error(503, "busy")
    endpoint.mock.reply_text("ok")
    events = await collect(endpoint.client())
    assert events[-1] == Completion("ok", (), "stop")
    assert len(endpoint.mock.requests) == 3


async def test_5xx_exhausting_retries_raises(endpoint: Endpoint) -> None:
    for _ in range(3):
        endpoint.mock.reply_error(500, "boom")
    with pytest.raises(ModelEndpointError) as caught:
        await collect(endpoint.client(max_retries=2))
    assert caught.value.http_status == 500
    assert caught.value.message == "model endpoint answered 500 after 3 attempts: boom"
    assert endpoint.mock.pending == 0


async def test_401_fails_at_once_with_the_body_message(endpoint: Endpoint) -> None:
    endpoint.mock.reply_error(401, "Incorrect API key provided")
    endpoint.mock.reply_text("never sent")
    with pytest.raises(ModelEndpointError) as caught:
        await collect(endpoint.client())
    assert caught.value.http_status == 401
    assert caught.value.message == "model endpoint answered 401: Incorrect API key provided"
    assert endpoint.mock.pending == 1


async def test_truncated_stream_raises_after_its_deltas(endpoint: Endpoint) -> None:
    endpoint.mock.reply_text("partial", chunk_size=4, truncated=True)
    seen: list[ChatEvent] = []
    with trio.fail_after(5), pytest.raises(ModelEndpointError, match="before the answer"):
        async with endpoint.client().open_stream(model="m", messages=MESSAGES) as stream:
            async for event in stream:
                seen.append(event)
    assert seen == [TextDelta("part"), TextDelta("ial")]


async def test_cancel_mid_stream_leaves_no_task(endpoint: Endpoint) -> None:
    endpoint.mock.reply_text("abcdef", chunk_size=1, delay=0.05)
    endpoint.mock.reply_text("next")
    client = endpoint.client()
    seen: list[ChatEvent] = []
    tasks_before = len(_all_tasks())

    async def consume(task_status: trio.TaskStatus[None]) -> None:
        async with client.open_stream(model="m", messages=MESSAGES) as stream:
            async for event in stream:
                seen.append(event)
                task_status.started()  # hands control back while holding the stream
                task_status = trio.TASK_STATUS_IGNORED

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(consume)
            nursery.cancel_scope.cancel()
        assert not nursery.child_tasks
        assert seen == [TextDelta("a")]
        # The server side notices the disconnect and its handler ends too (polled:
        # those tasks are the server's and signal nothing).
        while len(_all_tasks()) > tasks_before:
            await trio.sleep(0.01)
        # The endpoint is still usable afterwards.
        assert (await collect(client))[-1] == Completion("next", (), "stop")


async def test_leaving_early_closes_cleanly(endpoint: Endpoint) -> None:
    endpoint.mock.reply_text("abcdef", chunk_size=1, delay=0.01)
    endpoint.mock.reply_text("next")
    client = endpoint.client()
    with trio.fail_after(5):
        async with client.open_stream(model="m", messages=MESSAGES) as stream:
            async for event in stream:
                assert event == TextDelta("a")
                break
        assert (await collect(client))[-1] == Completion("next", (), "stop")


async def test_cancel_while_waiting_on_a_hung_stream(endpoint: Endpoint) -> None:
    endpoint.mock.reply_hang()
    with trio.move_on_after(0.2) as scope:
        await collect(endpoint.client())
    assert scope.cancelled_caught


async def test_connection_refused_raises() -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    async with httpx.AsyncClient() as http:
        client = ChatCompletionsClient(http, base_url=base_url, api_key=None)
        with pytest.raises(ModelEndpointError) as caught:
            await collect(client)
    assert caught.value.message == f"model endpoint {base_url} refused the connection"
    assert caught.value.http_status is None
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


async def test_retry_after_is_capped_at_backoff_max(autojump_clock: trio.abc.Clock) -> None:
    mock = MockLLM()
    mock.reply_error(429, "later", retry_after=120)
    mock.reply_text("ok")
    async with httpx.AsyncClient(transport=mock.transport()) as http:
        client = ChatCompletionsClient(http, base_url="http://m/v1", api_key=None, backoff_max=3)
        start = trio.current_time()
        assert (await client.complete(model="m", messages=MESSAGES)).text == "ok"
        assert trio.current_time() - start == pytest.approx(3.0)


async def test_backoff_grows_and_stays_bounded(autojump_clock: trio.abc.Clock) -> None:
    mock = MockLLM()
    for _ in range(5):
        mock.reply_error(502, "bad gateway")
    async with httpx.AsyncClient(transport=mock.transport()) as http:
        client = ChatCompletionsClient(
            http, base_url="http://m/v1", api_key=None, max_retries=4, backoff_base=1, backoff_max=4
        )
        start = trio.current_time()
        with pytest.raises(ModelEndpointError, match="after 5 attempts"):
            await client.complete(model="m", messages=MESSAGES)
    # Delays 1, 2, 4, 4 with jitter in [50 %, 100 %]: between 5.5 and 11 seconds.
    assert 5.5 <= trio.current_time() - start <= 11


# -- hand-made streams -------------------------------------------------------------------


class ChunkedStream(httpx.AsyncByteStream):
    """A body in fixed pieces; a plain iterator so early closing leaves no generator."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = iter(chunks)

    def __aiter__(self) -> ChunkedStream:
        return self

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()
        try:
            return next(self._chunks)
        except StopIteration:
            raise StopAsyncIteration from None


def sse_client(
    body: bytes, *, piece: int | None = None, headers: dict[str, str] | None = None
) -> tuple[ChatCompletionsClient, list[httpx.Request]]:
    requests: list[httpx.Request] = []
    chunks = [body[i : i + piece] for i in range(0, len(body), piece)] if piece else [body]

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(
            200,
            headers=headers or {"content-type": "text/event-stream"},
            stream=ChunkedStream(chunks),
        )

    http = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return ChatCompletionsClient(http, base_url="http://x/v1/", api_key="sk-1"), requests


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [choice]})


def tool_delta(**fields: Any) -> str:
    return chunk({"tool_calls": [{"index": 0, **fields}]})


ARGUMENTS_HEAD = '{"a"'

# Comments, an ignored field, "data:" without a space, and all three line endings.
ODD_BODY = "".join(
    [
        ": keep-alive comment\r\n\r\n",
        f"data: {chunk({'role': 'assistant', 'content': ''})}\r\n\r\n",
        f"data: {chunk({'content': 'Hé'})}\n\n",
        f"event: ignored\r\ndata:{chunk({'content': 'llo'})}\r\n\r\n",
        f"data: {tool_delta(id='c1', function={'name': 'f'})}\r\r",
        f"data: {tool_delta(function={'arguments': ARGUMENTS_HEAD})}\n\n",
        f"data: {tool_delta(function={'arguments': ': 1}'})}\n\n",
        f"data: {chunk({}, 'tool_calls')}\r\n\r\n",
        "data: [DONE]\r\n\r\n",
    ]
).encode()


@pytest.mark.parametrize("piece", [None, 1, 2, 3, 5, 7, 64])
async def test_sse_frames_split_at_odd_byte_boundaries(piece: int | None) -> None:
    client, requests = sse_client(ODD_BODY, piece=piece)
    events = await collect(client)
    assert events == [
        TextDelta("Hé"),
        TextDelta("llo"),
        Completion("Héllo", (ToolCall("c1", "f", '{"a": 1}'),), "tool_calls"),
    ]
    (request,) = requests
    assert str(request.url) == "http://x/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-1"


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"data: {not json\n\n", "malformed stream"),
        (b'data: {"choices": [{"delta": {"content": "\xff"}}]}\n\n', "malformed stream"),
        (b'data: {"error": {"message": "overloaded"}}\n\n', "mid-stream: overloaded"),
        (f"data: {chunk({'content': 'x'})}\n\n".encode(), "before the answer was complete"),
    ],
)
async def test_bad_streams_raise(body: bytes, match: str) -> None:
    client, _ = sse_client(body)
    with pytest.raises(ModelEndpointError, match=match):
        await collect(client)


async def test_finish_reason_without_done_is_complete() -> None:
    client, _ = sse_client(f"data: {chunk({'content': 'x'}, 'length')}\n\n".encode())
    assert await collect(client) == [TextDelta("x"), Completion("x", (), "length")]


async def test_json_answer_to_a_stream_request_raises() -> None:
    client, _ = sse_client(b"{}", headers={"content-type": "application/json"})
    with pytest.raises(ModelEndpointError, match="instead of an event stream"):
        await collect(client)


def _all_tasks() -> list[trio.lowlevel.Task]:
    tasks, todo = [], [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        assert task is not None
        tasks.append(task)
        todo.extend(t for n in task.child_nurseries for t in n.child_tasks)
    return tasks
