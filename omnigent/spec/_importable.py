"""The folder of an operator's spec file joins the import path.

A spec names Python code by module — a ``function`` policy (``mypol:check``), a Python
tool (``tools.python: [calc:add]``) — and the natural place for that module is beside
the spec. Python finds a script's own folder for it (``sys.path[0]``), so omnigent does
the same for a spec file the operator names (``omnigent run PATH``, ``agents add``,
``stdio --agent``, ``serve --agents DIR``): no ``PYTHONPATH`` needed, from any directory.
Specs a client sends have no folder, and may name only what the operator allowed.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["importable_beside"]


def importable_beside(path: str | Path, *, folder: bool = False) -> None:
    """Put the folder of the spec file ``path`` (or ``path`` itself, a folder of specs,
    with ``folder=True``) first on the import path, once."""
    where = Path(path).resolve()
    entry = str(where if folder else where.parent)
    if entry not in sys.path:
        sys.path.insert(0, entry)
