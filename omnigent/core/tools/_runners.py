"""Runners, as the core sees them: where a runner-bound session's work is sent.

A session may be bound to a *runner* (``runner_id``, see ``docs/runners.md``): a process
on another machine that runs what touches files or starts processes. The core knows
nothing of how a runner is reached; it is given a :class:`Runners` (the server's runner
hub, :mod:`omnigent.transports.runner`) and asks it for two things per session:

* the session's harness — a stand-in whose ``run_turn`` has the runner run the real
  one, every call of it served by the core's own turn (events, tools, policies,
  elicitations stay here);
* the session's :class:`Workplace` — where its OS tools run once the policies let a
  call through, and where its terminals' panes live.

A runtime opened without one refuses to run a runner-bound session's turn
(:func:`no_runners`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ...errors import RunnerOffline
from ...harnesses.base import Harness, HarnessEnv
from ..cluster import RunnerLinks
from ..work import Panes

__all__ = ["Runners", "Workplace", "no_runners"]


class Workplace(Protocol):
    """Where a runner-bound session's OS tools run and its terminals live."""

    runner_id: str

    @property
    def panes(self) -> Panes:
        """The runner's tmux server, for this session's terminals."""
        ...

    async def start_directory(self, spec_cwd: str | None, raw: str | None) -> Path:
        """Where a terminal starts, resolved on the runner inside the session's working
        directory there (see :func:`omnigent.tools.terminals.start_directory`).

        Raises:
            ToolError: naming the directory and what is wrong with it, or the runner
                is offline.
        """
        ...

    async def run_tool(self, name: str, args: dict[str, Any]) -> str:
        """Run an OS tool (``sys_os_*``) there; its output, failures as ``Error: …``.

        Cancellation: the call is cancelled there too (a shell's group is killed).
        """
        ...


class Runners(RunnerLinks, Protocol):
    """The runners sessions may be bound to (implemented by the server's hub): its own
    links (:class:`~omnigent.core.cluster.RunnerLinks`), and what a runner-bound
    session runs on."""

    def harness(self, runner_id: str, env: HarnessEnv, agent_id: str) -> Harness:
        """The server-side harness of a session bound to ``runner_id``."""
        ...

    def workplace(self, runner_id: str, session_id: str, cwd: str | None) -> Workplace:
        """Where that session's OS tools run (``cwd``: its spec's ``os_env.cwd``)."""
        ...


def no_runners(runner_id: str) -> RunnerOffline:
    """The error for a runner-bound session in a runtime that takes no runners."""
    return RunnerOffline(
        runner_id,
        0,
        f"this session runs on runner {runner_id!r}, but this runtime accepts no "
        "runners (serve it with `omnigent serve --runner-token …`)",
    )
