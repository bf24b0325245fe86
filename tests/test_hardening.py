"""Regression tests for the races and failure paths a review of the core found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.core.bus import _persist as persist_module
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.testing import RecordingHarness, collect_turn, probe, run_turn, scripted_agent

from .conftest import all_tasks, statuses, wait_quiet


async def hang(request: TurnRequest, ctx: TurnContext) -> None:
    async with ctx.open_message() as message:
        await message.write("working")
        await trio.sleep_forever()


async def test_cancelling_the_runtime_from_outside_still_ends_every_turn(tmp_path: Path) -> None:
    """Regression: an outer cancel killed the bus writer before turns could end."""
    db = f"sqlite:///{tmp_path / 'outer.db'}"
    recorder = RecordingHarness(hang)
    started = trio.Event()
    before = all_tasks()
    with trio.move_on_after(5) as outer:
        async with omnigent.open_runtime(db=db) as rt:
            rt.register_harness("recorder", recorder.factory)
            agent = await rt.create_agent(scripted_agent(harness="recorder"))
            session = (await rt.create_session(agent.id)).id
            async with rt.subscribe(session) as events:
                await rt.send_message(session, "go")
                async for event in events:
                    if event.type == "response.output_text.delta":
                        started.set()
                        break
            outer.cancel()
            await trio.sleep_forever()
    assert started.is_set()
    assert all_tasks() <= before
    async with omnigent.open_runtime(db=db) as rt:
        async with rt.subscribe(session, after=0) as events:
            seen = await collect_turn(events)
        assert statuses(seen) == ["running", "cancelled"]
        assert [e.type for e in seen][-2] == "response.cancelled"


async def test_a_harness_failing_while_stopped_fails_only_its_own_session(
    rt: omnigent.Runtime,
) -> None:
    """Regression: Cancelled + RuntimeError from a harness nursery crashed the runtime."""
    started = trio.Event()

    async def broken_cleanup(request: TurnRequest, ctx: TurnContext) -> None:
        async def child() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise RuntimeError("cleanup failed")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
            started.set()
            await trio.sleep_forever()

    broken = RecordingHarness(broken_cleanup)
    rt.register_harness("broken", broken.factory)
    bad = (
        await rt.create_session((await rt.create_agent(scripted_agent("b", harness="broken"))).id)
    ).id
    good_agent = await rt.create_agent(
        scripted_agent("g", script=[{"sleep": 0.2}, {"say": "fine"}])
    )
    good = (await rt.create_session(good_agent.id)).id
    async with rt.subscribe(bad) as bad_events, rt.subscribe(good) as good_events:
        await rt.send_message(bad, "go")
        await rt.send_message(good, "go")
        await started.wait()
        await rt.stop_session(bad)
        bad_turn = await collect_turn(bad_events)
        good_turn = await collect_turn(good_events)
    assert statuses(bad_turn)[-1] == "failed"
    assert bad_turn[-1].to_dict()["error"]["code"] == "harness_crashed"
    assert "cleanup failed" not in str(bad_turn)  # logged, never published
    assert statuses(good_turn) == ["running", "idle"]
    assert statuses(await run_turn(rt, good)) == ["running", "idle"]


async def test_a_message_sent_while_a_stop_winds_down_is_answered(
    rt: omnigent.Runtime,
) -> None:
    """Regression: it went to the dying actor and was never answered."""
    started = trio.Event()
    winding_down = trio.Event()

    async def slow_to_stop(request: TurnRequest, ctx: TurnContext) -> None:
        if request.turn_number > 0:
            async with ctx.open_message() as message:
                await message.write("second turn")
            return
        try:
            started.set()
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                winding_down.set()
                await trio.sleep(0.2)

    recorder = RecordingHarness(slow_to_stop)
    rt.register_harness("slow", recorder.factory)
    session = (
        await rt.create_session((await rt.create_agent(scripted_agent(harness="slow"))).id)
    ).id
    async with rt.subscribe(session) as events, trio.open_nursery() as nursery:
        await rt.send_message(session, "first")
        await started.wait()
        nursery.start_soon(rt.stop_session, session)
        await winding_down.wait()
        with trio.fail_after(5):
            async with rt.open_turn_stream(session, "second") as (accepted, turn):
                assert accepted.status == "accepted"
                answer = [e async for e in turn]
        first = await collect_turn(events)
    assert statuses(first) == ["running", "cancelled"]
    assert answer[-1].type == "response.completed"


async def test_no_work_starts_on_a_session_being_deleted(rt: omnigent.Runtime) -> None:
    """Regression: a message during a delete started an actor that outlived the session."""
    recorder = RecordingHarness(hang)
    rt.register_harness("recorder", recorder.factory)
    session = (
        await rt.create_session((await rt.create_agent(scripted_agent(harness="recorder"))).id)
    ).id
    await rt.send_message(session, "go")
    refused: list[BaseException] = []

    async def sneak_in() -> None:
        try:
            await rt.send_message(session, "late")
        except omnigent.SessionNotFound as exc:
            refused.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(rt.delete_session, session)
        await trio.lowlevel.checkpoint()
        nursery.start_soon(sneak_in)
    assert len(refused) == 1
    await wait_quiet(rt)
    assert rt.statistics()["active_sessions"] == 0
    assert await probe(rt).store.read_events(session, 0) == []


async def test_no_work_starts_once_shutdown_began(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    session = (await rt.create_session(agent.id)).id
    probe(rt).set_closing(True)
    with pytest.raises(omnigent.RuntimeClosed):
        await rt.send_message(session, "late")
    probe(rt).set_closing(False)


async def test_a_flaky_store_does_not_take_the_runtime_down(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setattr(persist_module, "_RETRY_DELAYS", (0.0, 0.0))
    original = probe(rt).store.append_events
    failures = 2

    async def flaky(events: Any, **options: Any) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise OSError("disk hiccup")
        await original(events, **options)

    probe(rt).store.append_events = flaky  # type: ignore[method-assign]
    agent = await rt.create_agent(scripted_agent(script=[{"say": "still here"}]))
    session = (await rt.create_session(agent.id)).id
    assert statuses(await run_turn(rt, session)) == ["running", "idle"]

    async def broken(events: Any, **options: Any) -> None:
        raise OSError("disk gone")

    probe(rt).store.append_events = broken  # type: ignore[method-assign]
    await rt.send_message(session, "lost")
    await wait_quiet(rt)
    await probe(rt).bus.flush()  # returns although the batch could not be written
    assert "dropping" in caplog.text
    probe(rt).store.append_events = original  # type: ignore[method-assign]
    assert statuses(await run_turn(rt, session)) == ["running", "idle"]


async def test_one_runtime_owns_a_database_file(tmp_path: Path) -> None:
    """Regression: a second runtime on the same file "recovered" the first's live turns
    and reused its event ids, which crashed the first."""
    db = f"sqlite:///{tmp_path / 'shared.db'}"
    recorder = RecordingHarness(hang)
    async with omnigent.open_runtime(db=db) as owner:
        owner.register_harness("recorder", recorder.factory)
        agent = await owner.create_agent(scripted_agent(harness="recorder"))
        session = (await owner.create_session(agent.id)).id
        async with owner.subscribe(session) as events:
            await owner.send_message(session, "go")
            await events.__anext__()
            with pytest.raises(omnigent.StoreBusy):
                async with omnigent.open_runtime(db=db):
                    pass
            async with omnigent.open_runtime(db=db, exclusive=False) as beside:
                listed = await beside.list_sessions()
                assert [s.id for s in listed.data] == [session]
                with pytest.raises(omnigent.StoreBusy, match="records only"):
                    await beside.send_message(session, "hi")
            assert (await owner.get_session(session)).status == "running"
    async with omnigent.open_runtime(db=db):  # the lock is released with its owner
        pass
