"""The Codex side of the ``codex`` harness, without I/O.

Codex runs as ``codex app-server`` — newline-delimited JSON-RPC on stdio — one
process per conversation, a thread per session and a turn per message
(``docs/harnesses-native.md``). The model provider is given on the command line
(``-c`` overrides), so one private ``CODEX_HOME`` serves every session::

    codex app-server -c model_provider="omnigent"
                     -c model_providers.omnigent={name=…, base_url=…, wire_api="responses", …}
                     -c features.plugins=false [-c model="M"]

This module builds that command line and environment and the JSON-RPC messages
omnigent sends (reading what Codex sends is :mod:`._stream`'s job), and maps
its approval requests:

* :func:`approval_event` / :func:`approval_params` / :func:`decision` map
  ``item/commandExecution/requestApproval`` and ``item/fileChange/requestApproval``
  onto omnigent's policies and elicitations (phases ``codex_command_approval`` and
  ``codex_file_change_approval``, ``params.command`` the command).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ErrorDetail
from ...model import ElicitationParams, MessageItem, elicitation_params
from ...spec import AgentSpec
from ..bridge import SERVER_NAME, TOKEN_VARIABLE
from ..native import ModelEndpoint, OptionCheck, input_blocks, native_spec_problems, positive_number
from ._stream import COMMAND_TOOL, FILE_TOOL, CodexReader, ServerRequest

__all__ = [
    "COMMAND_APPROVAL",
    "COMMAND_PHASE",
    "DEFAULT_BASE_URL",
    "FILE_APPROVAL",
    "FILE_PHASE",
    "approval_event",
    "approval_params",
    "codex_argv",
    "codex_environment",
    "decision",
    "error_response",
    "notification",
    "request",
    "result",
    "spec_problems",
    "thread_params",
    "turn_input",
]

HARNESS = "codex"
COMMAND_APPROVAL = "item/commandExecution/requestApproval"
FILE_APPROVAL = "item/fileChange/requestApproval"
COMMAND_PHASE = "codex_command_approval"
FILE_PHASE = "codex_file_change_approval"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VARIABLE = "OMNIGENT_MODEL_KEY"
BRIDGE_CALL_TIMEOUT = 86_400
"""Seconds Codex lets one call of omnigent's tools take (it may wait on a person)."""
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
METHOD_NOT_FOUND = -32601


def _sandbox(value: Any) -> str | None:
    return None if value in SANDBOXES else f"must be one of {', '.join(SANDBOXES)}"


OPTIONS: dict[str, OptionCheck] = {"startup_timeout": positive_number, "sandbox": _sandbox}
ENV_PREFIXES = ("OPENAI_", "RUST_LOG", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE")


def spec_problems(spec: AgentSpec, harness: str = HARNESS) -> list[ErrorDetail]:
    """The spec keys ``codex`` cannot honour (see :func:`native_spec_problems`)."""
    return native_spec_problems(spec, harness, OPTIONS, ENV_PREFIXES)


# -- the process -----------------------------------------------------------------------


def _toml(value: str) -> str:
    # A JSON string is a valid TOML basic string (same escapes).
    return json.dumps(value)


def codex_argv(
    binary: str,
    *,
    endpoint: ModelEndpoint,
    model: str | None,
    shim: Sequence[str] | None = None,
) -> tuple[str, ...]:
    """``codex app-server`` with omnigent's model provider, offline but for it.

    ``features.plugins = false`` keeps it from looking up chatgpt.com and github.com
    at every start (docs/harnesses-native.md). ``shim`` is the command of the tool
    bridge's MCP shim: the MCP server ``omnigent`` (Codex then offers its tools in the
    namespace ``mcp__omnigent``, behind its ``tool_search``), whose calls Codex makes
    without asking (``default_tools_approval_mode = "approve"``: omnigent's policies
    decide as the bridge runs them), each allowed a day (a call may wait for a
    person), its token passed on from Codex's environment.
    """
    provider = {
        "name": "omnigent",
        "base_url": endpoint.base_url or DEFAULT_BASE_URL,
        "wire_api": "responses",
    }
    if endpoint.api_key:
        provider["env_key"] = KEY_VARIABLE
    table = "{" + ", ".join(f"{k}={_toml(v)}" for k, v in provider.items()) + "}"
    argv = [
        binary,
        "app-server",
        "-c",
        'model_provider="omnigent"',
        "-c",
        f"model_providers.omnigent={table}",
        "-c",
        "features.plugins=false",
    ]
    if model:
        argv += ["-c", f"model={_toml(model)}"]
    if shim:
        server = {
            "command": _toml(shim[0]),
            "args": "[" + ", ".join(_toml(arg) for arg in shim[1:]) + "]",
            "env_vars": f"[{_toml(TOKEN_VARIABLE)}]",
            "default_tools_approval_mode": '"approve"',
            "startup_timeout_sec": "30",
            "tool_timeout_sec": str(BRIDGE_CALL_TIMEOUT),
        }
        for key, value in server.items():
            argv += ["-c", f"mcp_servers.{SERVER_NAME}.{key}={value}"]
    return tuple(argv)


def codex_environment(
    base: Mapping[str, str],
    *,
    home: Path,
    endpoint: ModelEndpoint,
    extra: Mapping[str, str],
    bridge_token: str | None = None,
) -> dict[str, str]:
    """The whole environment: ``base``, the private ``CODEX_HOME``, the key, the tool
    bridge's token (passed on to the shim), ``extra``."""
    env = dict(base)
    env["CODEX_HOME"] = str(home)
    if bridge_token is not None:
        env[TOKEN_VARIABLE] = bridge_token
    if endpoint.api_key:
        env[KEY_VARIABLE] = endpoint.api_key
    env.update(extra)
    return env


# -- what omnigent sends ---------------------------------------------------------------


def request(request_id: int, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}


def notification(method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method}


def result(request_id: Any, value: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": dict(value)}


def error_response(request_id: Any, message: str, code: int = METHOD_NOT_FOUND) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def thread_params(
    *, cwd: Path, sandbox: str, instructions: str, model: str | None, thread_id: str | None
) -> dict[str, Any]:
    """``thread/start`` (or, with ``thread_id``, ``thread/resume``) params: Codex asks
    about every command and file change (``untrusted``), so omnigent sees each."""
    params: dict[str, Any] = {
        "cwd": str(cwd),
        "approvalPolicy": "untrusted",
        "sandbox": sandbox,
    }
    if instructions:
        params["developerInstructions"] = instructions
    if model:
        params["model"] = model
    if thread_id is not None:
        params["threadId"] = thread_id
        params["excludeTurns"] = True  # no full-history hydration (deprecated)
    return params


def turn_input(messages: Sequence[MessageItem], preamble: str | None) -> list[dict[str, Any]]:
    """``turn/start`` input: the messages' text and images (``data:`` URLs included)."""
    return input_blocks(messages, preamble, lambda url: {"type": "image", "url": url})


# -- approvals ---------------------------------------------------------------------------


def _command_of(params: Mapping[str, Any]) -> str:
    actions = params.get("commandActions")
    inner = [
        str(a["command"])
        for a in (actions if isinstance(actions, list) else ())
        if isinstance(a, Mapping) and isinstance(a.get("command"), str)
    ]
    if inner:
        return " && ".join(inner)
    raw = params.get("command")
    return " ".join(str(p) for p in raw) if isinstance(raw, list) else str(raw or "")


def approval_event(request: ServerRequest, reader: CodexReader) -> dict[str, Any]:
    """The policy event of an approval request: ``exec_command {command, cwd}`` or
    ``apply_patch {changes}`` (taken from the ``fileChange`` item the request names)."""
    params = request.params
    if request.method == COMMAND_APPROVAL:
        tool, tool_input = COMMAND_TOOL, {"command": _command_of(params), "cwd": params.get("cwd")}
    else:
        changes = reader.changes.get(str(params.get("itemId")), [])
        tool, tool_input = FILE_TOOL, {"changes": changes}
    context = {"harness": HARNESS, "item_id": params.get("itemId"), "reason": params.get("reason")}
    return {
        "type": "PHASE_TOOL_CALL",
        "data": {"tool_name": tool, "tool_input": tool_input},
        "context": context,
    }


def approval_params(request: ServerRequest, event: Mapping[str, Any]) -> ElicitationParams:
    """The elicitation asking the person about an approval request."""

    data = event["data"]
    tool_input = dict(data["tool_input"])
    reason = request.params.get("reason")
    suffix = f" ({reason})" if isinstance(reason, str) and reason else ""
    if request.method == COMMAND_APPROVAL:
        command = str(tool_input["command"])
        return elicitation_params(
            f"Codex wants to run: {command}{suffix}",
            COMMAND_PHASE,
            tool_name=data["tool_name"],
            tool_input=tool_input,
            command=command,
        )
    paths = [str(c.get("path")) for c in tool_input.get("changes", [])]
    what = ", ".join(paths) if paths else "files"
    return elicitation_params(
        f"Codex wants to change {what}{suffix}",
        FILE_PHASE,
        tool_name=data["tool_name"],
        tool_input=tool_input,
    )


def decision(accepted: bool) -> dict[str, Any]:
    """The approval's answer. Only ``accept`` / ``decline``: never a session-wide or
    policy-amending decision, so omnigent's policies keep seeing every call."""
    return {"decision": "accept" if accepted else "decline"}
