"""The ``os_env.sandbox`` block: the original omnigent's fields, read strictly.

Every field of the original's block is accepted under its own name (a spec written
for it registers here unchanged, and cloning keeps every field): ``type``,
``read_paths``, ``write_paths``, ``write_files``, ``allow_network``,
``cwd_allow_hidden``, ``cwd_hidden_scan_max_entries``, ``cwd_hidden_scan_overflow``,
``env_passthrough``, ``egress_rules``, ``egress_allow_private_destinations``. What
each enforces is in ``docs/sandbox.md``; :mod:`omnigent.processes.sandbox` enforces
it.

A field that would have no effect is refused rather than ignored: anything set with
``type: none``, ``egress_rules`` without ``allow_network``, and
``egress_allow_private_destinations`` without ``egress_rules``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from ..errors import ErrorDetail
from . import _rules as rule
from ._egress import parse_egress_rule
from ._rules import Problems, Rules

__all__ = ["SandboxSpec"]

SandboxType = Literal["none", "auto", "linux_bwrap", "darwin_seatbelt"]
Overflow = Literal["error", "warn", "unlimited"]

_MAX_PATHS = 256


@rule.described({"maxItems": _MAX_PATHS, "items": {"minLength": 1}})
def _paths(values: tuple[str, ...]) -> Problems:
    if len(values) > _MAX_PATHS:
        return [ErrorDetail("", f"at most {_MAX_PATHS} entries")]
    return [
        ErrorDetail(f"[{i}]", "must be a non-empty path without NUL characters")
        for i, value in enumerate(values)
        if not value or "\0" in value
    ]


@rule.described({"maxItems": _MAX_PATHS})
def _hidden_names(values: tuple[str, ...]) -> Problems:
    return [
        ErrorDetail(f"[{i}]", f"must be '*' or a name starting with '.' (no '/'), got {name!r}")
        for i, name in enumerate(values)
        if name != "*" and (not name.startswith(".") or "/" in name or name in (".", ".."))
    ]


@rule.described({"maxItems": _MAX_PATHS})
def _env_names(values: tuple[str, ...]) -> Problems:
    return [
        ErrorDetail(f"[{i}]", detail.msg)
        for i, name in enumerate(values)
        for detail in rule.env_names({name: ""})
    ]


@rule.described({"maxItems": _MAX_PATHS})
def _egress_rules(values: tuple[str, ...]) -> Problems:
    problems = []
    for index, text in enumerate(values):
        try:
            parse_egress_rule(text)
        except ValueError as exc:
            problems.append(ErrorDetail(f"[{index}]", str(exc)))
    return problems


@attrs.frozen
class SandboxSpec:
    """The OS sandbox around everything the agent's session runs (``docs/sandbox.md``).

    ``type`` is ``auto`` when the block is given without one (this platform's
    sandbox) and ``none`` when the spec has no block at all.
    """

    _rules: ClassVar[Rules] = {
        "read_paths": _paths,
        "write_paths": _paths,
        "write_files": _paths,
        "cwd_allow_hidden": _hidden_names,
        "cwd_hidden_scan_max_entries": rule.at_least_one,
        "env_passthrough": _env_names,
        "egress_rules": _egress_rules,
    }
    type: SandboxType = "auto"
    read_paths: tuple[str, ...] = ()
    write_paths: tuple[str, ...] = ()
    write_files: tuple[str, ...] = ()
    allow_network: bool = False
    cwd_allow_hidden: tuple[str, ...] = (".venv",)
    cwd_hidden_scan_max_entries: int = 50_000
    cwd_hidden_scan_overflow: Overflow = "warn"
    env_passthrough: tuple[str, ...] = ()
    egress_rules: tuple[str, ...] = ()
    egress_allow_private_destinations: bool = False

    def __attrs_post_init__(self) -> None:
        cross: list[ErrorDetail] = []
        if self.type == "none":
            cross += [
                ErrorDetail(name, "has no effect with type none: set type to auto or linux_bwrap")
                for name in self._set_fields()
            ]
        if self.egress_rules and not self.allow_network:
            cross.append(
                ErrorDetail(
                    "egress_rules",
                    "needs allow_network: true (the rules narrow the network; without it "
                    "there is none)",
                )
            )
        if self.egress_allow_private_destinations and not self.egress_rules:
            cross.append(
                ErrorDetail(
                    "egress_allow_private_destinations",
                    "only applies with egress_rules (without them the network is not filtered)",
                )
            )
        rule.validate(self, cross)

    def _set_fields(self) -> list[str]:
        """The fields (other than ``type``) that differ from their defaults."""
        out = []
        for field in attrs.fields(type(self)):
            if field.name == "type":
                continue
            default: Any = field.default
            if getattr(self, field.name) != default:
                out.append(field.name)
        return out

    @property
    def confined(self) -> bool:
        """Whether this block asks for a sandbox at all (``type`` other than ``none``)."""
        return self.type != "none"
