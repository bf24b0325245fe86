"""One nesting limit for everything that arrives from outside: :func:`check_depth`.

Python's JSON encoder, ``copy.deepcopy``, cattrs and every recursive walk in the code
recurse once (or several times) per level of nesting, so a value nested a few hundred
levels deep raises ``RecursionError`` wherever it is next touched — in a route (a
``500``), or in a session actor while an event is encoded (the actor dies, and its
background work with it). Refusing such values where they enter is the only place the
refusal is cheap and clear.

The limit is :data:`MAX_DEPTH` (64) levels of objects and arrays, the same at every
boundary: HTTP bodies (:func:`omnigent.model.loads` checks what it decodes), YAML specs
(:func:`omnigent.spec.load_yaml`), anything structured with
:func:`omnigent.model.structure` (specs, events, message content, ``metadata``, a
script's ``args``, an ``mcp_elicitation``'s ``requestedSchema``), tool arguments, and
the JSON-RPC and harness-protocol decoders, which call :func:`check_depth` on what they
read. A scalar is depth 0, ``{}`` and ``[]`` are depth 1, ``{"a": []}`` is depth 2.

The walk is iterative (it cannot itself hit the recursion limit) and stops at the first
container past the limit, so its cost is bounded by the size of the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..errors import InvalidInput

__all__ = ["MAX_DEPTH", "check_depth", "too_deep"]

MAX_DEPTH: Final = 64
"""The most levels of nested objects and arrays any input may have."""

_KEY_CHARS: Final = 40  # a key shown in an error path is cut to this many characters


def too_deep(value: Any, *, limit: int = MAX_DEPTH) -> list[str | int] | None:
    """The path to the first container nested deeper than ``limit``, else ``None``.

    Mappings, lists and tuples count as containers; anything else is a leaf. The path
    holds keys (as given) and list indexes, outermost first.
    """
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 0, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.items()
        elif isinstance(node, list | tuple):
            children = enumerate(node)
        else:
            continue
        if depth >= limit:
            return list(path)
        for key, child in children:
            if isinstance(child, Mapping | list | tuple):
                stack.append((child, depth + 1, (*path, key)))
    return None


def render_path(root: str, path: list[str | int]) -> str:
    """``root`` extended by ``path`` in the dotted form of error details (``a.b[0]``)."""
    out = root
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = str(part)
        if len(name) > _KEY_CHARS:
            name = name[: _KEY_CHARS - 1] + "…"
        out = f"{out}.{name}" if out else name
    return out or "$"


def check_depth(
    value: Any,
    *,
    loc: str = "",
    limit: int = MAX_DEPTH,
    error: type[InvalidInput] = InvalidInput,
) -> None:
    """Refuse ``value`` if objects and arrays in it nest deeper than ``limit``.

    Args:
        value: decoded JSON or YAML (or any mix of mappings, lists and tuples).
        loc: where ``value`` sits in the request, prefixed to the error path.
        limit: levels allowed; :data:`MAX_DEPTH` unless a caller has a reason.
        error: the :class:`~omnigent.errors.InvalidInput` subclass to raise
            (``SpecError`` for specs).

    Raises:
        InvalidInput: (or ``error``) with one detail naming the first container past
        the limit, e.g. ``metadata.a.a.a…``.
    """
    path = too_deep(value, limit=limit)
    if path is not None:
        raise error.at(render_path(loc, path), f"nested deeper than {limit} levels")
