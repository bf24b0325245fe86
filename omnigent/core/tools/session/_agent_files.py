"""Agent files in a working directory: read a spec, list the agent-config folder, write
an agent's bundle.

What ``sys_session_create {config_path}``, ``sys_agent_list`` and
``sys_agent_download`` touch on disk. Every path goes through
:func:`~omnigent.tools.open_beneath`, so it stays inside the working directory — ``..``, an
absolute path elsewhere and a symlink out are refused, with no window between the check
and the open — and files are bounded in size.

Blocking filesystem calls: run these in a worker thread.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from pathlib import Path
from typing import Any

from ....errors import SpecError
from ....spec import AgentSpec, load_yaml, redact_secrets
from ....tools import ToolError, open_beneath, resolve_root
from .._agent_args import TypedError

__all__ = [
    "AGENT_CONFIGS",
    "BUNDLE_SPEC",
    "MAX_LOCAL_CONFIGS",
    "MAX_SPEC_BYTES",
    "bundle",
    "bundle_name",
    "local_configs",
    "read_spec",
    "write_beneath",
]

AGENT_CONFIGS = Path(".omnigent") / "agent-configs"
"""The workspace's agent-config folder: specs an agent wrote, listed by sys_agent_list."""
BUNDLE_SPEC = "config.yaml"
"""The spec's name inside an agent's bundle."""
MAX_SPEC_BYTES = 1 << 20
MAX_LOCAL_CONFIGS = 200
_CONFIG_SUFFIXES = (".yaml", ".yml")
_ESCAPES = "sys_session_create config_path escapes the working directory"


def read_spec(cwd: Path, raw: str) -> AgentSpec:
    """The agent spec in the file ``raw`` names (JSON if it ends in ``.json``).

    Raises:
        TypedError: ``config_not_found`` (no such file). ToolError: the path leaves
            the working directory, the file is too large, unreadable or not a spec.
    """
    data = _read_beneath(cwd, raw)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{raw!r} is not UTF-8 text") from None
    try:
        if raw.lower().endswith(".json"):
            return AgentSpec.from_json(text)
        return AgentSpec.from_yaml(text)
    except SpecError as exc:
        raise ToolError(f"{raw!r} is not a valid agent spec: {exc.message}") from None


def _read_beneath(cwd: Path, raw: str) -> bytes:
    """The bytes of the regular file ``raw`` inside ``cwd`` (bounded).

    Raises:
        TypedError: ``config_not_found``. ToolError: it leaves the working directory,
            is too large or cannot be read.
    """
    root = resolve_root(cwd)
    try:
        fd, _ = open_beneath(cwd, root, raw, "read")
    except ToolError:
        raise ToolError(_ESCAPES) from None
    except FileNotFoundError:
        raise TypedError("config_not_found", ("config_path", raw)) from None
    except OSError as exc:
        raise ToolError(f"cannot read {raw!r}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise TypedError("config_not_found", ("config_path", raw))
        data = handle.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise ToolError(f"{raw!r} is larger than {MAX_SPEC_BYTES} bytes")
    return data


def local_configs(cwd: Path) -> list[dict[str, Any]]:
    """The agent configs in ``cwd/.omnigent/agent-configs`` (at most 200, by path):
    ``{name, path, description}`` each, ``path`` relative to ``cwd`` (what
    ``sys_session_create``'s ``config_path`` takes). A file that is not a YAML mapping
    is left out."""
    folder = resolve_root(cwd) / AGENT_CONFIGS
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[dict[str, Any]] = []
    for name in names:
        if len(found) == MAX_LOCAL_CONFIGS:
            break
        if not name.lower().endswith(_CONFIG_SUFFIXES):
            continue
        relative = str(AGENT_CONFIGS / name)
        try:
            loaded = load_yaml(_read_beneath(cwd, relative).decode("utf-8"), what=relative)
        except (ToolError, SpecError, UnicodeDecodeError):
            continue
        if isinstance(loaded, dict):
            found.append(
                {
                    "name": _text(loaded.get("name")),
                    "path": relative,
                    "description": _text(loaded.get("description")),
                }
            )
    return found


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def bundle_name(agent_name: str, version: int) -> str:
    """An agent bundle's default file name: ``<name>-v<version>.tar.gz``."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in agent_name) or "agent"
    return f"{safe}-v{version}.tar.gz"


def bundle(spec: AgentSpec, *, redact: bool) -> bytes:
    """The agent's bundle: a gzipped tar holding its spec as :data:`BUNDLE_SPEC`.

    The spec is written without its ``api_key``; ``redact`` (the caller does not own
    the agent) replaces every credential in it as well — headers, ``env``, keys and
    tokens, the sub-agents' included (:func:`omnigent.spec.redact_secrets`).
    """
    data = spec.to_dict()
    data.get("executor", {}).get("config", {}).pop("api_key", None)
    if redact:
        data = redact_secrets(data)
    import tarfile  # here, with PyYAML: imported with the first bundle a server writes

    import yaml

    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        member = tarfile.TarInfo(BUNDLE_SPEC)
        member.size = len(text)
        member.mode = 0o644
        archive.addfile(member, io.BytesIO(text))
    return buffer.getvalue()


def write_beneath(cwd: Path, raw: str, data: bytes) -> int:
    """Write ``data`` at ``raw`` inside ``cwd`` (folders created); returns the bytes.

    Raises:
        ToolError: the path leaves the working directory (a symlink included), or
            cannot be written.
    """
    root = resolve_root(cwd)
    try:
        fd, _ = open_beneath(cwd, root, raw, "write", make_parents=True)
    except ToolError:
        raise ToolError(
            "sys_agent_download resolved destination escapes the working directory"
        ) from None
    except OSError as exc:  # IsADirectoryError included
        raise ToolError(f"cannot write {raw}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "wb") as handle:
        with contextlib.suppress(OSError):
            handle.truncate(0)
        handle.write(data)
    return len(data)
