"""Decoding JSON from the wire, strictly: only what JSON is, and what can be kept.

:func:`loads` is the one decoder of bodies the HTTP transport reads (and, through
:mod:`omnigent.model._wire`, what everything structures); :func:`finite_float` is its
number rule, shared with the JSON-RPC decoder.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import InvalidInput
from ._depth import MAX_DEPTH, check_depth

__all__ = ["finite_float", "loads"]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _TooLarge(ValueError):
    pass


def finite_float(text: str) -> float:
    """``json.loads``' ``parse_float`` that refuses a number no double can hold.

    Raises:
        ValueError: for ``1e400`` and the like.
    """
    # ``1e400`` is valid JSON but no double: Python makes it ``inf``, which would go
    # back out as ``Infinity`` (not JSON) in every answer and stream that echoes it.
    number = float(text)
    if not math.isfinite(number):
        raise _TooLarge(f"the number {text[:40]} is too large for a 64-bit float")
    return number


def loads(raw: bytes | str, *, loc: str = "body") -> Any:
    """Decode JSON from the wire, strictly.

    Refuses what Python's ``json`` accepts but JSON does not (``NaN``, ``Infinity``),
    numbers too large for a double (``1e400``, which would come back as ``Infinity``),
    objects and arrays nested deeper than :data:`~omnigent.model.MAX_DEPTH`, and lone
    surrogates (``"\\ud800"``), which no UTF-8 store can keep.

    Raises:
        InvalidInput: at ``loc``; for nesting, at the path of the first container past
        the limit inside the document (``metadata.a.a…``, as field paths are named).
    """
    try:
        data = json.loads(raw, parse_constant=_no_constant, parse_float=finite_float)
    except RecursionError:
        raise InvalidInput.at(loc, f"nested deeper than {MAX_DEPTH} levels") from None
    except _TooLarge as exc:
        raise InvalidInput.at(loc, str(exc)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput.at(loc, f"not valid JSON: {exc}") from None
    check_depth(data)
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput.at(loc, "invalid Unicode: a lone surrogate") from None
    return data
