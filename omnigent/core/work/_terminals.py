"""A session's live terminals: owned by the session, announced, watched for idleness.

:class:`SessionTerminals` is the :class:`~omnigent.tools.terminals.TerminalControl` a
session's terminal tools act on. Each terminal is one task in the **session's**
nursery (started through :meth:`BackgroundTasks.start_owned`), so it lives exactly as
long as the session's work: ``sys_terminal_close`` cancels it alone, and
``stop_session``, delete and runtime shutdown cancel it with everything else. Whatever
ends it, its ``finally`` — shielded, bounded — kills the tmux session and every process
in the pane, then publishes ``session.resource.deleted``.

Exactly once: a fresh launch publishes one ``session.resource.created`` after the pane
exists; the matching ``deleted`` is published by that same task's ``finally`` and only
if ``created`` was. A second launch of the same ``(terminal, session)`` — even one
racing the first — answers ``already_running`` and publishes nothing.

While it runs, the task polls the visible screen. When the screen has stayed the same
for the spec's ``idle_after`` after changing, and differs from what the agent last
read (see :class:`~omnigent.tools.terminals.IdleDetector`), it posts a
``terminal_idle`` inbox item, which wakes the agent. A pane whose command exits ends
its terminal the same way a close does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from ..._ids import new_id
from ...errors import ResourceNotFound, SandboxUnavailable
from ...model import Resource, ResourceCreated, ResourceDeleted, ResourceScreen
from ...spec import TerminalSpec
from ...tools import terminals as term
from ..bus import EventBus
from ._tasks import BackgroundTasks

if TYPE_CHECKING:
    from ...processes.sandbox import Launch, SandboxPolicy

__all__ = ["MAX_TERMINALS", "Panes", "SessionTerminals", "StartDirectory"]

log = logging.getLogger(__name__)

MAX_TERMINALS = 32
_END_TIMEOUT = 30.0  # kill (two tmux commands and the grace) plus the deleted event
_MAX_POLL = 1.0
_FAILED_POLLS = 3  # a pane that cannot be captured this many times running is gone


def _poll_interval(idle_after: float | None) -> float:
    if idle_after is None:
        return _MAX_POLL
    return min(_MAX_POLL, max(0.05, idle_after / 5))


@attrs.define(eq=False)
class _Live:
    """One terminal, from its launch to its end."""

    name: str
    key: str
    spec: TerminalSpec
    cwd: Path
    tmux_session: str
    pane: term.NewPane | None = None
    running: bool = False
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    settled: trio.Event = attrs.field(factory=trio.Event)  # launched, or failed
    ended: trio.Event = attrs.field(factory=trio.Event)
    detector: term.IdleDetector | None = None

    @property
    def resource_id(self) -> str:
        return term.resource_id(self.name, self.key)

    def info(self) -> term.TerminalInfo:
        return term.TerminalInfo(self.name, self.key, self.spec.command, str(self.cwd))

    def resource(self) -> Resource:
        metadata = {"terminal_name": self.name, "session_key": self.key, "running": self.running}
        return Resource(self.resource_id, "terminal", metadata)


class Panes(Protocol):
    """Where a session's terminals' panes live: the runtime's tmux server
    (:class:`~omnigent.tools.terminals.TmuxServer`), or the tmux server of the session's
    runner (``docs/runners.md``). Every method but :meth:`kill_terminal` raises
    :class:`~omnigent.tools.terminals.TmuxFailed` or
    :class:`~omnigent.tools.terminals.TmuxUnavailable` as ``TmuxServer`` does."""

    async def start_pane(
        self,
        session_name: str,
        cwd: Path,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
    ) -> term.NewPane:
        """Start a detached tmux session running ``command`` in ``cwd``."""
        ...

    async def send_text(self, pane_id: str, text: str) -> None:
        """Type ``text`` literally into the pane."""
        ...

    async def send_keys(self, pane_id: str, keys: Sequence[str]) -> None:
        """Press the key names ``keys`` in the pane."""
        ...

    async def capture(self, pane_id: str, scrollback: int = 0) -> str:
        """The pane's visible rows, after up to ``scrollback`` history lines."""
        ...

    async def kill_terminal(self, session_name: str, pane_pid: int | None) -> None:
        """End one terminal and every process of its pane (shielded, bounded)."""
        ...


StartDirectory = Callable[[str | None, str | None], Awaitable[Path]]
"""Where a terminal starts, from its spec's ``cwd`` and the call's (see
:func:`omnigent.tools.terminals.start_directory`)."""


class SessionTerminals:
    """The live terminals of one session actor. Made by the session's tools.

    Args:
        server: where the panes live.
        start_directory: resolves a terminal's start directory — against the session's
            working directory here, or in its runner's workspace there.
        sandbox: the sandbox a pane's command runs in (None: none).
    """

    def __init__(
        self,
        *,
        session_id: str,
        specs: Mapping[str, TerminalSpec],
        server: Panes,
        tasks: BackgroundTasks,
        bus: EventBus,
        start_directory: StartDirectory,
        sandbox: Callable[[], Awaitable[SandboxPolicy | None]] | None = None,
    ) -> None:
        self.session_id = session_id
        self._specs = specs
        self._server = server
        self._tasks = tasks
        self._bus = bus
        self._start_directory = start_directory
        self._sandbox = sandbox
        self._live: dict[tuple[str, str], _Live] = {}

    # -- TerminalControl -------------------------------------------------------------

    @property
    def specs(self) -> Mapping[str, TerminalSpec]:
        return self._specs

    async def start_directory(self, spec_cwd: str | None, raw: str | None) -> Path:
        return await self._start_directory(spec_cwd, raw)

    async def launch(
        self, terminal: str, session: str, cwd: Path
    ) -> tuple[term.TerminalInfo, bool]:
        key = (terminal, session)
        while (live := self._live.get(key)) is not None:
            if not live.running:
                await live.settled.wait()  # another launch of it is under way
            if live.running:
                return live.info(), True
            # That launch failed (and removed itself): try afresh.
        if len(self._live) >= MAX_TERMINALS:
            raise term.ToolError(
                f"this session already runs {MAX_TERMINALS} terminals; close one first"
            )
        live = _Live(terminal, session, self._specs[terminal], cwd, new_id("omnigent"))
        self._live[key] = live
        await self._tasks.start_owned(self._run, live, name=f"terminal {live.resource_id}")
        return live.info(), False

    async def send(self, terminal: str, session: str, text: str, keys: Sequence[str]) -> None:
        pane = self._running(terminal, session)
        try:
            if text:
                await self._server.send_text(pane.pane_id, text)
            if keys:
                await self._server.send_keys(pane.pane_id, keys)
        except (term.TmuxFailed, term.TmuxUnavailable) as exc:
            raise term.ToolError(f"cannot send to terminal {terminal} ({session}): {exc}") from exc

    async def read(self, terminal: str, session: str, scrollback: int) -> term.Screen:
        live = self._live.get((terminal, session))
        screen, capture = await self._capture(terminal, session, scrollback)
        if live is not None and live.detector is not None:
            live.detector.mark_seen(term.screen_digest(capture))
        return screen

    def running(self) -> list[term.TerminalInfo]:
        return [live.info() for live in self._live.values() if live.running]

    async def close(self, terminal: str, session: str) -> bool:
        live = self._live.get((terminal, session))
        if live is None:
            return False
        await live.settled.wait()
        if not live.running:
            return False  # its launch failed, or it ended meanwhile
        live.scope.cancel()
        await live.ended.wait()
        return True

    # -- for the runtime (snapshots, HTTP) ---------------------------------------------

    def resources(self) -> list[Resource]:
        """The running terminals as resources, in launch order."""
        return [live.resource() for live in self._live.values() if live.running]

    async def screen(self, resource_id: str, scrollback: int = 0) -> ResourceScreen:
        """A terminal's screen, for a client (the agent's idle notices are unaffected).

        Raises:
            ResourceNotFound: no running terminal has that id.
        """
        for live in self._live.values():
            if live.running and live.resource_id == resource_id:
                try:
                    screen, _ = await self._capture(live.name, live.key, scrollback)
                except term.ToolError:
                    break  # it ended meanwhile
                return ResourceScreen(
                    resource_id, "terminal", screen.text, screen.scrollback, screen.truncated
                )
        raise ResourceNotFound(resource_id)

    # -- the terminal's task -----------------------------------------------------------

    def _running(self, terminal: str, session: str) -> term.NewPane:
        live = self._live.get((terminal, session))
        if live is None or not live.running or live.pane is None:
            raise term.ToolError(
                f"terminal {terminal} (session {session}) is not running; "
                "start it with sys_terminal_launch"
            )
        return live.pane

    async def _capture(
        self, terminal: str, session: str, scrollback: int
    ) -> tuple[term.Screen, str]:
        pane = self._running(terminal, session)
        try:
            capture = await self._server.capture(pane.pane_id, scrollback)
        except (term.TmuxFailed, term.TmuxUnavailable) as exc:
            raise term.ToolError(f"cannot read terminal {terminal} ({session}): {exc}") from exc
        text, truncated = term.trim_screen(capture)
        return term.Screen(text, scrollback, truncated), capture

    async def _run(self, live: _Live, *, task_status: trio.TaskStatus[None]) -> None:
        created = False
        try:
            with live.scope:
                async with self._launch(live) as launch:
                    live.pane = await self._start_pane(live, launch)
                    live.running = True
                    await self._bus.publish(self.session_id, ResourceCreated(resource=_wire(live)))
                    created = True
                    live.settled.set()
                    task_status.started()
                    await self._watch(live)
        finally:
            live.running = False
            if self._live.get((live.name, live.key)) is live:
                del self._live[(live.name, live.key)]
            with trio.move_on_after(_END_TIMEOUT, shield=True):
                pid = None if live.pane is None else live.pane.pid
                await self._server.kill_terminal(live.tmux_session, pid)
                if created:
                    deleted = ResourceDeleted(
                        resource_id=live.resource_id, resource_type="terminal"
                    )
                    await self._bus.publish(self.session_id, deleted)
            live.settled.set()
            live.ended.set()

    @asynccontextmanager
    async def _launch(self, live: _Live) -> AsyncIterator[Launch | None]:
        """The terminal's command inside the session's sandbox, for as long as it runs
        (the sandbox's egress proxy serves the pane); None without a sandbox."""
        from ...processes.sandbox import open_pane_launch, open_sandbox  # the first terminal

        spec = live.spec
        argv = [spec.command, *spec.args]
        try:
            policy = None if self._sandbox is None else await self._sandbox()
            async with (
                open_sandbox(policy) as box,
                open_pane_launch(box, argv, cwd=live.cwd, env=spec.env) as launch,
            ):
                yield launch
        except SandboxUnavailable as exc:
            raise term.ToolError(f"cannot start terminal {live.name}: {exc.message}") from exc

    async def _start_pane(self, live: _Live, launch: Launch | None) -> term.NewPane:
        """Start the pane: the spec's command as it is, or the sandbox's launch of it."""
        spec = live.spec
        try:
            if launch is None:
                return await self._server.start_pane(
                    live.tmux_session, live.cwd, spec.command, spec.args, spec.env
                )
            command, *args = launch.argv
            return await self._server.start_pane(live.tmux_session, live.cwd, command, args, {})
        except (term.TmuxFailed, term.TmuxUnavailable) as exc:
            raise term.ToolError(f"cannot start terminal {live.name}: {exc}") from exc

    async def _watch(self, live: _Live) -> None:
        """Poll the screen until the pane is gone; post idle notices on the way."""
        assert live.pane is not None
        idle_after = live.spec.idle_seconds
        live.detector = None if idle_after is None else term.IdleDetector(idle_after)
        interval = _poll_interval(idle_after)
        failures = 0
        while True:
            await trio.sleep(interval)
            try:
                capture = await self._server.capture(live.pane.pane_id)
            except term.TmuxUnavailable as exc:
                log.info("terminal %s of %s ended: %s", live.resource_id, self.session_id, exc)
                return
            except term.TmuxFailed as exc:
                failures += 1
                if exc.gone or failures >= _FAILED_POLLS:
                    log.info("terminal %s of %s ended: %s", live.resource_id, self.session_id, exc)
                    return
                continue
            failures = 0
            digest = term.screen_digest(capture)
            if live.detector is not None and live.detector.observe(digest, trio.current_time()):
                await self._tasks.post_inbox(
                    {"type": "terminal_idle", "terminal": live.name, "session": live.key}
                )


def _wire(live: _Live) -> dict[str, Any]:
    out: dict[str, Any] = live.resource().to_dict()
    return out
