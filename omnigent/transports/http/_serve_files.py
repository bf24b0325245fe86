"""What ``omnigent serve`` reads from disk: the agent specs of ``--agents DIR`` and the
server-wide default policies of ``--policies FILE``.

Both are the operator's files, so they may name what a client's spec may not (a
program to run, any function policy); errors name the file and the bad entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from ...core import Runtime
from ...errors import BadRequest, ErrorDetail, SpecError
from ...spec import AgentSpec, importable_beside, load_yaml, parse_policy_spec

__all__ = ["AGENT_SUFFIXES", "load_policies", "register_agents"]


AGENT_SUFFIXES = (".yaml", ".yml", ".json")


async def register_agents(runtime: Runtime, agents_dir: str | Path) -> list[str]:
    """Register every ``*.yaml``, ``*.yml`` and ``*.json`` spec in ``agents_dir``.

    Files are read in name order; an unchanged spec keeps its version, so starting
    again on the same database registers nothing new. The folder joins the import path
    (its specs' policies and Python tools may live in modules beside them). Returns the
    agent names.

    Raises:
        BadRequest: ``agents_dir`` is not a directory, or a file cannot be read.
        SpecError: naming the file, for an invalid spec.
    """
    folder = Path(agents_dir)
    if not await trio.to_thread.run_sync(folder.is_dir):
        raise BadRequest(f"--agents {agents_dir}: no such directory")
    importable_beside(folder, folder=True)
    names: list[str] = []
    for path in await trio.to_thread.run_sync(_spec_files, folder):
        spec = await trio.to_thread.run_sync(_load_spec_file, path)
        try:
            agent = await runtime.create_agent(spec)
        except SpecError as exc:
            raise SpecError(f"{path}: {exc.message}", exc.details) from exc
        names.append(agent.name)
    return names


def _spec_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in AGENT_SUFFIXES and p.is_file())


def _load_spec_file(path: Path) -> AgentSpec:
    try:
        return AgentSpec.load(path)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc.message}", exc.details) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRequest(f"cannot read agent spec {path}: {exc}") from exc


def load_policies(path: str | Path) -> list[dict[str, Any]]:
    """The server-wide default policies in a YAML file: a list of policy specs.

    Each entry is written as in an agent spec's ``policies`` list; they apply to every
    session after its agent's own policies.

    Raises:
        SpecError: naming the file and the bad entry (``[1].tools``).
        BadRequest: the file cannot be read.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRequest(f"cannot read the policies file {path}: {exc}") from exc
    data = load_yaml(text, what=str(path))
    if data is None:
        return []
    if not isinstance(data, list) or not all(isinstance(p, dict) for p in data):
        detail = ErrorDetail("$", "expected a list of policies")
        raise SpecError(f"{path}: expected a list of policies", [detail])
    for index, policy in enumerate(data):
        try:
            parse_policy_spec(policy, root=f"[{index}]")
        except SpecError as exc:
            raise SpecError(f"{path}: {exc.message}", exc.details) from exc
    return data
