"""JSON-RPC 2.0: framing, decoding and dispatch without I/O, then the Trio connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import omnigent.rpc as rpc
from omnigent.rpc import ConnectionClosed, NdjsonStream, RpcConnection

from .conftest import all_tasks

# -- framing ------------------------------------------------------------------------------


def test_lines_split_across_chunks_of_any_size() -> None:
    splitter = rpc.LineSplitter()
    big = b"x" * (2 * 1024 * 1024)
    out: list[Any] = []
    for chunk in (b'{"a":', b"1}\n\n  \n", big[:1000], big[1000:], b"\r\n", b"tail"):
        out += splitter.feed(chunk)
    out += splitter.end()
    assert out == [b'{"a":1}', big, b"tail"]


def test_an_oversized_line_is_skipped_to_its_newline_and_reported_once() -> None:
    splitter = rpc.LineSplitter(max_line=10)
    out = splitter.feed(b"0123456789ABC")
    out += splitter.feed(b"DEF" * 10)
    out += splitter.feed(b"GHI\nok\n")
    assert out == [rpc.TOO_LARGE, b"ok"]
    assert splitter.feed(b"0123456789\n") == [b"0123456789"]  # exactly the limit is fine


# -- decoding -----------------------------------------------------------------------------


def test_decode_reads_requests_notifications_and_responses() -> None:
    assert rpc.decode('{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}') == rpc.Request(
        1, "m", {"a": 1}
    )
    assert rpc.decode(b'{"jsonrpc":"2.0","id":"x","method":"m"}') == rpc.Request("x", "m")
    assert rpc.decode('{"jsonrpc":"2.0","method":"n","params":[1]}') == rpc.Notification("n", [1])
    assert rpc.decode('{"jsonrpc":"2.0","id":3,"result":null}') == rpc.Response(3, None)
    error = {"code": -1, "message": "no"}
    assert rpc.decode(json.dumps({"jsonrpc": "2.0", "id": 3, "error": error})) == rpc.Response(
        3, None, error
    )


def _code(reply: Any) -> int:
    assert isinstance(reply, dict) and reply["jsonrpc"] == "2.0", reply
    code: int = reply["error"]["code"]
    return code


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe",
        "not json",
        '{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":NaN}}',
        '{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":"\\ud800"}}',
        "[" * 5000 + "]" * 5000,
        "",
    ],
)
def test_text_that_is_not_json_is_a_parse_error(raw: str | bytes) -> None:
    reply = rpc.decode(raw)
    assert _code(reply) == rpc.PARSE_ERROR
    assert reply["id"] is None  # type: ignore[index]


@pytest.mark.parametrize(
    ("raw", "reply_id"),
    [
        ("[]", None),
        ('[{"jsonrpc":"2.0","id":1,"method":"m"}]', None),
        ("7", None),
        ('{"id":1,"method":"m"}', 1),
        ('{"jsonrpc":"1.0","id":1,"method":"m"}', 1),
        ('{"jsonrpc":"2.0","id":true,"method":"m"}', None),
        ('{"jsonrpc":"2.0","id":1.5,"method":"m"}', None),
        ('{"jsonrpc":"2.0","id":{},"method":"m"}', None),
        ('{"jsonrpc":"2.0","id":2,"method":5}', 2),
        ('{"jsonrpc":"2.0","id":2,"method":""}', 2),
        ('{"jsonrpc":"2.0","id":2,"method":"m","params":"x"}', 2),
        ('{"jsonrpc":"2.0","id":2}', 2),
        ('{"jsonrpc":"2.0","id":2,"result":1,"error":{}}', 2),
        ('{"jsonrpc":"2.0","id":9,"method":"m","params":' + "[" * 70 + "]" * 70 + "}", 9),
    ],
)
def test_json_that_is_no_message_is_an_invalid_request(raw: str, reply_id: Any) -> None:
    reply = rpc.decode(raw)
    assert _code(reply) == rpc.INVALID_REQUEST
    assert reply["id"] == reply_id  # type: ignore[index]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
message_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "id": st.integers() | st.text() | json_values,
        "method": st.sampled_from(["ping", "$/cancel_request", ""]) | json_values,
        "params": json_values,
        "result": json_values,
        "error": json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary() | st.text() | json_values.map(json.dumps) | message_like.map(json.dumps))
def test_decode_never_raises_and_answers_only_json_rpc_errors(raw: str | bytes) -> None:
    decoded = rpc.decode(raw)
    if isinstance(decoded, dict):
        assert _code(decoded) in (rpc.PARSE_ERROR, rpc.INVALID_REQUEST)
        assert "Traceback" not in decoded["error"]["message"]
        rpc.encode(decoded)  # the reply can always be sent
    else:
        assert isinstance(decoded, rpc.Request | rpc.Notification | rpc.Response)


# -- dispatch ----------------------------------------------------------------------------


def test_dispatcher_runs_known_methods_once_per_id_and_within_the_limit() -> None:
    d = rpc.Dispatcher({"m"}, {"n"}, max_in_flight=2)
    assert d.receive(rpc.Request(1, "m")) == rpc.Run(rpc.Request(1, "m"))
    reply = d.receive(rpc.Request(1, "m"))
    assert isinstance(reply, rpc.Reply) and _code(reply.message) == rpc.INVALID_REQUEST
    unknown = d.receive(rpc.Request(5, "nope"))
    assert isinstance(unknown, rpc.Reply) and _code(unknown.message) == rpc.METHOD_NOT_FOUND
    assert isinstance(d.receive(rpc.Request("1", "m")), rpc.Run)  # "1" is not 1
    busy = d.receive(rpc.Request(3, "m"))
    assert isinstance(busy, rpc.Reply) and _code(busy.message) == rpc.SERVER_BUSY
    d.finish(1)
    assert isinstance(d.receive(rpc.Request(1, "m")), rpc.Run)
    assert d.in_flight == 2


def test_dispatcher_routes_notifications_cancels_and_responses() -> None:
    d = rpc.Dispatcher({"m"}, {"n"})
    assert d.receive(rpc.Notification("n", {})) == rpc.Notify(rpc.Notification("n", {}))
    assert isinstance(d.receive(rpc.Notification("other")), rpc.Drop)
    d.receive(rpc.Request(7, "m"))
    cancel = rpc.Notification(rpc.CANCEL_REQUEST, {"requestId": 7})
    assert d.receive(cancel) == rpc.Cancel(7)
    assert isinstance(d.receive(rpc.Notification(rpc.CANCEL_REQUEST, {"requestId": 8})), rpc.Drop)
    assert isinstance(d.receive(rpc.Notification(rpc.CANCEL_REQUEST, [7])), rpc.Drop)
    request_id, message = d.next_request("peer/method", {"x": 1})
    assert message == {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "peer/method",
        "params": {"x": 1},
    }
    assert d.receive(rpc.Response(request_id, 5)) == rpc.Deliver(rpc.Response(request_id, 5))
    assert isinstance(d.receive(rpc.Response(request_id, 5)), rpc.Drop)  # only once
    assert isinstance(d.receive(rpc.Response("zz", 5)), rpc.Drop)


# -- the connection ----------------------------------------------------------------------


class Echo:
    """A handler: ``echo`` answers its params, ``slow`` waits, ``boom`` raises."""

    methods = frozenset({"echo", "slow", "boom", "bad", "ask"})
    notifications = frozenset({"note"})
    ordered: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.notes: list[Any] = []
        self.slow_started = trio.Event()
        self.slow_cancelled = trio.Event()
        self.connection: RpcConnection | None = None

    async def input_ended(self) -> None:
        pass

    async def handle_request(self, method: str, params: Any, admit: Any) -> Any:
        if method == "echo":
            return params
        if method == "slow":
            self.slow_started.set()
            try:
                await trio.sleep_forever()
            finally:
                self.slow_cancelled.set()
        if method == "boom":
            raise RuntimeError("secret internals /etc/passwd")
        if method == "bad":
            raise rpc.RpcError.invalid_params("x is wrong", {"loc": "x"})
        assert self.connection is not None
        return await self.connection.request("client/answer", params)

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notes.append(params)


class Peer:
    """The other end: writes lines, reads lines."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.reader = NdjsonStream(stream, stream)

    async def send(self, message: Any) -> None:
        text = message if isinstance(message, str) else json.dumps(message, ensure_ascii=False)
        await self.stream.send_all(text.encode() + b"\n")

    async def receive(self) -> Any:
        raw = await self.reader.receive()
        assert isinstance(raw, bytes), raw
        return json.loads(raw)


@asynccontextmanager
async def serving(handler: Echo, **options: Any) -> AsyncIterator[tuple[Peer, RpcConnection]]:
    ours, theirs = trio.testing.memory_stream_pair()
    options.setdefault("drain_timeout", 0.5)  # the peer hangs up on what it left running
    connection = RpcConnection(NdjsonStream(ours, ours), handler, **options)
    handler.connection = connection
    async with trio.open_nursery() as nursery:
        await nursery.start(connection.run)
        yield Peer(theirs), connection
        await theirs.aclose()


async def test_requests_run_concurrently_and_errors_leave_the_connection_up() -> None:
    handler = Echo()
    with trio.fail_after(5):
        async with serving(handler) as (peer, _):
            await peer.send({"jsonrpc": "2.0", "id": 1, "method": "slow"})
            await handler.slow_started.wait()
            await peer.send("garbage")
            assert (await peer.receive())["error"]["code"] == rpc.PARSE_ERROR
            await peer.send({"jsonrpc": "2.0", "id": 2, "method": "missing"})
            assert (await peer.receive())["error"]["code"] == rpc.METHOD_NOT_FOUND
            await peer.send({"jsonrpc": "2.0", "id": 3, "method": "bad"})
            bad = await peer.receive()
            assert bad["error"] == {
                "code": rpc.INVALID_PARAMS,
                "message": "Invalid params: x is wrong",
                "data": {"loc": "x"},
            }
            await peer.send({"jsonrpc": "2.0", "id": 4, "method": "boom"})
            boom = await peer.receive()
            assert boom == {
                "jsonrpc": "2.0",
                "id": 4,
                "error": {"code": rpc.INTERNAL_ERROR, "message": "Internal error"},
            }
            await peer.send({"jsonrpc": "2.0", "method": "note", "params": {"n": 1}})
            await peer.send({"jsonrpc": "2.0", "id": 5, "method": "echo", "params": {"a": "é"}})
            assert await peer.receive() == {"jsonrpc": "2.0", "id": 5, "result": {"a": "é"}}
            assert handler.notes == [{"n": 1}]
            # The slow one is still running; the peer cancels it.
            await peer.send(
                {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}
            )
            cancelled = await peer.receive()
            assert cancelled["id"] == 1 and cancelled["error"]["code"] == rpc.REQUEST_CANCELLED
            assert handler.slow_cancelled.is_set()


async def test_a_two_mebibyte_message_and_an_oversized_one() -> None:
    handler = Echo()
    text = "é" * (1024 * 1024)  # 2 MiB of UTF-8
    with trio.fail_after(10):
        ours, theirs = trio.testing.memory_stream_pair()
        connection = RpcConnection(NdjsonStream(ours, ours, max_message=3 * 1024 * 1024), handler)
        async with trio.open_nursery() as nursery:
            await nursery.start(connection.run)
            peer = Peer(theirs)
            await peer.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [text]})
            assert (await peer.receive())["result"] == [text]
            await peer.send(
                {"jsonrpc": "2.0", "id": 2, "method": "echo", "params": ["x" * 4_000_000]}
            )
            too_large = await peer.receive()
            assert too_large["error"]["code"] == rpc.INVALID_REQUEST
            await peer.send({"jsonrpc": "2.0", "id": 3, "method": "echo", "params": [1]})
            assert (await peer.receive())["result"] == [1]
            await theirs.aclose()


async def test_outgoing_requests_get_their_answers_and_cancel_politely() -> None:
    handler = Echo()
    with trio.fail_after(5):
        async with serving(handler) as (peer, connection):
            await peer.send({"jsonrpc": "2.0", "id": "a", "method": "ask", "params": {"q": 1}})
            asked = await peer.receive()
            assert asked["method"] == "client/answer" and asked["params"] == {"q": 1}
            await peer.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"ok": True}})
            assert await peer.receive() == {"jsonrpc": "2.0", "id": "a", "result": {"ok": True}}
            # An error answer raises RpcError in the handler (which lets it through).
            await peer.send({"jsonrpc": "2.0", "id": "b", "method": "ask"})
            asked = await peer.receive()
            await peer.send(
                {"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -1, "message": "no"}}
            )
            assert (await peer.receive())["error"] == {"code": -1, "message": "no"}
            # Our own request, cancelled while waiting: the peer hears $/cancel_request.
            with trio.move_on_after(0.05):
                await connection.request("client/slow")
            sent = await peer.receive()
            notice = await peer.receive()
            assert notice == {
                "jsonrpc": "2.0",
                "method": "$/cancel_request",
                "params": {"requestId": sent["id"]},
            }
            assert connection.statistics() == {"incoming_in_flight": 0, "outgoing_waiting": 0}


async def test_a_closed_stream_cancels_every_request_and_leaves_no_task() -> None:
    handler = Echo()
    before = all_tasks()
    with trio.fail_after(5):
        ours, theirs = trio.testing.memory_stream_pair()
        connection = RpcConnection(NdjsonStream(ours, ours), handler, drain_timeout=0.5)
        handler.connection = connection
        outcome: list[BaseException] = []

        async def ask_peer() -> None:
            try:
                await connection.request("client/never")
            except ConnectionClosed as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            await nursery.start(connection.run)
            nursery.start_soon(ask_peer)
            peer = Peer(theirs)
            await peer.send({"jsonrpc": "2.0", "id": 1, "method": "slow"})
            await handler.slow_started.wait()
            await peer.receive()  # client/never
            await theirs.aclose()
        assert handler.slow_cancelled.is_set()
        assert [type(e) for e in outcome] == [ConnectionClosed]
        assert connection.closed
        with pytest.raises(ConnectionClosed):
            await connection.notify("late")
    assert all_tasks() == before


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.binary(max_size=60) | message_like.map(json.dumps), max_size=8))
async def test_fuzzed_input_never_kills_the_connection_nor_shows_a_traceback(
    lines: list[str | bytes],
) -> None:
    handler = Echo()
    with trio.fail_after(10):
        async with serving(handler) as (peer, _):
            for line in lines:
                raw = line.encode() if isinstance(line, str) else line
                await peer.stream.send_all(raw.replace(b"\n", b" ") + b"\n")
            await peer.send({"jsonrpc": "2.0", "id": "probe", "method": "echo", "params": [1]})
            while True:  # whatever came back, the probe is answered in the end
                answer = await peer.receive()
                if "error" in answer:
                    assert "Traceback" not in answer["error"]["message"]
                    assert answer["error"]["code"] in (
                        rpc.PARSE_ERROR,
                        rpc.INVALID_REQUEST,
                        rpc.METHOD_NOT_FOUND,
                        rpc.INVALID_PARAMS,
                        rpc.INTERNAL_ERROR,
                    )
                if answer.get("id") == "probe" and "result" in answer:
                    break
                if answer.get("method") == "client/answer":  # a fuzzed "ask": answer it
                    await peer.send({"jsonrpc": "2.0", "id": answer["id"], "result": None})


async def test_at_the_end_of_input_every_request_read_is_still_answered() -> None:
    """Regression (issue 29): a request followed at once by EOF was never answered."""
    handler = Echo()
    with trio.fail_after(5):
        ours, theirs = trio.testing.memory_stream_pair()
        connection = RpcConnection(NdjsonStream(ours, ours), handler, drain_timeout=0.5)
        async with trio.open_nursery() as nursery:
            await nursery.start(connection.run)
            peer = Peer(theirs)
            await peer.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [1]})
            await peer.send({"jsonrpc": "2.0", "id": 2, "method": "slow"})
            await theirs.send_eof()  # half-closed: the peer still reads
            answers = {m["id"]: m for m in [await peer.receive(), await peer.receive()]}
        assert answers[1]["result"] == [1]
        # What did not finish within the drain's deadline is cancelled, and says so.
        assert answers[2]["error"]["code"] == rpc.REQUEST_CANCELLED
        assert handler.slow_cancelled.is_set()


class Ordered(Echo):
    """``first`` waits to be released; ``early`` lets the next ones in before it ends."""

    methods = frozenset({"first", "early", "echo", "loose"})
    notifications = frozenset({"note"})
    ordered = frozenset({"first", "early", "echo", "note"})

    def __init__(self) -> None:
        super().__init__()
        self.release = trio.Event()
        self.noted = trio.Event()
        self.started: list[str] = []

    async def handle_request(self, method: str, params: Any, admit: Any) -> Any:
        self.started.append(f"{method}:{params}")
        if method == "first":
            await self.release.wait()
        if method == "early":
            admit()
            await self.release.wait()
        return params

    async def handle_notification(self, method: str, params: Any) -> None:
        self.started.append(f"{method}:{params}")
        self.noted.set()


async def test_ordered_messages_start_in_arrival_order_and_others_do_not_wait() -> None:
    handler = Ordered()
    with trio.fail_after(5):
        async with serving(handler) as (peer, _):
            lines = [
                {"jsonrpc": "2.0", "id": 1, "method": "first", "params": [1]},
                *(
                    {"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]}
                    for i in range(2, 9)
                ),
                {"jsonrpc": "2.0", "method": "note", "params": ["n"]},
                {"jsonrpc": "2.0", "id": 9, "method": "loose", "params": [9]},
            ]
            await peer.stream.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            assert (await peer.receive())["id"] == 9  # unordered: it did not wait
            assert sorted(handler.started) == ["first:[1]", "loose:[9]"]
            handler.release.set()
            ids = [(await peer.receive())["id"] for _ in range(8)]
            assert sorted(ids) == list(range(1, 9))
            in_order = [*(f"echo:[{i}]" for i in range(2, 9)), "note:['n']"]
            await handler.noted.wait()
            assert handler.started[2:] == in_order
            # A request that admits early lets the ones behind it run meanwhile.
            handler.release = trio.Event()
            await peer.send({"jsonrpc": "2.0", "id": 10, "method": "early", "params": [10]})
            await peer.send({"jsonrpc": "2.0", "id": 11, "method": "echo", "params": [11]})
            assert (await peer.receive())["id"] == 11
            handler.release.set()
            assert (await peer.receive())["id"] == 10
