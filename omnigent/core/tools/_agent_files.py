"""Agent spec files in a working directory: read one, list a folder, write one.

What ``sys_session_create {config_path}``, ``sys_agent_list`` and
``sys_agent_download`` touch on disk. Every path goes through
:func:`~omnigent.tools.open_beneath`, so it stays inside the working directory — ``..``, an
absolute path elsewhere and a symlink out are refused, with no window between the check
and the open — and files are bounded in size.

Blocking filesystem calls: run these in a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from ...errors import SpecError
from ...spec import AgentSpec
from ...tools import ToolError, open_beneath, resolve_root, string
from ._agent_args import TypedError

__all__ = [
    "AGENTS_FOLDER",
    "MAX_SPEC_BYTES",
    "local_specs",
    "plain_filename",
    "read_spec",
    "spec_text",
    "write_beneath",
]

AGENTS_FOLDER = Path(".omnigent") / "agents"
MAX_SPEC_BYTES = 1 << 20
MAX_LOCAL_SPECS = 200
_SUFFIXES = (".yaml", ".yml", ".json")


def read_spec(cwd: Path, raw: str) -> AgentSpec:
    """The agent spec in the file ``raw`` names (JSON if it ends in ``.json``).

    Raises:
        TypedError: ``config_not_found`` (no such file). ToolError: the path leaves
            the working directory, the file is too large, unreadable or not a spec.
    """
    root = resolve_root(cwd)
    try:
        fd, _ = open_beneath(cwd, root, raw, "read")
    except ToolError as exc:
        raise ToolError(
            f"'config_path' must stay inside the working directory: {exc.message}"
        ) from None
    except FileNotFoundError:
        raise TypedError("config_not_found", f"no agent spec file at {raw!r}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {raw!r}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise TypedError("config_not_found", f"{raw!r} is not a file")
        data = handle.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise ToolError(f"{raw!r} is larger than {MAX_SPEC_BYTES} bytes")
    try:
        return _parse(raw, data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ToolError(f"{raw!r} is not UTF-8 text") from None
    except SpecError as exc:
        raise ToolError(f"{raw!r} is not a valid agent spec: {exc.message}") from None


def _parse(name: str, text: str) -> AgentSpec:
    if name.lower().endswith(".json"):
        return AgentSpec.from_json(text)
    return AgentSpec.from_yaml(text)


def local_specs(cwd: Path) -> tuple[list[tuple[str, AgentSpec]], list[dict[str, str]]]:
    """Every spec in ``cwd/.omnigent/agents`` (at most 200); the unreadable as errors."""
    found: list[tuple[str, AgentSpec]] = []
    problems: list[dict[str, str]] = []
    root = resolve_root(cwd)
    folder = root / AGENTS_FOLDER
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return found, problems
    for name in names[:MAX_LOCAL_SPECS]:
        if not name.lower().endswith(_SUFFIXES):
            continue
        relative = str(AGENTS_FOLDER / name)
        try:
            found.append((relative, read_spec(cwd, relative)))
        except ToolError as exc:
            problems.append({"source": "local", "path": relative, "message": exc.message})
    return found, problems


def plain_filename(value: Any) -> str | None:
    """A check: a file name with no path in it, ending in a spec suffix."""
    problem = string(value)
    if problem:
        return problem
    if value in ("", ".", "..") or "/" in value or "\\" in value or "\x00" in value:
        return "must be a plain file name, not a path"
    if not value.lower().endswith(_SUFFIXES):
        return "must end in .yaml, .yml or .json"
    return None


def spec_text(spec: AgentSpec, filename: str) -> str:
    """``spec`` as the file ``filename`` holds it, without its ``api_key``."""
    data = spec.to_dict()
    data.get("executor", {}).get("config", {}).pop("api_key", None)
    if filename.lower().endswith(".json"):
        return json.dumps(data, indent=2) + "\n"
    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def write_beneath(cwd: Path, raw: str, text: str) -> int:
    """Write ``text`` at ``raw`` inside ``cwd`` (folders created); returns the bytes.

    Raises:
        ToolError: the path leaves the working directory, or cannot be written.
    """
    root = resolve_root(cwd)
    data = text.encode()
    try:
        fd, _ = open_beneath(cwd, root, raw, "write", make_parents=True)
    except OSError as exc:  # IsADirectoryError included
        raise ToolError(f"cannot write {raw}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "wb") as handle:
        with contextlib.suppress(OSError):
            handle.truncate(0)
        handle.write(data)
    return len(data)
