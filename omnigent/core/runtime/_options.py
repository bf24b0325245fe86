"""A runtime's settings: what ``open_runtime`` was asked for, checked once.

:class:`RuntimeOptions` holds the settings of one runtime — no resource, nothing with a
lifetime — built by :func:`runtime_options` from :func:`~._open.open_runtime`'s
arguments before anything is opened, so a bad argument is refused before a store or
a process is touched. ``open_runtime`` passes it to the :class:`~._runtime.Runtime`
beside what it opened (the store, the bus, the nurseries, …).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..._config import omnigent_home
from ...errors import InvalidInput
from ...harnesses.base import HarnessFactory
from ...harnesses.registry import HarnessRegistry
from ...outbound import UrlAllowList, url_prefix_problem
from ...processes import DEFAULT_GRACE, DEFAULT_IDLE_TIMEOUT
from ...spec import ClientTrust, PolicySpec, env_name_problem, parse_policy_spec
from ..tools import PolicyAllowlist, PolicyFunctions, Runners, ToolAllowlist, ToolPlace
from ._inputs import MAX_MESSAGE_BYTES

__all__ = ["RuntimeOptions", "runtime_options"]

log = logging.getLogger(__name__)


@attrs.frozen(eq=False)
class RuntimeOptions:
    """One runtime's settings (see :func:`~omnigent.core.open_runtime` for each).

    Attributes:
        place: where sessions' OS tools act (workspace, home, default directory).
        harnesses: the harness registry (entry points and the harnesses given).
        default_policies: applied to every session after its agent's own.
        safe_defaults: ask before a command or a write outside the working directory
            when no policy has an opinion (the safe defaults, ``omnigent run``'s).
        policy_allowlist: which function policies an agent may name.
        tool_allowlist: which Python tools a client's spec may name (``tools.python``).
        client_trust: what a client's spec (or a remote client's MCP server) may name:
            programs, environment variables, model and MCP URLs.
        max_message_bytes: the largest message a session takes.
        exclusive: this runtime owns its database (else: records only).
        shutdown_grace: seconds sessions get to end at shutdown.
        harness_idle_timeout: seconds an external harness process may sit unused.
        runners: where runner-bound sessions' work is sent (the server's hub).
    """

    place: ToolPlace
    harnesses: HarnessRegistry
    default_policies: tuple[PolicySpec, ...] = ()
    safe_defaults: bool = False
    policy_allowlist: PolicyAllowlist = attrs.field(
        factory=lambda: PolicyAllowlist(load_entry_points=False)
    )
    tool_allowlist: ToolAllowlist = attrs.field(
        factory=lambda: ToolAllowlist(load_entry_points=False)
    )
    client_trust: ClientTrust = attrs.field(factory=ClientTrust)
    max_message_bytes: int = MAX_MESSAGE_BYTES
    exclusive: bool = True
    shutdown_grace: float = DEFAULT_GRACE
    harness_idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    runners: Runners | None = None

    @property
    def records_only(self) -> bool:
        """Whether the runtime only reads and writes records (``exclusive=False``)."""
        return not self.exclusive


def runtime_options(
    *,
    load_entry_points: bool = True,
    home: str | Path | None = None,
    workspace: str | Path | None = None,
    default_cwd: str | Path | None = None,
    default_policies: Sequence[Mapping[str, Any] | PolicySpec] = (),
    safe_defaults: bool = False,
    policy_functions: PolicyFunctions | None = None,
    policy_modules: Iterable[str] = (),
    tool_functions: PolicyFunctions | None = None,
    tool_modules: Iterable[str] = (),
    workspace_roots: Iterable[str | Path] | None = None,
    purge_workspaces: bool = False,
    allowed_commands: Iterable[str] = (),
    allowed_env: Iterable[str] = (),
    allowed_mcp_urls: Iterable[str] = (),
    allowed_model_urls: Iterable[str] = (),
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    exclusive: bool = True,
    shutdown_grace: float = DEFAULT_GRACE,
    harness_idle_timeout: float | None = None,
    harnesses: Mapping[str, HarnessFactory] | None = None,
    runners: Runners | None = None,
) -> RuntimeOptions:
    """Check ``open_runtime``'s settings and build the runtime's options.

    Raises:
        InvalidInput: a bad ``policy_modules`` / ``tool_modules`` name or
            ``policy_functions`` / ``tool_functions`` entry, an ``allowed_mcp_urls`` or
            ``allowed_model_urls`` entry that is not an http(s) URL prefix, or an
            ``allowed_env`` entry that is not a name.
    """
    place = ToolPlace(
        workspace=Path(workspace) if workspace is not None else Path.cwd(),
        home=Path(home) if home is not None else omnigent_home(),
        default_cwd=Path(default_cwd) if default_cwd is not None else None,
        purge_workspaces=purge_workspaces,
        roots=None if workspace_roots is None else tuple(Path(r) for r in workspace_roots),
    )
    trust = _client_trust(allowed_commands, allowed_env, allowed_mcp_urls, allowed_model_urls)
    policies = [p if isinstance(p, PolicySpec) else parse_policy_spec(p) for p in default_policies]
    allowlist = PolicyAllowlist(
        functions=policy_functions,
        modules=policy_modules,
        trusted=[p.function for p in policies if p.function is not None],
        load_entry_points=load_entry_points,
    )
    tools = ToolAllowlist(functions=tool_functions, modules=tool_modules, load_entry_points=False)
    registry = HarnessRegistry()
    if load_entry_points:
        registry.load_entry_points()
    for name, factory in (harnesses or {}).items():
        registry.register(name, factory, replace=True)
    return RuntimeOptions(
        place=place,
        harnesses=registry,
        default_policies=tuple(policies),
        safe_defaults=safe_defaults,
        policy_allowlist=allowlist,
        tool_allowlist=tools,
        client_trust=trust,
        max_message_bytes=max_message_bytes,
        exclusive=exclusive,
        shutdown_grace=shutdown_grace,
        harness_idle_timeout=_idle_timeout(harness_idle_timeout),
        runners=runners,
    )


def _client_trust(
    commands: Iterable[str], env: Iterable[str], mcp_urls: Iterable[str], model_urls: Iterable[str]
) -> ClientTrust:
    """The operator's allow-lists for clients, each entry checked.

    Raises:
        InvalidInput: at ``allowed_env[i]``, ``allowed_mcp_urls[i]`` or
            ``allowed_model_urls[i]``.
    """
    for field, entries, check in (
        ("allowed_env", env := tuple(env), env_name_problem),
        ("allowed_mcp_urls", mcp_urls := tuple(mcp_urls), url_prefix_problem),
        ("allowed_model_urls", model_urls := tuple(model_urls), url_prefix_problem),
    ):
        for index, entry in enumerate(entries):
            problem = check(entry) if isinstance(entry, str) else "expected a string"
            if problem is not None:
                raise InvalidInput.at(f"{field}[{index}]", problem)
    return ClientTrust(
        commands=commands,
        env=env,
        mcp_urls=UrlAllowList(mcp_urls),
        model_urls=UrlAllowList(model_urls),
    )


def _idle_timeout(given: float | None) -> float:
    """The harness idle timeout: ``given``, else ``$OMNIGENT_HARNESS_IDLE_TIMEOUT``."""
    if given is not None:
        return given
    raw = os.environ.get("OMNIGENT_HARNESS_IDLE_TIMEOUT")
    if not raw:
        return DEFAULT_IDLE_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        log.warning("ignoring OMNIGENT_HARNESS_IDLE_TIMEOUT=%r (not a number >= 0)", raw)
        return DEFAULT_IDLE_TIMEOUT
    return value
