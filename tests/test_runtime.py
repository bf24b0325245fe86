"""The core runtime: turns, statuses, fault injection, interrupts, buffering."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import omnigent
from omnigent.core.session._turn import CRASHED_MESSAGE
from omnigent.errors import HarnessError
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseFailed,
    SessionStatusChanged,
    item_text,
)
from omnigent.testing import RecordingHarness, collect_turn, probe, run_turn, scripted_agent

from .conftest import all_tasks, statuses, types, wait_quiet

LIBRARY_YAML = """
name: greeter
executor:
  type: omnigent
  config:
    harness: scripted
    script:
      - say: Hello from the library example.
"""


async def test_library_example_runs_as_written() -> None:
    # The example from API.md, word for word apart from the spec text and db.
    seen: list[Any] = []
    async with omnigent.open_runtime(db=None) as rt:
        agent = await rt.create_agent(omnigent.AgentSpec.from_yaml(LIBRARY_YAML))
        session = await rt.create_session(agent_id=agent.id)
        async with rt.subscribe(session.id, after=0) as events:
            await rt.send_message(session.id, "hello")
            async for event in events:
                seen.append(event.to_dict())
                if event.type == "session.status" and event.status in (
                    "idle",
                    "failed",
                    "cancelled",
                ):
                    break
    text = "".join(e["delta"] for e in seen if e["type"] == "response.output_text.delta")
    assert text == "Hello from the library example."
    assert seen[-1]["status"] == "idle"


async def test_turn_publishes_running_then_exactly_one_terminal(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "one two"}]))
    session = await rt.create_session(agent.id)
    events = await run_turn(rt, session.id)
    assert types(events)[:2] == ["session.status", "response.created"]
    assert types(events)[-2:] == ["response.completed", "session.status"]
    assert statuses(events) == ["running", "idle"]
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    deltas = [e.delta for e in events if isinstance(e, OutputTextDelta)]
    assert deltas == ["one ", "two"]
    done = [e.item for e in events if isinstance(e, OutputItemDone)]
    assert item_text(done[0]) == "one two"
    snapshot = await rt.get_session(session.id)
    assert snapshot.status == "idle"
    assert snapshot.busy is False
    assert snapshot.last_event_id == events[-1].event_id


async def test_fail_step_ends_failed_with_its_message(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "partial"}, {"fail": "no luck"}]))
    session = await rt.create_session(agent.id)
    events = await run_turn(rt, session.id)
    assert statuses(events) == ["running", "failed"]
    assert events[-1].error is not None
    assert events[-1].error.message == "no luck"
    failed = [e for e in events if isinstance(e, ResponseFailed)]
    assert len(failed) == 1
    assert failed[0].error.message == "no luck"


async def test_harness_that_fails_in_setup(rt: omnigent.Runtime) -> None:
    def broken_factory(env: Any) -> Any:
        raise RuntimeError("cannot start")

    rt.register_harness("broken", broken_factory)
    agent = await rt.create_agent(scripted_agent(harness="broken"))
    session = await rt.create_session(agent.id)
    before = all_tasks()
    events = await run_turn(rt, session.id)
    assert statuses(events) == ["running", "failed"]
    assert events[-1].error.message == CRASHED_MESSAGE
    assert "cannot start" not in repr(events)  # logged, never published
    assert events[-1].error.code == "harness_crashed"
    await wait_quiet(rt)
    assert all_tasks() <= before


async def test_a_spec_that_cannot_be_resolved_fails_the_turn_with_a_fixed_sentence(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path / 'o.db'}"
    async with omnigent.open_runtime(db) as rt:
        session = await rt.create_session((await rt.create_agent(scripted_agent())).id)
    async with omnigent.open_runtime(db) as rt:  # nothing kept: the spec is read again

        async def unwell(*args: Any, **kwargs: Any) -> Any:
            raise OSError("cannot open /srv/secret/agents.db")

        monkeypatch.setattr(probe(rt).store, "get_agent", unwell)
        events = await run_turn(rt, session.id)
        failed = [e for e in events if isinstance(e, ResponseFailed)]
        assert [e.to_dict()["error"] for e in failed] == [
            {
                "message": "Failed to resolve the agent spec for this turn.",
                "code": "internal_error",
                "type": "OSError",  # the class, never the text
            }
        ]
        assert "secret" not in repr(events) and statuses(events)[-1] == "failed"


async def test_harness_that_raises_mid_stream_keeps_partial_text(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        async with ctx.open_message() as message:
            await message.write("half an ")
            raise ValueError("exploded")

    recorder.body = body
    events = await run_turn(rt, rec_session)
    assert statuses(events) == ["running", "failed"]
    assert events[-1].error.message == CRASHED_MESSAGE
    assert events[-1].error.code == "harness_crashed"
    items = (await rt.list_items(rec_session)).data
    assert isinstance(items[-1], MessageItem)
    assert items[-1].status == "incomplete"
    assert item_text(items[-1]) == "half an "
    await wait_quiet(rt)


async def test_harness_error_message_is_shown(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        raise HarnessError("the model is on strike")

    recorder.body = body
    events = await run_turn(rt, rec_session)
    assert events[-1].error.message == "the model is on strike"
    assert events[-1].error.code == "harness_error"


async def test_hanging_harness_is_interrupted_within_a_second(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    started = trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        async with ctx.open_message() as message:
            await message.write("thinking")
            started.set()
            await trio.sleep_forever()

    recorder.body = body
    before = all_tasks()
    async with rt.subscribe(rec_session) as events:
        await rt.send_message(rec_session, "go")
        await started.wait()
        assert (await rt.get_session(rec_session)).busy
        with trio.fail_after(1):
            assert await rt.interrupt(rec_session) is True
            seen = await collect_turn(events)
    assert statuses(seen) == ["running", "cancelled"]
    assert types(seen)[-2] == "response.cancelled"
    await wait_quiet(rt)
    assert all_tasks() <= before
    assert await rt.interrupt(rec_session) is False
    assert recorder.closed == 1


async def test_stop_session_cancels_the_turn(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    started = trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        started.set()
        await trio.sleep_forever()

    recorder.body = body
    async with rt.subscribe(rec_session) as events:
        await rt.send_message(rec_session, "go")
        await started.wait()
        with trio.fail_after(1):
            await rt.stop_session(rec_session)
            seen = await collect_turn(events)
    assert statuses(seen) == ["running", "cancelled"]
    assert rt.statistics()["active_sessions"] == 0


async def test_reported_failed_then_completed_ends_idle(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        ctx.report_response_status("failed", "transient")
        ctx.report_response_status("completed")

    recorder.body = body
    events = await run_turn(rt, rec_session)
    assert statuses(events) == ["running", "idle"]
    assert types(events).count("response.completed") == 1
    assert "response.failed" not in types(events)


async def test_reported_failed_ends_failed_with_the_harness_message(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        ctx.report_response_status("failed", "rate limited upstream")

    recorder.body = body
    events = await run_turn(rt, rec_session)
    assert statuses(events) == ["running", "failed"]
    assert events[-1].error.message == "rate limited upstream"


async def test_mid_turn_message_is_buffered_then_answered_by_a_continuation(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    release = trio.Event()
    started = trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        if request.turn_number == 0:
            started.set()
            await release.wait()
        async with ctx.open_message() as message:
            await message.write(f"answer {request.turn_number}")

    recorder.body = body
    async with rt.subscribe(rec_session) as events:
        first = await rt.send_message(rec_session, "first")
        assert first.status == "accepted"
        await started.wait()
        second = await rt.send_message(rec_session, "second")
        assert second.status == "buffered"
        release.set()
        turn1 = await collect_turn(events)
        turn2 = await collect_turn(events)
    assert statuses(turn1) == ["running", "idle"]
    assert statuses(turn2) == ["running", "idle"]
    assert [item_text(m) for m in recorder.requests[1].input] == ["second"]
    history = [item_text(i) for i in recorder.requests[1].history]
    assert history == ["first", "answer 0"]
    stored = [item_text(i) for i in (await rt.list_items(rec_session)).data]
    assert stored == ["first", "answer 0", "second", "answer 1"]


async def test_injected_message_is_answered_by_the_running_turn(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    arrived = trio.Event()
    started = trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        started.set()
        await arrived.wait()
        injected = await ctx.take_injections()
        async with ctx.open_message() as message:
            await message.write("saw " + ",".join(item_text(m) for m in injected))

    recorder.body = body
    async with rt.subscribe(rec_session) as events:
        await rt.send_message(rec_session, "first")
        await started.wait()
        assert (await rt.send_message(rec_session, "extra")).status == "buffered"
        arrived.set()
        turn = await collect_turn(events)
    assert statuses(turn) == ["running", "idle"]
    await wait_quiet(rt)
    assert len(recorder.requests) == 1
    stored = [item_text(i) for i in (await rt.list_items(rec_session)).data]
    assert stored == ["first", "extra", "saw extra"]


async def test_turn_stream_ends_with_the_turn_that_answers(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    async with rt.open_turn_stream(rec_session, "hello") as (accepted, events):
        seen = [e async for e in events]
    assert accepted.status == "accepted"
    assert types(seen)[-1] == "response.completed"


async def test_a_turn_stream_of_some_types_still_ends_with_the_answer(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    with trio.fail_after(10):
        stream = rt.open_turn_stream(rec_session, "hello", types=("response.created",))
        async with stream as (_accepted, events):
            seen = [e async for e in events]
    assert types(seen) == [
        "session.status",
        "response.created",
        "response.completed",
    ]


async def test_tool_calls_are_recorded_with_statuses(rt: omnigent.Runtime) -> None:
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    rt.register_tool(add)
    agent = await rt.create_agent(
        scripted_agent(
            script=[{"call": "add", "args": {"a": 2, "b": 3}}, {"call": "add", "args": {}}]
        )
    )
    session = await rt.create_session(agent.id)
    events = await run_turn(rt, session.id)
    done = [e.item for e in events if isinstance(e, OutputItemDone)]
    calls = [i for i in done if isinstance(i, FunctionCallItem)]
    assert [c.status for c in calls] == [
        "action_required",
        "completed",
        "action_required",
        "completed",
    ]
    outputs = [i.output for i in done if isinstance(i, FunctionCallOutputItem)]
    assert outputs[0] == "5"
    assert outputs[1].startswith("Error: invalid arguments for add: missing required argument")
    items = (await rt.list_items(session.id)).data
    assert [i.type for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
    ]


async def test_runtime_exit_cancels_running_turns(tmp_path: Any) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    recorder = RecordingHarness()
    started = trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        started.set()
        await trio.sleep_forever()

    recorder.body = body
    before = all_tasks()
    async with omnigent.open_runtime(db=db) as rt:
        rt.register_harness("recorder", recorder.factory)
        agent = await rt.create_agent(scripted_agent(harness="recorder"))
        session = await rt.create_session(agent.id)
        await rt.send_message(session.id, "go")
        await started.wait()
    assert all_tasks() <= before
    async with omnigent.open_runtime(db=db) as rt:
        async with rt.subscribe(session.id, after=0) as events:
            seen = await collect_turn(events)
        assert statuses(seen) == ["running", "cancelled"]
        assert (await rt.get_session(session.id)).status == "cancelled"


async def test_harnesses_given_to_open_runtime_are_there_before_it_yields() -> None:
    """Regression (issue 17): a harness a recovered turn needs at start could only be
    registered after ``open_runtime`` yielded, racing that turn (two flaky tests)."""
    recorder = RecordingHarness()
    with trio.fail_after(10):
        async with omnigent.open_runtime(harnesses={"recorder": recorder.factory}) as rt:
            agent = await rt.create_agent(scripted_agent(harness="recorder"))
            session = await rt.create_session(agent.id)
            seen = await run_turn(rt, session.id, "hi")
    assert statuses(seen) == ["running", "idle"]


async def test_user_exception_from_the_runtime_block_is_not_wrapped() -> None:
    with pytest.raises(KeyError):
        async with omnigent.open_runtime():
            raise KeyError("mine")


async def test_many_sessions_in_parallel_each_end_once(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"sleep": 0.01}, {"say": "done"}]))
    sessions = [(await rt.create_session(agent.id)).id for _ in range(20)]
    results: dict[str, list[str]] = {}

    async def one(session_id: str) -> None:
        results[session_id] = statuses(await run_turn(rt, session_id))

    async with trio.open_nursery() as nursery:
        for session_id in sessions:
            nursery.start_soon(one, session_id)
    assert all(r == ["running", "idle"] for r in results.values())
    await wait_quiet(rt)
    assert rt.statistics()["active_sessions"] == 0


async def test_a_second_session_status_event_is_published_per_turn_only(
    rt: omnigent.Runtime,
) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    session = await rt.create_session(agent.id)
    for _ in range(3):
        events = await run_turn(rt, session.id)
        assert [e for e in events if isinstance(e, SessionStatusChanged)][-1].status == "idle"
    async with rt.subscribe(session.id, after=0) as all_events:
        seen = []
        async for event in all_events:
            seen.append(event)
            if event.event_id == (await rt.get_session(session.id)).last_event_id:
                break
    assert statuses(seen) == ["running", "idle"] * 3


async def test_a_parent_hears_about_its_children(rt: omnigent.Runtime) -> None:
    """Regression: session.child_session.updated was defined but never published."""
    agent = await rt.create_agent(scripted_agent(script=[{"say": "child answer"}]))
    parent = (await rt.create_session(agent.id)).id
    async with rt.subscribe(parent) as events:
        child = (await rt.create_session(agent.id, parent_session_id=parent, title="kid")).id
        await run_turn(rt, child)
        updates = []
        with trio.fail_after(5):
            async for event in events:
                assert event.type == "session.child_session.updated"
                updates.append(event.to_dict()["child"])
                if updates[-1]["status"] == "idle" and updates[-1]["preview"]:
                    break
    assert {u["id"] for u in updates} == {child}
    assert updates[0]["status"] == "idle" and updates[0]["busy"] is False
    assert any(u["status"] == "running" and u["busy"] for u in updates)
    assert updates[-1]["preview"] == "child answer"
    assert updates[-1]["agent"] == "bot" and updates[-1]["title"] == "kid"
    listed = await rt.child_summary(child)
    assert (listed.id, listed.status, listed.preview) == (child, "idle", "child answer")


async def test_a_session_without_an_override_follows_its_agent_between_turns(
    rt: omnigent.Runtime,
) -> None:
    first = await rt.create_agent(scripted_agent(script=[{"say": "version one"}]))
    following = (await rt.create_session(first.id)).id
    pinned = (await rt.create_session(first.id, harness_override="scripted")).id

    async def said(session_id: str) -> str:
        events = await run_turn(rt, session_id)
        return "".join(e.delta for e in events if isinstance(e, OutputTextDelta))

    assert await said(following) == "version one"
    await wait_quiet(rt)
    second = await rt.create_agent(scripted_agent(script=[{"say": "version two"}]))
    assert (second.id, second.version) == (first.id, 2)
    # "No harness_override: track the spec" — the next turn runs the new version.
    assert await said(following) == "version two"
    assert (await probe(rt).store.get_session(following)).agent_version == 2  # type: ignore[union-attr]
    # An override keeps the version the session was made with.
    assert await said(pinned) == "version one"
