"""Cost that does not grow with the work: kept histories, cached images, bounded
buffers, and per-session state that goes when the session is idle.

Regression tests for issue 8: each fails on the code before the fix.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent.core.runtime import _files, _messages
from omnigent.errors import Conflict
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import InputImage, MessageItem
from omnigent.testing import RecordingHarness, collect_turn, probe, run_turn, scripted_agent

from .conftest import statuses, wait_quiet
from .http_helpers import HTTPX_GENERATORS

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


async def test_a_session_reads_its_history_from_the_store_once(
    rt: omnigent.Runtime,
    rec_session: str,
    recorder: RecordingHarness,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: every turn re-read and re-parsed the session's whole history."""
    reads = 0
    original = probe(rt).store.list_items

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await original(*args, **kwargs)

    monkeypatch.setattr(probe(rt).store, "list_items", counting)
    for _ in range(4):
        assert statuses(await run_turn(rt, rec_session)) == ["running", "idle"]
    assert reads == 1
    # And what the harness saw is exactly the stored history, in order.
    last = recorder.requests[-1]
    stored = (await rt.list_items(rec_session)).data
    assert [*last.history, *last.input] == list(stored[: len(last.history) + 1])
    assert [i.to_dict() for i in last.history] == [i.to_dict() for i in stored[:-2]]


async def test_kept_history_matches_the_store_with_tools_and_injections(
    rt: omnigent.Runtime, rec_session: str, recorder: RecordingHarness
) -> None:
    released = trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        if request.turn_number == 0:
            await ctx.call_tool("sys_os_read", {"path": "missing.txt"})
            await released.wait()
            await ctx.take_injections()
        async with ctx.open_message() as message:
            await message.write(f"turn {request.turn_number}")

    recorder.body = body
    async with rt.subscribe(rec_session) as events:
        await rt.send_message(rec_session, "first")
        async for event in events:
            if (
                event.type == "response.output_item.done"
                and event.item.type == "function_call_output"
            ):
                break
        await rt.send_message(rec_session, "injected")
        await rt.send_message(rec_session, "later")
        released.set()
        await collect_turn(events)
    await wait_quiet(rt)
    assert statuses(await run_turn(rt, rec_session, "third")) == ["running", "idle"]
    final = recorder.requests[-1]
    stored = [i.to_dict() for i in (await rt.list_items(rec_session)).data]
    assert [i.to_dict() for i in final.history] + [m.to_dict() for m in final.input] == stored[:-1]


async def test_images_are_encoded_once_and_off_the_event_loop(
    rt: omnigent.Runtime,
    rec_session: str,
    recorder: RecordingHarness,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: every image of the history was base64-encoded on the event loop on
    every turn (133 ms per 20 MiB image, per turn)."""
    threads: list[threading.Thread] = []
    original = _files._encode

    def spying(content_type: str, content: bytes) -> str:
        threads.append(threading.current_thread())
        return original(content_type, content)

    monkeypatch.setattr(_files, "_encode", spying)
    upload = await rt.upload_file(PNG, filename="dot.png", content_type="image/png")
    image = [{"type": "input_image", "file_id": upload.id}, {"type": "input_text", "text": "?"}]
    for content in (image, "and now?", "and now?"):
        assert statuses(await run_turn(rt, rec_session, content)) == ["running", "idle"]
    assert len(threads) == 1
    assert threads[0] is not threading.main_thread()
    for request in recorder.requests[1:]:
        first = request.history[0]
        assert isinstance(first, MessageItem) and isinstance(first.content[0], InputImage)
        assert first.content[0].image_url is not None
        assert first.content[0].image_url.startswith("data:image/png;base64,")
        assert first.content[0].file_id is None


async def _hanging_turn(rt: omnigent.Runtime) -> str:
    agent = await rt.create_agent(scripted_agent("h", script=[{"sleep": 30}]))
    session = (await rt.create_session(agent.id)).id
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "busy")
        async for event in events:
            if event.type == "response.created":
                break
    return session


async def test_the_mid_turn_buffer_is_capped(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a session buffered every message sent during a turn, without bound."""
    monkeypatch.setattr(_messages, "MAX_BUFFERED_MESSAGES", 3)
    session = await _hanging_turn(rt)
    for i in range(3):
        assert (await rt.send_message(session, f"m{i}")).status == "buffered"
    with pytest.raises(Conflict) as caught:
        await rt.send_message(session, "one too many")
    assert caught.value.status == 409
    texts = [i.to_dict()["content"][0]["text"] for i in (await rt.list_items(session)).data]
    assert texts == ["busy", "m0", "m1", "m2"]  # the refused message was not kept
    await rt.stop_session(session)


@HTTPX_GENERATORS[0]
@HTTPX_GENERATORS[1]
async def test_over_http_a_full_buffer_is_a_409(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_messages, "MAX_BUFFERED_MESSAGES", 1)
    async with omnigent.open_runtime() as rt:
        from omnigent.transports.http._app import create_app

        session = await _hanging_turn(rt)
        await rt.send_message(session, "buffered")
        app = create_app(rt)
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "x"}]}}
            answer = await client.post(f"/v1/sessions/{session}/events", json=body)
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "conflict"
        await rt.stop_session(session)


async def test_the_bus_forgets_sessions_nobody_uses(tmp_path: Any) -> None:
    """Regression: the bus kept every session's counter and status for ever, so memory
    grew with every session a process touched."""
    async with omnigent.open_runtime(db=f"sqlite:///{tmp_path / 'm.db'}") as rt:
        agent = await rt.create_agent(scripted_agent(script=[{"say": "hi"}]))
        sessions = [(await rt.create_session(agent.id)).id for _ in range(50)]
        for session in sessions:
            assert statuses(await run_turn(rt, session)) == ["running", "idle"]
        await wait_quiet(rt)
        await probe(rt).bus.flush()
        assert probe(rt).bus.statistics()["sessions"] == 0
        # Forgotten, and still right: snapshots, resumption and new turns.
        snapshot = await rt.get_session(sessions[0])
        assert snapshot.status == "idle" and snapshot.last_event_id == 6
        assert await rt.last_event_id(sessions[0]) == 6
        events = await run_turn(rt, sessions[0])
        assert events[0].event_id == 7


async def test_a_held_session_keeps_its_counter_while_its_actor_lives(
    rt: omnigent.Runtime,
) -> None:
    session = await _hanging_turn(rt)
    assert probe(rt).bus.statistics()["sessions"] == 1
    await rt.stop_session(session)
    await wait_quiet(rt)
    await probe(rt).bus.flush()
    assert probe(rt).bus.statistics()["sessions"] == 0


async def test_kept_histories_are_bounded(rt: omnigent.Runtime) -> None:
    from omnigent.core.session._history import HistoryCache

    agent = await rt.create_agent(scripted_agent(script=[{"say": "hi"}]))
    sessions = [(await rt.create_session(agent.id)).id for _ in range(6)]
    for session in sessions:
        assert statuses(await run_turn(rt, session)) == ["running", "idle"]
    cache = HistoryCache(probe(rt).store, max_items=5, max_sessions=3)
    for session in sessions:
        history = await cache.get(session)
        assert len(history) == 2  # the message and the answer
    stats = cache.statistics()
    assert (stats["sessions"], stats["items"]) == (2, 4) and stats["bytes"] > 0
    history.record(MessageItem(role="user", content=()))
    assert cache.statistics()["items"] == 5
    history.doubt()  # a write it recorded may have failed: read again next time
    stats = cache.statistics()
    assert (stats["sessions"], stats["items"]) == (1, 2)
