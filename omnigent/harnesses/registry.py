"""Harness names, aliases and factories: one registry per runtime.

Built in: ``loop`` (aliases ``agent``, ``default``, ``omnigent``, ``openai``),
``scripted`` (aliases ``script``, ``mock``), ``external`` (the program named by
``executor.config.command``, see :mod:`omnigent.harnesses.external._harness`), and the
native coding agents under the names the original omnigent gives them, each read
back as written: ``claude-sdk`` (alias ``claude``), ``claude-native`` and
``claude-code`` (the Claude Code CLI), ``codex`` and ``codex-native`` (``codex
app-server``), ``pi`` (the pi coding agent) and ``openai-agents`` (alias
``openai-agents-sdk``: an OpenAI Agents SDK agent, in a process of its own).
Packages add harnesses through the ``omnigent.harnesses`` entry-point
group: each entry point loads a factory (a callable ``HarnessEnv -> Harness``, such
as :func:`omnigent.harnesses.external._harness.external_harness` builds) registered under
the entry point's name.

Besides its factory a harness may declare what it needs up front, so a request it
cannot serve is refused before anything runs: a :class:`ModelRule` (the models it
runs), ``accepts_model`` (whether a model chosen per session reaches it at all),
``requires`` (whether its program is installed here) and ``check_spec`` (spec keys it
cannot honour).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial
from importlib.metadata import entry_points

import attrs

from ..errors import Conflict, ErrorDetail, UnknownHarness
from ..spec import AgentSpec
from ._models import CLAUDE_MODELS, GPT_MODELS, ModelRule
from .base import Harness, HarnessEnv, HarnessFactory

__all__ = ["CLAUDE_NAMES", "CODEX_NAMES", "HarnessInfo", "HarnessRegistry", "ModelRule"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "omnigent.harnesses"

SpecCheck = Callable[[AgentSpec], list[ErrorDetail]]

CLAUDE_NAMES = ("claude-sdk", "claude-native", "claude-code")
"""The names Claude Code runs under: the original omnigent's two, and this one's."""
CODEX_NAMES = ("codex", "codex-native")
"""The names ``codex app-server`` runs under."""


@attrs.frozen
class HarnessInfo:
    """A registered harness.

    Attributes:
        models: the models it runs (``None``: any).
        requires: says what is missing for it to run here (``None`` from the call:
            nothing); ``None``: it needs nothing outside omnigent.
        check_spec: the errors of a spec it cannot honour as written.
        accepts_model: whether a model chosen per session (``model_override``, a
            sub-agent dispatch's ``args.model``) reaches what it runs; ``scripted``
            plays the same script whatever the model, so a dispatcher refuses one.
        native: it runs a vendor's agent in a process of its own (Claude Code, Codex,
            pi, an Agents SDK agent), which a stop reaches at its next step: a
            ``sys_cancel_task`` of its work is answered as best effort.
    """

    name: str
    factory: HarnessFactory
    aliases: tuple[str, ...] = ()
    models: ModelRule | None = None
    requires: Callable[[], str | None] | None = None
    check_spec: SpecCheck | None = None
    accepts_model: bool = True
    native: bool = False


def _make_loop(env: HarnessEnv) -> Harness:
    from .loop import LoopHarness

    return LoopHarness(env)


def _make_scripted(env: HarnessEnv) -> Harness:
    from .scripted import ScriptedHarness

    return ScriptedHarness(env)


def _make_external(env: HarnessEnv) -> Harness:
    from .external import make_external

    return make_external(env)


def _make_claude(env: HarnessEnv) -> Harness:
    from .claude import ClaudeCodeHarness

    return ClaudeCodeHarness(env)


def _make_codex(env: HarnessEnv) -> Harness:
    from .codex import CodexHarness

    return CodexHarness(env)


def _make_pi(env: HarnessEnv) -> Harness:
    from .pi import PiHarness

    return PiHarness(env)


def _make_agents(env: HarnessEnv) -> Harness:
    from .agents_sdk import AgentsHarness

    return AgentsHarness(env)


def _check_agents(spec: AgentSpec) -> list[ErrorDetail]:
    from .agents_sdk import spec_problems

    return spec_problems(spec, "openai-agents")


def _check_claude(harness: str, spec: AgentSpec) -> list[ErrorDetail]:
    from .claude import spec_problems

    return spec_problems(spec, harness)


def _check_pi(spec: AgentSpec) -> list[ErrorDetail]:
    from .pi import spec_problems

    return spec_problems(spec, "pi")


# What a native harness needs installed is found by its own package, imported when the
# question is first asked (a session on the harness, a listing): not when a server
# starts (benchmarks/startup.py).
def _claude_missing(name: str) -> str | None:
    from .native import CLAUDE_CLI

    return CLAUDE_CLI.missing(name)


def _codex_missing(name: str) -> str | None:
    from .native import CODEX_CLI

    return CODEX_CLI.missing(name)


def _pi_missing() -> str | None:
    from .native import PI_CLI

    return PI_CLI.missing("pi")


def _agents_sdk_missing() -> str | None:
    from .native import AGENTS_SDK

    return AGENTS_SDK.missing("openai-agents")


def _unread(spec: AgentSpec, harness: str, keys: tuple[str, ...]) -> list[ErrorDetail]:
    """``executor.config`` keys set in ``spec`` that ``harness`` would silently ignore."""
    config = spec.executor.config
    return [
        ErrorDetail(f"executor.config.{key}", f"not read by harness {harness!r}")
        for key in keys
        if getattr(config, key) is not None
    ]


def _check_loop(spec: AgentSpec) -> list[ErrorDetail]:
    return _unread(spec, "loop", ("script", "turns", "command", "agent"))


def _check_scripted(spec: AgentSpec) -> list[ErrorDetail]:
    return _unread(spec, "scripted", ("command", "agent"))


def _check_external(spec: AgentSpec) -> list[ErrorDetail]:
    return _unread(spec, "external", ("agent",))


def _check_codex(harness: str, spec: AgentSpec) -> list[ErrorDetail]:
    from .codex import spec_problems

    return spec_problems(spec, harness)


class HarnessRegistry:
    """Maps names and aliases to harness factories."""

    def __init__(self, *, builtins: bool = True) -> None:
        self._harnesses: dict[str, HarnessInfo] = {}
        self._aliases: dict[str, str] = {}
        self._entry_points_pending = False
        if builtins:
            self.register(
                "loop",
                _make_loop,
                aliases=("agent", "default", "omnigent", "openai"),
                check_spec=_check_loop,
            )
            self.register(
                "scripted",
                _make_scripted,
                aliases=("script", "mock"),
                accepts_model=False,
                check_spec=_check_scripted,
            )
            self.register("external", _make_external, check_spec=_check_external)
            for name in CLAUDE_NAMES:
                self.register(
                    name,
                    _make_claude,
                    aliases=("claude",) if name == "claude-sdk" else (),
                    models=CLAUDE_MODELS,
                    requires=partial(_claude_missing, name),
                    check_spec=partial(_check_claude, name),
                    native=True,
                )
            for name in CODEX_NAMES:
                self.register(
                    name,
                    _make_codex,
                    models=GPT_MODELS,
                    requires=partial(_codex_missing, name),
                    check_spec=partial(_check_codex, name),
                    native=True,
                )
            self.register(
                "pi",
                _make_pi,
                requires=_pi_missing,
                check_spec=_check_pi,
                native=True,
            )
            self.register(
                "openai-agents",
                _make_agents,
                aliases=("openai-agents-sdk",),
                requires=_agents_sdk_missing,
                check_spec=_check_agents,
                native=True,
            )

    def register(
        self,
        name: str,
        factory: HarnessFactory,
        *,
        aliases: Iterable[str] = (),
        replace: bool = False,
        models: ModelRule | None = None,
        requires: Callable[[], str | None] | None = None,
        check_spec: SpecCheck | None = None,
        accepts_model: bool = True,
        native: bool = False,
    ) -> None:
        """Register a harness under ``name`` (and ``aliases``).

        ``models``, ``requires``, ``check_spec``, ``accepts_model`` and ``native`` are
        described on :class:`HarnessInfo`.

        Raises:
            Conflict: a name or alias is taken and ``replace`` is false.
        """
        self._load_pending()
        aliases = tuple(aliases)
        for key in (name, *aliases):
            if not replace and (key in self._harnesses or key in self._aliases):
                raise Conflict(f"harness name {key!r} is already registered")
        self._harnesses[name] = HarnessInfo(
            name, factory, aliases, models, requires, check_spec, accepts_model, native
        )
        self._aliases.pop(name, None)
        for alias in aliases:
            self._aliases[alias] = name

    def load_entry_points(self) -> None:
        """Register every harness advertised in the ``omnigent.harnesses`` group, when
        the registry is next asked about (or given) a name.

        Reading the group scans every installed distribution's metadata (≈ 10 ms,
        and loading an entry point imports its package): a runtime asks for it when
        it opens, and a server pays for it with its first session, not its start.
        Built-in names and those registered before the group is read win over an
        entry point's.
        """
        self._entry_points_pending = True

    def _load_pending(self) -> None:
        if not self._entry_points_pending:
            return
        self._entry_points_pending = False
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in self._harnesses or ep.name in self._aliases:
                continue
            try:
                self.register(ep.name, ep.load())
            except Exception:
                log.warning("could not load harness entry point %s", ep.name, exc_info=True)

    def canonical(self, name: str) -> str:
        """The canonical name for ``name`` or an alias of it.

        Raises:
            UnknownHarness: nothing is registered under ``name``.
        """
        self._load_pending()
        if name in self._harnesses:
            return name
        if name in self._aliases:
            return self._aliases[name]
        raise UnknownHarness(name, self.names())

    def known(self, name: str) -> bool:
        """Whether ``name`` is a registered name or alias."""
        self._load_pending()
        return name in self._harnesses or name in self._aliases

    def names(self) -> list[str]:
        self._load_pending()
        return sorted(self._harnesses)

    def info(self, name: str) -> HarnessInfo:
        """What is registered under ``name`` or an alias. Raises UnknownHarness."""
        return self._harnesses[self.canonical(name)]

    def unavailable(self, name: str) -> str | None:
        """Why the harness cannot run here (what to install), or ``None`` if it can.

        For refusing work up front — a sub-agent dispatch to a harness whose CLI is
        missing is refused before any child session is created. Raises UnknownHarness.
        """
        requires = self.info(name).requires
        return None if requires is None else requires()

    def unavailable_reason(self, name: str) -> str | None:
        """:meth:`unavailable`, with a check that raises counted as unavailable (logged).

        Raises UnknownHarness.
        """
        requires = self.info(name).requires
        if requires is None:
            return None
        try:
            return requires()
        except Exception as exc:
            log.warning("the availability check of harness %s raised", name, exc_info=True)
            return f"harness {name!r} could not check that it can start: {exc}"

    def model_problem(self, name: str, model: str | None) -> str | None:
        """The message refusing ``model`` on the harness (its model guard), or ``None``.

        ``None`` for no model (the harness's default) and for harnesses that run any
        model. Raises UnknownHarness.
        """
        rule = self.info(name).models
        if rule is None or model is None:
            return None
        return rule.refusal(self.canonical(name), model)

    def spec_problems(self, name: str, spec: AgentSpec) -> list[ErrorDetail]:
        """Every reason the harness cannot run ``spec`` as written (``[]``: none).

        The spec's own model against the harness's model guard (at
        ``executor.config.model``), then the harness's own checks. Raises
        UnknownHarness.
        """
        info = self.info(name)
        problems: list[ErrorDetail] = []
        refusal = self.model_problem(name, spec.model)
        if refusal is not None:
            problems.append(ErrorDetail("executor.config.model", refusal))
        if info.check_spec is not None:
            problems.extend(info.check_spec(spec))
        return problems

    def create(self, name: str, env: HarnessEnv) -> Harness:
        """A new harness instance for one session."""
        return self._harnesses[self.canonical(name)].factory(env)
