"""The rules an agent spec obeys beyond its types, and the one error they raise.

:mod:`omnigent.spec` declares each class's per-field rules as a ``_rules`` mapping of
field name to one of the checks here, and calls :func:`validate` from
``__attrs_post_init__`` with any cross-field failures of its own. Keeping the checks
apart from the classes keeps :mod:`omnigent.spec` a plain statement of the spec's shape;
:mod:`omnigent.spec._wire` runs the same ``_rules`` while structuring the wire, so a
spec read from YAML and one built in Python fail the same way.

A check takes the field's value and returns :data:`Problems` with ``loc`` relative to
that value (``""`` for the value itself, ``"[2]"`` for an item), so the caller can
prefix the field path. Nothing here knows cattrs. A check that JSON Schema can state is
a :class:`Rule` carrying that statement, which the HTTP transport's OpenAPI document
shows (:mod:`omnigent.model._schema`): the check and its description sit side by side.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from ..errors import ErrorDetail, SpecError
from ..model._depth import MAX_DEPTH, render_path, too_deep
from ._yaml_json import unheld_values

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
# A terminal's resource id is ``terminal_<name>_<session key>``: no "_" in the name, so
# the id splits back into one pair.
_TERMINAL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_POLICY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_MAX_REF = 200


# -- per-value rules ------------------------------------------------------------------


@attrs.frozen
class Rule:
    """A per-field check, with the JSON Schema fragment that says the same thing.

    The fragment never says more than the check does: a document may be looser than
    the code (a rule it cannot state is simply left out), never stricter.
    """

    check: Callable[[Any], Problems]
    json_schema: Mapping[str, Any]

    def __call__(self, value: Any) -> Problems:
        return self.check(value)


def described(fragment: Mapping[str, Any]) -> Callable[[Callable[[Any], Problems]], Rule]:
    """Make a check a :class:`Rule` carrying ``fragment``, the JSON Schema it states."""

    def wrap(check: Callable[[Any], Problems]) -> Rule:
        return Rule(check, fragment)

    return wrap


def _anchored(pattern: re.Pattern[str]) -> str:
    """``pattern`` as JSON Schema states a full match (``re.fullmatch`` here)."""
    return f"^{pattern.pattern}$"


def _matches(pattern: re.Pattern[str], shape: str) -> Callable[[str], Problems]:
    def check(name: str) -> Problems:
        if len(name) > _MAX_NAME:
            return [ErrorDetail("", f"must be at most {_MAX_NAME} characters")]
        if not pattern.fullmatch(name):
            return [ErrorDetail("", f"must match {shape}, got {name!r}")]
        return []

    return check


agent_name = Rule(
    _matches(_AGENT_NAME, "[a-z0-9][a-z0-9._-]*"),
    {"maxLength": _MAX_NAME, "pattern": _anchored(_AGENT_NAME)},
)
mcp_name = Rule(
    _matches(_MCP_NAME, "lowercase words joined by single '_' or '-'"),
    {"maxLength": _MAX_NAME, "pattern": _anchored(_MCP_NAME)},
)


def shallow(value: Any) -> Problems:
    """Free-form data (``metadata``, a step's ``args``) nests at most ``MAX_DEPTH`` deep
    and holds only JSON values (a spec is stored as JSON).

    A spec built in Python skips the wire's checks; without this, a deep value would
    surface as a ``RecursionError`` wherever the spec is next encoded, and a
    ``datetime`` or a NaN as a ``500`` from the store's encoder.
    """
    path = too_deep(value)
    if path is None:
        return unheld_values(value)
    return [ErrorDetail(render_path("", path), f"nested deeper than {MAX_DEPTH} levels")]


@described({"minLength": 1, "minItems": 1})
def non_empty(value: str | tuple[Any, ...] | None) -> Problems:
    return [ErrorDetail("", "must not be empty")] if value is not None and not value else []


@described({"minItems": 1, "items": {"minLength": 1}})
def command(argv: tuple[str, ...] | None) -> Problems:
    if argv is None:
        return []
    if not argv:
        return [ErrorDetail("", "must not be empty")]
    return [ErrorDetail(f"[{i}]", "must not be empty") for i, arg in enumerate(argv) if not arg]


@described({"minimum": 1})
def at_least_one(value: int) -> Problems:
    return [] if value >= 1 else [ErrorDetail("", f"must be at least 1, got {value}")]


@described({"minimum": 0})
def seconds(value: float) -> Problems:
    if math.isfinite(value) and value >= 0:
        return []
    return [ErrorDetail("", f"must be a finite number >= 0, got {value}")]


# The reference's shape (Python identifiers, in any script) is left to the check.
@described({"maxLength": _MAX_REF})
def function_ref(ref: str | None) -> Problems:
    """A ``function`` policy's reference: ``pkg.module:attr``, or a name.

    A name (``pkg.module.attr``, ``ask_for_bash``, ``acme-guard``) is looked up among
    the functions the operator registered and the ``omnigent.policies`` entry points,
    then as a dotted module path; whether it may run is the runtime's decision.
    """
    if ref is None:
        return []
    if len(ref) > _MAX_REF:
        return [ErrorDetail("", f"must be at most {_MAX_REF} characters")]
    module, colon, attr = ref.partition(":")
    if colon:
        if all(p.isidentifier() for part in (module, attr) for p in part.split(".")):
            return []
    elif _POLICY_NAME.fullmatch(ref):
        return []
    return [ErrorDetail("", f"must be 'pkg.module:attr' or a registered name, got {ref!r}")]


@described({"maxLength": _MAX_REF})
def agent_ref(ref: str | None) -> Problems:
    """An ``openai-agents`` agent: ``package.module:attr`` (identifiers only)."""
    if ref is None:
        return []
    if len(ref) > _MAX_REF:
        return [ErrorDetail("", f"must be at most {_MAX_REF} characters")]
    module, colon, attr = ref.partition(":")
    if colon and all(p.isidentifier() for part in (module, attr) for p in part.split(".")):
        return []
    return [ErrorDetail("", f"must be 'package.module:attr', got {ref!r}")]


@described({"exclusiveMinimum": 0})
def optional_positive(value: float | None) -> Problems:
    if value is None or (math.isfinite(value) and value > 0):
        return []
    return [ErrorDetail("", f"must be a finite number > 0, got {value}")]


_PYTHON_REF = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
# Names the runtime's own tools use: a Python tool of a spec may not take one.
_RESERVED_TOOL_PREFIXES = ("sys_", "mcp__")


def python_tool_name(ref: str) -> str:
    """The name a spec's Python tool ``pkg.module:fn`` is offered under: ``fn``."""
    return ref.rpartition(":")[2].rpartition(".")[2]


@described({"items": {"maxLength": _MAX_REF, "pattern": _anchored(_PYTHON_REF)}})
def python_tools(refs: tuple[str, ...]) -> Problems:
    """``tools.python``: ``pkg.module:function`` references, each offered under the
    function's own name, which must be unique and not a built-in's (``sys_*``,
    ``mcp__*``)."""
    problems: Problems = []
    seen: dict[str, str] = {}
    for index, ref in enumerate(refs):
        loc = f"[{index}]"
        if len(ref) > _MAX_REF or not _PYTHON_REF.fullmatch(ref):
            problems.append(
                ErrorDetail(loc, f"must be 'pkg.module:function' (Python names), got {ref!r}")
            )
            continue
        name = python_tool_name(ref)
        if len(name) > 64:
            problems.append(ErrorDetail(loc, f"a tool name is at most 64 characters: {name!r}"))
        elif name.startswith(_RESERVED_TOOL_PREFIXES):
            problems.append(
                ErrorDetail(loc, f"tool {name!r} clashes with omnigent's own (sys_*, mcp__*)")
            )
        elif name in seen:
            problems.append(
                ErrorDetail(loc, f"tool {name!r} clashes with {seen[name]!r}, also named {name!r}")
            )
        seen.setdefault(name, ref)
    return problems


@described({"minimum": 0})
def optional_seconds(value: float | None) -> Problems:
    return [] if value is None else seconds(value)


@described({"propertyNames": {"pattern": _anchored(_TERMINAL_NAME)}})
def terminal_names(terminals: dict[str, Any]) -> Problems:
    return [
        ErrorDetail(
            name,
            "a terminal name must be 1-64 letters, digits, '.' or '-' (no '_'), "
            "starting with a letter or digit",
        )
        for name in terminals
        if not _TERMINAL_NAME.fullmatch(name)
    ]


@described({"propertyNames": {"pattern": _anchored(_ENV_NAME)}})
def env_names(env: dict[str, str]) -> Problems:
    return [
        ErrorDetail(name, "an environment variable name must match [A-Za-z_][A-Za-z0-9_]*")
        for name in env
        if not _ENV_NAME.fullmatch(name)
    ]


@described({"pattern": "^https?://"})
def url(value: str | None) -> Problems:
    if value is None or value.startswith(("http://", "https://")):
        return []
    return [ErrorDetail("", f"must be an http:// or https:// URL, got {value!r}")]


# -- applying them to an object -------------------------------------------------------


def rules_of(cls: type) -> Rules:
    """The per-field rules ``cls`` declares (none if it has no ``_rules``)."""
    rules: Rules = getattr(cls, "_rules", {})
    return rules


def _join(field: str, loc: str) -> str:
    if not loc:
        return field
    return f"{field}{loc}" if loc.startswith("[") else f"{field}.{loc}"


def validate(obj: object, cross: Sequence[ErrorDetail] = ()) -> None:
    """Raise one :class:`SpecError` for every field rule and ``cross`` failure."""
    problems = [
        ErrorDetail(_join(name, d.loc), d.msg)
        for name, rule in rules_of(type(obj)).items()
        for d in rule(getattr(obj, name))
    ]
    problems.extend(cross)
    if problems:
        summary = "; ".join(f"{d.msg} @ {d.loc or '$'}" for d in problems[:5])
        raise SpecError(f"invalid {type(obj).__name__}: {summary}", problems)


def duplicates(names: list[str], where: str, what: str) -> Problems:
    """A problem at ``where[i].name`` for each name already seen earlier in ``names``."""
    seen: set[str] = set()
    problems = []
    for index, name in enumerate(names):
        if name in seen:
            problems.append(ErrorDetail(f"{where}[{index}].name", f"duplicate {what} {name!r}"))
        seen.add(name)
    return problems
