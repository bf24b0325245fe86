"""ACP's ``initialize`` and ``authenticate``: what the client can do, what omnigent answers.

``initialize`` is the one request a connection must send first, and the one whose
answer is fixed by the agent rather than by a session. :func:`read_client` reads the
client's side (``protocolVersion``; the ``fs`` and ``terminal`` capabilities that decide
which of the session's tools the editor runs, :mod:`._client_tools`; form elicitation;
boolean config options); :func:`initialize_answer` builds omnigent's, advertising
exactly what ACP v1's schema (1.21) names and omnigent serves: ``loadSession``,
``sessionCapabilities`` ``list``, ``resume``, ``close``, ``delete`` and the unstable
``fork``, and one authentication method, with the ``_omnigent/...`` extension methods
listed under ``_meta.omnigent.methods``.

Authentication: the ACP registry lists only agents that offer a method, and the one
credential omnigent needs is the model provider's key, which it reads from its
environment. :data:`AUTH_METHOD` (an ``agent`` method: the client calls
``authenticate`` with it) says so; :func:`missing_model_key` is what ``authenticate``
checks. ACP's schema has no environment-variable method any more (its experimental
``env_var`` type was removed in July 2026), so the variable is named in the method's
description and ``_meta``.

All pure but :func:`mcp_http`, which reads the runtime's allowlist.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..._version import __version__
from ...core import Runtime
from ...mcp import mcp_installed
from ...spec import AgentSpec
from ._mcp_servers import ClientMcpMode
from ._params import Params, invalid

__all__ = [
    "AUTH_METHOD",
    "AUTH_METHOD_ID",
    "PROTOCOL_VERSION",
    "ClientCapabilities",
    "initialize_answer",
    "mcp_http",
    "missing_model_key",
    "read_client",
]

PROTOCOL_VERSION = 1
AUTH_METHOD_ID = "model-api-key"
KEY_VARIABLE = "OPENAI_API_KEY"
AUTH_METHOD: dict[str, Any] = {
    "id": AUTH_METHOD_ID,
    "name": "Model API key from the environment",
    "description": (
        f"omnigent sends your model provider's key from its environment: set {KEY_VARIABLE} "
        "(or the spec's executor.config.api_key, or a local model server's base_url) in "
        "the agent's env in your editor's settings. authenticate checks that it is there."
    ),
    "_meta": {"omnigent": {"env": [KEY_VARIABLE, "OPENAI_BASE_URL"]}},
}


@attrs.frozen
class ClientCapabilities:
    """What the client said it can do in ``initialize``.

    ``form_elicitation``: ``elicitation.form`` was present (ACP requires each mode to
    be explicit); ``boolean_options``: ``session.configOptions.boolean`` was.
    """

    read: bool = False
    write: bool = False
    terminal: bool = False
    form_elicitation: bool = False
    boolean_options: bool = False


def _present(value: Any, *path: str) -> bool:
    """Whether the object at ``path`` inside ``value`` is there (an object, not null).

    Capabilities ACP added later are read leniently, as its schema says
    (``x-deserialize-default-on-error``): a malformed one is one not advertised.
    """
    for key in path:
        if not isinstance(value, Mapping):
            return False
        value = value.get(key)
    return isinstance(value, Mapping)


def read_client(params: Params) -> ClientCapabilities:
    """The client's capabilities from ``initialize``'s params.

    Raises:
        RpcError: ``-32602`` at ``protocolVersion`` when it is missing or not an
            integer in ``0..65535``, or at an ``fs`` or ``terminal`` flag that is not
            a boolean.
    """
    version = params.integer("protocolVersion", low=0, high=65535)
    if version is None:
        raise invalid("protocolVersion", "expected an integer")
    caps = params.object("clientCapabilities")
    fs = caps.object("fs")
    raw = params.raw("clientCapabilities")
    return ClientCapabilities(
        read=fs.flag("readTextFile"),
        write=fs.flag("writeTextFile"),
        terminal=caps.flag("terminal"),
        form_elicitation=_present(raw, "elicitation", "form"),
        boolean_options=_present(raw, "session", "configOptions", "boolean"),
    )


def initialize_answer(extensions: Iterable[str], *, mcp_http: bool) -> dict[str, Any]:
    """omnigent's answer to ``initialize``.

    Args:
        extensions: the ``_omnigent/...`` methods the connection answers.
        mcp_http: whether HTTP MCP servers the client passes can be connected.
    """
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": mcp_http, "sse": False},
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                "close": {},
                "delete": {},
                "fork": {},  # unstable in ACP v1
            },
            "_meta": {"omnigent": {"methods": sorted(extensions)}},
        },
        "agentInfo": {"name": "omnigent", "title": "omnigent", "version": __version__},
        "authMethods": [AUTH_METHOD],
    }


def missing_model_key(spec: AgentSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """What is missing for the agent's model to be reached, or ``None``.

    Only the ``loop`` harness on the default endpoint (OpenAI's: no ``base_url`` in
    the spec nor ``OPENAI_BASE_URL``) needs a key omnigent must be given: a local or
    named endpoint may need none, and the other harnesses find their own.
    """
    env = os.environ if environ is None else environ
    config = spec.executor.config
    if spec.executor.type != "omnigent" or config.harness != "loop":
        return None
    if config.base_url or env.get("OPENAI_BASE_URL") or config.api_key or env.get(KEY_VARIABLE):
        return None
    return f"set {KEY_VARIABLE} in the agent's environment (the editor's agent settings)"


def mcp_http(mode: ClientMcpMode, runtime: Runtime) -> bool:
    """Whether HTTP MCP servers the client passes can be connected at all."""
    if mode == "operator":
        return mcp_installed()
    if mode == "client":
        return mcp_installed() and bool(runtime.allowed_mcp_urls)
    return False
