"""The pi side of the ``pi`` harness, without I/O.

pi (``@mariozechner/pi-coding-agent``) runs as one long-lived process per
conversation in RPC mode — JSON lines on stdio (``docs/harnesses-native.md``, "pi")::

    pi --mode rpc --no-extensions -e <omnigent's extension.ts> --no-skills
       --no-prompt-templates --no-themes --provider omnigent
       --session-dir DIR [--session FILE]

omnigent's extension (``extension.ts`` beside this file) registers the provider
``omnigent`` from the environment built here, appends the agent's prompt to pi's
system prompt, registers omnigent's tools, and asks omnigent's policies about pi's own
tool calls — the last two through the tool bridge (:mod:`omnigent.harnesses.bridge`).

This module builds the command line, the environment and the commands omnigent
sends (``prompt``, ``abort``, ``get_state``), and reads pi's events into the relay's
actions (:class:`PiReader`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ...errors import ErrorDetail
from ...model import InputImage, InputText, MessageItem, OutputText
from ...spec import AgentSpec
from ..bridge import TOKEN_VARIABLE, BridgeAddress
from ..native import (
    Action,
    Call,
    CallOutput,
    EndMessage,
    Finished,
    ModelEndpoint,
    Say,
    Used,
    native_spec_problems,
    positive_number,
    reported_usage,
    split_data_url,
)

__all__ = [
    "APIS",
    "DEFAULT_API",
    "EXTENSION",
    "PI_OWN_TOOLS",
    "Answered",
    "PiReader",
    "abort_command",
    "pi_argv",
    "pi_environment",
    "prompt_command",
    "registered",
    "spec_problems",
    "state_command",
]

log = logging.getLogger(__name__)

EXTENSION = Path(__file__).with_name("extension.ts")
"""omnigent's pi extension, loaded with ``-e``."""

APIS: Mapping[str, tuple[str, str]] = {
    "openai-completions": ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
    "openai-responses": ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
    "anthropic-messages": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
}
"""The model APIs pi's provider may speak, with the environment variables that name
their endpoint and key when the spec does not."""
DEFAULT_API = "openai-completions"

PI_OWN_TOOLS = frozenset({"read", "bash", "edit", "write", "grep", "find", "ls"})
"""pi's built-in tools: an omnigent tool of one of these names is not registered
(the extension skips it too), so pi's own stays."""

ENV_PREFIXES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "NODE_EXTRA_CA_CERTS")


def _api(value: Any) -> str | None:
    return None if value in APIS else f"must be one of {', '.join(sorted(APIS))}"


OPTIONS = {"startup_timeout": positive_number, "api": _api}


def spec_problems(spec: AgentSpec, harness: str) -> list[ErrorDetail]:
    """The spec keys ``pi`` cannot honour (see :func:`native_spec_problems`)."""
    return native_spec_problems(spec, harness, OPTIONS, ENV_PREFIXES)


def registered(tools: Iterable[str]) -> frozenset[str]:
    """Which of the bridged tools the extension registers with pi."""
    return frozenset(name for name in tools if name not in PI_OWN_TOOLS)


# -- the process -----------------------------------------------------------------------


def pi_argv(binary: str, *, session_dir: Path, session_file: str | None) -> tuple[str, ...]:
    """The command line of one conversation's process.

    No discovery (extensions, skills, prompt templates, themes: a repository's
    ``.pi/`` may not run code omnigent never saw), and no ``--model`` or
    ``--append-system-prompt`` either: both come through the extension, so a model id
    is never read as a pattern nor a prompt as a file path.
    """
    argv = [
        binary,
        "--mode",
        "rpc",
        "--no-extensions",
        "--extension",
        str(EXTENSION),
        "--no-skills",
        "--no-prompt-templates",
        "--no-themes",
        "--provider",
        "omnigent",
        "--session-dir",
        str(session_dir),
    ]
    if session_file:
        argv += ["--session", session_file]
    return tuple(argv)


def pi_environment(
    base: Mapping[str, str],
    *,
    agent_dir: Path,
    endpoint: ModelEndpoint,
    api: str,
    model: str,
    instructions: str,
    bridge: BridgeAddress,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """The whole environment of the process: ``base``, pi's private config directory,
    what the extension reads (endpoint, model, prompt, bridge), then the spec's
    ``extra``.

    The key is always in ``OMNIGENT_MODEL_KEY`` (pi reads a provider's ``apiKey`` as
    the name of a variable, or runs it when it starts with ``!``: omnigent never
    hands it a literal).
    """
    env = dict(base)
    env.update(
        {
            "PI_CODING_AGENT_DIR": str(agent_dir),
            "PI_OFFLINE": "1",
            "PI_TELEMETRY": "0",
            "OMNIGENT_PI_BASE_URL": endpoint.base_url or "",
            "OMNIGENT_PI_API": api,
            "OMNIGENT_PI_MODEL": model,
            "OMNIGENT_PI_INSTRUCTIONS": instructions,
            "OMNIGENT_MODEL_KEY": endpoint.api_key or "omnigent-no-key",
            "OMNIGENT_BRIDGE_SOCKET": str(bridge.path),
            TOKEN_VARIABLE: bridge.token,
        }
    )
    env.update(extra)
    return env


# -- what omnigent sends ---------------------------------------------------------------


def prompt_command(
    request_id: str, messages: Sequence[MessageItem], preamble: str | None
) -> dict[str, Any]:
    """One turn's ``prompt``: the messages' text (after the preamble, if any) and
    their images."""
    texts: list[str] = [preamble] if preamble else []
    images: list[dict[str, str]] = []
    for message in messages:
        for block in message.content:
            if isinstance(block, InputText | OutputText) and block.text:
                texts.append(block.text)
            elif isinstance(block, InputImage) and block.image_url:
                data = split_data_url(block.image_url)
                if data is None:
                    texts.append(f"(an image at {block.image_url})")
                else:
                    images.append({"type": "image", "mimeType": data[0], "data": data[1]})
    command: dict[str, Any] = {"id": request_id, "type": "prompt", "message": "\n\n".join(texts)}
    if images:
        command["images"] = images
    return command


def abort_command() -> dict[str, Any]:
    return {"type": "abort"}


def state_command(request_id: str) -> dict[str, Any]:
    return {"id": request_id, "type": "get_state"}


# -- what pi says ----------------------------------------------------------------------


@attrs.frozen
class Answered:
    """pi's ``response`` to one of omnigent's commands."""

    request_id: str | None
    command: str
    success: bool
    data: Any = None
    error: str | None = None


class PiReader:
    """Reads pi's events into relay actions (:mod:`.._native_relay`) and answers."""

    def __init__(self) -> None:
        self._messages = 0
        self._streamed = False
        self._error: str | None = None

    def feed(self, events: Iterable[Mapping[str, Any]]) -> list[Action | Answered]:
        """Everything ``events`` say, in order; a burst of one message's text is one
        :class:`Say`."""
        out: list[Action | Answered] = []
        for event in events:
            for action in self._read(event):
                last = out[-1] if out else None
                if isinstance(action, Say) and isinstance(last, Say) and last.key == action.key:
                    out[-1] = Say(action.key, last.text + action.text)
                else:
                    out.append(action)
        return out

    def _read(self, event: Mapping[str, Any]) -> list[Action | Answered]:
        kind = event.get("type")
        if kind == "response":
            return [_answered(event)]
        if kind == "message_start" and _role(event) == "assistant":
            self._messages += 1
            self._streamed = False
            return []
        if kind == "message_update":
            return self._update(event)
        if kind == "message_end" and _role(event) == "assistant":
            return self._message_end(event)
        if kind == "tool_execution_start":
            return self._call(event)
        if kind == "tool_execution_end":
            return self._output(event)
        if kind == "agent_end":
            error, self._error = self._error, None
            return [Finished(error)]
        if kind == "extension_error":
            log.warning("pi: omnigent's extension failed in %s: %s", event.get("event"), event)
        return []

    def _key(self) -> str:
        return f"pi_message_{self._messages}"

    def _update(self, event: Mapping[str, Any]) -> list[Action | Answered]:
        update = event.get("assistantMessageEvent")
        if not isinstance(update, Mapping) or update.get("type") != "text_delta":
            return []
        delta = update.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        self._streamed = True
        return [Say(self._key(), delta)]

    def _message_end(self, event: Mapping[str, Any]) -> list[Action | Answered]:
        message = event.get("message")
        message = message if isinstance(message, Mapping) else {}
        out: list[Action | Answered] = []
        if not self._streamed:  # a reply that came whole
            text = _text(message.get("content"))
            if text:
                out.append(Say(self._key(), text))
        out.append(EndMessage())
        if (used := _used(message)) is not None:
            out.append(used)
        stop = message.get("stopReason")
        if stop == "error":
            detail = message.get("errorMessage")
            self._error = f"pi: {detail}" if isinstance(detail, str) else "pi: the model failed"
        elif stop == "aborted":
            self._error = "pi aborted the turn"
        else:
            self._error = None
        return out

    def _call(self, event: Mapping[str, Any]) -> list[Action | Answered]:
        name, call_id = event.get("toolName"), event.get("toolCallId")
        if not isinstance(name, str) or not isinstance(call_id, str):
            return []
        args = event.get("args")
        return [Call(call_id, name, json.dumps(args if isinstance(args, Mapping) else {}))]

    def _output(self, event: Mapping[str, Any]) -> list[Action | Answered]:
        name, call_id = event.get("toolName"), event.get("toolCallId")
        if not isinstance(name, str) or not isinstance(call_id, str):
            return []
        result = event.get("result")
        text = _text(result.get("content") if isinstance(result, Mapping) else None)
        if event.get("isError") is True and not text.startswith("Error:"):
            text = f"Error: {text}" if text else "Error: the tool failed"
        return [CallOutput(call_id, text)]


def _used(message: Mapping[str, Any]) -> Used | None:
    """The model call's usage an assistant message carries (pi's ``usage``), if any.

    pi splits the prompt into ``input`` (neither read from nor written to the cache),
    ``cacheRead`` and ``cacheWrite``; omnigent's ``input_tokens`` is the whole prompt,
    of which ``cacheRead`` was cached. pi's zeros (the model reported nothing, an
    aborted call) record nothing.
    """
    usage = message.get("usage")
    if not isinstance(usage, Mapping):
        return None
    prompt = ("input", "cacheRead", "cacheWrite")
    model = message.get("model")
    return reported_usage(usage, prompt=prompt, cached="cacheRead", output="output", model=model)


def _answered(event: Mapping[str, Any]) -> Answered:
    request_id = event.get("id")
    error = event.get("error")
    return Answered(
        request_id if isinstance(request_id, str) else None,
        str(event.get("command")),
        event.get("success") is True,
        event.get("data"),
        error if isinstance(error, str) else None,
    )


def _role(event: Mapping[str, Any]) -> Any:
    message = event.get("message")
    return message.get("role") if isinstance(message, Mapping) else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, Mapping) and part.get("type") == "text"
    )
