"""YAML values a JSON store can hold, and nothing else.

A spec is stored as JSON and answered as JSON, so a YAML spec may hold only what JSON
can: strings, finite numbers, booleans, null, lists and mappings with string keys.
PyYAML's safe schema (YAML 1.1) constructs more — dates and timestamps
(``since: 2024-05-01``), ``!!binary`` bytes, ``!!set``, ``!!omap``/``!!pairs``,
``.nan``/``.inf``, integers past what Python converts (4,300 digits), non-string keys —
which once reached the store's encoder and answered ``500`` (or crashed ``serve
--agents`` with a traceback).

:data:`JSON_CONSTRUCTORS` build such values as :class:`Unheld` markers instead of
failing where they meet them, and :func:`unheld_values` then names every one by its
path, so one error lists each field (``metadata.since: a date or time …``) as every
other spec error does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import attrs

from ..errors import ErrorDetail
from ..model._depth import render_path

if TYPE_CHECKING:  # the loader imports PyYAML, and these only when it reads a document
    from yaml.constructor import SafeConstructor
    from yaml.nodes import Node, ScalarNode

__all__ = ["JSON_CONSTRUCTORS", "Unheld", "unheld_values"]

_QUOTE = "quote it to keep it as text"


@attrs.frozen
class Unheld:
    """A value JSON cannot hold, standing where the YAML put it (``why`` says what)."""

    why: str


def _timestamp(loader: SafeConstructor, node: Node) -> Unheld:
    return Unheld(f"a date or time is not a JSON value; {_QUOTE}")


def _binary(loader: SafeConstructor, node: Node) -> Unheld:
    return Unheld("!!binary is not a JSON value; send the text (base64) as a string")


def _set(loader: SafeConstructor, node: Node) -> Unheld:
    return Unheld("!!set is not a JSON value; use a list")


def _pairs(loader: SafeConstructor, node: Node) -> Unheld:
    return Unheld("!!omap and !!pairs are not JSON values; use a mapping or a list")


def _float(loader: SafeConstructor, node: ScalarNode) -> float | Unheld:
    value = loader.construct_yaml_float(node)
    if not math.isfinite(value):
        return Unheld(f"{_scalar(node)!r} is not a finite number (JSON has no NaN or Infinity)")
    return value


def _int(loader: SafeConstructor, node: ScalarNode) -> int | Unheld:
    try:
        value = loader.construct_yaml_int(node)
    except ValueError:  # Python's int() refuses more than 4,300 digits
        return Unheld(f"the integer {_scalar(node)[:20]}… is too long to be kept")
    return value


def _scalar(node: Node) -> str:
    value = getattr(node, "value", None)  # a scalar node's text (a collection's: a list)
    return value if isinstance(value, str) else "?"


_TAG = "tag:yaml.org,2002:"
JSON_CONSTRUCTORS: Final[dict[str | None, Callable[[SafeConstructor, Any], Any]]] = {
    _TAG + "timestamp": _timestamp,
    _TAG + "binary": _binary,
    _TAG + "set": _set,
    _TAG + "omap": _pairs,
    _TAG + "pairs": _pairs,
    _TAG + "float": _float,
    _TAG + "int": _int,
}
"""Constructors for a ``SafeLoader`` subclass's ``yaml_constructors``: what JSON can
hold is built as usual, the rest as :class:`Unheld`."""


def unheld_values(data: Any) -> list[ErrorDetail]:
    """Every value in ``data`` JSON cannot hold, and every non-string key, by path.

    That is an :class:`Unheld` marker (from YAML), a float that is not finite, and
    anything but ``str``, ``int``, ``float``, ``bool``, ``None``, ``dict``, ``list``
    and ``tuple`` (a ``datetime`` or ``bytes`` a spec built in Python holds).
    Iterative (the depth is bounded before this runs, but a stack costs nothing); a
    node shared through aliases is reported once per path it appears at.
    """
    return list(_walk(data))


def _walk(data: Any) -> Iterator[ErrorDetail]:
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, Unheld):
            yield ErrorDetail(render_path("", path), value.why)
        elif isinstance(value, dict):
            for key, inner in reversed(list(value.items())):
                if isinstance(key, str):
                    stack.append((inner, [*path, key]))
                    continue
                unheld = isinstance(key, Unheld)
                shown = key.why if unheld else f"the key {key!r} is not a string"
                yield ErrorDetail(
                    render_path("", [*path, "?" if unheld else str(key)]),
                    f"{shown}; a mapping's keys must be strings ({_QUOTE})",
                )
        elif isinstance(value, list | tuple):
            numbered = reversed(list(enumerate(value)))
            stack.extend((inner, [*path, index]) for index, inner in numbered)
        elif isinstance(value, float) and not math.isfinite(value):
            yield ErrorDetail(render_path("", path), f"{value} is not a finite number")
        elif not isinstance(value, str | int | float | bool | None):
            yield ErrorDetail(
                render_path("", path), f"a {type(value).__name__} is not a JSON value"
            )
