"""How an agent's turns run: its executor, the harness config, the scripted steps.

An :class:`~omnigent.spec.AgentSpec`'s ``executor`` says how its turns are run:
which harness, which model, what limits, what command starts an external harness.
The ``scripted`` harness's steps exist only inside it (``script`` and ``turns``), so
they live together here, apart from the rest of the spec's shape in
:mod:`omnigent.spec._spec`.

The contract is the spec's (see :mod:`omnigent.spec._spec`): per-field rules in each
class's ``_rules`` (:mod:`omnigent.spec._rules`), cross-field rules raised from
``__attrs_post_init__`` as one :class:`~omnigent.errors.SpecError`. On the wire, the
key a step has picks its kind (:data:`STEP_KINDS`); the hooks that read it are
registered by :mod:`omnigent.spec._spec`, with the other classes
(:data:`EXECUTOR_CLASSES`).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeAlias

import attrs

from ..errors import ErrorDetail
from . import _rules as rule
from ._rules import Rules

__all__ = [
    "EXECUTOR_CLASSES",
    "STEP_KINDS",
    "CallStep",
    "ExecutorConfig",
    "ExecutorSpec",
    "FailStep",
    "SayStep",
    "ScriptStep",
    "SleepStep",
]


@attrs.frozen
class SayStep:
    """Scripted step: stream ``say`` as text deltas, then record an assistant message."""

    say: str


@attrs.frozen
class CallStep:
    """Scripted step: call tool ``call`` with ``args``, through the agent's policies."""

    _rules: ClassVar[Rules] = {"call": rule.non_empty, "args": rule.shallow}
    call: str
    args: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def __attrs_post_init__(self) -> None:
        rule.validate(self)


@attrs.frozen
class SleepStep:
    """Scripted step: wait ``sleep`` seconds (cancellable like any turn)."""

    _rules: ClassVar[Rules] = {"sleep": rule.seconds}
    sleep: float

    def __attrs_post_init__(self) -> None:
        rule.validate(self)


@attrs.frozen
class FailStep:
    """Scripted step: fail the turn with message ``fail``."""

    fail: str


ScriptStep: TypeAlias = SayStep | CallStep | SleepStep | FailStep
"""One step of the ``scripted`` harness; on the wire, the key present picks the kind."""

STEP_KINDS: dict[str, type] = {
    "say": SayStep,
    "call": CallStep,
    "sleep": SleepStep,
    "fail": FailStep,
}
"""The wire key of each step kind: a step's one key picks its class."""


@attrs.frozen
class ExecutorConfig:
    """How the ``omnigent`` executor runs turns: which harness, model and limits.

    ``script`` (steps played on every turn) and ``turns`` (turn N plays list N, the
    last repeating) drive the ``scripted`` harness and are mutually exclusive.
    ``command`` starts an external harness (required for ``harness: external``).
    ``agent`` names the OpenAI Agents SDK agent an ``openai-agents`` session runs
    (``package.module:attr``; the operator must allow its module).
    ``options`` is free-form and read by the harness.
    """

    _rules: ClassVar[Rules] = {
        "harness": rule.non_empty,
        "max_steps": rule.at_least_one,
        "turns": rule.non_empty,
        "command": rule.command,
        "agent": rule.agent_ref,
        "options": rule.shallow,
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
    agent: str | None = None
    env: dict[str, str] = attrs.field(factory=dict, hash=False, repr=False)
    options: dict[str, Any] = attrs.field(factory=dict, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        cross = []
        if self.script is not None and self.turns is not None:
            cross.append(ErrorDetail("turns", "script and turns are mutually exclusive"))
        if self.harness == "external" and self.command is None:
            cross.append(ErrorDetail("command", "required when harness is 'external'"))
        rule.validate(self, cross)


@attrs.frozen
class ExecutorSpec:
    """Which executor runs the agent; ``omnigent`` picks the harness from ``config``."""

    type: str = "omnigent"
    config: ExecutorConfig = attrs.field(factory=ExecutorConfig)


EXECUTOR_CLASSES: tuple[type, ...] = (
    SayStep,
    CallStep,
    SleepStep,
    FailStep,
    ExecutorConfig,
    ExecutorSpec,
)
"""This module's classes, leaves first, as :func:`~._wire.register_spec_hooks` takes them."""
