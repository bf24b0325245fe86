"""A session's sandbox, open: it turns a command into what to actually execute.

:func:`open_sandbox` checks that the policy can be enforced here (else
:class:`~omnigent.errors.SandboxUnavailable`: nothing runs bare), starts the egress
proxy when the policy has ``egress_rules``, and yields a :class:`Sandbox`.
:meth:`Sandbox.wrap` gives a :class:`Launch` — argv, environment, working directory —
for whoever starts the process: a shell tool, a tmux pane, an MCP server, a harness.
The sandbox starts nothing itself, so it composes with however the caller starts and
tracks its processes (its own process group, a recorded group, a pane's Unix
session): a ``Launch`` is just a different argv and environment for the same start.

Without a policy (``sandbox: {type: none}``) the sandbox is a pass-through: the argv
unchanged, the caller's environment inherited.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from ...errors import SandboxUnavailable
from ._bridge import LAUNCHER
from ._bwrap import BridgeMount, SystemMasks, bwrap_argv, system_masks
from ._env import sandbox_env
from ._hidden import HiddenEntries, HiddenScanOverflow, scan_hidden
from ._policy import Backend, SandboxPolicy
from ._probe import bwrap_problem, find_bwrap
from ._proxy import open_egress_proxy

__all__ = ["Launch", "Sandbox", "open_sandbox"]


@attrs.frozen
class Launch:
    """What to execute: ``argv`` in ``cwd`` with ``env`` (None: inherit the caller's)."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str] | None = None


@attrs.frozen
class Sandbox:
    """An open sandbox (or a pass-through, ``policy`` None). Made by :func:`open_sandbox`."""

    policy: SandboxPolicy | None
    bwrap: str = ""
    system: SystemMasks = attrs.field(factory=SystemMasks)
    bridge: BridgeMount | None = None

    @property
    def confined(self) -> bool:
        """Whether processes are confined (False for ``type: none``)."""
        return self.policy is not None

    async def hidden_entries(self) -> HiddenEntries:
        """The hidden entries under the policy's roots, now (a scan in a thread).

        Raises:
            SandboxUnavailable: the scan passed its cap with ``overflow: error``.
        """
        policy = self.policy
        if policy is None:
            return HiddenEntries()
        roots = [
            p for p in (*policy.writable_roots(), *policy.read_paths) if p not in policy.write_files
        ]
        try:
            return await trio.to_thread.run_sync(
                lambda: scan_hidden(
                    roots,
                    allow=policy.allow_hidden,
                    max_entries=policy.hidden_scan_max,
                    overflow=policy.hidden_overflow,
                    keep=policy.named(),
                )
            )
        except HiddenScanOverflow as exc:
            raise SandboxUnavailable(f"the sandbox refuses to start: {exc}") from None

    async def wrap(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        interactive: bool = False,
    ) -> Launch:
        """What to execute to run ``argv`` in ``cwd`` inside the sandbox.

        Args:
            argv: the command (its program found on ``PATH`` inside).
            cwd: its working directory (in the workspace, or another root).
            env: variables to set on top of the sandbox's minimal environment (a
                pass-through sandbox: on top of the caller's environment; None and
                no sandbox: inherit it unchanged).
            interactive: a terminal's command (keeps the caller's Unix session).

        Raises:
            SandboxUnavailable: the hidden-entry scan refused (``overflow: error``).
        """
        policy = self.policy
        if policy is None:
            full = None if env is None else {**os.environ, **env}
            return Launch(tuple(argv), cwd, full)
        hidden = await self.hidden_entries()
        wrapped = bwrap_argv(
            self.bwrap,
            policy,
            argv,
            cwd=cwd,
            hidden=hidden,
            system=self.system,
            interactive=interactive,
            bridge=self.bridge,
        )
        inside = sandbox_env(
            os.environ,
            home=policy.home,
            passthrough=policy.env_passthrough,
            extra=env,
            proxied=self.bridge is not None,
        )
        return Launch(tuple(wrapped), cwd, inside)


def _bridge_mount(socket: Path) -> BridgeMount:
    """The bridge runs on the interpreter running omnigent (its installation is
    re-exposed when hidden: :attr:`SandboxPolicy.runtime_reads`), with no site and no
    environment (``-I -S``): nothing of the workspace is imported."""
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    return BridgeMount(socket, (python, "-I", "-S", "-c", LAUNCHER))


async def _check(policy: SandboxPolicy, bwrap: str | None) -> str:
    """The bwrap binary to use, once the policy is known to be enforceable here.

    Raises:
        SandboxUnavailable: naming why not.
    """
    if policy.backend is Backend.DARWIN_SEATBELT:
        if sys.platform == "darwin":
            raise SandboxUnavailable(
                "os_env.sandbox.type darwin_seatbelt: this omnigent has no Seatbelt "
                "backend yet, so nothing was run (use type none to run unsandboxed)"
            )
        raise SandboxUnavailable(
            "os_env.sandbox.type darwin_seatbelt runs only on macOS, and this is "
            f"{sys.platform}: use linux_bwrap or auto (nothing was run unsandboxed)"
        )
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"linux_bwrap runs only on Linux, and this is {sys.platform}")
    binary = bwrap or find_bwrap()
    if binary is None:
        raise SandboxUnavailable(
            "linux_bwrap needs bubblewrap, which is not installed here (Debian/Ubuntu: "
            "apt-get install bubblewrap); nothing was run unsandboxed"
        )
    problem = await trio.to_thread.run_sync(bwrap_problem, binary)
    if problem is not None:
        raise SandboxUnavailable(f"{problem}; nothing was run unsandboxed")
    return binary


@asynccontextmanager
async def open_sandbox(
    policy: SandboxPolicy | None, *, bwrap: str | None = None
) -> AsyncIterator[Sandbox]:
    """Open ``policy``'s sandbox for the block (None: a pass-through).

    Args:
        policy: the session's resolved policy, or None for ``sandbox: {type: none}``.
        bwrap: the bubblewrap binary (default: ``bwrap`` on ``$PATH``).

    Raises:
        SandboxUnavailable: the policy cannot be enforced here (its backend is for
            another platform, ``bwrap`` is missing or cannot create namespaces).

    Cancellation: leaving the block stops the egress proxy (its connections end);
    processes the caller started with the sandbox's launches are the caller's.
    """
    if policy is None:
        yield Sandbox(None)
        return
    binary = await _check(policy, bwrap)
    system = await trio.to_thread.run_sync(system_masks)
    if not (policy.allow_network and policy.egress is not None):
        yield Sandbox(policy, binary, system)
        return
    async with open_egress_proxy(policy.egress, allow_private=policy.allow_private) as socket:
        yield Sandbox(policy, binary, system, _bridge_mount(socket))
