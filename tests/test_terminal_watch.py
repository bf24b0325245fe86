"""A session's terminals over an in-memory tmux double, on a virtual clock.

:class:`SessionTerminals` drives its tmux server through a few methods; the double
here answers them from a screen that changes with (virtual) time, so the idle
watcher's timing and the exactly-once events are checked deterministically with
pytest-trio's ``autojump_clock``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from omnigent.core.work._terminals import SessionTerminals
from omnigent.model import ResourceCreated, ResourceDeleted
from omnigent.spec import TerminalSpec
from omnigent.tools.terminals import NewPane, TmuxFailed, ToolError


@attrs.define
class FakeTmux:
    """Answers a capture from ``screen(now)``; ``gone`` makes the pane vanish."""

    screen: Callable[[float], str]
    gone: bool = False
    flaky: int = 0  # how many captures fail (without saying the pane is gone)
    fail_start: str | None = None
    started: list[tuple[Any, ...]] = attrs.field(factory=list)
    sent: list[list[str]] = attrs.field(factory=list)
    killed: list[tuple[str, int | None]] = attrs.field(factory=list)

    async def start_pane(
        self, name: str, cwd: Path, command: str, args: Sequence[str], env: Any
    ) -> NewPane:
        await trio.lowlevel.checkpoint()
        if self.fail_start is not None:
            raise TmuxFailed(["new-session"], self.fail_start)
        self.started.append((name, cwd, command, tuple(args)))
        return NewPane("%1", 4242)

    async def send_text(self, pane_id: str, text: str) -> None:
        await trio.sleep(0.001)
        self.sent.append(["text", pane_id, text])

    async def send_keys(self, pane_id: str, keys: Sequence[str]) -> None:
        await trio.sleep(0.001)
        self.sent.append(["keys", pane_id, *keys])

    async def capture(self, pane_id: str, scrollback: int = 0) -> str:
        await trio.sleep(0.001)
        if self.gone:
            raise TmuxFailed(["capture-pane"], "can't find pane: %1")
        if self.flaky:
            self.flaky -= 1
            raise TmuxFailed(["capture-pane"], "server busy")
        return self.screen(trio.current_time())

    async def kill_terminal(self, session_name: str, pane_pid: int | None) -> None:
        await trio.lowlevel.checkpoint()
        self.killed.append((session_name, pane_pid))


@attrs.define
class FakeTasks:
    nursery: trio.Nursery
    inbox: list[tuple[float, dict[str, Any]]] = attrs.field(factory=list)

    async def start_owned(self, run: Any, *args: Any, name: str) -> Any:
        return await self.nursery.start(functools.partial(run, *args))

    async def post_inbox(self, item: dict[str, Any]) -> None:
        self.inbox.append((trio.current_time(), item))


@attrs.define
class FakeBus:
    events: list[Any] = attrs.field(factory=list)

    async def publish(self, session_id: str, event: Any) -> None:
        self.events.append(event)


def terminals(
    nursery: trio.Nursery, tmux: FakeTmux, idle_after: float | None = 2.0
) -> tuple[SessionTerminals, FakeTasks, FakeBus]:
    tasks, bus = FakeTasks(nursery), FakeBus()

    async def start_directory(spec_cwd: str | None, raw: str | None) -> Path:
        return Path("/work")

    spec = TerminalSpec(command="bash", idle_after=0 if idle_after is None else idle_after)
    control = SessionTerminals(
        session_id="conv_1",
        specs={"bash": spec},
        server=tmux,  # type: ignore[arg-type]
        tasks=tasks,  # type: ignore[arg-type]
        bus=bus,  # type: ignore[arg-type]
        start_directory=start_directory,
    )
    return control, tasks, bus


def phases(*changes: tuple[float, str]) -> Callable[[float], str]:
    """A screen that shows each text from its start time on."""

    def screen(now: float) -> str:
        shown = ""
        for start, text in changes:
            if now >= start:
                shown = text
        return shown

    return screen


async def test_idle_notices_follow_the_screen(autojump_clock: trio.testing.MockClock) -> None:
    tmux = FakeTmux(phases((0, "$ "), (3, "$ make\nbuilding"), (4, "$ make\ndone\n$ ")))
    async with trio.open_nursery() as nursery:
        control, tasks, bus = terminals(nursery, tmux)
        info, already = await control.launch("bash", "s1", Path("/work"))
        assert not already and info.resource_id == "terminal_bash_s1"
        await trio.sleep(12)
        # The prompt settled (notice 1), then the build ran and settled (notice 2).
        times = [t for t, _ in tasks.inbox]
        assert len(times) == 2
        assert 2.0 <= times[0] < 3.0
        assert 6.0 <= times[1] < 7.0
        assert tasks.inbox[0][1] == {"type": "terminal_idle", "terminal": "bash", "session": "s1"}
        assert await control.close("bash", "s1")
    assert [type(e) for e in bus.events] == [ResourceCreated, ResourceDeleted]
    assert tmux.killed == [(tmux.started[0][0], 4242)]


async def test_a_screen_the_agent_read_is_not_news(autojump_clock: trio.testing.MockClock) -> None:
    tmux = FakeTmux(phases((0, "$ ls\nfile"), (5, "$ ls\nfile\n$ date\nMon")))
    async with trio.open_nursery() as nursery:
        control, tasks, _ = terminals(nursery, tmux)
        await control.launch("bash", "s1", Path("/work"))
        await trio.sleep(0.5)
        screen = await control.read("bash", "s1", 0)
        assert screen.text == "$ ls\nfile"
        await trio.sleep(4)
        assert tasks.inbox == []  # it settled, but the agent has seen it
        await trio.sleep(5)
        assert len(tasks.inbox) == 1  # the new output is news
        await control.close("bash", "s1")


async def test_idle_after_zero_never_notifies(autojump_clock: trio.testing.MockClock) -> None:
    tmux = FakeTmux(phases((0, "a"), (3, "b")))
    async with trio.open_nursery() as nursery:
        control, tasks, _ = terminals(nursery, tmux, idle_after=None)
        await control.launch("bash", "s1", Path("/work"))
        await trio.sleep(30)
        assert tasks.inbox == []
        await control.close("bash", "s1")


async def test_a_vanished_pane_ends_the_terminal_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tmux = FakeTmux(phases((0, "$ ")))
    async with trio.open_nursery() as nursery:
        control, _, bus = terminals(nursery, tmux)
        await control.launch("bash", "s1", Path("/work"))
        tmux.gone = True
        await trio.sleep(5)
        assert control.running() == [] and control.resources() == []
        assert not await control.close("bash", "s1")  # nothing left to close
        with pytest.raises(ToolError, match="not running"):
            await control.send("bash", "s1", "ls", ["Enter"])
    assert [type(e) for e in bus.events] == [ResourceCreated, ResourceDeleted]
    assert len(tmux.killed) == 1


async def test_a_few_failed_captures_are_tolerated(autojump_clock: trio.testing.MockClock) -> None:
    tmux = FakeTmux(phases((0, "$ ")), flaky=2)
    async with trio.open_nursery() as nursery:
        control, _, bus = terminals(nursery, tmux)
        await control.launch("bash", "s1", Path("/work"))
        await trio.sleep(10)
        assert [r.id for r in control.resources()] == ["terminal_bash_s1"]
        tmux.flaky = 3  # three in a row: the pane is unreachable, the terminal is over
        await trio.sleep(10)
        assert control.resources() == []
    assert [type(e) for e in bus.events] == [ResourceCreated, ResourceDeleted]


async def test_racing_launches_start_one_pane(autojump_clock: trio.testing.MockClock) -> None:
    tmux = FakeTmux(phases((0, "$ ")))
    answers: list[bool] = []
    async with trio.open_nursery() as nursery:
        control, _, bus = terminals(nursery, tmux)

        async def launch() -> None:
            answers.append((await control.launch("bash", "s1", Path("/work")))[1])

        async with trio.open_nursery() as racing:
            for _ in range(5):
                racing.start_soon(launch)
        assert sorted(answers) == [False, True, True, True, True]
        assert len(tmux.started) == 1
        nursery.cancel_scope.cancel()  # as a stop does: the terminal still ends cleanly
    assert [type(e) for e in bus.events] == [ResourceCreated, ResourceDeleted]
    assert len(tmux.killed) == 1


async def test_a_failed_launch_publishes_nothing_and_can_be_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tmux = FakeTmux(phases((0, "$ ")), fail_start="create window failed")
    async with trio.open_nursery() as nursery:
        control, _, bus = terminals(nursery, tmux)
        with pytest.raises(ToolError, match="cannot start terminal bash: create window failed"):
            await control.launch("bash", "s1", Path("/work"))
        assert bus.events == [] and control.resources() == []
        assert len(tmux.killed) == 1  # whatever tmux made of it is killed by name
        tmux.fail_start = None
        assert not (await control.launch("bash", "s1", Path("/work")))[1]
        await control.close("bash", "s1")
    assert [type(e) for e in bus.events] == [ResourceCreated, ResourceDeleted]
