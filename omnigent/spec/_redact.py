"""A spec as anyone but its owner may see it: the credentials in it replaced.

Agents are readable by every caller, but a spec carries credentials: a model key
(``executor.config.api_key``), an MCP server's ``headers`` (``Authorization: Bearer
…``), the ``env`` of the programs it runs, a token in a harness's ``options``.
:func:`redact_secrets` is the one rule every place that shows a spec uses —
``GET /v1/agents/{id}/spec``, ``sys_agent_download`` for someone who does not own the
agent — so none of them can forget a field:

* every value of an ``env`` or ``headers`` mapping (the names stay: they say what the
  agent needs);
* every value under a key whose name holds ``key``, ``token``, ``secret``,
  ``password``, ``passwd``, ``credential``, ``cookie`` or ``authorization``, or is
  the word ``auth`` (``auth``, ``basic_auth``; not ``author``), at any depth
  (``metadata.deploy.github_token``, ``options.api_key``).

A redacted value reads :data:`REDACTED`; ``None`` stays ``None`` (it holds nothing).
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["REDACTED", "redact_secrets"]

REDACTED: Final = "<redacted>"

_SECRET_WORDS: Final = ("key", "token", "secret", "password", "passwd", "credential", "cookie")
_AUTH: Final = re.compile(r"(^|[^a-z])auth([^a-z]|$)|authori[sz]ation")
_MAPPINGS_OF_SECRETS: Final = ("env", "headers")


def _secret_name(name: object) -> bool:
    lowered = str(name).lower()
    return any(word in lowered for word in _SECRET_WORDS) or bool(_AUTH.search(lowered))


def redact_secrets(value: Any, *, hide: bool = False) -> Any:
    """``value`` (a spec's dict form, or any part of one) with its credentials replaced.

    Args:
        value: decoded JSON (dicts, lists, scalars); it is not changed.
        hide: replace every scalar under ``value`` (used for what a secret key holds).
    """
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for name, inner in value.items():
            if name in _MAPPINGS_OF_SECRETS and isinstance(inner, dict):
                out[name] = {k: REDACTED for k in inner}
            else:
                out[name] = redact_secrets(inner, hide=hide or _secret_name(name))
        return out
    if isinstance(value, list | tuple):
        return [redact_secrets(inner, hide=hide) for inner in value]
    return REDACTED if hide and value is not None else value
