"""Runners, as the core sees them: where a runner-bound session's work is sent.

A session may be bound to a *runner* (``runner_id``, see ``docs/runners.md``): a process
on another machine that runs what touches files or starts processes. The core knows
nothing of how a runner is reached; it is given a :class:`Runners` (the server's runner
hub, :mod:`omnigent.transports.runner`) and asks it for two things per session:

* the session's harness — a stand-in whose ``run_turn`` has the runner run the real
  one, every call of it served by the core's own turn (events, tools, policies,
  elicitations stay here);
* the session's :class:`Workplace` — where its OS tools run once the policies let a
  call through, where its terminals' panes live, and where its stdio MCP servers run
  (:class:`ToolServers`).

A runtime opened without one refuses to run a runner-bound session's turn
(:func:`no_runners`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import trio

from ...errors import RunnerOffline
from ...harnesses.base import Harness, HarnessEnv, ToolSchema
from ...model import ElicitationParams
from ...spec import AgentSpec
from ..cluster import RunnerLinks
from ..work import Panes

__all__ = ["McpAsk", "Runners", "ToolServers", "Workplace", "no_runners"]

McpAsk = Callable[[ElicitationParams, bool], Awaitable[tuple[str, Any]]]
"""Ask the person behind a session for an MCP server: ``(params, in_turn) -> (action,
content)``."""


class ToolServers(Protocol):
    """A session's MCP servers, as its tools use them: the local
    :class:`~omnigent.mcp.McpServers`, or those its runner holds."""

    @property
    def started(self) -> bool:
        """Whether :meth:`start` has connected them (a task of the session holds them)."""
        ...

    def schemas(self) -> tuple[ToolSchema, ...]:
        """Their tools, as the model is offered them (empty before start)."""
        ...

    def offers(self, name: str) -> bool:
        """Whether ``name`` is one of their tools."""
        ...

    async def start(self, nursery: trio.Nursery) -> None:
        """Connect them (once), in a task of ``nursery`` that holds them.

        Raises:
            HarnessError: a server did not start (the turn fails with it).
        """
        ...

    def close(self) -> None:
        """Close them (the holding task ends)."""
        ...

    async def call(self, name: str, arguments: Mapping[str, Any], *, in_turn: bool) -> str:
        """Call one of their tools; its result (``Error: …`` on failure)."""
        ...


class Workplace(Protocol):
    """Where a runner-bound session's OS tools run and its terminals live."""

    runner_id: str

    @property
    def spec(self) -> AgentSpec:
        """The session's spec as its runner is given it (with the sandbox it runs in,
        an ancestor's when it has none of its own: see ``spec_for_runner``)."""
        ...

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

    def mcp_servers(self, ask: McpAsk) -> ToolServers:
        """The spec's stdio MCP servers, run on the runner (their elicitations ``ask``
        here)."""
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

    def workplace(
        self, runner_id: str, session_id: str, spec: AgentSpec, agent_id: str | None = None
    ) -> Workplace:
        """Where that session's OS tools, terminals and stdio MCP servers run (``spec``:
        as the runner is given it, its sandbox included; ``agent_id``: its agent, which
        its runner may trust)."""
        ...


def no_runners(runner_id: str) -> RunnerOffline:
    """The error for a runner-bound session in a runtime that takes no runners."""
    return RunnerOffline(
        runner_id,
        0,
        f"this session runs on runner {runner_id!r}, but this runtime accepts no "
        "runners (serve it with `omnigent serve --runner-token …`)",
    )
