"""The SSE side of the HTTP transport, over a real loopback socket."""

from __future__ import annotations

import httpx
import trio

from omnigent.testing import probe

from .conftest import all_tasks
from .http_helpers import (
    HTTPX_GENERATORS,
    Frame,
    Server,
    is_terminal_status,
    open_server,
    open_stream,
    scripted,
    wait_for,
)

pytestmark = HTTPX_GENERATORS

SLOW = scripted("slow", [{"say": "one two three"}, {"sleep": 0.3}, {"say": "four five six"}])


async def _finished_turn(server: Server, spec: dict | None = None) -> tuple[str, list[Frame]]:
    """A session with one finished turn, and all of its frames (replayed from 0)."""
    session_id = await server.session(spec or scripted(script=[{"say": "alpha beta gamma"}]))
    async with open_stream(server.client, "GET", f"/v1/sessions/{session_id}/stream?after=0") as r:
        await server.message(session_id)
        frames = await r.read_until(is_terminal_status)
    return session_id, frames


async def test_background_turn_streams_every_event_with_headers() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            session_id = await server.session()
            url = f"/v1/sessions/{session_id}/stream"
            async with open_stream(server.client, "GET", url) as r:
                assert r.response.status_code == 200
                headers = r.response.headers
                assert headers["content-type"].startswith("text/event-stream")
                assert headers["cache-control"] == "no-cache"
                assert headers["x-accel-buffering"] == "no"
                answer = await server.message(session_id)
                assert answer["status"] == "accepted"
                frames = await r.read_until(is_terminal_status)
            kinds = [f.event for f in frames]
            assert kinds[0] == "session.status" and frames[0].data["status"] == "running"
            assert "response.created" in kinds
            assert "response.output_text.delta" in kinds
            assert "response.completed" in kinds
            assert frames[-1].data["status"] == "idle"
            ids = [f.id for f in frames]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
            for frame in frames:
                assert frame.data["event_id"] == frame.id
                assert frame.data["type"] == frame.event
                assert frame.data["session_id"] == session_id


async def test_replay_from_every_after_gives_exactly_the_later_events() -> None:
    with trio.fail_after(20):
        async with open_server() as server:
            session_id, frames = await _finished_turn(server)
            ids = [f.id for f in frames]
            assert ids == list(range(1, len(ids) + 1))
            for after in range(len(ids) + 1):
                url = f"/v1/sessions/{session_id}/stream?after={after}"
                expected = [(f.id, f.event, f.data) for f in frames if f.id > after]
                async with open_stream(server.client, "GET", url) as r:
                    got = await r.read_until(count=len(expected)) if expected else []
                assert [(f.id, f.event, f.data) for f in got] == expected
                # The same with the header (which wins over the query).
                headers = {"Last-Event-ID": str(after)}
                stale = f"/v1/sessions/{session_id}/stream?after=0"
                async with open_stream(server.client, "GET", stale, headers=headers) as r:
                    got = await r.read_until(count=len(expected)) if expected else []
                assert [(f.id, f.event, f.data) for f in got] == expected


async def test_last_event_id_reconnect_mid_turn_sees_every_remaining_event_once() -> None:
    spec = scripted(
        "chatty",
        [{"say": "a b c d"}, {"sleep": 0.2}, {"say": "e f g h"}, {"sleep": 0.2}, {"say": "i j"}],
    )
    with trio.fail_after(15):
        async with open_server() as server:
            session_id = await server.session(spec)
            url = f"/v1/sessions/{session_id}/stream"
            first = await server.client.get(f"/v1/sessions/{session_id}")
            start = first.json()["last_event_id"]
            async with open_stream(server.client, "GET", f"{url}?after={start}") as r:
                await server.message(session_id)
                # Leave after the first deltas, while the turn is still running.
                before = await r.read_until(lambda f: f.event == "response.output_text.delta")
            last = before[-1].id
            headers = {"Last-Event-ID": str(last)}
            async with open_stream(server.client, "GET", url, headers=headers) as r:
                after = await r.read_until(is_terminal_status)
            async with open_stream(server.client, "GET", f"{url}?after={start}") as r:
                whole = await r.read_until(is_terminal_status)
            assert [f.id for f in before + after] == [f.id for f in whole]
            assert [f.data for f in before + after] == [f.data for f in whole]
            assert any(f.event == "response.output_text.delta" for f in after)


async def test_a_hundred_subscribers_all_get_every_event_in_order() -> None:
    spec = scripted("many", [{"sleep": 0.3}, {"say": " ".join(f"w{i}" for i in range(200))}])
    with trio.fail_after(30):
        async with open_server() as server:
            session_id = await server.session(spec)
            url = f"/v1/sessions/{session_id}/stream"
            results: list[list[Frame]] = []
            limits = httpx.Limits(max_connections=200)
            async with (
                httpx.AsyncClient(base_url=server.url, limits=limits, timeout=20) as client,
                trio.open_nursery() as nursery,
            ):
                connected = trio.Semaphore(0)

                async def subscriber() -> None:
                    async with open_stream(client, "GET", url) as r:
                        connected.release()
                        results.append(await r.read_until(is_terminal_status))

                for _ in range(100):
                    nursery.start_soon(subscriber)
                for _ in range(100):
                    await connected.acquire()
                await server.message(session_id)
            async with open_stream(server.client, "GET", f"{url}?after=0") as r:
                whole = [(f.id, f.data) for f in await r.read_until(is_terminal_status)]
            assert len(results) == 100
            assert len(whole) > 200
            for frames in results:
                assert [(f.id, f.data) for f in frames] == whole


async def test_client_disconnect_mid_stream_frees_the_subscription_and_tasks() -> None:
    spec = scripted("long", [{"say": "start"}, {"sleep": 5}, {"say": "never seen"}])
    with trio.fail_after(10):
        async with open_server() as server:
            session_id = await server.session(spec)
            bus = probe(server.runtime).bus
            await wait_for(lambda: server.runtime.statistics()["tasks"] == 0)
            baseline = {t.name for t in all_tasks()}
            url = f"/v1/sessions/{session_id}/stream?after=0"
            async with open_stream(server.client, "GET", url) as r:
                await server.message(session_id)
                await r.read_until(lambda f: f.event == "response.output_item.done")
                assert bus.statistics()["subscribers"] == 1
                names = [t.name for t in all_tasks()]
                assert any(name.startswith("sse ") for name in names)  # the body's watcher
                assert not any("sse pump" in name for name in names)  # served in place
            await wait_for(lambda: bus.statistics()["subscribers"] == 0)
            await wait_for(lambda: not any(t.name.startswith("sse ") for t in all_tasks()))
            # The turn itself is untouched by the client leaving; stop it.
            await server.client.post(
                f"/v1/sessions/{session_id}/events", json={"type": "stop_session"}
            )
            await wait_for(lambda: {t.name for t in all_tasks()} <= baseline | _http_tasks())


def _http_tasks() -> set[str]:
    """Names of tasks that belong to connections (keep-alive) rather than to a stream."""
    return {t.name for t in all_tasks() if "hypercorn" in t.name or "httpcore" in t.name}


async def test_streamed_turn_ends_after_its_terminal_response() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            session_id = await server.session(scripted(script=[{"say": "streamed words"}]))
            body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "x"}]}}
            url = f"/v1/sessions/{session_id}/events?stream=true"
            async with open_stream(server.client, "POST", url, json=body) as r:
                assert r.response.status_code == 200
                assert r.response.headers["content-type"].startswith("text/event-stream")
                frames = await r.read_until()  # to the end of the response
            kinds = [f.event for f in frames]
            assert kinds[-1] == "response.completed"
            assert "response.output_text.delta" in kinds
            deltas = "".join(f.data["delta"] for f in frames if f.event.endswith(".delta"))
            assert deltas == "streamed words"


async def test_a_streamed_turn_survives_pings_mid_turn() -> None:
    """Regression: a ping cancels the body's wait for the turn's next event; the turn
    stream's iterator loses nothing to that cancel and repeats nothing after it.

    The turn sleeps 0.3 s between its words with a ping every 0.05 s: the frames sent
    are exactly the session's events from the first to the response's end, in order.
    """
    with trio.fail_after(10):
        async with open_server(ping_interval=0.05) as server:
            session_id = await server.session(SLOW)
            body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "x"}]}}
            url = f"/v1/sessions/{session_id}/events?stream=true"
            frames = []
            async with open_stream(server.client, "POST", url, json=body) as r:
                while (frame := await r.next(comments=True)) is not None:
                    frames.append(frame)
            events = [f for f in frames if not f.comment]
            assert events[-1].event == "response.completed"
            first, last = events[0].id, events[-1].id
            assert first is not None and last is not None
            pings = [i for i, f in enumerate(frames) if f.comment]
            assert pings and frames.index(events[0]) < pings[0] < frames.index(events[-1])
            deltas = "".join(f.data["delta"] for f in events if f.event.endswith(".delta"))
            assert deltas == "one two threefour five six"
            replay = f"/v1/sessions/{session_id}/stream?after={first - 1}"
            async with open_stream(server.client, "GET", replay) as r:
                stored = await r.read_until(lambda f: f.id == last)
            assert [(f.id, f.event) for f in events] == [(f.id, f.event) for f in stored]


async def test_interrupt_ends_the_turn_cancelled_within_a_second() -> None:
    spec = scripted("sleepy", [{"say": "working"}, {"sleep": 30}])
    with trio.fail_after(10):
        async with open_server() as server:
            session_id = await server.session(spec)
            url = f"/v1/sessions/{session_id}/stream?after=0"
            async with open_stream(server.client, "GET", url) as r:
                await server.message(session_id)
                await r.read_until(lambda f: f.event == "response.output_item.done")
                with trio.fail_after(1):
                    answer = await server.client.post(
                        f"/v1/sessions/{session_id}/events", json={"type": "interrupt", "data": {}}
                    )
                    assert answer.status_code == 202
                    rest = await r.read_until(is_terminal_status)
            assert rest[-1].data["status"] == "cancelled"
            assert "response.cancelled" in [f.event for f in rest]


async def test_mid_turn_message_is_buffered_and_answered_by_a_continuation_turn() -> None:
    spec = scripted("busy", [{"sleep": 0.3}, {"say": "done"}])
    with trio.fail_after(10):
        async with open_server() as server:
            session_id = await server.session(spec)
            url = f"/v1/sessions/{session_id}/stream?after=0"
            async with open_stream(server.client, "GET", url) as r:
                assert (await server.message(session_id, "first"))["status"] == "accepted"
                await r.read_until(lambda f: f.event == "response.created")
                second = await server.message(session_id, "second")
                assert second["status"] == "buffered"
                frames = await r.read_until(is_terminal_status)
                if frames[-1].data["status"] == "idle":
                    # The scripted harness takes no injections: a continuation turn runs.
                    frames += await r.read_until(is_terminal_status)
            completed = [f for f in frames if f.event == "response.completed"]
            assert len(completed) == 2
            items = (await server.client.get(f"/v1/sessions/{session_id}/items")).json()["data"]
            texts = [(i["role"], i["content"][0]["text"]) for i in items if i["type"] == "message"]
            assert texts == [
                ("user", "first"),
                ("assistant", "done"),
                ("user", "second"),
                ("assistant", "done"),
            ], texts


async def test_idle_stream_sends_pings() -> None:
    with trio.fail_after(10):
        async with open_server(ping_interval=0.05) as server:
            session_id = await server.session()
            async with open_stream(server.client, "GET", f"/v1/sessions/{session_id}/stream") as r:
                frame = await r.next(comments=True)
                assert frame is not None and frame.comment


async def test_stopping_ends_open_streams_promptly() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            session_id = await server.session()
            async with open_stream(server.client, "GET", f"/v1/sessions/{session_id}/stream") as r:
                await wait_for(lambda: server.runtime.statistics()["subscribers"] == 1)
                server.stopping.set()
                with trio.fail_after(1):
                    assert await r.read_until() == []
            await wait_for(lambda: server.runtime.statistics()["subscribers"] == 0)


async def test_deleting_a_session_ends_its_streams() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            session_id = await server.session()
            async with open_stream(server.client, "GET", f"/v1/sessions/{session_id}/stream") as r:
                await wait_for(lambda: server.runtime.statistics()["subscribers"] == 1)
                deleted = await server.client.delete(f"/v1/sessions/{session_id}")
                assert deleted.status_code == 200
                with trio.fail_after(2):
                    await r.read_until()
