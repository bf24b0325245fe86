"""The runner's machine: its workspace, what its operator allows, what it has running.

:class:`RunnerPlace` is built once per runner process (:func:`open_runner_place`) and
shared by every link it has: the workspace every path stays inside, the trust rule for
the programs a spec names, the harness process manager (pid files), the record of the
shells' process groups (:class:`~omnigent.processes.GroupFiles`), the private tmux
server for terminals and the HTTP client harnesses reach model endpoints with. Opening
it first ends what a dead predecessor left on this machine: harness processes (by their
pid files), shells (by their group files) and tmux servers (by their unlocked
directories) — so no orphan survives a runner restart.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import httpx
import trio

from ..errors import ErrorDetail, SpecError
from ..harnesses.registry import HarnessRegistry
from ..processes import (
    GroupFiles,
    ProcessManager,
    TmuxServer,
    open_process_manager,
    open_tmux_server,
)
from ..spec import AgentSpec, ClientTrust, client_spec_problems
from ..tools import ToolError, ensure_dir, resolve_inside, resolve_root

__all__ = ["RunnerPlace", "open_runner_place", "tmux_base"]

log = logging.getLogger("omnigent.runner")

_GRACE = 2.0
_SERVER_FETCHES = re.compile(r"mcp_servers\[\d+\]\.url$")


@attrs.frozen(eq=False)
class RunnerPlace:
    """What one runner process stands on (see the module docstring).

    Attributes:
        workspace: the directory every session's paths stay inside (resolved).
        trust: what a spec the server sends may name here — programs, the variables
            they start with, model endpoints (``runner --allow-command``,
            ``--allow-env``, ``--allow-model-url``).
        trusted_agent: the agent id whose specs run whatever they name (the one
            ``run --server`` uploaded for this runner), or ``None``.
    """

    workspace: Path
    home: Path
    trust: ClientTrust
    processes: ProcessManager
    groups: GroupFiles
    tmux: TmuxServer
    http: httpx.AsyncClient
    harnesses: HarnessRegistry
    trusted_agent: str | None = None

    def spec_problems(self, spec: AgentSpec, agent_id: str | None) -> list[ErrorDetail]:
        """Where ``spec`` asks for what this runner's operator did not allow."""
        if agent_id is not None and agent_id == self.trusted_agent:
            return []
        return [
            ErrorDetail(d.loc, _for_runner(d.msg))
            for d in client_spec_problems(spec, self.trust)
            # os_env.cwd is resolved by workdir(), inside the workspace; an HTTP MCP
            # server's URL is the server's to fetch, not this runner's.
            if not d.loc.endswith("os_env.cwd") and _SERVER_FETCHES.search(d.loc) is None
        ]

    def check_spec(self, spec: AgentSpec, agent_id: str | None) -> None:
        """Raises SpecError naming each field this runner refuses to run."""
        problems = self.spec_problems(spec, agent_id)
        if problems:
            raise SpecError(
                "this runner refuses the spec: "
                + "; ".join(f"{d.msg} @ {d.loc}" for d in problems),
                problems,
            )

    async def workdir(self, cwd: str | None) -> Path:
        """Where a session whose spec says ``os_env.cwd: cwd`` works: the workspace, or
        ``cwd`` inside it (created); never outside.

        Resolved at every call, never kept: a directory of the workspace swapped for a
        symlink that leads out would otherwise stay the tools' root.

        Raises:
            ToolError: ``cwd`` leads outside the workspace (or cannot be made).
        """
        if not cwd:
            return await trio.to_thread.run_sync(resolve_root, self.workspace)
        target = await trio.to_thread.run_sync(resolve_inside, self.workspace, cwd)
        try:
            await ensure_dir(target)
        except OSError as exc:
            raise ToolError(f"cannot make the working directory {cwd!r}: {exc.strerror}") from exc
        return target


def _for_runner(message: str) -> str:
    """The server's wording of a trust refusal, said by this runner."""
    return (
        message.replace("this server", "this runner")
        .replace("the server's", "the runner's")
        .replace("`serve --allow-", "`omnigent runner --allow-")
    )


def tmux_base(home: Path) -> Path:
    """Where a runner keeps its tmux server: ``<tmp>/omnigent-runner-<uid>-<digest of
    its home>`` — short enough for a socket path, and its own: only the next runner
    with the same home sweeps what a dead one left there (a runtime's sweep of its own
    base never reaches it, nor does another runner's)."""
    digest = hashlib.sha256(os.fsencode(os.path.abspath(home))).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"omnigent-runner-{os.getuid()}-{digest}"


@asynccontextmanager
async def open_runner_place(
    workspace: Path,
    home: Path,
    *,
    trust: ClientTrust | None = None,
    trusted_agent: str | None = None,
    harnesses: HarnessRegistry | None = None,
) -> AsyncIterator[RunnerPlace]:
    """The runner's machine for the length of the block.

    Before yielding, what a dead runner (or runtime) left is ended. Leaving the block
    terminates every harness process it started and kills its tmux server with every
    pane left in it (bounded).

    Raises:
        ToolError: ``workspace`` is not a directory.
    """
    root = await trio.to_thread.run_sync(resolve_root, workspace)
    groups = GroupFiles(home / "run" / "groups")
    killed = await groups.sweep(_GRACE)
    if killed:
        log.warning("ended %d process group(s) a previous runner left", killed)
    async with (
        open_process_manager(home) as processes,
        open_tmux_server(tmux_base(home)) as tmux,
        httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=30.0)) as http,
    ):
        yield RunnerPlace(
            workspace=root,
            home=home,
            trust=trust if trust is not None else ClientTrust(),
            processes=processes,
            groups=groups,
            tmux=tmux,
            http=http,
            harnesses=harnesses if harnesses is not None else HarnessRegistry(),
            trusted_agent=trusted_agent,
        )
