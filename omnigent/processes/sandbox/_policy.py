"""A resolved sandbox policy: what one session's processes may see, write and reach.

The spec's ``os_env.sandbox`` block is text (``~/.ssh/known_hosts``, ``.``, rules);
:meth:`SandboxPolicy.resolve` turns it into absolute paths and parsed rules for one
working directory, once per session. Everything that starts a process for the session
confines it with the same policy, and the file tools check the same read and write
sets in-process (:meth:`SandboxPolicy.readable_roots`, :meth:`writable_roots`).
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import attrs

from ...errors import SandboxUnavailable
from ...spec import EgressRule, EgressRules, SandboxSpec
from ._hidden import Overflow

__all__ = ["Backend", "SandboxPolicy", "backend_for", "block_policy"]


class Backend(enum.Enum):
    """How a sandbox is enforced (``os_env.sandbox.type``, ``auto`` resolved)."""

    LINUX_BWRAP = "linux_bwrap"
    DARWIN_SEATBELT = "darwin_seatbelt"


def backend_for(kind: str, platform: str = sys.platform) -> Backend | None:
    """The backend ``os_env.sandbox.type`` names; ``auto`` is this platform's, and
    ``none`` (or ``auto`` on a platform with none) is None."""
    if kind == "auto":
        if platform.startswith("linux"):
            return Backend.LINUX_BWRAP
        if platform == "darwin":
            return Backend.DARWIN_SEATBELT
        return None
    if kind == "none":
        return None
    return Backend(kind)


def _expand(raw: str, base: Path, home: Path) -> Path:
    """``~`` and relative paths made absolute (``$VAR`` is deliberately not expanded:
    a spec naming ``$HOME`` means those characters)."""
    if raw == "~" or raw.startswith("~/"):
        path = home / raw[2:]
    else:
        path = Path(raw)
        if not path.is_absolute():
            path = base / path
    return Path(os.path.normpath(path))


PRIVATE_DIRS = (Path("/tmp"), Path("/var/tmp"), Path("/run"))
"""Directories every sandbox replaces with empty private ones."""


def _runtime_reads(hidden: Sequence[Path]) -> tuple[Path, ...]:
    """The running interpreter's directories, and omnigent's own package (the tool
    bridge's shim, pi's extension), that a hidden or private directory would cover —
    a virtual environment under ``/tmp``, say, whose native CLIs a session starts."""
    python = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    candidates = (
        Path(os.path.realpath(sys.base_prefix)),
        Path(os.path.realpath(sys.prefix)),
        Path(os.path.abspath(sys.prefix)),
        python.parent,
        _PACKAGE,
    )
    covering = (*hidden, *PRIVATE_DIRS)
    covered = [c for c in candidates if any(c.is_relative_to(h) for h in covering)]
    return tuple(dict.fromkeys(covered))


_PACKAGE = Path(__file__).resolve().parents[2]
"""omnigent's own package directory (``omnigent/``)."""


@attrs.frozen
class SandboxPolicy:
    """One session's sandbox, resolved. Immutable; shared by every process it starts.

    Attributes:
        backend: how it is enforced.
        workspace: the session's working directory (writable).
        read_paths: extra read-only paths (``read_paths``).
        write_paths: extra writable directories (``write_paths``).
        write_files: extra writable files (``write_files``).
        allow_network: whether any network is reachable.
        egress: with ``allow_network``, the only requests that pass (None: all).
        allow_private: whether ``egress`` may reach non-global addresses.
        allow_hidden: hidden names that stay visible (``cwd_allow_hidden``).
        hidden_scan_max: the hidden-entry scan's entry cap.
        hidden_overflow: what the scan does past it.
        env_passthrough: variables of the runtime's environment passed in.
        hide: directories masked whole (the user's home, ``$OMNIGENT_HOME``): what a
            root above re-exposes is bound back over them.
        home: the user's home as the sandbox knows it (``$HOME`` inside).
        runtime_reads: the Python installation running omnigent and omnigent's own
            package, when a hidden directory covers them (a pyenv, a virtualenv or a
            checkout under the home): bound back read-only, so the runtime's own
            helpers (the egress bridge, the tool bridge's shim) and processes started
            with its interpreter (MCP servers, harnesses) run.
    """

    backend: Backend
    workspace: Path
    read_paths: tuple[Path, ...] = ()
    write_paths: tuple[Path, ...] = ()
    write_files: tuple[Path, ...] = ()
    allow_network: bool = False
    egress: EgressRules | None = None
    allow_private: bool = False
    allow_hidden: frozenset[str] = frozenset({".venv"})
    hidden_scan_max: int = 50_000
    hidden_overflow: Overflow = Overflow.WARN
    env_passthrough: tuple[str, ...] = ()
    hide: tuple[Path, ...] = ()
    home: Path = attrs.field(factory=Path.home)
    runtime_reads: tuple[Path, ...] = ()

    @classmethod
    def resolve(
        cls,
        backend: Backend,
        workspace: Path,
        *,
        read_paths: Sequence[str] = (),
        write_paths: Sequence[str] = (),
        write_files: Sequence[str] = (),
        allow_network: bool = False,
        egress_rules: Sequence[str] = (),
        allow_private: bool = False,
        allow_hidden: Iterable[str] = (".venv",),
        hidden_scan_max: int = 50_000,
        hidden_overflow: str = "warn",
        env_passthrough: Sequence[str] = (),
        hide: Iterable[Path] = (),
        home: Path | None = None,
    ) -> SandboxPolicy:
        """A policy from the spec's values, for ``workspace`` (absolute, resolved).

        ``~`` is ``home`` (default: the user's); relative paths are relative to
        the workspace. ``egress_rules`` are parsed (the spec checked them already).
        Blocking (it looks at the filesystem: which hidden directories exist, where
        the running Python lives); cheap.

        Raises:
            ValueError: a malformed egress rule.
        """
        home = home or Path.home()
        paths = [_expand(p, workspace, home) for p in read_paths]
        writable = [_expand(p, workspace, home) for p in write_paths]
        # Only directories that exist can be covered (and need to be).
        hidden = tuple(h for h in (home, *hide) if h != Path("/") and h.is_dir())
        return cls(
            backend=backend,
            workspace=workspace,
            read_paths=tuple(paths),
            write_paths=tuple(writable),
            write_files=tuple(_expand(p, workspace, home) for p in write_files),
            allow_network=allow_network,
            egress=EgressRules.parse(egress_rules) if egress_rules else None,
            allow_private=allow_private,
            allow_hidden=frozenset(allow_hidden),
            hidden_scan_max=hidden_scan_max,
            hidden_overflow=Overflow(hidden_overflow),
            env_passthrough=tuple(env_passthrough),
            hide=hidden,
            home=home,
            runtime_reads=_runtime_reads(hidden),
        )

    def for_process(
        self,
        *,
        writes: Sequence[Path] = (),
        reads: Sequence[Path] = (),
        endpoint: str | None = None,
    ) -> SandboxPolicy:
        """This policy widened for a process omnigent starts for the session (a
        harness): its own private directories writable, ``reads`` (its tool bridge's
        socket directory) visible, and its model endpoint reachable — even with no
        network otherwise (then through the egress proxy, the endpoint its only
        destination), and even on a private address.

        Raises:
            ValueError: ``endpoint`` is not an ``http(s)://`` URL with a host.
        """
        policy = attrs.evolve(
            self,
            write_paths=(*self.write_paths, *writes),
            runtime_reads=(*self.runtime_reads, *reads),
        )
        if endpoint is None or (self.allow_network and self.egress is None):
            return policy
        url = urlsplit(endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) endpoint: {endpoint!r}")
        port = url.port or (443 if url.scheme == "https" else 80)
        rules = self.egress.rules if self.egress is not None else ()
        egress = EgressRules((*rules, EgressRule.endpoint(url.hostname, port)))
        return attrs.evolve(policy, allow_network=True, egress=egress)

    def writable_roots(self) -> tuple[Path, ...]:
        """Directories whose contents may be written: the workspace and write_paths."""
        return (self.workspace, *self.write_paths)

    def readable_roots(self) -> tuple[Path, ...]:
        """Directories and files beyond the system that may be read: every writable
        root and file, and read_paths."""
        return (*self.writable_roots(), *self.write_files, *self.read_paths)

    def named(self) -> frozenset[Path]:
        """Every path the policy names (never masked as hidden themselves)."""
        return frozenset(self.readable_roots())


def block_policy(
    block: SandboxSpec, workspace: Path, *, hide: Iterable[Path] = ()
) -> SandboxPolicy | None:
    """The policy of an ``os_env.sandbox`` block for ``workspace`` (None: ``type:
    none``), hiding ``hide`` whole. Blocking, as :meth:`SandboxPolicy.resolve`.

    Raises:
        SandboxUnavailable: ``type: auto`` on a platform with no sandbox.
    """
    if not block.confined:
        return None
    backend = backend_for(block.type)
    if backend is None:
        raise SandboxUnavailable(
            "os_env.sandbox.type auto: this platform has no sandbox omnigent can use "
            "(linux_bwrap on Linux, darwin_seatbelt on macOS); nothing was run"
        )
    return SandboxPolicy.resolve(
        backend,
        workspace,
        read_paths=block.read_paths,
        write_paths=block.write_paths,
        write_files=block.write_files,
        allow_network=block.allow_network,
        egress_rules=block.egress_rules,
        allow_private=block.egress_allow_private_destinations,
        allow_hidden=block.cwd_allow_hidden,
        hidden_scan_max=block.cwd_hidden_scan_max_entries,
        hidden_overflow=block.cwd_hidden_scan_overflow,
        env_passthrough=block.env_passthrough,
        hide=hide,
    )
