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

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from ..model import (
    TERMINAL_STATUSES,
    ChildSessionSummary,
    ChildSessionUpdated,
    ElicitationRequest,
    ElicitationResolved,
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
    ResponseCreated,
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
from ._report import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    format_error,
)

__all__ = [
    "APPROVE_PROMPT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "ApprovalMode",
    "ChildProgress",
    "Chunk",
    "ElicitationDialog",
    "Failure",
    "Question",
    "Reply",
    "TailRenderer",
    "TurnRenderer",
    "auto_reply",
    "child_line",
    "describe_request",
    "elicitation_owner",
    "failed_turns",
    "format_agent",
    "format_agents",
    "format_error",
    "format_session",
    "format_session_tree",
    "format_sessions",
    "iso_time",
    "one_line",
    "parse_approval",
    "questions_of",
    "session_note",
    "withdrawn_note",
]


class TurnRenderer:
    """Turns the events of one turn into :class:`Chunk` s and an exit code.

    Feed it every event of the turn stream in order, then call :meth:`finish` once.
    Assistant text is written as it streams; a tool line, a new message or the end of
    the turn first closes an unfinished line of text, so the two streams interleave
    cleanly on a terminal.
    """

    def __init__(self, *, live: bool = False) -> None:
        self._mid_line = False
        self._text_item: str | None = None
        self._exit_code: int | None = None
        self._error: str | None = None
        self._terminated = False
        # The session's children, one line each (in place on a terminal: ``live``).
        self._children = ChildProgress(live=live)

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

    def note_stopped(self) -> None:
        """The session was stopped while no turn ran (its children were at work): the
        command ends as an interrupt, whatever the last turn said."""
        self._exit_code, self._error = EXIT_INTERRUPTED, None

    def feed(self, event: Event) -> list[Chunk]:
        """The chunks one event prints (often none); records how the turn ends."""
        if isinstance(event, OutputTextDelta):
            return self._text(event)
        if isinstance(event, OutputItemDone):
            return self._item_done(event)
        if isinstance(event, ChildSessionUpdated):
            lines = self._children.update(event.child)
            return [*self._end_line(), *lines] if lines else []
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
        self._children.leave()
        return self._end_line()

    def _text(self, event: OutputTextDelta) -> list[Chunk]:
        # Two assistant messages in one turn would otherwise run into each other.
        chunks = self._end_line() if event.item_id != self._text_item else []
        self._children.leave()
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
        self._children.leave()
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


class ChildProgress:
    """A session's children, one line each, as they work (``run`` of an orchestrator).

    On a terminal (``live``) the lines are a block redrawn in place at each change, as
    long as nothing else was printed below it (:meth:`leave` says something was: the
    next change draws the block afresh below). Elsewhere (a pipe, a log) a line is
    printed when a child's state changes, so the record reads top to bottom.
    """

    def __init__(self, *, live: bool) -> None:
        self._live = live
        self._lines: dict[str, str] = {}
        self._states: dict[str, str] = {}
        self._drawn = 0  # lines of the block still on screen, right above the cursor

    def update(self, child: ChildSessionSummary) -> list[Chunk]:
        line = f"  {child_line(child)}"
        state = child.current_task_status or "starting"
        if self._lines.get(child.id) == line:
            return []
        self._lines[child.id] = line
        if self._live:
            return [Chunk("stderr", self._redraw())]
        if self._states.get(child.id) == state:
            return []
        self._states[child.id] = state
        return [Chunk("stderr", line + "\n")]

    def leave(self) -> None:
        """Something was printed below the block: it can no longer be redrawn."""
        self._drawn = 0

    def _redraw(self) -> str:
        # Up to the block's first line (ANSI CPL), then each line cleared (EL) and written.
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        self._drawn = len(self._lines)
        return up + "".join(f"\x1b[2K{line}\n" for line in self._lines.values())


class TailRenderer:
    """A session's events as ``sessions tail`` prints them, for as long as they come.

    The assistant's text goes to stdout as it streams and tool calls to stderr, as
    :class:`TurnRenderer` does for one turn; around them, on stderr: each status change
    (``· running``, ``· idle``, ``· failed (code): message``), a question the session asks
    with the command that answers it, and each child's progress.
    """

    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self._turn = TurnRenderer()

    def feed(self, event: Event) -> list[Chunk]:
        if isinstance(event, OutputTextDelta | OutputItemDone):
            return self._turn.feed(event)
        line = self._line(event)
        if line is None:
            return []
        return [*self._turn.break_line(), Chunk("stderr", line + "\n")]

    def finish(self) -> list[Chunk]:
        return self._turn.break_line()

    def _line(self, event: Event) -> str | None:
        if isinstance(event, SessionStatusChanged):
            if event.error is not None:
                return f"· {event.status} ({event.error.code}): {event.error.message}"
            return f"· {event.status}"
        if isinstance(event, ElicitationRequest):
            owner = event.params.target_session_id or self._session_id
            return (
                f"? {event.params.message}  "
                f"(omnigent approve {owner} {event.elicitation_id}, or deny)"
            )
        if isinstance(event, ElicitationResolved):
            return f"· {event.elicitation_id} {event.action or 'answered'}"
        if isinstance(event, ChildSessionUpdated):
            return f"· {child_line(event.child)}"
        return None


def child_line(child: ChildSessionSummary) -> str:
    """A child session in one line: ``counter:apples  idle  There are 3.``."""
    name = child.title or child.id
    preview = f"  {one_line(child.preview, 60)}" if child.preview else ""
    return f"{name}  {child.current_task_status or 'starting'}{preview}"


# -- listings ---------------------------------------------------------------------------
#
# Agents and sessions are rendered from their wire dicts (what GET /v1/… answers), so
# the same lines come out whether a store or a server was read (see _records).


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


def format_agent(agent: Mapping[str, Any]) -> str:
    """``<id> <name> v<version>``: what ``agents add`` prints."""
    return f"{agent['id']} {agent['name']} v{agent['version']}"


def format_agents(agents: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per agent: id, name, version, harness, model (``-`` if none)."""
    rows = [
        (a["id"], a["name"], f"v{a['version']}", a["harness"], a.get("model") or "-")
        for a in agents
    ]
    return _table(rows) or ["no agents"]


def _session_row(session: Mapping[str, Any], indent: str = "") -> tuple[str, ...]:
    title = session.get("title")
    return (
        indent + session["id"],
        session["agent_name"],
        session["status"],
        one_line(title, 40) if title else "-",
        iso_time(session["created_at"]),
    )


def format_sessions(sessions: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per session: id, agent name, status, title (``-`` if none), created."""
    return _table([_session_row(s) for s in sessions]) or ["no sessions"]


def format_session_tree(tree: Iterable[tuple[int, Mapping[str, Any]]]) -> list[str]:
    """``sessions list --tree``: ``(depth, session)`` rows, children indented under
    their parents (``└ `` marks a child)."""
    rows = [_session_row(s, "   " * (depth - 1) + "└ " if depth else "") for depth, s in tree]
    return _table(rows) or ["no sessions"]


def session_note(session_id: str) -> str:
    """What ``run`` prints on stderr once a turn ends: the session, and how to go on."""
    return f"session {session_id} (continue it with --session {session_id})\n"


@attrs.frozen
class Failure:
    """A turn that failed, and where its line goes in the history: after the item
    ``after_item`` (``None``: before every item), then past ``after_users`` user
    messages (when the turn wrote no item: its own message, and those of the turns
    since ``after_item`` that wrote none either)."""

    event_id: int
    code: str
    message: str
    after_item: str | None
    after_users: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "error": {"code": self.code, "message": self.message},
            "after_item": self.after_item,
        }


def failed_turns(events: Iterable[Event]) -> list[Failure]:
    """The failed turns of a session's event log, each placed in its history.

    A turn's items appear in its events (``response.output_item.done``), so a failure
    goes after the last item its turn wrote. A turn that wrote none failed right after
    the user message that started it: past one user message for it, and one for each
    turn before it that wrote nothing since the last item.
    """
    failures: list[Failure] = []
    last_item: str | None = None
    silent = 0  # turns since last_item that wrote no item
    wrote = False
    for event in events:
        if isinstance(event, ResponseCreated):
            wrote = False
            silent += 1
        elif isinstance(event, OutputItemDone):
            last_item, wrote, silent = event.item.id, True, 0
        elif isinstance(event, ResponseFailed):
            skip = 0 if wrote else silent
            failures.append(
                Failure(event.event_id, event.error.code, event.error.message, last_item, skip)
            )
    return failures


def format_session(
    session: Mapping[str, Any], items: Sequence[Item], failures: Sequence[Failure] = ()
) -> list[str]:
    """``sessions show``: the session's line, then one line per item of its history.

    Messages are ``role: text`` (an image is ``[image]``; text is shown in full), tool
    calls ``→ name(arguments)``, their outputs ``← output`` (one line each, cut), and a
    failed turn ``✗ turn failed (code): message`` where it failed (:func:`failed_turns`);
    then each request the session waits on, with the command that answers it. What
    its model calls used (:func:`format_usage`) follows the session's line.
    """
    lines = format_sessions([session])
    if session.get("parent_session_id"):
        lines.append(f"(a sub-session of {session['parent_session_id']})")
    lines.extend(format_usage(session))
    at = _failure_positions(items, failures)
    for index, item in enumerate(items):
        lines.extend(_failure_line(f) for f in at.get(index, ()))
        line = _item_line(item)
        if line is not None:
            lines.append(line)
    lines.extend(_failure_line(f) for f in at.get(len(items), ()))
    if not items and not failures:
        lines.append("(no items)")
    for request in session.get("pending_elicitations") or ():
        params = request.get("params") or {}
        owner = params.get("target_session_id") or session["id"]
        lines.append(
            f"? {params.get('message', '')}  "
            f"(omnigent approve {owner} {request['elicitation_id']}, or deny)"
        )
    return lines


def format_usage(session: Mapping[str, Any]) -> list[str]:
    """The snapshot's ``usage`` as a line, and ``tree_usage`` when sub-sessions added to
    it; nothing when no model call reported usage (a scripted agent, an old server)."""
    own, tree = session.get("usage") or {}, session.get("tree_usage") or {}
    lines = []
    if own.get("model_calls"):
        lines.append(f"usage: {_usage_text(own)}")
    if tree.get("model_calls", 0) > own.get("model_calls", 0):
        lines.append(f"usage with sub-sessions: {_usage_text(tree)}")
    return lines


def _usage_text(usage: Mapping[str, Any]) -> str:
    calls = usage.get("model_calls", 0)
    text = (
        f"{usage.get('input_tokens', 0):,} tokens in"
        f" ({usage.get('cached_input_tokens', 0):,} cached),"
        f" {usage.get('output_tokens', 0):,} out,"
        f" {calls} model call{'s' if calls != 1 else ''}"
    )
    cost = usage.get("cost_usd")
    return f"{text}, ${cost:.6f}" if isinstance(cost, int | float) else text


def _item_line(item: Item) -> str | None:
    if isinstance(item, MessageItem):
        text = "".join(_block_text(block) for block in item.content)
        return f"{item.role}: {text}"
    if isinstance(item, FunctionCallItem):
        return f"→ {item.name}({one_line(item.arguments)})"
    if isinstance(item, FunctionCallOutputItem):
        return f"← {one_line(item.output)}"
    return None


def _failure_line(failure: Failure) -> str:
    return f"✗ turn failed ({failure.code}): {failure.message}"


def _failure_positions(
    items: Sequence[Item], failures: Sequence[Failure]
) -> dict[int, list[Failure]]:
    """Failures by the index of the item they go before (``len(items)``: at the end)."""
    index_of = {item.id: index for index, item in enumerate(items)}
    placed: dict[int, list[Failure]] = {}
    for failure in failures:
        if failure.after_item is None:
            position = 0
        else:
            position = index_of.get(failure.after_item, len(items) - 1) + 1
        for _ in range(failure.after_users):
            while position < len(items) and not _is_user_message(items[position]):
                position += 1
            position = min(position + 1, len(items))
        placed.setdefault(position, []).append(failure)
    return placed


def _is_user_message(item: Item) -> bool:
    return isinstance(item, MessageItem) and item.role == "user"


def _block_text(block: object) -> str:
    if isinstance(block, InputText | OutputText):
        return block.text
    return "[image]"
