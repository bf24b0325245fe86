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
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeAlias

import attrs
import yaml
from cattrs.errors import ClassValidationError
from cattrs.gen import make_dict_structure_fn, override

from .errors import ErrorDetail, SpecError
from .model._wire import WireError, converter, structure, unstructure

__all__ = [
    "AgentSpec",
    "CallStep",
    "ExecutorConfig",
    "ExecutorSpec",
    "FailStep",
    "McpServerSpec",
    "OsEnv",
    "PolicySpec",
    "SandboxSpec",
    "SayStep",
    "ScriptStep",
    "SleepStep",
    "TerminalSpec",
    "ToolsGrant",
    "parse_policy_spec",
]

Problems: TypeAlias = list[ErrorDetail]
"""Rule failures; each ``loc`` is relative to the value or object checked."""
Rules: TypeAlias = dict[str, Callable[[Any], Problems]]
"""Per-field rules of a class (its ``_rules``), checked as the wire is structured and
again on construction, so a spec built in Python obeys them too."""

_AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
# MCP tools are exposed as ``mcp__<server>__<tool>``, and a model API takes function
# names matching ``[a-zA-Z0-9_-]+``: no dots, and no ``__`` or edge ``_`` so the server
# part can be split back out unambiguously.
_MCP_NAME = re.compile(r"[a-z0-9]+(?:[_-][a-z0-9]+)*")
_MAX_NAME = 100


# -- per-value rules ------------------------------------------------------------------


def _matches(pattern: re.Pattern[str], shape: str) -> Callable[[str], Problems]:
    def check(name: str) -> Problems:
        if len(name) > _MAX_NAME:
            return [ErrorDetail("", f"must be at most {_MAX_NAME} characters")]
        if not pattern.fullmatch(name):
            return [ErrorDetail("", f"must match {shape}, got {name!r}")]
        return []

    return check


_agent_name = _matches(_AGENT_NAME, "[a-z0-9][a-z0-9._-]*")
_mcp_name = _matches(_MCP_NAME, "lowercase words joined by single '_' or '-'")


def _non_empty(value: str | tuple[Any, ...] | None) -> Problems:
    return [ErrorDetail("", "must not be empty")] if value is not None and not value else []


def _command(argv: tuple[str, ...] | None) -> Problems:
    if argv is None:
        return []
    if not argv:
        return [ErrorDetail("", "must not be empty")]
    return [ErrorDetail(f"[{i}]", "must not be empty") for i, arg in enumerate(argv) if not arg]


def _at_least_one(value: int) -> Problems:
    return [] if value >= 1 else [ErrorDetail("", f"must be at least 1, got {value}")]


def _seconds(value: float) -> Problems:
    if math.isfinite(value) and value >= 0:
        return []
    return [ErrorDetail("", f"must be a finite number >= 0, got {value}")]


def _function_ref(ref: str | None) -> Problems:
    if ref is None:
        return []
    module, colon, attr = ref.partition(":")
    dotted = (module, attr) if colon else (ref,)
    if all(p.isidentifier() for part in dotted for p in part.split(".")) and (colon or "." in ref):
        return []
    return [ErrorDetail("", f"must be 'pkg.module:attr' or 'pkg.module.attr', got {ref!r}")]


def _url(url: str | None) -> Problems:
    if url is None or url.startswith(("http://", "https://")):
        return []
    return [ErrorDetail("", f"must be an http:// or https:// URL, got {url!r}")]


def _rules(cls: type) -> Rules:
    rules: Rules = getattr(cls, "_rules", {})
    return rules


def _join(field: str, loc: str) -> str:
    if not loc:
        return field
    return f"{field}{loc}" if loc.startswith("[") else f"{field}.{loc}"


def _validate(obj: object, cross: Sequence[ErrorDetail] = ()) -> None:
    """Raise one :class:`SpecError` for every field rule and ``cross`` failure."""
    problems = [
        ErrorDetail(_join(name, d.loc), d.msg)
        for name, rule in _rules(type(obj)).items()
        for d in rule(getattr(obj, name))
    ]
    problems.extend(cross)
    if problems:
        summary = "; ".join(f"{d.msg} @ {d.loc or '$'}" for d in problems[:5])
        raise SpecError(f"invalid {type(obj).__name__}: {summary}", problems)


def _duplicates(names: list[str], where: str, what: str) -> Problems:
    seen: set[str] = set()
    problems = []
    for index, name in enumerate(names):
        if name in seen:
            problems.append(ErrorDetail(f"{where}[{index}].name", f"duplicate {what} {name!r}"))
        seen.add(name)
    return problems


# -- the spec -------------------------------------------------------------------------


@attrs.frozen
class SayStep:
    """Scripted step: stream ``say`` as text deltas, then record an assistant message."""

    say: str


@attrs.frozen
class CallStep:
    """Scripted step: call tool ``call`` with ``args``, through the agent's policies."""

    _rules: ClassVar[Rules] = {"call": _non_empty}
    call: str
    args: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def __attrs_post_init__(self) -> None:
        _validate(self)


@attrs.frozen
class SleepStep:
    """Scripted step: wait ``sleep`` seconds (cancellable like any turn)."""

    _rules: ClassVar[Rules] = {"sleep": _seconds}
    sleep: float

    def __attrs_post_init__(self) -> None:
        _validate(self)


@attrs.frozen
class FailStep:
    """Scripted step: fail the turn with message ``fail``."""

    fail: str


ScriptStep: TypeAlias = SayStep | CallStep | SleepStep | FailStep
"""One step of the ``scripted`` harness; on the wire, the key present picks the kind."""

_STEP_KINDS: dict[str, type] = {
    "say": SayStep,
    "call": CallStep,
    "sleep": SleepStep,
    "fail": FailStep,
}


@attrs.frozen
class ExecutorConfig:
    """How the ``omnigent`` executor runs turns: which harness, model and limits.

    ``script`` (steps played on every turn) and ``turns`` (turn N plays list N, the
    last repeating) drive the ``scripted`` harness and are mutually exclusive.
    ``command`` starts an external harness (required for ``harness: external``).
    ``options`` is free-form and read by the harness.
    """

    _rules: ClassVar[Rules] = {
        "harness": _non_empty,
        "max_steps": _at_least_one,
        "turns": _non_empty,
        "command": _command,
    }
    harness: str = "loop"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    temperature: float | None = None
    max_steps: int = 50
    script: tuple[ScriptStep, ...] | None = None
    turns: tuple[tuple[ScriptStep, ...], ...] | None = None
    command: tuple[str, ...] | None = None
    env: dict[str, str] = attrs.field(factory=dict, hash=False)
    options: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def __attrs_post_init__(self) -> None:
        cross = []
        if self.script is not None and self.turns is not None:
            cross.append(ErrorDetail("turns", "script and turns are mutually exclusive"))
        if self.harness == "external" and self.command is None:
            cross.append(ErrorDetail("command", "required when harness is 'external'"))
        _validate(self, cross)


@attrs.frozen
class ExecutorSpec:
    """Which executor runs the agent; ``omnigent`` picks the harness from ``config``."""

    type: str = "omnigent"
    config: ExecutorConfig = attrs.field(factory=ExecutorConfig)


@attrs.frozen
class SandboxSpec:
    """Sandboxing of the agent's OS tools (only ``none`` for now)."""

    type: Literal["none"] = "none"


@attrs.frozen
class OsEnv:
    """The OS environment the agent's tools act in; ``cwd`` defaults to the caller's."""

    type: Literal["caller_process"] = "caller_process"
    cwd: str | None = None
    sandbox: SandboxSpec = attrs.field(factory=SandboxSpec)


@attrs.frozen
class ToolsGrant:
    """Extra tools granted: ``agents`` are sub-agents this agent may dispatch to."""

    agents: tuple[str, ...] = ()


@attrs.frozen
class TerminalSpec:
    """A named terminal the agent can open (grants the ``sys_terminal_*`` tools)."""

    _rules: ClassVar[Rules] = {"command": _non_empty}
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = attrs.field(factory=dict, hash=False)
    cwd: str | None = None

    def __attrs_post_init__(self) -> None:
        _validate(self)


PolicyType = Literal["ask_tools", "deny_tools", "allow_tools", "function"]


@attrs.frozen
class PolicySpec:
    """A rule applied to tool calls.

    ``ask_tools``/``deny_tools``/``allow_tools`` apply to the listed ``tools``;
    ``function`` calls the importable ``function`` (``pkg.mod:attr``) to decide.
    ``reason`` is shown to the user or model when the policy asks or denies.
    """

    _rules: ClassVar[Rules] = {"name": _non_empty, "function": _function_ref}
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
        _validate(self, cross)


@attrs.frozen
class McpServerSpec:
    """An MCP server: started by ``command`` (stdio) or reached at ``url`` (HTTP).

    Its tools appear to the model as ``mcp__<name>__<tool>``.
    """

    _rules: ClassVar[Rules] = {"name": _mcp_name, "command": _command, "url": _url}
    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: dict[str, str] = attrs.field(factory=dict, hash=False)
    headers: dict[str, str] = attrs.field(factory=dict, hash=False)

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
        _validate(self, cross)


Sharing = Literal["none", "non-public", "public"]


@attrs.frozen
class AgentSpec:
    """An agent: its prompt, executor, environment, sub-agents, tools and policies.

    Build one with :meth:`from_yaml`, :meth:`from_json`, :meth:`from_dict` or
    :meth:`load`; all raise :class:`~omnigent.errors.SpecError` naming every bad
    field. ``metadata`` is free-form and never read by omnigent.
    """

    _rules: ClassVar[Rules] = {"name": _agent_name}
    name: str
    description: str = ""
    prompt: str = ""
    executor: ExecutorSpec = attrs.field(factory=ExecutorSpec)
    os_env: OsEnv | None = None
    sub_agents: tuple[AgentSpec, ...] = ()
    tools: ToolsGrant = attrs.field(factory=ToolsGrant)
    spawn: bool = False
    async_enabled: bool = False
    terminals: dict[str, TerminalSpec] = attrs.field(factory=dict, hash=False)
    policies: tuple[PolicySpec, ...] = ()
    agent_session_sharing: Sharing = "none"
    mcp_servers: tuple[McpServerSpec, ...] = ()
    metadata: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def __attrs_post_init__(self) -> None:
        sub_names = [a.name for a in self.sub_agents]
        cross = _duplicates(sub_names, "sub_agents", "sub-agent name")
        known = ", ".join(dict.fromkeys(sub_names)) or "none defined"
        cross += [
            ErrorDetail(f"tools.agents[{i}]", f"no sub-agent named {n!r} (sub_agents: {known})")
            for i, n in enumerate(self.tools.agents)
            if n not in sub_names
        ]
        cross += _duplicates([p.name for p in self.policies], "policies", "policy name")
        cross += _duplicates([m.name for m in self.mcp_servers], "mcp_servers", "server name")
        _validate(self, cross)

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
    def from_yaml(cls, text: str) -> AgentSpec:
        """Build a spec from YAML text (``yaml.safe_load``).

        Raises:
            SpecError: for a YAML syntax error (at ``$``, with the line in the message)
                or an invalid spec.
        """
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise SpecError.at("$", f"invalid YAML{where}: {problem}") from exc
        return cls.from_dict(data)

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

        Blocking file I/O: from async code, call it in ``trio.to_thread.run_sync``.

        Raises:
            OSError: the file cannot be read.
            SpecError: the file is not a valid spec.
        """
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".json":
            return cls.from_json(text)
        return cls.from_yaml(text)

    def to_dict(self) -> dict[str, Any]:
        """The wire form (JSON-ready; ``None`` fields left out); round-trips via from_dict."""
        out: dict[str, Any] = unstructure(self)
        return out


# -- wire hooks (registered at import, before any structure call) ---------------------


def _wire_error(problems: Problems, cls: type) -> Exception:
    """Rule failures in the form :func:`omnigent.model._wire.structure` reports."""
    errors: list[Exception] = [WireError(d.msg, d.loc) for d in problems]
    if len(errors) == 1:
        return errors[0]
    return ClassValidationError(f"invalid {cls.__name__}", errors, cls)


def _field_hook(field_type: Any, rule: Callable[[Any], Problems]) -> Callable[[Any, Any], Any]:
    # Checking the field as it is structured reports it alongside the other field
    # errors of the same object, instead of only once the whole object has built.
    def structure_checked(value: Any, _: Any) -> Any:
        out = converter.structure(value, field_type)
        if problems := rule(out):
            raise _wire_error(problems, type(out))
        return out

    return structure_checked


def _register(cls: type) -> None:
    attrs.resolve_types(cls)
    fields = {f.name: f.type for f in attrs.fields(cls)}
    overrides = {
        name: override(struct_hook=_field_hook(fields[name], rule))
        for name, rule in _rules(cls).items()
    }
    # mypy reads ``**overrides`` as possibly feeding the ``_cattrs_*`` flags.
    make_fn: Callable[..., Callable[[Any, Any], Any]] = make_dict_structure_fn
    inner = make_fn(cls, converter, **overrides)

    def structure_spec_object(value: Any, _: Any) -> Any:
        # The dict hook raises the wire's "expected object, got <type>" for non-mappings.
        converter.structure(value, dict[str, Any])
        try:
            return inner(value, cls)
        except ClassValidationError as exc:
            # cattrs wraps what ``__init__`` raised (our SpecError from a cross-field
            # rule) in a ClassValidationError; rewrite it in the wire's terms.
            failed = [e for e in exc.exceptions if isinstance(e, SpecError)]
            if not failed:
                raise
            raise _wire_error([d for e in failed for d in e.details], cls) from None

    converter.register_structure_hook(cls, structure_spec_object)


def _structure_step(value: Any, _: Any) -> ScriptStep:
    converter.structure(value, dict[str, Any])
    kinds = [key for key in _STEP_KINDS if key in value]
    if len(kinds) != 1:
        found = f", got {' and '.join(kinds)}" if kinds else ""
        raise WireError(f"a step needs exactly one of say, call, sleep, fail{found}")
    step: ScriptStep = converter.structure(value, _STEP_KINDS[kinds[0]])
    return step


# Leaves first: a generated hook captures the hooks of its fields' classes when built.
converter.register_structure_hook(ScriptStep, _structure_step)
for _cls in (
    SayStep,
    CallStep,
    SleepStep,
    FailStep,
    ExecutorConfig,
    ExecutorSpec,
    SandboxSpec,
    OsEnv,
    ToolsGrant,
    TerminalSpec,
    PolicySpec,
    McpServerSpec,
    AgentSpec,
):
    _register(_cls)


def parse_policy_spec(data: Any, *, root: str = "") -> PolicySpec:
    """One policy (as in a spec's ``policies`` list), e.g. a server-wide default.

    Raises:
        SpecError: naming every failing field under ``root``.
    """
    policy: PolicySpec = structure(data, PolicySpec, root=root, error=SpecError)
    return policy
