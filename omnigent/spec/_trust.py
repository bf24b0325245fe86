"""What a spec sent by a client may not ask for: programs to run, places to act.

A spec is code-adjacent: besides prompts and policies it can name programs the runtime
starts (an external harness's ``executor.config.command``, a stdio MCP server's
``command``, a terminal's ``command``) and the directory the OS tools act in. The
operator's own specs (``serve --agents``, ``omnigent run``, the library) may do all of
that. A spec that arrives from a client of a server (``POST /v1/agents``, a spec file
an agent wrote and registers with ``sys_session_create``) may not: a program is run
only if the operator allowed it by name (``serve --allow-command``,
``open_runtime(allowed_commands=...)``), and the working directory must stay inside
the server's workspace (a relative ``os_env.cwd`` without ``..``).

Allowing a program lets clients run it with any arguments they choose: allow only
programs that are safe in those hands (a harness or MCP server binary, not a shell or
an interpreter).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import PurePosixPath

from ..errors import ErrorDetail
from ._spec import AgentSpec

__all__ = ["client_spec_problems"]


def client_spec_problems(spec: AgentSpec, allowed: Collection[str]) -> list[ErrorDetail]:
    """Every place a client's ``spec`` (and its sub-agents) oversteps, by field path."""
    return list(_problems(spec, "", allowed))


def _problems(spec: AgentSpec, root: str, allowed: Collection[str]) -> Iterator[ErrorDetail]:
    config = spec.executor.config
    if config.command:
        yield from _program(config.command[0], f"{root}executor.config.command", allowed)
    for index, server in enumerate(spec.mcp_servers):
        if server.command:
            yield from _program(server.command[0], f"{root}mcp_servers[{index}].command", allowed)
    for name, terminal in spec.terminals.items():
        yield from _program(terminal.command, f"{root}terminals.{name}.command", allowed)
    if spec.os_env is not None and spec.os_env.cwd:
        cwd = PurePosixPath(spec.os_env.cwd)
        if cwd.is_absolute() or ".." in cwd.parts:
            yield ErrorDetail(
                f"{root}os_env.cwd",
                "a spec sent by a client may only name a relative working directory "
                "inside the server's workspace (no absolute path, no '..')",
            )
    for index, sub in enumerate(spec.sub_agents):
        yield from _problems(sub, f"{root}sub_agents[{index}].", allowed)


def _program(program: str, loc: str, allowed: Collection[str]) -> Iterator[ErrorDetail]:
    if program in allowed:
        return
    known = ", ".join(sorted(allowed)) or "none"
    yield ErrorDetail(
        loc,
        f"this server runs no program a client names ({program!r}); the operator can "
        f"allow one with `serve --allow-command {program}` (allowed: {known})",
    )
