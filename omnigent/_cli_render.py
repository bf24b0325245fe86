"""What the command line prints: events, agents and sessions as text.

Pure functions and one small state machine, with no I/O, so each rendering rule is
tested on its own. :mod:`omnigent.cli` writes what these return.

A turn renders to two streams: the assistant's text goes to ``stdout`` (so it can be
piped), and everything about the turn — tool calls, their outputs, approvals, the
closing error — goes to ``stderr``.

An approval is a small conversation, :class:`ElicitationDialog`: what to show, which
prompt to print, and what each line typed means. The terminal reading is in
:mod:`omnigent.cli`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import attrs

from .core.records import Agent, SessionSnapshot
from .errors import InvalidInput, OmnigentError
from .model import (
    TERMINAL_STATUSES,
    ElicitationRequest,
    Event,
    FunctionCallItem,
    FunctionCallOutputItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseCancelled,
    ResponseCompleted,
    ResponseFailed,
    SessionStatus,
)

__all__ = [
    "APPROVE_PROMPT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
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
    "format_sessions",
    "iso_time",
    "one_line",
    "parse_approval",
    "questions_of",
    "withdrawn_note",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""The turn failed, or omnigent could not do what was asked for a reason not the user's."""
EXIT_USAGE = 2
"""The user asked for something impossible: a bad spec, a missing file, a bad option."""
EXIT_INTERRUPTED = 130
"""The turn was cancelled (128 + SIGINT, as shells report a Ctrl-C)."""

TOOL_TEXT_LIMIT = 200

Stream = Literal["stdout", "stderr"]


@attrs.frozen
class Chunk:
    """Text to write to one of the two output streams."""

    stream: Stream
    text: str


def one_line(text: str, limit: int = TOOL_TEXT_LIMIT) -> str:
    """``text`` with its whitespace runs collapsed to single spaces, cut at ``limit``.

    A tool's arguments or output can be a page of JSON; the terminal gets a glimpse.
    """
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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

    @property
    def exit_code(self) -> int:
        """0 completed, 1 failed (or no ending seen), 130 cancelled."""
        return EXIT_FAILED if self._exit_code is None else self._exit_code

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
            chunks.append(Chunk("stderr", "Interrupted.\n"))
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
            isinstance(event, SessionStatus)
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


# -- approvals --------------------------------------------------------------------------

ApprovalMode = Literal["ask", "yes", "no-input"]
"""How ``run`` answers elicitations: ask on the terminal, accept all, or decline all."""
Action = Literal["accept", "decline", "cancel"]

APPROVE_PROMPT = "Approve? [y/N] "


@attrs.frozen
class Reply:
    """An answer to an elicitation: ``action``, and for ``accept`` optional ``content``."""

    action: Action
    content: Any = None


@attrs.frozen
class Question:
    """One question of an ``ask_user_question`` elicitation (Claude Code's shape)."""

    text: str
    header: str = ""
    options: tuple[tuple[str, str], ...] = ()  # (label, description)
    multi: bool = False


def elicitation_owner(request: ElicitationRequest, session_id: str) -> str:
    """The session that resolves ``request``: a descendant's id on a mirrored request."""
    return request.params.target_session_id or session_id


def questions_of(ask_user_question: Mapping[str, Any] | None) -> list[Question]:
    """The questions of ``params.ask_user_question`` (wire data: malformed ones are skipped)."""
    raw = (ask_user_question or {}).get("questions")
    questions = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("question"), str):
            continue
        options = []
        for option in entry.get("options") or []:
            if isinstance(option, Mapping) and isinstance(option.get("label"), str):
                options.append((option["label"], str(option.get("description") or "")))
            elif isinstance(option, str):
                options.append((option, ""))
        header = entry.get("header")
        questions.append(
            Question(
                entry["question"],
                header if isinstance(header, str) else "",
                tuple(options),
                entry.get("multiSelect") is True,
            )
        )
    return questions


def _tool_call(request: ElicitationRequest) -> str | None:
    params = request.params
    # A question's tool input is the questions, listed in full by the dialog.
    if params.tool_name is None or params.ask_user_question:
        return None
    arguments = json.dumps(params.tool_input or {}, ensure_ascii=False, default=str)
    return f"{params.tool_name}({one_line(arguments)})"


def describe_request(request: ElicitationRequest) -> str:
    """What is shown before the prompt: the message, then tool, policy and owner lines."""
    params = request.params
    lines = [f"? {one_line(params.message, 1000)}"]
    if (call := _tool_call(request)) is not None:
        lines.append(f"  tool:    {call}")
    if params.policy_name:
        lines.append(f"  policy:  {params.policy_name}")
    if params.target_session_id:
        lines.append(f"  session: {params.target_session_id} (a sub-session)")
    return "\n".join(lines) + "\n"


def parse_approval(line: str | None) -> Action | None:
    """y/yes accept; n/no/empty decline; ``None`` (end of input) cancel; else ``None``."""
    if line is None:
        return "cancel"
    answer = line.strip().lower()
    if answer in ("y", "yes"):
        return "accept"
    if answer in ("", "n", "no"):
        return "decline"
    return None


def auto_reply(request: ElicitationRequest, mode: ApprovalMode) -> tuple[Reply, str]:
    """The reply ``--yes`` or ``--no-input`` gives, and the line that says so.

    ``--yes`` approves; it does not make up answers to questions, which are declined.
    """
    what = _tool_call(request) or one_line(request.params.message)
    if mode == "yes" and not request.params.ask_user_question:
        return Reply("accept"), f"✓ approved (--yes): {what}\n"
    flag = "--yes" if mode == "yes" else "--no-input"
    return Reply("decline"), f"✗ declined ({flag}): {what}\n"


def withdrawn_note(action: str | None) -> str:
    """Shown when an elicitation ended without this terminal's answer.

    ``action`` is the resolved event's (``expired``: withdrawn, as when the turn is
    interrupted), or ``None`` when the answer given here came too late.
    """
    if action in ("accept", "decline", "cancel"):
        return f"(answered elsewhere: {action})\n"
    if action == "expired":
        return "(withdrawn)\n"
    return "(already answered or withdrawn)\n"


class ElicitationDialog:
    """Answering one elicitation on a terminal, as a state machine without I/O.

    Show :meth:`opening`; then while :meth:`next_prompt` returns text, print it, read a
    line and pass it to :meth:`answer` (``None`` at end of input), printing the note it
    returns. :attr:`reply` is then set. An approval asks ``Approve? [y/N]``; an
    ``ask_user_question`` asks each question in turn: a number (several,
    comma-separated, where more than one may be chosen) picks options, other text is
    the person's own answer. Empty declines, end of input cancels.
    """

    def __init__(self, request: ElicitationRequest) -> None:
        self.request = request
        self.reply: Reply | None = None
        self._questions = questions_of(request.params.ask_user_question)
        self._answers: dict[str, str] = {}
        self._shown = False

    def opening(self) -> str:
        return describe_request(self.request)

    def next_prompt(self) -> str | None:
        """The text to print before reading the next line, or ``None`` when done."""
        if self.reply is not None:
            return None
        if not self._questions:
            return APPROVE_PROMPT
        question = self._questions[len(self._answers)]
        shown, self._shown = self._shown, True
        return _choice_prompt(question) if shown else _show_question(question)

    def answer(self, line: str | None) -> str:
        """Take one line (``None``: end of input); returns a note to print, maybe empty."""
        if line is None:
            self.reply = Reply("cancel")
            return "(end of input: cancelled)\n"
        if not self._questions:
            action = parse_approval(line)
            if action is None:
                return "Please answer y or n.\n"
            self.reply = Reply(action)
            return ""
        if not line.strip():
            self.reply = Reply("decline")
            return ""
        question = self._questions[len(self._answers)]
        chosen = _choose(question, line.strip())
        if chosen is None:
            return f"Please choose {_choice_range(question)}, or type your own answer.\n"
        self._answers[question.text] = chosen
        self._shown = False
        if len(self._answers) == len(self._questions):
            self.reply = Reply("accept", dict(self._answers))
        return ""


def _choice_range(question: Question) -> str:
    many = "one or more of " if question.multi else ""
    return f"{many}1-{len(question.options)}"


def _choice_prompt(question: Question) -> str:
    if not question.options:
        return "Answer: "
    return f"Choose {_choice_range(question)}: "


def _show_question(question: Question) -> str:
    header = f"[{question.header}] " if question.header else ""
    lines = [f"  {header}{question.text}"]
    for number, (label, description) in enumerate(question.options, 1):
        lines.append(f"    {number}. {label}" + (f" — {description}" if description else ""))
    return "\n".join(lines) + "\n" + _choice_prompt(question)


def _choose(question: Question, text: str) -> str | None:
    """The answer ``text`` gives: option labels (``", "``-joined), or the text itself.

    ``None`` if it looks like numbers but does not pick options validly.
    """
    parts = [part.strip() for part in text.split(",")]
    if not question.options or not all(part.isdigit() for part in parts):
        return text
    numbers = [int(part) for part in parts]
    if (len(numbers) > 1 and not question.multi) or not all(
        1 <= n <= len(question.options) for n in numbers
    ):
        return None
    labels = dict.fromkeys(question.options[n - 1][0] for n in numbers)
    return ", ".join(labels)


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


def format_error(exc: BaseException) -> list[str]:
    """``Error: <message>``, then ``  <loc>: <msg>`` for each field of a validation error."""
    message = exc.message if isinstance(exc, OmnigentError) else str(exc)
    lines = [f"Error: {message}"]
    if isinstance(exc, InvalidInput):
        lines.extend(f"  {d.loc or '$'}: {d.msg}" for d in exc.details)
    return lines
