"""Argument checking for built-in tools, and the error a tool reports to the model.

A built-in tool validates its whole argument object before it touches anything, and
reports *every* problem at once (``Error: invalid arguments for sys_os_read: 'path' is
required; 'offset' must be a non-negative integer, got -1``) so the model can fix its
call in one go. This module is pure: no I/O, no Trio.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "ArgField",
    "ToolError",
    "check_args",
    "is_int",
    "non_empty_string",
    "non_negative_int",
    "positive_int",
    "positive_number",
    "string",
]

#: A check returns ``None`` when the value is acceptable, else what it should be.
Check = Callable[[Any], str | None]


class ToolError(Exception):
    """A failure the model can act on; the tool answers ``Error: <message>``.

    Raised inside a tool's implementation and turned into the output string at the
    tool's edge, so helpers can stop early without threading error strings around.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def render(self) -> str:
        return f"Error: {self.message}"


@attrs.frozen
class ArgField:
    """One argument a tool accepts: its name, whether it is required, and its check."""

    name: str
    check: Check
    required: bool = False


def is_int(value: Any) -> bool:
    # bool is an int subclass, but ``true`` is not a line count.
    return isinstance(value, int) and not isinstance(value, bool)


def _type_name(value: Any) -> str:
    return {
        type(None): "null",
        bool: "boolean",
        str: "string",
        int: "integer",
        float: "number",
        list: "array",
        dict: "object",
    }.get(type(value), type(value).__name__)


def string(value: Any) -> str | None:
    return None if isinstance(value, str) else f"must be a string, got {_type_name(value)}"


def non_empty_string(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {_type_name(value)}"
    return None if value else "must not be empty"


def non_negative_int(value: Any) -> str | None:
    if is_int(value) and value >= 0:
        return None
    return f"must be a non-negative integer, got {value!r}"


def positive_int(value: Any) -> str | None:
    if is_int(value) and value > 0:
        return None
    return f"must be a positive integer, got {value!r}"


def positive_number(maximum: float) -> Check:
    """A check for a finite number in ``(0, maximum]`` (integers accepted)."""

    def check(value: Any) -> str | None:
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and 0 < value <= maximum
        )
        return None if ok else f"must be a positive number of at most {maximum:g}, got {value!r}"

    return check


def check_args(tool: str, args: Any, fields: Sequence[ArgField]) -> Mapping[str, Any]:
    """Return ``args`` if every field passes, else raise one :class:`ToolError` for all.

    Raises:
        ToolError: ``invalid arguments for <tool>: <problem>; <problem>…`` naming each
            missing, unknown and mistyped argument.
    """
    if not isinstance(args, Mapping):
        raise ToolError(
            f"invalid arguments for {tool}: arguments must be an object, got {_type_name(args)}"
        )
    known = {f.name: f for f in fields}
    problems: list[str] = []
    for name, field in known.items():
        if name not in args:
            if field.required:
                problems.append(f"{name!r} is required")
            continue
        problem = field.check(args[name])
        if problem:
            problems.append(f"{name!r} {problem}")
    for name in args:
        if name not in known:
            problems.append(f"unknown argument {name!r} (expected: {', '.join(known)})")
    if problems:
        raise ToolError(f"invalid arguments for {tool}: " + "; ".join(problems))
    return args
