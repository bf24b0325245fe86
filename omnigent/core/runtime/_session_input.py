"""The checks on what a client sends for a session's own fields.

A session is created (``POST /v1/sessions``) with a title, labels, a ``model_override``,
a ``cwd`` and ``initial_items`` (each of the :class:`InitialItem` shape), and updated
(``PATCH``) in its :data:`UPDATABLE` fields. Each value is checked here before anything
is stored; a bad one raises :class:`~omnigent.errors.InvalidInput` at its field. These
are pure functions of the wire values, kept apart from
:class:`~._session_catalog.SessionCatalog` — which reads and writes the rows, and checks what
needs them (the agent, the parent, file references, whether the agent can run the
override) — so that each field's rule is stated once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal

import attrs

from ..._ids import runner_id_problem
from ...errors import InvalidInput
from ...model import ContentBlock, structure

__all__ = [
    "MODEL_OVERRIDE_PATTERN",
    "UPDATABLE",
    "InitialItem",
    "check_changes",
    "check_cwd",
    "check_labels",
    "check_model_override",
    "check_runner_id",
    "check_title",
]

MODEL_OVERRIDE_PATTERN = "^[A-Za-z0-9._:/@-]{1,200}$"
"""What a ``model_override`` must match (the whole string: no trailing newline)."""
_MODEL_OVERRIDE = re.compile(MODEL_OVERRIDE_PATTERN.removesuffix("$") + r"\Z")


@attrs.frozen
class _InitialMessage:
    """A message of an initial item; any role (a history may start mid-conversation)."""

    role: Literal["user", "assistant", "system", "developer"]
    content: tuple[ContentBlock, ...]


@attrs.frozen
class InitialItem:
    """One ``initial_items`` entry of a new session: ``{type: "message", data}``."""

    type: Literal["message"]
    data: _InitialMessage


def check_model_override(value: Any) -> str | None:
    """The ``model_override`` given, or None; it must match :data:`MODEL_OVERRIDE_PATTERN`."""
    if value is None:
        return None
    # ``$`` alone would let "gpt-4o\n" through (it matches before a final newline).
    if not isinstance(value, str) or not _MODEL_OVERRIDE.match(value):
        raise InvalidInput.at("model_override", f"must match {MODEL_OVERRIDE_PATTERN}")
    return value


def check_labels(labels: Any) -> dict[str, str]:
    """The labels as a string-to-string dict (``{}`` for None)."""
    if labels is None:
        return {}
    return structure(labels, dict[str, str], root="labels")


_MAX_CWD = 4096


def check_cwd(cwd: Any) -> str | None:
    """An absolute directory path (it need not exist here: it is the client's)."""
    if cwd is None:
        return None
    if not isinstance(cwd, str) or not cwd or len(cwd) > _MAX_CWD or "\x00" in cwd:
        raise InvalidInput.at("cwd", f"must be an absolute path of at most {_MAX_CWD} characters")
    if not PurePosixPath(cwd).is_absolute():
        raise InvalidInput.at("cwd", "must be an absolute path")
    return cwd


def check_runner_id(runner_id: Any) -> str | None:
    """A runner's name (``docs/runners.md``), or None: the session runs here."""
    if runner_id is None:
        return None
    problem = runner_id_problem(runner_id)
    if problem is not None:
        raise InvalidInput.at("runner_id", problem)
    return str(runner_id)


def check_title(title: Any) -> str | None:
    """The title given: a string, or None."""
    if title is not None and not isinstance(title, str):
        raise InvalidInput.at("title", "expected string")
    return title if title is None else str(title)


UPDATABLE = ("title", "labels", "model_override")
"""The fields a session update (``PATCH``) may change."""


def check_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a session update, each checked (any key not :data:`UPDATABLE` is refused).

    Whether the agent can run a new ``model_override`` is the caller's to check: that
    needs the session's spec.
    """
    for key in changes:
        if key not in UPDATABLE:
            raise InvalidInput.at(key, "unknown field")
    fields: dict[str, Any] = {}
    if "title" in changes:
        fields["title"] = check_title(changes["title"])
    if "labels" in changes:
        fields["labels"] = check_labels(changes["labels"])
    if "model_override" in changes:
        fields["model_override"] = check_model_override(changes["model_override"])
    return fields
