"""The provider configuration: which model providers this machine can reach.

``config.yaml`` — in ``$OMNIGENT_CONFIG_HOME`` if set, else ``$OMNIGENT_HOME`` — may hold
a ``providers:`` list (every other top-level key is left to its own reader), or the
original omnigent's mapping of providers by name (:mod:`._mapping`)::

    default_provider: gateway
    providers:
      - name: gateway
        kind: gateway                 # an OpenAI-compatible gateway
        base_url: https://example.cloud.databricks.com/serving-endpoints
        model_prefix: databricks-     # its model ids carry this prefix
        models: [databricks-claude-sonnet-4-6, databricks-gpt-5-4]
        harnesses: [loop]             # harnesses that route through it
      - name: anthropic
        kind: key                     # a vendor API key
        family: anthropic
        api_key_env: ANTHROPIC_KEY    # the variable that holds it
        models: [claude-sonnet-4-6, claude-opus-4-8]
        harnesses: [claude-code]
      - name: codex-login
        kind: subscription            # a vendor CLI login
        family: openai
        harnesses: [codex]

A worker (a sub-agent, or the calling agent itself) uses the provider that lists its
harness, else the one whose ``base_url`` is the worker's ``executor.config.base_url``,
else ``default_provider``; with none of them the provider is undetermined, and model
ids pass to the worker untouched. Parsing is strict (unknown keys and wrong types are
errors naming the field); a missing file is an empty configuration.

The provider a session's harness goes through also supplies its model endpoint when
neither the spec (``executor.config.base_url``) nor the environment
(``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``) names one: its ``base_url`` and the key in
the variable ``api_key_env`` names (:func:`omnigent.harnesses.native._cli.model_endpoint`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import attrs

from ..errors import ConfigError, ErrorDetail, SpecError
from ..model import ContextWindows, Prices, structure
from ..spec import load_yaml
from ._mapping import HostOf, entries_from_mapping

__all__ = [
    "CONFIG_FILE",
    "MAX_CONFIG_BYTES",
    "Provider",
    "ProviderConfig",
    "ProviderKind",
    "config_home",
    "databricks_host",
    "load_provider_config",
    "parse_provider_config",
]

CONFIG_FILE = "config.yaml"
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MAX_CONFIG_BYTES = 1 << 20

ProviderKind = Literal["key", "gateway", "subscription"]
Vendor = Literal["anthropic", "openai"]


@attrs.frozen
class Provider:
    """One way to reach models.

    Attributes:
        name: how workers and ``default_provider`` refer to it.
        kind: ``key`` (a vendor API key), ``gateway`` (an OpenAI-compatible gateway
            whose ids carry ``model_prefix``) or ``subscription`` (a vendor CLI login).
        family: the vendor of a ``key`` or ``subscription`` provider.
        base_url: its endpoint; a ``loop`` worker with this ``base_url`` uses it.
        model_prefix: the prefix a gateway's model ids carry (``databricks-``).
        models: the model ids it serves, as it spells them (``sys_list_models``).
        harnesses: canonical harness names that route through it.
        api_key_env: the environment variable that holds its key (the key itself
            never lives in the file). The key is sent only to this provider's
            endpoint: ``base_url``, or the vendor's own when it has none.
    """

    name: str
    kind: ProviderKind
    family: Vendor | None = None
    base_url: str | None = None
    model_prefix: str = ""
    models: tuple[str, ...] = ()
    harnesses: tuple[str, ...] = ()
    api_key_env: str | None = None

    def problems(self, at: str) -> list[ErrorDetail]:
        """The cross-field rules this provider breaks, located under ``at``."""
        found = []
        if not self.name.strip():
            found.append(ErrorDetail(f"{at}.name", "must not be empty"))
        if self.kind in ("key", "subscription") and self.family is None:
            found.append(ErrorDetail(f"{at}.family", f"required for a {self.kind} provider"))
        if self.kind == "gateway" and self.family is not None:
            found.append(ErrorDetail(f"{at}.family", "a gateway serves every family"))
        if self.kind != "gateway" and self.model_prefix:
            found.append(ErrorDetail(f"{at}.model_prefix", "only a gateway has a prefix"))
        if self.api_key_env is not None and not _VARIABLE.fullmatch(self.api_key_env):
            found.append(
                ErrorDetail(f"{at}.api_key_env", "must name an environment variable (A_KEY)")
            )
        if self.kind == "subscription" and (self.base_url or self.api_key_env):
            found.append(
                ErrorDetail(f"{at}.kind", "a subscription is the CLI's own login: no endpoint")
            )
        return found


@attrs.frozen
class _ConfigFile:
    """The part of ``config.yaml`` this module reads (strictly)."""

    keys: ClassVar[tuple[str, ...]] = ("providers", "default_provider")
    # ``prices`` and ``context_windows`` are read beside them, by
    # :meth:`Prices.from_config` and :meth:`ContextWindows.from_config`.
    providers: tuple[Provider, ...] = ()
    default_provider: str | None = None


@attrs.frozen
class ProviderConfig:
    """The providers of one machine, and how a worker's provider is chosen."""

    providers: tuple[Provider, ...] = ()
    default: str | None = None
    source: str | None = None
    prices: Prices = attrs.field(factory=Prices)
    """The ``prices`` table: what each model's tokens cost (``docs/observability.md``)."""
    context_windows: ContextWindows = attrs.field(factory=ContextWindows)
    """The ``context_windows`` table: each model's window in tokens (ACP's ``usage_update``)."""

    def named(self, name: str) -> Provider | None:
        return next((p for p in self.providers if p.name == name), None)

    @property
    def gateway_prefixes(self) -> tuple[str, ...]:
        return tuple(p.model_prefix for p in self.providers if p.kind == "gateway")

    def for_worker(self, harness: str, base_url: str | None = None) -> Provider | None:
        """The provider a worker running ``harness`` (canonical) goes through.

        The first that lists the harness, else the first with the worker's
        ``base_url``, else the default; ``None`` when none applies.
        """
        for provider in self.providers:
            if harness in provider.harnesses:
                return provider
        if base_url:
            wanted = base_url.rstrip("/")
            for provider in self.providers:
                if provider.base_url and provider.base_url.rstrip("/") == wanted:
                    return provider
        return self.named(self.default) if self.default else None

    def serving(self, harness: str) -> Provider | None:
        """The provider whose endpoint a harness (canonical name) uses by default.

        The first that lists the harness, else the default provider when it lists
        none (a catch-all); never one that names other harnesses only — a gateway
        for ``loop`` is no endpoint for Claude Code.
        """
        for provider in self.providers:
            if harness in provider.harnesses:
                return provider
        default = self.named(self.default) if self.default else None
        return default if default is not None and not default.harnesses else None


def parse_provider_config(
    data: Any, *, source: str = CONFIG_FILE, host_of: HostOf = lambda profile: None
) -> ProviderConfig:
    """A configuration from decoded YAML (``None``: empty).

    ``providers:`` is this omnigent's list or the original's mapping (see
    :mod:`._mapping`; ``host_of`` gives a Databricks profile's workspace URL).

    Raises:
        ConfigError: naming each bad field (``providers[1].kind``).
    """
    if data is None:
        return ProviderConfig(source=source)
    if not isinstance(data, Mapping):
        raise ConfigError.at("$", f"{source} must hold a mapping")
    mine = {k: v for k, v in data.items() if k in _ConfigFile.keys}
    if isinstance(mine.get("providers"), Mapping):
        try:
            entries, default = entries_from_mapping(mine["providers"], host_of)
        except ConfigError as exc:
            raise ConfigError(f"invalid {source}: {exc.message}", exc.details) from None
        mine["providers"] = entries
        if default is not None:
            mine.setdefault("default_provider", default)
    try:
        prices = Prices.from_config(data.get("prices"))
        windows = ContextWindows.from_config(data.get("context_windows"))
    except ConfigError as exc:
        raise ConfigError(f"invalid {source}: {exc.message}", exc.details) from None
    try:
        parsed = structure(mine, _ConfigFile, error=ConfigError)
    except ConfigError as exc:
        summary = "; ".join(f"{d.msg} @ {d.loc or '$'}" for d in exc.details[:5])
        raise ConfigError(f"invalid {source}: {summary}", exc.details) from None
    problems: list[ErrorDetail] = []
    seen: set[str] = set()
    for index, provider in enumerate(parsed.providers):
        problems += provider.problems(f"providers[{index}]")
        if provider.name in seen:
            problems.append(ErrorDetail(f"providers[{index}].name", "duplicate provider name"))
        seen.add(provider.name)
    if parsed.default_provider is not None and parsed.default_provider not in seen:
        known = ", ".join(sorted(seen)) or "none defined"
        problems.append(
            ErrorDetail(
                "default_provider",
                f"no provider named {parsed.default_provider!r} (providers: {known})",
            )
        )
    if problems:
        summary = "; ".join(f"{d.msg} @ {d.loc}" for d in problems[:5])
        raise ConfigError(f"invalid {source}: {summary}", problems)
    return ProviderConfig(parsed.providers, parsed.default_provider, source, prices, windows)


def config_home(home: Path) -> Path:
    """Where ``config.yaml`` is: ``$OMNIGENT_CONFIG_HOME`` (the original omnigent's
    variable), else ``home`` (``$OMNIGENT_HOME``)."""
    chosen = os.environ.get("OMNIGENT_CONFIG_HOME")
    return Path(chosen).expanduser() if chosen else home


def databricks_host(profile: str) -> str | None:
    """A Databricks CLI profile's workspace URL, from ``$DATABRICKS_CONFIG_FILE`` or
    ``~/.databrickscfg`` (``None``: no such file, profile or ``host``)."""
    import configparser  # only for a Databricks profile: not on every start

    path = Path(os.environ.get("DATABRICKS_CONFIG_FILE") or "~/.databrickscfg").expanduser()
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError):
        return None
    if not parser.has_option(profile, "host"):
        return None
    host = parser.get(profile, "host").strip()
    return host or None


def load_provider_config(home: Path) -> ProviderConfig:
    """Read ``config.yaml`` (blocking: call it in a worker thread) from
    :func:`config_home`.

    A missing file is an empty configuration.

    Raises:
        ConfigError: the file is unreadable, too large, not YAML, or invalid.
    """
    path = config_home(home) / CONFIG_FILE
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return ProviderConfig(source=str(path))
    except OSError as exc:
        raise ConfigError.at("$", f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError.at("$", f"{path} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        data = load_yaml(raw.decode("utf-8"), what=str(path))
    except UnicodeDecodeError as exc:
        raise ConfigError.at("$", f"{path} is not valid YAML: {exc}") from exc
    except SpecError as exc:  # the one bounded YAML reader speaks in spec errors
        raise ConfigError(exc.message, exc.details) from exc
    return parse_provider_config(data, source=str(path), host_of=databricks_host)
