"""The environment a sandboxed process starts with: a minimal set, plus what is named.

The runtime's own environment holds the model keys (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``), database URLs and whatever else the operator exported; a
sandboxed process gets none of it. It gets the variables a shell and ordinary tools
need (:data:`MINIMAL`, ``LC_*``), the names ``env_passthrough`` lists, and what the
caller sets explicitly (a terminal's or MCP server's ``env`` from the spec, a
harness's own variables).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["MINIMAL", "PROXY_URL", "sandbox_env"]

MINIMAL = frozenset(
    {
        "PATH",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "TZ",
    }
)
"""Passed through when set (``HOME`` and ``TMPDIR`` are set to what the sandbox has)."""

PROXY_URL = "http://127.0.0.1:3128"
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


def sandbox_env(
    runtime_env: Mapping[str, str],
    *,
    home: Path,
    passthrough: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    proxied: bool = False,
) -> dict[str, str]:
    """The environment of one sandboxed process.

    Args:
        runtime_env: the runtime's environment (``os.environ``).
        home: ``HOME`` inside (the user's home path, an empty private tmpfs there).
        passthrough: names copied from ``runtime_env`` when set (``env_passthrough``).
        extra: variables the caller sets explicitly; they win.
        proxied: point every HTTP client at the in-sandbox bridge to the egress
            proxy (``egress_rules``), with no exceptions (``NO_PROXY`` empty).
    """
    names = MINIMAL | set(passthrough)
    env = {k: v for k, v in runtime_env.items() if k in names or k.startswith("LC_")}
    env["HOME"] = str(home)
    env["TMPDIR"] = "/tmp"
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    if proxied:
        for name in _PROXY_VARIABLES:
            env[name] = PROXY_URL
        env["NO_PROXY"] = env["no_proxy"] = ""
    if extra:
        env.update(extra)
    return env
