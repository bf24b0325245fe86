"""The ``omnigent`` command line.

Every subcommand is a pair: ``_add_<name>_parser(subparsers)`` declares its arguments
and sets ``handler`` to a ``_cmd_<name>(args) -> int`` function; adding a subcommand is
writing that pair and listing the first in :data:`_SUBCOMMANDS`. Handlers raise
:class:`~omnigent.errors.OmnigentError` for what went wrong; :func:`main` turns it into
``Error: …`` on stderr and an exit code, so no handler prints its own errors.

Exit codes: 0 done; 1 the turn failed, or omnigent failed (a 5xx error); 2 the user asked
for something impossible (a 4xx error: a bad spec, a missing file, an unknown harness,
or a bad option); 130 interrupted.

What is printed is decided in :mod:`omnigent._cli_render`; this module only does I/O.
"""

from __future__ import annotations

import argparse
import functools
import io
import logging
import os
import signal
import stat
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import trio

from . import __version__
from ._cli_render import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    ApprovalMode,
    Chunk,
    ElicitationDialog,
    Reply,
    TurnRenderer,
    auto_reply,
    elicitation_owner,
    format_agent,
    format_agents,
    format_error,
    format_sessions,
    one_line,
    withdrawn_note,
)
from .core import Runtime, open_runtime
from .core.runtime import default_db_url
from .errors import BadRequest, OmnigentError, SessionNotFound
from .model import ElicitationRequest, ElicitationResolved, Event
from .spec import AgentSpec

__all__ = ["build_parser", "default_db_url", "main"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Handler = Callable[[argparse.Namespace], int]
if TYPE_CHECKING:
    _Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

_TITLE_LENGTH = 80


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (``sys.exit(main())``).

    Args:
        argv: the arguments after the program name; ``None`` reads ``sys.argv``.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler = args.handler
    with _logging_to_stderr(args.verbose):
        try:
            return handler(args)
        except (KeyboardInterrupt, OmnigentError, BaseExceptionGroup) as exc:
            return _report(exc)


def _report(exc: BaseException) -> int:
    """The exit code for an error that reached :func:`main`, after telling the user.

    Raises:
        exc itself, if it is a bug rather than the user's or the world's doing: a
        traceback is then the most useful thing to show.
    """
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split(KeyboardInterrupt)
        if rest is None:
            exc = KeyboardInterrupt()
        elif len(leaves := list(_leaves(rest))) == 1 and isinstance(leaves[0], OmnigentError):
            exc = leaves[0]
    if isinstance(exc, KeyboardInterrupt):
        _write([Chunk("stderr", "Interrupted.\n")])
        return EXIT_INTERRUPTED
    if not isinstance(exc, OmnigentError):
        raise exc
    for line in format_error(exc):
        print(line, file=sys.stderr)
    return EXIT_USAGE if exc.status < 500 else EXIT_FAILED


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


# -- the parser -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``omnigent`` argument parser, with every subcommand of :data:`_SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="omnigent", description="A Trio-native runtime for LLM agent sessions."
    )
    parser.add_argument("--version", action="version", version=f"omnigent {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log INFO (-vv: DEBUG) to stderr"
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for add_parser in _SUBCOMMANDS:
        add_parser(subparsers)
    return parser


def _add_db_option(parser: argparse.ArgumentParser) -> None:
    # Resolved when the command runs, so OMNIGENT_DB / OMNIGENT_HOME are read late.
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="database URL (default: $OMNIGENT_DB, else sqlite:///$OMNIGENT_HOME/omnigent.db)",
    )


def _db_url(args: argparse.Namespace) -> str:
    db: str | None = args.db
    return db or default_db_url()


def _add_run_parser(subparsers: _Subparsers) -> None:
    run = subparsers.add_parser("run", help="run one turn of an agent and stream its answer")
    run.add_argument("path", metavar="PATH", help="agent spec file (YAML, or JSON if *.json)")
    run.add_argument("prompt", metavar="PROMPT", help="the user message")
    run.add_argument("--model", metavar="M", help="use model M for this session")
    answers = run.add_mutually_exclusive_group()
    answers.add_argument(
        "--yes",
        dest="approvals",
        action="store_const",
        const="yes",
        help="approve every tool call a policy asks about, without asking",
    )
    answers.add_argument(
        "--no-input",
        dest="approvals",
        action="store_const",
        const="no-input",
        help="decline every approval without asking (never reads stdin)",
    )
    run.set_defaults(approvals="ask")
    _add_db_option(run)
    run.set_defaults(handler=_cmd_run)


def _add_agents_parser(subparsers: _Subparsers) -> None:
    agents = subparsers.add_parser("agents", help="register and list agents")
    commands = agents.add_subparsers(metavar="COMMAND", required=True)
    add = commands.add_parser("add", help="register an agent (a new version if the name exists)")
    add.add_argument("path", metavar="PATH", help="agent spec file")
    _add_db_option(add)
    add.set_defaults(handler=_cmd_agents_add)
    listing = commands.add_parser("list", help="list agents (latest versions)")
    _add_db_option(listing)
    listing.set_defaults(handler=_cmd_agents_list)


def _add_sessions_parser(subparsers: _Subparsers) -> None:
    sessions = subparsers.add_parser("sessions", help="list sessions")
    commands = sessions.add_subparsers(metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="list sessions, newest first")
    listing.add_argument("--agent", metavar="NAME", help="only sessions of this agent")
    listing.add_argument("--limit", metavar="N", type=int, default=20, help="at most N (1-100)")
    _add_db_option(listing)
    listing.set_defaults(handler=_cmd_sessions_list)


def _add_serve_parser(subparsers: _Subparsers) -> None:
    from .transports.serve import add_serve_parser, run_serve

    add_serve_parser(subparsers).set_defaults(handler=run_serve)


_SUBCOMMANDS: tuple[Callable[[_Subparsers], None], ...] = (
    _add_run_parser,
    _add_serve_parser,
    _add_agents_parser,
    _add_sessions_parser,
)


# -- the handlers -----------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    spec = _load_spec(args.path)
    turn = functools.partial(
        _run_turn,
        spec,
        args.prompt,
        db=_db_url(args),
        model=args.model,
        approvals=args.approvals,
        watch_sigint=_owns_sigint(),
    )
    # Ctrl-C outside the turn (while the runtime opens, say) then surfaces at a
    # checkpoint of the main task, where every cleanup below still runs.
    return trio.run(turn, restrict_keyboard_interrupt_to_checkpoints=True)


def _cmd_agents_add(args: argparse.Namespace) -> int:
    spec = _load_spec(args.path)
    agent = _with_runtime(_db_url(args), lambda rt: rt.create_agent(spec))
    print(format_agent(agent))
    return 0


def _cmd_agents_list(args: argparse.Namespace) -> int:
    agents = _with_runtime(_db_url(args), lambda rt: rt.list_agents())
    _print_lines(format_agents(agents))
    return 0


def _cmd_sessions_list(args: argparse.Namespace) -> int:
    page = _with_runtime(
        _db_url(args), lambda rt: rt.list_sessions(agent_name=args.agent, limit=args.limit)
    )
    _print_lines(format_sessions(page.data))
    if page.has_more:
        print(f"(more sessions: raise --limit above {args.limit})", file=sys.stderr)
    return 0


def _load_spec(path: str) -> AgentSpec:
    """The spec in ``path``.

    Raises:
        BadRequest: the file cannot be read. SpecError: it is not a valid spec.
    """
    try:
        return AgentSpec.load(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise BadRequest(f"cannot read agent spec {path!r}: {reason}") from exc
    except UnicodeDecodeError as exc:
        raise BadRequest(f"cannot read agent spec {path!r}: not UTF-8 text") from exc


def _with_runtime(db: str, action: Callable[[Runtime], Awaitable[T]]) -> T:
    """Open a runtime on ``db``, await ``action(runtime)``, close it; its result."""

    async def run() -> T:
        async with open_runtime(db=db) as rt:
            return await action(rt)

    return trio.run(run, restrict_keyboard_interrupt_to_checkpoints=True)


# -- one turn ---------------------------------------------------------------------------


async def _run_turn(
    spec: AgentSpec,
    prompt: str,
    *,
    db: str,
    model: str | None,
    approvals: ApprovalMode,
    watch_sigint: bool,
) -> int:
    """Register ``spec``, open a session and stream one turn answering ``prompt``.

    Returns the exit code (see :class:`~omnigent._cli_render.TurnRenderer`).
    Elicitations the stream shows are answered as ``approvals`` says (see
    :class:`_Approvals`).

    Cancellation: a first Ctrl-C interrupts the turn, which ends ``cancelled`` and is
    recorded so; a second stops waiting for it. Either way the runtime closes, and an
    open prompt is abandoned.
    """
    renderer = TurnRenderer()
    with trio.CancelScope() as give_up:
        async with open_runtime(db=db) as rt:
            agent = await rt.create_agent(spec)
            session = await rt.create_session(
                agent.id, title=one_line(prompt, _TITLE_LENGTH) or None, model_override=model
            )
            answering = _Approvals(rt, session.id, renderer, approvals, _stdin_lines)
            async with rt.open_turn_stream(session.id, prompt) as (_, events):
                log.info("session %s: turn started", session.id)
                async with trio.open_nursery() as nursery:
                    await nursery.start(_interrupt_on_sigint, rt, session.id, give_up, watch_sigint)
                    nursery.start_soon(answering.run)
                    async for event in events:
                        answering.feed(event)
                    nursery.cancel_scope.cancel()
    if give_up.cancelled_caught:
        renderer.note_interrupted()
    _write(renderer.finish())
    return renderer.exit_code


async def _interrupt_on_sigint(
    rt: Runtime,
    session_id: str,
    give_up: trio.CancelScope,
    watch: bool,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """While running, Ctrl-C interrupts the turn, and a second one cancels ``give_up``.

    Taking SIGINT as a message, instead of letting trio raise ``KeyboardInterrupt`` at
    an arbitrary point, lets the turn end through the runtime like any interrupt: its
    ``response.cancelled`` is published, persisted and rendered. With ``watch`` false
    it only reports started.
    """
    if not watch:
        task_status.started()
        return
    # The interrupt runs beside the receiver: a stop waits for the session's work to
    # end, and a second Ctrl-C must be heard meanwhile.
    async with trio.open_nursery() as interrupting:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            interrupted = False
            async for _ in signals:
                if interrupted:
                    give_up.cancel()
                    return
                interrupted = True
                interrupting.start_soon(_interrupt_turn, rt, session_id)


async def _interrupt_turn(rt: Runtime, session_id: str) -> None:
    log.info("session %s: interrupting the turn", session_id)
    # Before a turn has taken the message there is nothing to interrupt; a stop drops
    # the message instead, and the turn stream ends on the session's status.
    if not await rt.interrupt(session_id):
        await rt.stop_session(session_id)


class _Approvals:
    """Answers the elicitations of a turn's stream, one at a time, as ``mode`` says.

    :meth:`feed` takes every event of the stream: it renders it, queues an
    ``response.elicitation_request`` (the session's own, or a descendant's mirrored one),
    and abandons the open prompt when its ``response.elicitation_resolved`` arrives —
    answered elsewhere, or withdrawn because the turn was interrupted. :meth:`run`
    asks, then resolves under the owning session. While a prompt is open, the turn's
    other output is held back and written when it closes, so the two never mix.

    Cancellation: cancelling :meth:`run` abandons the open prompt (the read is
    cancellable; see :class:`_Lines`), ends its line and writes what was held.
    """

    def __init__(
        self,
        rt: Runtime,
        session_id: str,
        renderer: TurnRenderer,
        mode: ApprovalMode,
        open_lines: Callable[[], _Lines],
    ) -> None:
        self._rt = rt
        self._session_id = session_id
        self._renderer = renderer
        self._mode: ApprovalMode = mode
        self._open_lines = open_lines
        self._lines: _Lines | None = None  # opened at the first prompt
        # At most the runtime's pending elicitations of this session tree: small.
        self._queued: dict[str, ElicitationRequest] = {}
        self._queue_changed = trio.Event()
        self._asking: tuple[str, trio.CancelScope] | None = None
        self._held: list[Chunk] | None = None  # not None while a prompt is open
        self._mid_prompt = False
        self._ended_elsewhere = ""  # the note for a prompt abandoned by its resolution

    def feed(self, event: Event) -> None:
        if isinstance(event, ElicitationRequest):
            self._queued[event.elicitation_id] = event
            self._queue_changed.set()
        elif isinstance(event, ElicitationResolved):
            self._queued.pop(event.elicitation_id, None)
            if self._asking is not None and self._asking[0] == event.elicitation_id:
                self._asking[1].cancel()
                self._ended_elsewhere = withdrawn_note(event.action)
        self._output(self._renderer.feed(event))

    async def run(self) -> None:
        while True:
            if not self._queued:
                self._queue_changed = trio.Event()
                await self._queue_changed.wait()
                continue
            request = self._queued.pop(next(iter(self._queued)))
            reply = await self._reply(request)
            if reply is not None:
                await self._resolve(request, reply)

    async def _reply(self, request: ElicitationRequest) -> Reply | None:
        """How the person answers ``request``; ``None`` if it ended before they did."""
        if self._mode != "ask":
            reply, line = auto_reply(request, self._mode)
            self._output([*self._renderer.break_line(), Chunk("stderr", line)])
            return reply
        dialog = ElicitationDialog(request)
        with trio.CancelScope() as scope:
            self._asking = (request.elicitation_id, scope)
            self._held = []
            try:
                self._say(dialog.opening(), before=self._renderer.break_line())
                while (prompt := dialog.next_prompt()) is not None:
                    self._say(dialog.answer(await self._read_line(prompt)))
            finally:
                self._asking = None
                self._end_prompt()
        return None if scope.cancelled_caught else dialog.reply

    async def _read_line(self, prompt: str) -> str | None:
        if self._lines is None:
            self._lines = self._open_lines()
        self._say(prompt)
        line = await self._lines.readline()
        # A terminal echoes what is typed, Enter included (but not Ctrl-D); piped
        # answers are echoed here, so the transcript reads the same either way.
        if line is None or not self._lines.is_terminal:
            self._say(f"{line or ''}\n")
        self._mid_prompt = False
        return line

    async def _resolve(self, request: ElicitationRequest, reply: Reply) -> None:
        owner = elicitation_owner(request, self._session_id)
        try:
            resolved = await self._rt.resolve_elicitation(
                owner, request.elicitation_id, reply.action, reply.content
            )
        except SessionNotFound:  # the sub-session was deleted meanwhile
            resolved = False
        if not resolved:
            self._output([Chunk("stderr", withdrawn_note(None))])

    def _say(self, text: str, before: Iterable[Chunk] = ()) -> None:
        """Write prompt text on stderr now, even while other output is held."""
        if text:
            _write([*before, Chunk("stderr", text)])
            self._mid_prompt = not text.endswith("\n")

    def _output(self, chunks: Iterable[Chunk]) -> None:
        if self._held is None:
            _write(chunks)
        else:
            self._held.extend(chunks)

    def _end_prompt(self) -> None:
        if self._mid_prompt:  # abandoned while waiting for a line
            self._say("\n")
        note, self._ended_elsewhere = self._ended_elsewhere, ""
        held, self._held = self._held or [], None
        _write([Chunk("stderr", note), *held])


class _Lines:
    """Lines of stdin, read without blocking the event loop; ``None`` at end of input.

    A terminal, pipe or socket is waited on with :func:`trio.lowlevel.wait_readable`,
    which is cancellable, and then read once with ``os.read``: the descriptor is left in
    blocking mode (it is usually shared with stdout and stderr, and with the shell), and
    a read after readiness returns at once. A file or ``/dev/null`` never blocks and is
    read directly. Only where polling is refused (``OSError``) is the read done in a
    worker thread; a cancelled prompt then abandons that thread, which may consume one
    more line of input before the process exits.
    """

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        self._buffer = b""
        self._ended = fd is None
        self.is_terminal = fd is not None and os.isatty(fd)
        mode = os.fstat(fd).st_mode if fd is not None else 0
        self._pollable = self.is_terminal or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)

    async def readline(self) -> str | None:
        while b"\n" not in self._buffer and not self._ended:
            data = await self._read()
            self._ended = not data
            self._buffer += data
        if not self._buffer:
            await trio.lowlevel.checkpoint()
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace").removesuffix("\r")

    async def _read(self) -> bytes:
        assert self._fd is not None
        fd = self._fd
        if not self._pollable:
            await trio.lowlevel.checkpoint()
            return os.read(fd, 4096)
        while True:
            try:
                await trio.lowlevel.wait_readable(fd)
            except OSError:  # not pollable after all (kqueue and some devices)
                return await trio.to_thread.run_sync(os.read, fd, 4096, abandon_on_cancel=True)
            try:
                return os.read(fd, 4096)
            except BlockingIOError:  # someone made it non-blocking and the data went
                continue


def _stdin_lines() -> _Lines:
    """:class:`_Lines` of ``sys.stdin``; at once at end if there is none (closed, say)."""
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else None
        if fd is not None:
            os.fstat(fd)
    except (OSError, ValueError, io.UnsupportedOperation):
        fd = None
    return _Lines(fd)


def _owns_sigint() -> bool:
    """Whether Ctrl-C is ours to handle: Python's default handler has it.

    Not off the main thread, where signals never arrive, nor when the process was
    started with SIGINT ignored or someone embedding us installed their own handler.
    Asked before ``trio.run``, which puts its own handler in place of the default.
    """
    on_main_thread = threading.current_thread() is threading.main_thread()
    return on_main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- output -----------------------------------------------------------------------------


def _write(chunks: Iterable[Chunk]) -> None:
    for chunk in chunks:
        stream = sys.stdout if chunk.stream == "stdout" else sys.stderr
        stream.write(chunk.text)
        stream.flush()


def _print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


@contextmanager
def _logging_to_stderr(verbosity: int) -> Iterator[None]:
    """Log to stderr only (stdout carries the answer): WARNING, ``-v`` INFO, ``-vv`` DEBUG.

    The root logger is restored on exit, so calling :func:`main` in-process (as the
    tests do) leaves logging as it found it.
    """
    level = (logging.WARNING, logging.INFO)[verbosity] if verbosity < 2 else logging.DEBUG
    root = logging.getLogger()
    handler = _StderrHandler(level)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    previous = root.level
    root.addHandler(handler)
    root.setLevel(min(level, previous or level))
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
