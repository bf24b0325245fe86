"""What a spec sent by a client may not ask for: programs to run, places to act.

A spec is code-adjacent: besides prompts and policies it can name programs the runtime
starts (an external harness's ``executor.config.command``, a stdio MCP server's
``command``, a terminal's ``command``) and the directory the OS tools act in. The
operator's own specs (``serve --agents``, ``omnigent run``, the library) may do all of
that. A spec that arrives from a client of a server (``POST /v1/agents``, a spec file
an agent wrote and registers with ``sys_session_create``) may not: a program is run
only if the operator allowed it by name (``serve --allow-command``,
``open_runtime(allowed_commands=...)``), and the working directory — and what its sandbox
grants (``os_env.sandbox.read_paths``, ``write_paths``, ``write_files``) — must stay
inside the server's workspace (relative, without ``~`` or ``..``); nor may it pass the
server's environment into its sandbox (``env_passthrough``: the server's model keys
live there).

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
    if spec.os_env is not None:
        yield from _os_env(spec, root)
    for index, sub in enumerate(spec.sub_agents):
        yield from _problems(sub, f"{root}sub_agents[{index}].", allowed)


def _outside(raw: str) -> bool:
    path = PurePosixPath(raw)
    return raw.startswith("~") or path.is_absolute() or ".." in path.parts


def _os_env(spec: AgentSpec, root: str) -> Iterator[ErrorDetail]:
    """The working directory and the sandbox's grants stay inside the workspace, and
    the server's environment stays the server's."""
    assert spec.os_env is not None
    if spec.os_env.cwd and _outside(spec.os_env.cwd):
        yield ErrorDetail(
            f"{root}os_env.cwd",
            "a spec sent by a client may only name a relative working directory "
            "inside the server's workspace (no absolute path, no '..')",
        )
    sandbox = spec.os_env.sandbox
    for key in ("read_paths", "write_paths", "write_files"):
        for index, raw in enumerate(getattr(sandbox, key)):
            if _outside(raw):
                yield ErrorDetail(
                    f"{root}os_env.sandbox.{key}[{index}]",
                    "a spec sent by a client may only grant paths inside its workspace "
                    "(relative, no '~', no '..')",
                )
    if sandbox.env_passthrough:
        yield ErrorDetail(
            f"{root}os_env.sandbox.env_passthrough",
            "a spec sent by a client cannot pass the server's environment into its sandbox",
        )


def _program(program: str, loc: str, allowed: Collection[str]) -> Iterator[ErrorDetail]:
    if program in allowed:
        return
    known = ", ".join(sorted(allowed)) or "none"
    yield ErrorDetail(
        loc,
        f"this server runs no program a client names ({program!r}); the operator can "
        f"allow one with `serve --allow-command {program}` (allowed: {known})",
    )
