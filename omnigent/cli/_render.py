"""What the command line prints: a turn's events, agents, sessions and errors, as text.

Pure functions and one small state machine, with no I/O, so each rendering rule is
tested on its own. The command line and the turn write what these return (see
:func:`omnigent.cli._output.write`).

A turn renders to two streams: the assistant's text goes to ``stdout`` (so it can be
piped), and everything about the turn — tool calls, their outputs, approvals, the
closing error — goes to ``stderr``.

An approval is a small conversation of its own, rendered in
:mod:`omnigent.cli._approval_render`; its names, and the :class:`Chunk` and
:func:`one_line` of :mod:`omnigent.cli._output`, are re-exported here so that this
module stays the one import for everything the command line prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from ..core import Agent, SessionSnapshot
from ..errors import InvalidInput, OmnigentError
from ..model import (
    TERMINAL_STATUSES,
    Event,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputText,
    Item,
    MessageItem,
    OutputItemDone,
    OutputText,
    OutputTextDelta,
    ResponseCancelled,
    ResponseCompleted,
    ResponseFailed,
    SessionStatusChanged,
)
from ._approval_render import (
    APPROVE_PROMPT,
    ApprovalMode,
    ElicitationDialog,
    Question,
    Reply,
    auto_reply,
    describe_request,
    elicitation_owner,
    parse_approval,
    questions_of,
    withdrawn_note,
)
from ._output import Chunk, one_line

__all__ = [
    "APPROVE_PROMPT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "ApprovalMode",
    "Chunk",
    "ElicitationDialog",
    "Question",
    "Reply",
    "TurnRenderer",
    "auto_reply",
    "describe_request",
    "elicitation_owner",
    "format_agent",
    "format_agents",
    "format_error",
    "format_session",
    "format_sessions",
    "iso_time",
    "one_line",
    "parse_approval",
    "questions_of",
    "session_note",
    "withdrawn_note",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""The turn failed, or omnigent could not do what was asked for a reason not the user's."""
EXIT_USAGE = 2
"""The user asked for something impossible: a bad spec, a missing file, a bad option."""
EXIT_INTERRUPTED = 130
"""The turn was cancelled (128 + SIGINT, as shells report a Ctrl-C)."""
EXIT_TERMINATED = 143
"""The turn was cancelled by SIGTERM (128 + SIGTERM, as shells report it)."""


class TurnRenderer:
    """Turns the events of one turn into :class:`Chunk` s and an exit code.

    Feed it every event of the turn stream in order, then call :meth:`finish` once.
    Assistant text is written as it streams; a tool line, a new message or the end of
    the turn first closes an unfinished line of text, so the two streams interleave
    cleanly on a terminal.
    """

    def __init__(self) -> None:
        self._mid_line = False
        self._text_item: str | None = None
        self._exit_code: int | None = None
        self._error: str | None = None
        self._terminated = False

    @property
    def exit_code(self) -> int:
        """0 completed, 1 failed (or no ending seen), 130 cancelled (143 by SIGTERM)."""
        if self._exit_code is None:
            return EXIT_FAILED
        if self._exit_code == EXIT_INTERRUPTED and self._terminated:
            return EXIT_TERMINATED
        return self._exit_code

    def note_terminated(self) -> None:
        """SIGTERM asked the turn to stop: a cancelled turn says so and exits 143."""
        self._terminated = True

    def feed(self, event: Event) -> list[Chunk]:
        """The chunks one event prints (often none); records how the turn ends."""
        if isinstance(event, OutputTextDelta):
            return self._text(event)
        if isinstance(event, OutputItemDone):
            return self._item_done(event)
        self._note_ending(event)
        return []

    def note_interrupted(self) -> None:
        """The caller stopped reading before the turn ended: it counts as cancelled."""
        if self._exit_code is None:
            self._exit_code = EXIT_INTERRUPTED

    def finish(self) -> list[Chunk]:
        """Close the last line of text, and say why the turn did not complete."""
        chunks = self._end_line()
        if self._exit_code is None:
            self._error = "the turn ended without a result"
        if self._error is not None:
            chunks.append(Chunk("stderr", f"Error: {self._error}\n"))
        elif self._exit_code == EXIT_INTERRUPTED:
            chunks.append(
                Chunk("stderr", "Terminated.\n" if self._terminated else "Interrupted.\n")
            )
        return chunks

    def break_line(self) -> list[Chunk]:
        """Close an unfinished line of text before something else is printed (a prompt)."""
        return self._end_line()

    def _text(self, event: OutputTextDelta) -> list[Chunk]:
        # Two assistant messages in one turn would otherwise run into each other.
        chunks = self._end_line() if event.item_id != self._text_item else []
        self._text_item = event.item_id
        if event.delta:
            chunks.append(Chunk("stdout", event.delta))
            self._mid_line = not event.delta.endswith("\n")
        return chunks

    def _item_done(self, event: OutputItemDone) -> list[Chunk]:
        item = event.item
        if isinstance(item, FunctionCallItem) and item.status == "action_required":
            line = f"→ {item.name}({one_line(item.arguments)})\n"
        elif isinstance(item, FunctionCallOutputItem):
            line = f"← {one_line(item.output)}\n"
        else:
            return []
        chunks = self._end_line()
        chunks.append(Chunk("stderr", line))
        return chunks

    def _note_ending(self, event: Event) -> None:
        if isinstance(event, ResponseCompleted):
            self._exit_code, self._error = EXIT_OK, None
        elif isinstance(event, ResponseFailed):
            self._exit_code, self._error = EXIT_FAILED, event.error.message
        elif isinstance(event, ResponseCancelled):
            self._exit_code, self._error = EXIT_INTERRUPTED, None
        elif (
            isinstance(event, SessionStatusChanged)
            and event.status in TERMINAL_STATUSES
            and self._exit_code is None
        ):
            # The stream ends on a session status only when a stop dropped the
            # message before any turn took it: the prompt was never answered.
            if event.status == "failed" and event.error is not None:
                self._exit_code, self._error = EXIT_FAILED, event.error.message
            else:
                self._exit_code = EXIT_INTERRUPTED

    def _end_line(self) -> list[Chunk]:
        self._text_item = None
        if not self._mid_line:
            return []
        self._mid_line = False
        return [Chunk("stdout", "\n")]


# -- listings ---------------------------------------------------------------------------


def iso_time(timestamp: float) -> str:
    """A store timestamp (seconds since the epoch) as ISO 8601 UTC, to the second."""
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as lines with columns padded to line up (the last column is not padded)."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]


def format_agent(agent: Agent) -> str:
    """``<id> <name> v<version>``: what ``agents add`` prints."""
    return f"{agent.id} {agent.name} v{agent.version}"


def format_agents(agents: Iterable[Agent]) -> list[str]:
    """One line per agent: id, name, version, harness, model (``-`` if none)."""
    rows = [(a.id, a.name, f"v{a.version}", a.harness, a.model or "-") for a in agents]
    return _table(rows) or ["no agents"]


def format_sessions(sessions: Iterable[SessionSnapshot]) -> list[str]:
    """One line per session: id, agent name, status, title (``-`` if none), created."""
    rows = [
        (
            s.id,
            s.agent_name,
            s.status,
            one_line(s.title, 40) if s.title else "-",
            iso_time(s.created_at),
        )
        for s in sessions
    ]
    return _table(rows) or ["no sessions"]


def session_note(session_id: str) -> str:
    """What ``run`` prints on stderr once a turn ends: the session, and how to go on."""
    return f"session {session_id} (continue it with --session {session_id})\n"


def format_session(session: SessionSnapshot, items: Iterable[Item]) -> list[str]:
    """``sessions show``: the session's line, then one line per item of its history.

    Messages are ``role: text`` (an image is ``[image]``; text is shown in full), tool
    calls ``→ name(arguments)``, their outputs ``← output`` (one line each, cut).
    """
    lines = format_sessions([session])
    for item in items:
        if isinstance(item, MessageItem):
            text = "".join(_block_text(block) for block in item.content)
            lines.append(f"{item.role}: {text}")
        elif isinstance(item, FunctionCallItem):
            lines.append(f"→ {item.name}({one_line(item.arguments)})")
        elif isinstance(item, FunctionCallOutputItem):
            lines.append(f"← {one_line(item.output)}")
    if len(lines) == 1:
        lines.append("(no items)")
    return lines


def _block_text(block: object) -> str:
    if isinstance(block, InputText | OutputText):
        return block.text
    return "[image]"


def format_error(exc: BaseException) -> list[str]:
    """``Error: <message>``, then ``  <loc>: <msg>`` for each field of a validation error."""
    message = exc.message if isinstance(exc, OmnigentError) else str(exc)
    lines = [f"Error: {message}"]
    if isinstance(exc, InvalidInput):
        lines.extend(f"  {d.loc or '$'}: {d.msg}" for d in exc.details)
    return lines
