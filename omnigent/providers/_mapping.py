"""The original omnigent's mapping form of ``providers:``, read as this one's list.

The original keys its providers by name, each with a ``kind`` and, for the kinds that
hold credentials, one block per model family::

    providers:
      workspace:                     # a Databricks workspace, by its CLI profile
        kind: databricks
        profile: DEFAULT
        default: true
      anthropic:
        kind: key
        anthropic: {base_url: https://api.anthropic.com, api_key: $ANTHROPIC_API_KEY}
      claude-login:
        kind: subscription
        cli: claude
      ollama:
        kind: local
        openai: {base_url: http://127.0.0.1:11434/v1, api_key: $OLLAMA_KEY}

:func:`entries_from_mapping` turns that into entries of the list form
(:class:`~._config.Provider`), so one configuration file serves both omnigents:

* ``key`` → a ``key`` provider per family block (named ``<name>``, or
  ``<name>.<family>`` when it has several); ``gateway`` and ``local`` → ``gateway``
  providers the same way. A block's ``base_url`` is kept; its key — ``api_key:
  $VAR`` (or ``${VAR}``) or ``api_key_ref: env:VAR`` — becomes ``api_key_env: VAR``
  (the key itself never lives in the file); ``models`` (aliases to ids) gives the ids.
* ``subscription`` with ``cli: claude`` / ``codex`` → a ``subscription`` of that
  vendor, for the harnesses that run that CLI.
* ``databricks`` with ``profile`` → a ``gateway`` whose model ids carry
  ``databricks-``, at ``<host>/serving-endpoints`` of that profile in
  ``~/.databrickscfg`` (``host_of``), its token in ``$DATABRICKS_TOKEN``.
* ``default: true`` (or a family, or a list of them) makes the first such provider
  ``default_provider``.

What this omnigent cannot honour is refused naming the field: the kinds
``cli-config`` and ``bedrock``, a key from the keychain (``api_key_ref: keychain:…``)
or a command (``auth_command``), an inline key (``api_key`` that is not a
``$VARIABLE``), and ``wire_api``. Pure: the caller gives ``host_of``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError, ErrorDetail

__all__ = ["HostOf", "entries_from_mapping"]

_FAMILIES = ("anthropic", "openai")
_CLIS = {"claude": "anthropic", "codex": "openai"}
_CLI_HARNESSES = {
    "claude": ("claude-sdk", "claude-native", "claude-code"),
    "codex": ("codex", "codex-native"),
}
_VARIABLE_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_KINDS = {"key": "key", "gateway": "gateway", "local": "gateway"}

HostOf = Callable[[str], str | None]


def entries_from_mapping(
    providers: Mapping[str, Any], host_of: HostOf
) -> tuple[list[dict[str, Any]], str | None]:
    """The list-form entries of a mapping-form ``providers:``, and the default's name.

    Args:
        providers: ``{name: {kind, …}}`` as decoded from YAML.
        host_of: a Databricks profile's workspace URL (``None``: not known).

    Raises:
        ConfigError: naming every field this omnigent cannot honour.
    """
    entries: list[dict[str, Any]] = []
    problems: list[ErrorDetail] = []
    default: str | None = None
    for name, raw in providers.items():
        at = f"providers.{name}"
        if not isinstance(raw, Mapping):
            problems.append(ErrorDetail(at, "must be a mapping with a 'kind'"))
            continue
        made = _provider(str(name), raw, at, host_of, problems)
        entries += made
        if made and default is None and _is_default(raw.get("default")):
            default = made[0]["name"]
    if problems:
        summary = "; ".join(f"{d.msg} @ {d.loc}" for d in problems[:5])
        raise ConfigError(f"invalid providers: {summary}", problems)
    return entries, default


def _is_default(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false")
    if isinstance(value, list | tuple):
        return bool(value)
    return value is True


def _provider(
    name: str, raw: Mapping[str, Any], at: str, host_of: HostOf, problems: list[ErrorDetail]
) -> list[dict[str, Any]]:
    kind = raw.get("kind")
    if kind == "subscription":
        cli = raw.get("cli")
        if cli not in _CLIS:
            problems.append(ErrorDetail(f"{at}.cli", "must be 'claude' or 'codex'"))
            return []
        return [
            {
                "name": name,
                "kind": "subscription",
                "family": _CLIS[cli],
                "harnesses": list(_CLI_HARNESSES[cli]),
            }
        ]
    if kind == "databricks":
        profile = raw.get("profile")
        if not isinstance(profile, str) or not profile:
            problems.append(ErrorDetail(f"{at}.profile", "a Databricks CLI profile is required"))
            return []
        host = host_of(profile)
        entry: dict[str, Any] = {"name": name, "kind": "gateway", "model_prefix": "databricks-"}
        if host is not None:
            entry["base_url"] = host.rstrip("/") + "/serving-endpoints"
            entry["api_key_env"] = "DATABRICKS_TOKEN"
        return [entry]
    if kind not in _KINDS:
        problems.append(
            ErrorDetail(
                f"{at}.kind",
                f"{kind!r} is not a kind this omnigent reads (key, gateway, local, "
                "subscription, databricks)",
            )
        )
        return []
    blocks = [(family, raw[family]) for family in _FAMILIES if family in raw]
    if not blocks:
        problems.append(ErrorDetail(at, f"a {kind} provider needs an anthropic or openai block"))
    several = len(blocks) > 1
    return [
        _family_entry(f"{name}.{family}" if several else name, kind, family, block, at, problems)
        for family, block in blocks
    ]


def _family_entry(
    name: str, kind: str, family: str, block: Any, at: str, problems: list[ErrorDetail]
) -> dict[str, Any]:
    at = f"{at}.{family}"
    entry: dict[str, Any] = {"name": name, "kind": _KINDS[kind]}
    if kind == "key":
        entry["family"] = family
    if not isinstance(block, Mapping):
        problems.append(ErrorDetail(at, "must be a mapping"))
        return entry
    for refused in ("auth_command", "wire_api"):
        if refused in block:
            problems.append(ErrorDetail(f"{at}.{refused}", "not read by this omnigent"))
    if isinstance(block.get("base_url"), str):
        entry["base_url"] = block["base_url"]
    variable = _key_variable(block, at, problems)
    if variable is not None:
        entry["api_key_env"] = variable
    models = block.get("models")
    if isinstance(models, Mapping):
        entry["models"] = [str(model) for model in models.values()]
    elif isinstance(models, list):
        entry["models"] = [str(model) for model in models]
    return entry


def _key_variable(block: Mapping[str, Any], at: str, problems: list[ErrorDetail]) -> str | None:
    """The variable that holds the block's key: ``api_key: $VAR`` / ``env:VAR``."""
    key, ref = block.get("api_key"), block.get("api_key_ref")
    if isinstance(key, str) and key:
        match = _VARIABLE_REF.fullmatch(key.strip())
        if match is None:
            problems.append(
                ErrorDetail(f"{at}.api_key", "must be $VARIABLE: a key never lives in the file")
            )
            return None
        return match.group(1)
    if isinstance(ref, str) and ref:
        source, _, variable = ref.partition(":")
        if source != "env" or not variable:
            problems.append(
                ErrorDetail(f"{at}.api_key_ref", "only env:VARIABLE is read by this omnigent")
            )
            return None
        return variable
    return None
