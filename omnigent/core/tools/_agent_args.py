"""Argument handling for the orchestration tools (``sys_session_*``, ``sys_agent_*``).

Pure: no I/O, no Trio. Every check here runs before anything is created or sent, so a
call the model got wrong changes nothing; the error names the problem and the way out.

The orchestration tools refuse as the original omnigent does, with a JSON object
(:func:`refusal`): a failure about a session, agent, spec file or task the call names is
``{"error": "<code>", "<what it named>": …}`` (:class:`TypedError`: ``session_not_found``,
``session_out_of_tree``, ``access_denied``, …), any other ``{"error": "<text>"}`` — so a
model, a policy or a program switches on ``error`` after ``json.loads``.

Also here: the naming rules of sub-agent sessions. A named child is titled
``<agent>:<title>``; closing one labels it ``omnigent.closed=true`` and suffixes its
title with ``:closed:<id>`` so the ``(agent, title)`` pair can be used again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from ...providers import check_model_id
from ...tools import ArgField, ToolError, check_args, non_empty_string, string

__all__ = [
    "CLOSED_LABEL",
    "CLOSED_MARK",
    "HISTORY_DEFAULT_TAIL",
    "HISTORY_MAX_TAIL",
    "LEVELS",
    "CreateArgs",
    "Refusal",
    "SendArgs",
    "TypedError",
    "closed_title",
    "is_closed",
    "parse_cancel",
    "parse_create",
    "parse_history",
    "parse_level",
    "parse_send",
    "refusal",
    "split_title",
    "visible_title",
]

CLOSED_LABEL = "omnigent.closed"
CLOSED_MARK = ":closed:"
HISTORY_DEFAULT_TAIL = 10
HISTORY_MAX_TAIL = 50
MAX_MESSAGE_CHARS = 200_000
MAX_TITLE_CHARS = 200
LEVELS = {"read": 1, "edit": 2, "manage": 3}


class Refusal(ToolError):
    """A refusal answered with exactly this JSON object (its ``error`` a code or a
    sentence), as the original omnigent answers it."""

    def __init__(self, answer: Mapping[str, Any]) -> None:
        super().__init__(str(answer["error"]))
        self.answer = dict(answer)


class TypedError(Refusal):
    """A refusal with the original omnigent's code, about the thing a call named.

    Rendered (:func:`refusal`) as ``{"error": code, <key>: <value>, "message"?: …}``:
    ``about`` is the one field naming what the call asked for (``conversation_id``,
    ``session_id``, ``agent_id``, ``config_path``, ``task_id``), in the original's
    spelling; ``message`` is said only where the original says one (``None``: the
    code is the whole answer).

    Args:
        code: ``session_not_found``, ``session_out_of_tree``, ``access_denied``, …
        about: ``(key, value)`` of what the call named.
        message: what to do instead, or ``None``.
        extra: more fields, after ``message`` (``{"hint": …}``).
    """

    def __init__(
        self,
        code: str,
        about: tuple[str, str],
        message: str | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        answer: dict[str, Any] = {"error": code, about[0]: about[1]}
        if message is not None:
            answer["message"] = message
        super().__init__({**answer, **(extra or {})})
        self.code = code
        self.message = f"{code}: {message or about[1]}"


def refusal(exc: ToolError) -> str:
    """An orchestration tool's refusal, as the original's JSON object.

    A :class:`Refusal` (a :class:`TypedError` included) is its own object; any other
    failure is ``{"error": "<what is wrong and how to call it instead>"}``.
    """
    if isinstance(exc, Refusal):
        return json.dumps(exc.answer)
    return json.dumps({"error": exc.message})


# -- session names ----------------------------------------------------------------------


def split_title(title: str | None) -> tuple[str | None, str | None]:
    """``(agent, title)`` of a named child's stored title (``agent:title``)."""
    visible = visible_title(title)
    if not visible or ":" not in visible:
        return None, visible
    agent, _, name = visible.partition(":")
    return agent, name


def visible_title(title: str | None) -> str | None:
    """The title without its closed marker (``a:b:closed:conv_1`` → ``a:b``)."""
    if title is None:
        return None
    visible, mark, _ = title.partition(CLOSED_MARK)
    return visible if mark else title


def closed_title(title: str | None, session_id: str) -> str:
    """The title a closed session gets, freeing its ``(agent, title)`` pair."""
    return f"{visible_title(title) or ''}{CLOSED_MARK}{session_id}"


def is_closed(labels: Mapping[str, str], title: str | None) -> bool:
    return labels.get(CLOSED_LABEL) == "true" or (title is not None and CLOSED_MARK in title)


# -- sys_session_send ---------------------------------------------------------------------


@attrs.frozen
class SendArgs:
    """A checked ``sys_session_send`` call: exactly one of the two addressing modes."""

    message: str
    model: str | None = None
    agent: str | None = None
    title: str | None = None
    session_id: str | None = None
    purpose: str | None = None


def _title_problem(value: Any) -> str | None:
    problem = non_empty_string(value)
    if problem:
        return problem
    if len(value) > MAX_TITLE_CHARS:
        return f"must be at most {MAX_TITLE_CHARS} characters"
    if CLOSED_MARK in value or any(ord(c) < 32 for c in value):
        return f"must not contain control characters or {CLOSED_MARK!r}"
    return None


_SEND_FIELDS = (
    ArgField("agent", non_empty_string),
    ArgField("title", _title_problem),
    ArgField("session_id", non_empty_string),
    ArgField("args", lambda v: None, required=True),
)


def parse_send(raw: Any) -> SendArgs:
    """Check a ``sys_session_send`` call.

    ``args`` is the message (a string) or ``{input, model?, purpose?}``.

    Raises:
        ToolError: with what is wrong and how to call it instead.
    """
    args = check_args("sys_session_send", raw, _SEND_FIELDS)
    named = "agent" in args or "title" in args
    if "session_id" in args and named:
        raise ToolError(
            "sys_session_send received both 'session_id' and 'agent'/'title' — supply "
            "exactly one addressing mode"
        )
    if not named and "session_id" not in args:
        raise ToolError(
            "sys_session_send needs 'agent' (with an optional 'title') to start or continue "
            "a named sub-agent, or 'session_id' to message a child session you created"
        )
    if named and "agent" not in args:
        raise ToolError("sys_session_send needs 'agent' with 'title': name the sub-agent")
    message, model, purpose = _message_of(args["args"])
    session_id = args.get("session_id")
    if model is not None and session_id is not None:
        raise ToolError(
            "sys_session_send 'model' applies only when a sub-agent session is first "
            f"created; it cannot change an existing session. Continue without 'model' to "
            f"message session {session_id!r}, or close the session and send again"
        )
    return SendArgs(message, model, args.get("agent"), args.get("title"), session_id, purpose)


def _message_of(value: Any) -> tuple[str, str | None, str | None]:
    if isinstance(value, str):
        message, model, purpose = value, None, None
    elif isinstance(value, Mapping):
        extra = sorted(set(value) - {"input", "model", "purpose"})
        if extra:
            raise ToolError(
                f"invalid arguments for sys_session_send: unknown key {extra[0]!r} in 'args' "
                "(it takes input, model and purpose)"
            )
        given = value.get("input")
        if not isinstance(given, str):
            raise ToolError(
                "invalid arguments for sys_session_send: 'args.input' must be the message "
                "(a string)"
            )
        message = given
        model = None
        if "model" in value:
            try:
                model = check_model_id(value["model"])
            except ValueError as exc:
                raise ToolError(f"sys_session_send: {exc}") from None
        purpose = value.get("purpose")
        if purpose is not None and not isinstance(purpose, str):
            raise ToolError("invalid arguments for sys_session_send: 'args.purpose' is a string")
    else:
        raise ToolError(
            "invalid arguments for sys_session_send: 'args' must be the message (a string) "
            "or an object {input, model?}"
        )
    if not message.strip():
        raise ToolError("sys_session_send needs a non-empty message in 'args'")
    if len(message) > MAX_MESSAGE_CHARS:
        raise ToolError(f"sys_session_send: the message is over {MAX_MESSAGE_CHARS} characters")
    return message, model, purpose


# -- sys_session_create -------------------------------------------------------------------


@attrs.frozen
class CreateArgs:
    """A checked ``sys_session_create`` call: an agent id or a spec file, not both."""

    agent_id: str | None = None
    config_path: str | None = None
    title: str | None = None
    message: str | None = None
    model: str | None = None


_CREATE_FIELDS = (
    ArgField("agent_id", non_empty_string),
    ArgField("config_path", non_empty_string),
    ArgField("title", _title_problem),
    ArgField("message", string),
    ArgField("model", lambda v: None),
)


def parse_create(raw: Any) -> CreateArgs:
    """Check a ``sys_session_create`` call.

    Raises:
        ToolError: naming the problem.
    """
    args = check_args("sys_session_create", raw, _CREATE_FIELDS)
    if ("agent_id" in args) == ("config_path" in args):
        raise ToolError(
            "sys_session_create requires exactly one of 'agent_id' (existing agent) or "
            "'config_path' (new agent from a local config)"
        )
    model = None
    if "model" in args:
        try:
            model = check_model_id(args["model"])
        except ValueError as exc:
            raise ToolError(f"sys_session_create: {exc}") from None
    message = args.get("message")
    if message is not None and len(message) > MAX_MESSAGE_CHARS:
        raise ToolError(f"sys_session_create: the message is over {MAX_MESSAGE_CHARS} characters")
    return CreateArgs(
        args.get("agent_id"), args.get("config_path"), args.get("title"), message or None, model
    )


# -- the small ones -------------------------------------------------------------------------


def parse_history(raw: Any) -> tuple[str, int]:
    """``(conversation_id, tail_items)`` of a ``sys_session_get_history`` call.

    ``tail_items`` defaults to 10 and is clamped to 50 (the prompt stays bounded).

    Raises:
        ToolError: naming the problem.
    """
    args = check_args(
        "sys_session_get_history",
        raw,
        (
            ArgField("conversation_id", non_empty_string, required=True),
            ArgField("tail_items", _int),
        ),
    )
    tail = args.get("tail_items", HISTORY_DEFAULT_TAIL)
    if tail < 1:
        raise ToolError("invalid arguments for sys_session_get_history: 'tail_items' must be >= 1")
    return args["conversation_id"], min(tail, HISTORY_MAX_TAIL)


def _int(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool)
    return None if ok else f"must be an integer, got {value!r}"


def parse_cancel(raw: Any) -> str:
    """The ``task_id`` of a ``sys_cancel_task`` call.

    Raises:
        ToolError: naming the problem.
    """
    args = check_args(
        "sys_cancel_task", raw, (ArgField("task_id", non_empty_string, required=True),)
    )
    task_id: str = args["task_id"]
    return task_id


def parse_level(value: Any) -> int:
    """A sharing level: ``read``/``edit``/``manage`` (or 1–3).

    Raises:
        ToolError: anything else.
    """
    if isinstance(value, str) and value in LEVELS:
        return LEVELS[value]
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 3:
        return value
    raise ToolError(f"sys_session_share: level must be one of {sorted(LEVELS)}")
