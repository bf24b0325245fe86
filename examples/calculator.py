"""Tools for ``calculator.yaml``: plain Python functions an agent calls as tools.

The spec names them as ``calculator:add`` and ``calculator:divide``; omnigent finds this
module beside the spec (the spec's folder is on the import path), offers each function
to that agent under its own name, and builds its JSON Schema from the signature and the
docstring below. A sync function runs in a worker thread; an ``async def`` would run on
the event loop.
"""

from __future__ import annotations


def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    total = a + b
    return int(total) if total == int(total) else total


def divide(a: float, b: float) -> float | str:
    """Divide a by b.

    Args:
        a: the dividend.
        b: the divisor (not zero).
    """
    if b == 0:
        return "Error: cannot divide by zero; ask for another divisor"
    return a / b
