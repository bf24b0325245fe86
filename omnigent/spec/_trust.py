"""What a spec sent by a client may not ask for: programs, variables, URLs, places.

A spec is code-adjacent: besides prompts and policies it can name programs the runtime
starts (an external harness's ``executor.config.command``, a stdio MCP server's
``command``, a terminal's ``command``), the environment they start with, URLs the
server then fetches (``executor.config.base_url``, ``mcp_servers[].url`` with its
``headers``) and the directory the OS tools act in. The operator's own specs (``serve
--agents``, ``omnigent run``, the library) may do all of that. A spec that arrives from
a client of a server (``POST /v1/agents``, a spec file an agent wrote and registers
with ``sys_session_create``) may only what the operator's :class:`ClientTrust` allows:

* a program by its name (``serve --allow-command``);
* an environment variable by its name (``serve --allow-env``; ``LD_PRELOAD``,
  ``NODE_OPTIONS`` or ``PYTHONPATH`` would make an allowed program run other code);
* a model endpoint or an MCP server's URL under an allowed prefix (``serve
  --allow-model-url``, ``--allow-mcp-url``): a server fetching any URL a client names
  is a request forgery (metadata addresses, internal services) — and what such a URL
  is fetched through is guarded too (:mod:`omnigent.outbound`);
* a working directory — and what its sandbox grants (``os_env.sandbox.read_paths``,
  ``write_paths``, ``write_files``) — inside the server's workspace (relative,
  without ``~`` or ``..``); nor may it pass the server's environment into its
  sandbox (``env_passthrough``: the server's model keys live there).

Allowing a program lets clients run it with any arguments they choose: allow only
programs that are safe in those hands (a harness or MCP server binary, not a shell or
an interpreter).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import PurePosixPath
from typing import Final

import attrs

from ..errors import ErrorDetail
from ..outbound import UrlAllowList
from ._spec import AgentSpec

__all__ = ["ClientTrust", "client_spec_problems", "env_name_problem"]

_ENV_PATTERN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")


def env_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an ``--allow-env`` entry: a variable name, or a prefix
    ending in ``*`` (``MY_TOOL_*``)."""
    if _ENV_PATTERN.fullmatch(name) is None:
        return f"must be a variable name, or a prefix ending in '*', got {name!r}"
    return None


def _frozen(values: Iterable[str]) -> frozenset[str]:
    return frozenset(values)


@attrs.frozen
class ClientTrust:
    """What the operator lets a client's spec name (see the module docstring).

    Raises:
        ValueError: (at construction) an env entry that is not a name or prefix, or a
            URL entry that is not a URL prefix.
    """

    commands: frozenset[str] = attrs.field(default=frozenset(), converter=_frozen)
    env: frozenset[str] = attrs.field(default=frozenset(), converter=_frozen)
    mcp_urls: UrlAllowList = attrs.field(factory=UrlAllowList)
    model_urls: UrlAllowList = attrs.field(factory=UrlAllowList)

    def __attrs_post_init__(self) -> None:
        for name in self.env:
            problem = env_name_problem(name)
            if problem is not None:
                raise ValueError(problem)

    def allows_env(self, name: str) -> bool:
        """Whether a client may set variable ``name`` for a program it names."""
        return name in self.env or any(
            entry.endswith("*") and name.startswith(entry[:-1]) for entry in self.env
        )

    def program_problems(self, program: str, loc: str) -> list[ErrorDetail]:
        if program in self.commands:
            return []
        known = ", ".join(sorted(self.commands)) or "none"
        return [
            ErrorDetail(
                loc,
                f"this server runs no program a client names ({program!r}); the operator "
                f"can allow one with `serve --allow-command {program}` (allowed: {known})",
            )
        ]

    def env_problems(self, env: Mapping[str, str], loc: str) -> list[ErrorDetail]:
        return [
            ErrorDetail(
                f"{loc}.{name}",
                f"a client may not set {name!r} for a program; the operator can allow "
                f"the variable with `serve --allow-env {name}`",
            )
            for name in env
            if not self.allows_env(name)
        ]

    def url_problems(self, url: str, loc: str, *, model: bool) -> list[ErrorDetail]:
        allow, option = (
            (self.model_urls, "--allow-model-url") if model else (self.mcp_urls, "--allow-mcp-url")
        )
        if allow.admits(url):
            return []
        return [
            ErrorDetail(
                loc,
                "this server fetches no URL a client names; the operator can allow a "
                f"prefix with `serve {option} URL`",
            )
        ]


def client_spec_problems(
    spec: AgentSpec, trust: ClientTrust | Collection[str]
) -> list[ErrorDetail]:
    """Every place a client's ``spec`` (and its sub-agents) oversteps, by field path.

    ``trust`` may be just the allowed programs (nothing else is then allowed).
    """
    if not isinstance(trust, ClientTrust):
        trust = ClientTrust(commands=trust)
    return list(_problems(spec, "", trust))


def _problems(spec: AgentSpec, root: str, trust: ClientTrust) -> Iterator[ErrorDetail]:
    config = spec.executor.config
    if config.command:
        yield from trust.program_problems(config.command[0], f"{root}executor.config.command")
    yield from trust.env_problems(config.env, f"{root}executor.config.env")
    if config.base_url is not None:
        yield from trust.url_problems(
            config.base_url, f"{root}executor.config.base_url", model=True
        )
    for index, server in enumerate(spec.mcp_servers):
        at = f"{root}mcp_servers[{index}]"
        if server.command:
            yield from trust.program_problems(server.command[0], f"{at}.command")
        yield from trust.env_problems(server.env, f"{at}.env")
        if server.url is not None:
            yield from trust.url_problems(server.url, f"{at}.url", model=False)
    for name, terminal in spec.terminals.items():
        yield from trust.program_problems(terminal.command, f"{root}terminals.{name}.command")
        yield from trust.env_problems(terminal.env, f"{root}terminals.{name}.env")
    if spec.os_env is not None:
        yield from _os_env(spec, root)
    for index, sub in enumerate(spec.sub_agents):
        yield from _problems(sub, f"{root}sub_agents[{index}].", trust)


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
