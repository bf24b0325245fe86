"""What the native coding-agent harnesses share: finding the CLI, the model guard,
the model endpoint, and which spec keys they can honour.

Everything here is pure or nearly so (a few ``stat`` calls to find a binary), so the
registry can ask it before any process exists:

* :class:`NativeCli` finds a CLI — ``$OMNIGENT_<NAME>_CLI`` if set, else the binary
  the pinned wheel bundles (``claude-agent-sdk``, ``openai-codex-cli-bin``), else
  ``PATH`` — and says what to install when it is missing (pi: npm's package).
* :class:`ModelRule` (from :mod:`omnigent.harnesses._models`, where the registry
  reads it without importing this package) is a single-vendor harness's model guard:
  a model of another family is refused up front, naming the rule (``only runs Claude
  models``, ``only runs GPT models``).
* :func:`model_endpoint` resolves where the model lives: ``executor.config`` first,
  then the environment, then the provider configuration (``config.yaml``).
* :func:`native_spec_problems` lists the spec keys a native harness cannot honour
  (those of the ``scripted`` and ``external`` harnesses, unknown options, variables
  that change how programs load), so they are refused instead of ignored.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ...errors import ErrorDetail
from ...providers import Provider
from ...spec import AgentSpec
from .._models import CLAUDE_MODELS, GPT_MODELS, ModelRule

__all__ = [
    "AGENTS_SDK",
    "CLAUDE_CLI",
    "CLAUDE_MODELS",
    "CODEX_CLI",
    "GPT_MODELS",
    "PI_CLI",
    "ModelEndpoint",
    "ModelRule",
    "NativeCli",
    "OptionCheck",
    "Program",
    "PythonPackage",
    "model_endpoint",
    "native_spec_problems",
    "positive_number",
]


@attrs.frozen
class NativeCli:
    """A coding agent's command-line program, and where it comes from.

    Attributes:
        title: what messages call it (``Claude Code``).
        binary: its executable's name on ``PATH``.
        install: how to install it, as messages say it.
        module: the Python package of a wheel that bundles it (``None``: none does).
        bundled: the binary's path inside that package.
    """

    title: str
    binary: str
    install: str
    module: str | None = None
    bundled: tuple[str, ...] = ()

    @property
    def variable(self) -> str:
        """The environment variable that names the binary explicitly."""
        return f"OMNIGENT_{self.binary.upper()}_CLI"

    def find(self, environ: Mapping[str, str] | None = None) -> Path | None:
        """The executable: ``$OMNIGENT_<NAME>_CLI``, the bundled one, or ``PATH``'s."""
        env = os.environ if environ is None else environ
        explicit = env.get(self.variable)
        if explicit:
            path = Path(explicit)
            return path if path.is_file() and os.access(path, os.X_OK) else None
        if self.module is not None:
            # find_spec locates the package without importing it (the SDK's is heavy).
            spec = importlib.util.find_spec(self.module)
            if spec is not None and spec.origin is not None:
                bundled = Path(spec.origin).parent.joinpath(*self.bundled)
                if bundled.is_file():
                    return bundled
        found = shutil.which(self.binary, path=env.get("PATH"))
        return Path(found) if found else None

    def missing(self, harness: str, environ: Mapping[str, str] | None = None) -> str | None:
        """Why ``harness`` cannot run here (which CLI, and how to install it), or
        ``None`` if it can."""
        env = os.environ if environ is None else environ
        if self.find(env) is not None:
            return None
        explicit = env.get(self.variable)
        if explicit:
            return (
                f"harness {harness!r} needs the {self.title} CLI, but "
                f"{self.variable}={explicit} is not an executable file"
            )
        return (
            f"harness {harness!r} needs the {self.title} CLI, which is not installed: "
            f"{self.install}"
        )


CLAUDE_CLI = NativeCli(
    title="Claude Code",
    binary="claude",
    install="pip install 'omnigent[claude]' (or npm install -g @anthropic-ai/claude-code)",
    module="claude_agent_sdk",
    bundled=("_bundled", "claude"),
)
CODEX_CLI = NativeCli(
    title="Codex",
    binary="codex",
    install="pip install 'omnigent[codex]' (or npm install -g @openai/codex)",
    module="codex_cli_bin",
    bundled=("bin", "codex"),
)
PI_CLI = NativeCli(
    title="pi",
    binary="pi",
    install="npm install -g @mariozechner/pi-coding-agent",
)


@attrs.frozen
class PythonPackage:
    """A Python distribution a harness runs in a child interpreter of the runtime's own.

    Attributes:
        title: what messages call it (``OpenAI Agents SDK``).
        distribution: its name on PyPI (``openai-agents``).
        install: how to install it, as messages say it.
    """

    title: str
    distribution: str
    install: str

    def find(self, environ: Mapping[str, str] | None = None) -> Path | None:
        """The interpreter that runs it (the runtime's), if it is installed there."""
        try:
            importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None
        return Path(sys.executable)

    def missing(self, harness: str, environ: Mapping[str, str] | None = None) -> str | None:
        """Why ``harness`` cannot run here (what to install), or ``None`` if it can."""
        if self.find(environ) is not None:
            return None
        return f"harness {harness!r} needs the {self.title}, which is not installed: {self.install}"


AGENTS_SDK = PythonPackage(
    title="OpenAI Agents SDK",
    distribution="openai-agents",
    install="pip install 'omnigent[openai-agents]'",
)

Program = NativeCli | PythonPackage
"""What a native harness needs installed: a CLI, or a Python package."""


@attrs.frozen
class ModelEndpoint:
    """Where a harness's model lives: a base URL and a key (either may be unset)."""

    base_url: str | None
    api_key: str | None = attrs.field(repr=False)


def model_endpoint(
    base_url: str | None,
    api_key: str | None,
    *,
    base_url_variable: str,
    api_key_variable: str,
    default_base_url: str | None = None,
    provider: Provider | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelEndpoint:
    """The model endpoint: the spec's ``executor.config``, else the environment, else
    the provider configuration, else ``default_base_url``.

    ``base_url`` / ``api_key`` are the spec's (``executor.config.base_url`` /
    ``api_key``); what they leave unset comes from ``base_url_variable`` /
    ``api_key_variable`` (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` for the loop and
    Codex, ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` for Claude Code), then from
    ``provider`` — the provider of ``$OMNIGENT_HOME/config.yaml`` the session's harness
    goes through: its ``base_url``, and the key in the variable its ``api_key_env``
    names — then ``default_base_url``.

    A key goes only to the endpoint it belongs to: the environment's key to the
    environment's endpoint (or the vendor's default), a provider's key to that
    provider's endpoint, and a spec naming an endpoint of its own (a spec a client
    registered, say) gets its own ``api_key`` or none — so no operator's key is ever
    sent to a URL someone else chose.
    """
    env = os.environ if environ is None else environ
    provided_url = provider.base_url if provider is not None else None
    provided_key = None
    if provider is not None and provider.api_key_env:
        provided_key = env.get(provider.api_key_env) or None
    environment_url = env.get(base_url_variable) or None
    if environment_url is not None or (provided_url is None and provided_key is None):
        operator_url = environment_url or default_base_url
        operator_key = env.get(api_key_variable) or None
    else:
        operator_url = provided_url or default_base_url
        operator_key = provided_key
    if base_url and _same_endpoint(base_url, operator_url):
        base_url = None
    key = api_key if base_url else (api_key or operator_key)
    return ModelEndpoint(base_url=base_url or operator_url or None, api_key=key)


def _same_endpoint(a: str, b: str | None) -> bool:
    return b is not None and a.rstrip("/") == b.rstrip("/")


OptionCheck = Callable[[Any], str | None]
"""Checks one ``executor.config.options`` value: ``None`` if fine, else what is wrong."""


def positive_number(value: Any) -> str | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return None if ok else "must be a number > 0"


def native_spec_problems(
    spec: AgentSpec,
    harness: str,
    options: Mapping[str, OptionCheck],
    env_prefixes: tuple[str, ...],
    *,
    reads_agent: bool = False,
) -> list[ErrorDetail]:
    """The spec keys a native harness cannot honour, each as an error.

    The ``scripted`` and ``external`` keys and ``temperature`` mean nothing to a CLI
    that runs its own model loop. (omnigent's own tool families — sub-agents,
    background calls, terminals, MCP servers — *are* honoured: they reach the CLI
    through the tool bridge, :mod:`omnigent.harnesses.bridge`.) ``options`` names the
    ``executor.config.options`` the harness reads,
    with a check for each value. ``executor.config.env`` may set only variables with
    one of ``env_prefixes``: the CLI's own settings, never what changes how programs
    load (``LD_PRELOAD``, ``NODE_OPTIONS``, ``PATH``) — those would run code no policy
    ever saw. ``executor.config.agent`` is refused unless the harness ``reads_agent``.
    """
    problems: list[ErrorDetail] = []
    config = spec.executor.config

    def refuse(loc: str, why: str) -> None:
        problems.append(ErrorDetail(loc, f"not supported by harness {harness!r}: {why}"))

    for key in ("script", "turns", "command", "temperature", "agent"):
        if key == "agent" and reads_agent:
            continue
        if getattr(config, key) is not None:
            refuse(f"executor.config.{key}", "it is not read by this harness")
    for name in config.env:
        if not name.startswith(env_prefixes):
            allowed = ", ".join(f"{p}*" if p.endswith("_") else p for p in env_prefixes)
            refuse(f"executor.config.env.{name}", f"only {allowed} may be set")
    for key, value in config.options.items():
        check = options.get(key)
        if check is None:
            known = ", ".join(sorted(options)) or "none"
            problems.append(
                ErrorDetail(
                    f"executor.config.options.{key}",
                    f"unknown option for harness {harness!r} (known: {known})",
                )
            )
        elif (problem := check(value)) is not None:
            problems.append(ErrorDetail(f"executor.config.options.{key}", problem))
    return problems
