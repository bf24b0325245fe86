"""The agent spec: what an agent is, as frozen attrs classes parsed strictly.

A spec arrives as YAML, JSON or a dict (see ``API.md``, "Agent spec") and is built
with the strict wire converter of :mod:`omnigent.model._wire`: nothing is coerced
(``spawn: "yes"`` and ``max_steps: "3"`` are errors), unknown keys are refused, and
``Literal`` fields take only their listed values.

Contract:

* Every failure is **one** :class:`~omnigent.errors.SpecError` whose ``details`` name
  each failing field by path (``executor.config.script[2].sleep``, ``policies[0].type``,
  ``bogus_key``). Type errors, per-field rules (the name pattern, ``max_steps >= 1``)
  and cross-field rules (``tools.agents`` naming a sub-agent, unique names,
  ``script``/``turns`` exclusivity) are collected together; only the cross-field rules
  of an object whose own fields failed are skipped, since there is nothing to compare.
* The same rules hold for specs built in Python: constructing an invalid object raises
  :class:`SpecError` with paths relative to that object.
* :meth:`AgentSpec.to_dict` is the wire form (``None`` fields left out) and round-trips:
  ``AgentSpec.from_dict(spec.to_dict()) == spec``.
* Specs are immutable and compare by value. ``dict`` fields (``env``, ``metadata``,
  ``options``...) are left out of ``__hash__`` so that specs stay hashable, and must not
  be mutated.

This module holds the spec's shape and cross-field rules; the executor and the
scripted harness's steps (what a harness reads) are in :mod:`omnigent.spec._executor`,
the per-field checks in :mod:`omnigent.spec._rules`, and the cattrs hooks that apply
them to the wire in :mod:`omnigent.spec._wire`, registered on the converter for every
class of both modules at the end of this one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs

from ..errors import ErrorDetail, SpecError
from ..model._wire import structure, unstructure
from . import _rules as rule
from ._executor import EXECUTOR_CLASSES, STEP_KINDS, ExecutorSpec, ScriptStep
from ._importable import commands_beside
from ._rules import Rules
from ._sandbox import SandboxSpec
from ._wire import register_spec_hooks
from ._yaml import load_yaml

__all__ = [
    "AgentSpec",
    "LimitsSpec",
    "McpServerSpec",
    "OsEnv",
    "PolicySpec",
    "TerminalSpec",
    "ToolsGrant",
    "parse_policy_spec",
]


# -- the spec -------------------------------------------------------------------------


def _no_sandbox() -> SandboxSpec:
    return SandboxSpec(type="none")


@attrs.frozen
class OsEnv:
    """The OS environment the agent's tools act in; ``cwd`` defaults to the caller's.

    ``sandbox`` confines every process the session starts (``docs/sandbox.md``); a
    spec without the block has none (``type: none``), one with a block but no
    ``type`` gets this platform's (``auto``). ``fork`` and ``start_in_scratch`` are
    the original omnigent's and parse, but are refused at registration (see
    :mod:`omnigent.spec._unbuilt`).
    """

    type: Literal["caller_process"] = "caller_process"
    cwd: str | None = None
    sandbox: SandboxSpec = attrs.field(factory=_no_sandbox)
    fork: bool = False
    start_in_scratch: bool = False


@attrs.frozen
class ToolsGrant:
    """Extra tools granted: ``agents`` are sub-agents this agent may dispatch to;
    ``python`` are Python callables (``pkg.module:function``) offered to this agent as
    tools under the function's own name."""

    _rules: ClassVar[Rules] = {"python": rule.python_tools}
    agents: tuple[str, ...] = ()
    python: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        rule.validate(self)


@attrs.frozen
class TerminalSpec:
    """A named terminal the agent can open (grants the ``sys_terminal_*`` tools).

    ``command`` and ``args`` run in a tmux pane, with ``env`` added to the runtime's
    environment, starting in ``cwd`` (relative to the session's working directory and
    inside it; default: the working directory). When the screen settles for
    ``idle_after`` seconds (default :attr:`DEFAULT_IDLE_AFTER`; ``0``: never) after
    output the agent has not read, the agent is woken with a ``terminal_idle`` inbox
    item.
    """

    DEFAULT_IDLE_AFTER: ClassVar[float] = 5.0
    _rules: ClassVar[Rules] = {
        "command": rule.non_empty,
        "env": rule.env_names,
        "idle_after": rule.optional_seconds,
    }
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = attrs.field(factory=dict, hash=False, repr=False)
    cwd: str | None = None
    idle_after: float | None = None

    @property
    def idle_seconds(self) -> float | None:
        """Seconds of quiet before an idle notice; None when notices are off."""
        if self.idle_after is None:
            return self.DEFAULT_IDLE_AFTER
        return self.idle_after or None

    def __attrs_post_init__(self) -> None:
        rule.validate(self)


@attrs.frozen
class LimitsSpec:
    """A session's budget: the most its model calls may use, summed over its turns.

    A turn that would cross a limit with its next model call ends ``failed`` with the
    code ``budget_exceeded`` before making it (``docs/observability.md``).
    ``max_cost_usd`` counts only priced calls (the configuration's ``prices``).
    """

    _rules: ClassVar[Rules] = {
        "max_cost_usd": rule.optional_positive,
        "max_tokens": rule.optional_positive,
    }
    max_cost_usd: float | None = None
    max_tokens: int | None = None

    def __attrs_post_init__(self) -> None:
        rule.validate(self)

    @property
    def bounded(self) -> bool:
        """Whether any limit is set (with none, no budget is checked)."""
        return self.max_cost_usd is not None or self.max_tokens is not None


PolicyType = Literal["ask_tools", "deny_tools", "allow_tools", "function"]


@attrs.frozen
class PolicySpec:
    """A rule applied to tool calls.

    ``ask_tools``/``deny_tools``/``allow_tools`` apply to the listed ``tools``;
    ``function`` calls the importable ``function`` (``pkg.mod:attr``) to decide.
    ``reason`` is shown to the user or model when the policy asks or denies.
    """

    _rules: ClassVar[Rules] = {"name": rule.non_empty, "function": rule.function_ref}
    name: str
    type: PolicyType
    tools: tuple[str, ...] = ()
    function: str | None = None
    reason: str | None = None

    def __attrs_post_init__(self) -> None:
        cross = []
        if self.type == "function":
            if self.function is None:
                cross.append(ErrorDetail("function", "required for function policies"))
            if self.tools:
                cross.append(ErrorDetail("tools", "only valid for tool policies"))
        else:
            if not self.tools:
                cross.append(ErrorDetail("tools", f"required for {self.type} policies"))
            if self.function is not None:
                cross.append(ErrorDetail("function", "only valid for function policies"))
        rule.validate(self, cross)


@attrs.frozen
class McpServerSpec:
    """An MCP server: started by ``command`` (stdio) or reached at ``url`` (HTTP).

    Its tools appear to the model as ``mcp__<name>__<tool>``.
    """

    _rules: ClassVar[Rules] = {"name": rule.mcp_name, "command": rule.command, "url": rule.url}
    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: dict[str, str] = attrs.field(factory=dict, hash=False, repr=False)
    headers: dict[str, str] = attrs.field(factory=dict, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        cross = []
        if self.command is None and self.url is None:
            cross.append(ErrorDetail("command", "required unless url is given"))
        if self.command is not None and self.url is not None:
            cross.append(ErrorDetail("url", "not allowed together with command"))
        if self.env and self.command is None:
            cross.append(ErrorDetail("env", "only valid with command"))
        if self.headers and self.url is None:
            cross.append(ErrorDetail("headers", "only valid with url"))
        rule.validate(self, cross)


Sharing = Literal["none", "non-public", "public"]


@attrs.frozen
class AgentSpec:
    """An agent: its prompt, executor, environment, sub-agents, tools and policies.

    Build one with :meth:`from_yaml`, :meth:`from_json`, :meth:`from_dict` or
    :meth:`load`; all raise :class:`~omnigent.errors.SpecError` naming every bad
    field. ``metadata`` is free-form and never read by omnigent.
    """

    _rules: ClassVar[Rules] = {
        "name": rule.agent_name,
        "terminals": rule.terminal_names,
        "metadata": rule.shallow,
    }
    name: str
    description: str = ""
    prompt: str = ""
    executor: ExecutorSpec = attrs.field(factory=ExecutorSpec)
    os_env: OsEnv | None = None
    sub_agents: tuple[AgentSpec, ...] = ()
    tools: ToolsGrant = attrs.field(factory=ToolsGrant)
    spawn: bool = False
    async_enabled: bool = True
    terminals: dict[str, TerminalSpec] = attrs.field(factory=dict, hash=False)
    policies: tuple[PolicySpec, ...] = ()
    agent_session_sharing: Sharing = "none"
    mcp_servers: tuple[McpServerSpec, ...] = ()
    limits: LimitsSpec = attrs.field(factory=LimitsSpec)
    metadata: dict[str, Any] = attrs.field(factory=dict, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        sub_names = [a.name for a in self.sub_agents]
        cross = rule.duplicates(sub_names, "sub_agents", "sub-agent name")
        known = ", ".join(dict.fromkeys(sub_names)) or "none defined"
        cross += [
            ErrorDetail(f"tools.agents[{i}]", f"no sub-agent named {n!r} (sub_agents: {known})")
            for i, n in enumerate(self.tools.agents)
            if n not in sub_names
        ]
        cross += rule.duplicates([p.name for p in self.policies], "policies", "policy name")
        cross += rule.duplicates([m.name for m in self.mcp_servers], "mcp_servers", "server name")
        rule.validate(self, cross)

    @property
    def harness(self) -> str:
        """The harness that runs this agent's turns (``executor.config.harness``)."""
        return self.executor.config.harness

    @property
    def model(self) -> str | None:
        """The model name, if the spec sets one (``executor.config.model``)."""
        return self.executor.config.model

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentSpec:
        """Build a spec from decoded YAML/JSON data.

        Raises:
            SpecError: naming every failing field (``$`` if ``data`` is not a mapping).
        """
        if not isinstance(data, Mapping):
            raise SpecError.at("$", "an agent spec must be a mapping")
        return structure(data, cls, error=SpecError)

    @classmethod
    def from_yaml(cls, text: str, *, aliases: bool = True) -> AgentSpec:
        """Build a spec from YAML text, read within bounds (:func:`load_yaml`).

        Args:
            text: the YAML document.
            aliases: accept ``*alias`` references (their expanded size is bounded);
                pass ``False`` for YAML a client sent, as the HTTP route does.

        Blocking and CPU-bound for large documents: from async code, call it in
        ``trio.to_thread.run_sync``.

        Raises:
            SpecError: for a YAML syntax error, a document too long, too deep or (with
                aliases) too large once expanded (at ``$``, with the line in the
                message), or an invalid spec.
        """
        return cls.from_dict(load_yaml(text, aliases=aliases, what="YAML"))

    @classmethod
    def from_json(cls, text: str) -> AgentSpec:
        """Build a spec from JSON text.

        Raises:
            SpecError: for a JSON syntax error (at ``$``) or an invalid spec.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError.at("$", f"invalid JSON at line {exc.lineno}: {exc.msg}") from exc
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | Path) -> AgentSpec:
        """Read a spec file: JSON if it ends in ``.json``, YAML otherwise.

        A program the spec starts may be named by a path relative to the file's folder:
        an element of an external harness's or a stdio MCP server's ``command`` (its
        own's and its sub-agents') that names a file beside the spec — ``[python,
        my_harness.py]``, ``[./bin/server]`` — is made absolute, so the spec runs from
        any directory (:func:`~._importable.commands_beside`).

        Blocking file I/O: from async code, call it in ``trio.to_thread.run_sync``.

        Raises:
            OSError: the file cannot be read.
            SpecError: the file is not a valid spec.
        """
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        spec = cls.from_json(text) if path.suffix.lower() == ".json" else cls.from_yaml(text)
        return commands_beside(spec, path.resolve().parent)

    def granted_sub_agents(self) -> dict[str, AgentSpec]:
        """The sub-agents this agent may dispatch to by name (``tools.agents``), in order."""
        by_name = {sub.name: sub for sub in self.sub_agents}
        return {name: by_name[name] for name in self.tools.agents if name in by_name}

    def to_dict(self) -> dict[str, Any]:
        """The wire form (JSON-ready; ``None`` fields left out); round-trips via from_dict."""
        out: dict[str, Any] = unstructure(self)
        return out


# Registered at import, before any structure call (see register_spec_hooks).
register_spec_hooks(
    ScriptStep,
    STEP_KINDS,
    (
        *EXECUTOR_CLASSES,
        SandboxSpec,
        OsEnv,
        ToolsGrant,
        TerminalSpec,
        PolicySpec,
        McpServerSpec,
        LimitsSpec,
        AgentSpec,
    ),
)


def parse_policy_spec(data: Any, *, root: str = "") -> PolicySpec:
    """One policy (as in a spec's ``policies`` list), e.g. a server-wide default.

    Raises:
        SpecError: naming every failing field under ``root``.
    """
    policy: PolicySpec = structure(data, PolicySpec, root=root, error=SpecError)
    return policy


def agent_references(spec: AgentSpec) -> tuple[str, ...]:
    """Every ``executor.config.agent`` of ``spec`` and its sub-agents, each once (the
    ``openai-agents`` agents it names: code that runs only if the operator trusts it)."""
    refs = [spec.executor.config.agent] if spec.executor.config.agent else []
    for sub in spec.sub_agents:
        refs += agent_references(sub)
    return tuple(dict.fromkeys(refs))
