"""Every turn ends, and so does the process: bounded shutdown, SIGTERM, fair publishing.

Regression tests for issue 8: each fails on the code before the fix.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.lowlevel

import omnigent
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import SessionStatusChanged
from omnigent.testing import RecordingHarness, collect_turn, probe, scripted_agent
from omnigent.transports.http._serve import add_serve_parser, serve

from .conftest import statuses, wait_quiet
from .http_helpers import HTTPX_GENERATORS, open_stream

GRACE = 0.5


def _started_in_thread(started: trio.Event) -> None:
    trio.from_thread.run_sync(started.set)


async def test_a_sync_tool_stuck_in_sleep_does_not_hold_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: leaving open_runtime waited for ``time.sleep(60)`` in a sync tool."""
    caplog.set_level(logging.WARNING)
    started = trio.Event()

    def sleepy() -> str:
        """Sleep a minute."""
        _started_in_thread(started)
        time.sleep(60)
        return "rested"

    db = f"sqlite:///{tmp_path / 's.db'}"
    with trio.fail_after(10):
        async with omnigent.open_runtime(db=db, shutdown_grace=GRACE) as rt:
            rt.register_tool(sleepy)
            agent = await rt.create_agent(scripted_agent(script=[{"call": "sleepy", "args": {}}]))
            session = (await rt.create_session(agent.id)).id
            await rt.send_message(session, "rest")
            await started.wait()
            leaving = time.monotonic()
        took = time.monotonic() - leaving
    assert took <= GRACE + 1.0, took
    assert "abandoning sync tool 'sleepy'" in caplog.text
    async with omnigent.open_runtime(db=db) as rt, rt.subscribe(session, after=0) as events:
        turn = await collect_turn(events)
    assert statuses(turn) == ["running", "cancelled"]


POLICY_STARTED: list[trio.Event] = []


def slow_policy(event: dict[str, Any]) -> dict[str, Any]:
    _started_in_thread(POLICY_STARTED[0])
    time.sleep(60)
    return {"result": "ALLOW"}


async def test_a_sync_policy_stuck_in_sleep_does_not_hold_shutdown() -> None:
    spec = scripted_agent(script=[{"call": "sys_os_read", "args": {"path": "x"}}])
    spec["policies"] = [{"name": "slow", "type": "function", "function": f"{__name__}:slow_policy"}]
    POLICY_STARTED[:] = [trio.Event()]
    with trio.fail_after(10):
        async with omnigent.open_runtime(shutdown_grace=GRACE, policy_modules=[__name__]) as rt:
            session = (await rt.create_session((await rt.create_agent(spec)).id)).id
            await rt.send_message(session, "read")
            await POLICY_STARTED[0].wait()
            leaving = time.monotonic()
        took = time.monotonic() - leaving
    assert took <= GRACE + 1.0, took


async def test_a_locked_database_does_not_hold_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: a writer waiting on a database locked by another process kept the
    runtime (and the store) from closing, for up to SQLite's busy timeout per retry."""
    path = tmp_path / "locked.db"
    db = f"sqlite:///{path}"
    async with omnigent.open_runtime(db=db) as rt:
        session = (await rt.create_session((await rt.create_agent(scripted_agent())).id)).id
    other = sqlite3.connect(path, isolation_level=None)
    try:
        with trio.fail_after(10):
            async with omnigent.open_runtime(db=db, shutdown_grace=GRACE) as rt:
                other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
                await probe(rt).bus.publish(session, SessionStatusChanged(status="idle"))
                while not probe(rt).store._waits:
                    await trio.sleep(0.001)  # until the writer waits for the lock
                leaving = time.monotonic()
            took = time.monotonic() - leaving
        assert took <= GRACE + 1.0, took
        assert "abandoning" in caplog.text
    finally:
        other.execute("ROLLBACK")
        other.close()
    async with omnigent.open_runtime(db=db) as rt:  # the file is whole and usable
        assert (await rt.get_session(session)).id == session


# -- interrupt and stop reach a sync tool (issue 22, defect 4) ---------------------------


@pytest.mark.parametrize("how", ["interrupt", "stop_session"])
async def test_a_sync_tool_blocked_in_its_thread_does_not_hold_an_interrupt_or_a_stop(
    how: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: the wait for a sync tool's thread was shielded, so with the tool in
    ``time.sleep(6)`` an interrupt did nothing and a stop took 5.7 s (a hung tool held
    both for ever). Now the thread gets a short grace, then the turn ends ``cancelled``
    without it; its late result is discarded, with a log line, and publishes nothing."""
    caplog.set_level(logging.WARNING)
    started, release, returned = trio.Event(), threading.Event(), threading.Event()

    def stuck() -> str:
        """Block until released (a minute at most)."""
        _started_in_thread(started)
        release.wait(60)
        returned.set()
        return "too late"

    db = f"sqlite:///{tmp_path / 's.db'}"
    with trio.fail_after(20):
        async with omnigent.open_runtime(db=db) as rt:
            rt.register_tool(stuck)
            spec = scripted_agent(script=[{"call": "stuck", "args": {}}, {"say": "after the tool"}])
            session = (await rt.create_session((await rt.create_agent(spec)).id)).id
            try:
                async with rt.subscribe(session, after=0) as events:
                    await rt.send_message(session, "go")
                    await started.wait()
                    began = time.monotonic()
                    if how == "interrupt":
                        assert await rt.interrupt(session)
                    else:
                        await rt.stop_session(session)
                    turn = await collect_turn(events)
                    took = time.monotonic() - began
            finally:
                release.set()
            assert statuses(turn) == ["running", "cancelled"]
            assert took < 2.0, took
            assert "abandoning sync tool 'stuck'" in caplog.text
            # The thread returns now: its result is discarded (logged), and nothing is
            # published after the turn's terminal event.
            while "returned after it was abandoned" not in caplog.text:
                await trio.sleep(0.01)
            assert returned.is_set()
            await wait_quiet(rt)
            async with rt.subscribe(session, after=0) as events:
                stored = await collect_turn(events)
            assert [e.to_dict() for e in stored] == [e.to_dict() for e in turn]
            assert await rt.last_event_id(session) == turn[-1].event_id
            assert "after the tool" not in str([e.to_dict() for e in stored])


async def test_a_sync_tool_that_returns_within_the_grace_finishes_with_its_turn(
    tmp_path: Path,
) -> None:
    """A cancel gives the thread its grace: a call about to return is waited for, so
    its work is done when the turn has ended (nothing is left running)."""
    started, returned = trio.Event(), threading.Event()

    def brief() -> str:
        """Take a moment."""
        _started_in_thread(started)
        time.sleep(0.1)
        returned.set()
        return "done"

    with trio.fail_after(20):
        async with omnigent.open_runtime(db=f"sqlite:///{tmp_path / 's.db'}") as rt:
            rt.register_tool(brief)
            spec = scripted_agent(script=[{"call": "brief", "args": {}}, {"sleep": 30}])
            session = (await rt.create_session((await rt.create_agent(spec)).id)).id
            async with rt.subscribe(session, after=0) as events:
                await rt.send_message(session, "go")
                await started.wait()
                assert await rt.interrupt(session)
                turn = await collect_turn(events)
            assert returned.is_set()
            assert statuses(turn) == ["running", "cancelled"]


async def test_a_store_write_that_does_not_return_does_not_hold_shutdown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression (issue 22, defect 6): once the writer was abandoned, leaving
    open_runtime waited for it with no deadline — a store write that does not give
    way held the process for as long as it took. The writer is now cancelled, and
    what it held is named in the log."""
    caplog.set_level(logging.WARNING)
    db = f"sqlite:///{tmp_path / 'w.db'}"
    with trio.fail_after(20):
        async with omnigent.open_runtime(db=db, shutdown_grace=GRACE) as rt:
            session = (await rt.create_session((await rt.create_agent(scripted_agent())).id)).id

            async def stuck(events: Any, **options: Any) -> None:
                await trio.sleep(8)  # no store.abandon() reaches it

            probe(rt).store.append_events = stuck  # type: ignore[method-assign]
            await probe(rt).bus.publish(session, SessionStatusChanged(status="idle"))
            leaving = time.monotonic()
        took = time.monotonic() - leaving
    assert took <= GRACE + 1.5, took
    assert "abandoning the event writer: 1 events not written" in caplog.text
    assert session in caplog.text


async def test_a_session_that_ignores_cancellation_does_not_hold_runtime_shutdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression (issue 22, defect 6): ``Runtime.shutdown`` ended with a wait for
    every session with no deadline, so a tool shielding itself from cancellation held
    it (and a server's shutdown of its streams) for as long as it liked. Now it returns
    within the grace plus half a second, naming the session; leaving open_runtime
    still waits for the task (Trio cannot abandon one)."""
    caplog.set_level(logging.WARNING)
    started = trio.Event()

    async def stubborn() -> str:
        """Ignore cancellation for a while."""
        started.set()
        with trio.CancelScope(shield=True):
            await trio.sleep(2.5)
        return "done"

    with trio.fail_after(10):
        async with omnigent.open_runtime(shutdown_grace=GRACE) as rt:
            rt.register_tool(stubborn)
            spec = scripted_agent(script=[{"call": "stubborn", "args": {}}])
            agent = await rt.create_agent(spec)
            session = (await rt.create_session(agent.id)).id
            await rt.send_message(session, "go")
            await started.wait()
            stopping = time.monotonic()
            await rt.shutdown()
            took = time.monotonic() - stopping
    assert took <= GRACE + 0.8, took
    assert "abandoning 1 sessions that did not end" in caplog.text
    assert session in caplog.text


async def test_a_session_that_ignores_cancellation_does_not_hold_a_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression (issue 22): stopping one session (``stop_session``, a delete) waited
    for its actor with no deadline, so a tool shielding itself held the caller — an
    HTTP request, a delete — for as long as it liked. Now the stop goes on after the
    grace plus half a second, naming the session."""
    caplog.set_level(logging.WARNING)
    started, release = trio.Event(), trio.Event()

    async def stubborn() -> str:
        """Ignore cancellation until released."""
        started.set()
        with trio.CancelScope(shield=True):
            await release.wait()
        return "done"

    with trio.fail_after(10):
        async with omnigent.open_runtime(shutdown_grace=GRACE) as rt:
            rt.register_tool(stubborn)
            spec = scripted_agent(script=[{"call": "stubborn", "args": {}}])
            agent = await rt.create_agent(spec)
            session = (await rt.create_session(agent.id)).id
            await rt.send_message(session, "go")
            await started.wait()
            stopping = time.monotonic()
            try:
                with trio.move_on_after(GRACE + 3):
                    await rt.stop_session(session)
                took = time.monotonic() - stopping
            finally:
                release.set()  # now it may end, and the runtime close
    assert GRACE <= took <= GRACE + 1.5, took
    assert "going on without 1 sessions that did not end" in caplog.text
    assert session in caplog.text


async def test_a_harness_streaming_from_memory_is_interrupted_at_once() -> None:
    """Regression: ``publish`` never yielded, so a harness streaming from memory ran
    thousands of deltas at a stretch (until the queue filled), starving every other
    task; an interrupt landed only then."""
    stopped_at: list[int] = []  # how many deltas were written after the interrupt
    after_interrupt = 0
    interrupted = False
    streaming = trio.Event()
    stopped = trio.Event()
    ticks = 0
    longest_stretch = 0

    async def flood(request: TurnRequest, ctx: TurnContext) -> None:
        nonlocal longest_stretch, after_interrupt
        stretch, seen = 0, ticks
        try:
            async with ctx.open_message() as message:
                for i in range(100_000):
                    await message.write(f"d{i} ")
                    after_interrupt += interrupted
                    stretch = stretch + 1 if ticks == seen else 0
                    seen = ticks
                    longest_stretch = max(longest_stretch, stretch)
                    if i == 100:
                        streaming.set()
        finally:
            stopped_at.append(after_interrupt)
            stopped.set()

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.lowlevel.checkpoint()
            ticks += 1

    with trio.fail_after(30):
        async with omnigent.open_runtime() as rt, trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            rt.register_harness("flood", RecordingHarness(flood).factory)
            flooded = (
                await rt.create_session(
                    (await rt.create_agent(scripted_agent("f", harness="flood"))).id
                )
            ).id
            other = (
                await rt.create_session(
                    (await rt.create_agent(scripted_agent("o", script=[{"say": "meanwhile"}]))).id
                )
            ).id
            # Nobody subscribes to the flood itself: a reader of 100,000 events would
            # only compete with what is measured here.
            async with rt.subscribe(other) as events:
                await rt.send_message(flooded, "go")
                await streaming.wait()
                await rt.send_message(other, "go")
                assert statuses(await collect_turn(events)) == ["running", "idle"]
            assert not stopped_at, "the flood ended before the other turn could run"
            assert await rt.interrupt(flooded)  # the turn's scope is cancelled now
            interrupted = True
            await stopped.wait()
            await wait_quiet(rt)
            await probe(rt).bus.flush()
            assert (await rt.get_session(flooded)).status == "cancelled"
            nursery.cancel_scope.cancel()
        # Counted, not timed: the next publish after the interrupt raises Cancelled.
        assert stopped_at[0] <= 1, stopped_at
        # Other tasks ran between (nearly) every two deltas, never thousands apart.
        assert longest_stretch < 50, longest_stretch


# -- omnigent run and SIGTERM ------------------------------------------------------------

SLOW_AGENT = """
name: slowpoke
executor:
  type: omnigent
  config: {harness: scripted, script: [{say: "thinking hard"}, {sleep: 30}, {say: never}]}
"""


async def _read_until(stream: trio.abc.ReceiveStream, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        chunk = await stream.receive_some(4096)
        assert chunk, f"the command exited before printing {marker!r}: {seen!r}"
        seen += chunk
    return seen


async def test_sigterm_to_omnigent_run_ends_the_turn_cancelled(tmp_path: Path) -> None:
    """Regression: SIGTERM killed ``omnigent run`` silently, leaving the session
    ``running`` (and, after the next start, ``failed``)."""
    (tmp_path / "slow.yaml").write_text(SLOW_AGENT)
    db = f"sqlite:///{tmp_path / 'run.db'}"
    command = [sys.executable, "-m", "omnigent", "run", str(tmp_path / "slow.yaml"), "go"]
    command += ["--db", db]
    env = {**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")}
    with trio.fail_after(30):
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        try:
            assert process.stdout is not None and process.stderr is not None
            await _read_until(process.stdout, b"thinking hard")
            process.send_signal(signal.SIGTERM)
            errors = b""
            async with process.stderr:
                async for chunk in process.stderr:
                    errors += chunk
            assert await process.wait() == 143
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert b"Terminated." in errors
    async with omnigent.open_runtime(db=db) as rt:
        (session,) = (await rt.list_sessions()).data
        assert session.status == "cancelled"


def test_serve_takes_a_shutdown_grace() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers())
    assert parser.parse_args(["serve", "--shutdown-grace", "1.5"]).shutdown_grace == 1.5
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(SystemExit):
            parser.parse_args(["serve", "--shutdown-grace", bad])


# -- serve: streams carry the end of the turn -----------------------------------------


@HTTPX_GENERATORS[0]
@HTTPX_GENERATORS[1]
async def test_at_serve_shutdown_every_stream_gets_the_terminal_events() -> None:
    """Regression: at shutdown, open streams stopped after the last delta; the turn's
    ``response.cancelled`` and ``session.status cancelled`` never reached them."""
    stop = trio.Event()
    spec = scripted_agent(script=[{"say": "working"}, {"sleep": 30}])
    body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    session_frames: list[Any] = []
    turn_frames: list[Any] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(
                lambda task_status: serve(
                    None, "127.0.0.1", 0, None, "none", stop=stop, task_status=task_status
                )
            )
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                agent = (await client.post("/v1/agents", json=spec)).json()["id"]
                sessions = []
                for _ in range(2):
                    created = await client.post("/v1/sessions", json={"agent_id": agent})
                    sessions.append(created.json()["id"])
                watched, streamed = sessions
                started = trio.Event()

                async def watch() -> None:
                    path = f"/v1/sessions/{watched}/stream"
                    async with open_stream(client, "GET", path) as reader:
                        await client.post(f"/v1/sessions/{watched}/events", json=body)
                        while (frame := await reader.next()) is not None:
                            session_frames.append(frame)

                async def turn() -> None:
                    path = f"/v1/sessions/{streamed}/events?stream=true"
                    async with open_stream(client, "POST", path, json=body) as reader:
                        while (frame := await reader.next()) is not None:
                            turn_frames.append(frame)
                            if frame.event == "response.output_text.delta":
                                started.set()

                async with trio.open_nursery() as streams:
                    streams.start_soon(watch)
                    streams.start_soon(turn)
                    await started.wait()
                    while not any(f.event == "response.output_item.done" for f in session_frames):
                        await trio.sleep(0.01)
                    stop.set()
    session_events = [f.event for f in session_frames]
    assert session_events[-2:] == ["response.cancelled", "session.status"]
    assert session_frames[-1].data["status"] == "cancelled"
    assert turn_frames[-1].event == "response.cancelled"
