"""An operator's spec file and its folder: modules beside it import, files beside it run.

A spec names Python code by module — a ``function`` policy (``mypol:check``), a Python
tool (``tools.python: [calc:add]``) — and the natural place for that module is beside
the spec. Python finds a script's own folder for it (``sys.path[0]``), so omnigent does
the same for a spec file the operator names (``omnigent run PATH``, ``agents add``,
``stdio --agent``, ``serve --agents DIR``): no ``PYTHONPATH`` needed, from any directory.
Specs a client sends have no folder, and may name only what the operator allowed.

The same goes for a program a spec file starts: ``command: [python, my_harness.py]``
names the harness beside the spec (:func:`commands_beside`), wherever ``omnigent`` runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from ._spec import AgentSpec

__all__ = ["commands_beside", "importable_beside"]


def importable_beside(path: str | Path, *, folder: bool = False) -> None:
    """Put the folder of the spec file ``path`` (or ``path`` itself, a folder of specs,
    with ``folder=True``) first on the import path, once."""
    where = Path(path).resolve()
    entry = str(where if folder else where.parent)
    if entry not in sys.path:
        sys.path.insert(0, entry)


def commands_beside(spec: AgentSpec, folder: Path) -> AgentSpec:
    """``spec`` with each ``command`` element that names a file in ``folder`` (a relative
    path: ``my_harness.py``, ``bin/server``) made absolute — an external harness's, a
    stdio MCP server's, its sub-agents' too. Anything else (``python``, ``-m``, a path
    to no file there) is left for the process to resolve as before. Blocking (it looks
    at the file system)."""
    changes: dict[str, Any] = {}
    config = spec.executor.config
    if config.command is not None:
        command = _beside(config.command, folder)
        if command != config.command:
            executor = attrs.evolve(spec.executor, config=attrs.evolve(config, command=command))
            changes["executor"] = executor
    servers = tuple(
        attrs.evolve(s, command=_beside(s.command, folder)) if s.command else s
        for s in spec.mcp_servers
    )
    if servers != spec.mcp_servers:
        changes["mcp_servers"] = servers
    subs = tuple(commands_beside(sub, folder) for sub in spec.sub_agents)
    if subs != spec.sub_agents:
        changes["sub_agents"] = subs
    return attrs.evolve(spec, **changes) if changes else spec


def _beside(command: tuple[str, ...], folder: Path) -> tuple[str, ...]:
    return tuple(_absolute(part, folder) for part in command)


def _absolute(part: str, folder: Path) -> str:
    if not part or part.startswith("-") or Path(part).is_absolute():
        return part
    candidate = folder / part
    return str(candidate) if candidate.is_file() else part
