"""What an approval looks like on the terminal, and what the lines typed at it mean.

Pure functions and one small state machine, :class:`ElicitationDialog`, with no I/O,
so each rule of the conversation is tested on its own: what is shown before the
prompt, which prompt to print, how ``y``/``n``, option numbers or free text are read,
what ``--yes`` and ``--no-input`` answer without asking, and the note shown when an
elicitation ends without this terminal's answer. Reading the lines and resolving the
elicitation is :mod:`omnigent.cli._prompt`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ..model import ElicitationRequest
from ._output import one_line

__all__ = [
    "APPROVE_PROMPT",
    "Action",
    "ApprovalMode",
    "ElicitationDialog",
    "Question",
    "Reply",
    "auto_reply",
    "describe_request",
    "elicitation_owner",
    "parse_approval",
    "questions_of",
    "withdrawn_note",
]

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
