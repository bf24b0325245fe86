"""Running a fake model server on its own: ``python -m omnigent.testing``.

For trying a spec, a CLI or an editor against a scripted model without a key — outside
any test. The script is a JSON file (a list of turns, see :func:`load_script`); the
server prints its base URL on the first line of stdout, serves until SIGINT or
SIGTERM, and can log every model request as one JSON line per request.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import trio

from ._fake_anthropic import FakeAnthropic
from ._fake_responses import FakeResponses
from ._mockllm import (
    ErrorReply,
    HangReply,
    MockLLM,
    MockToolCall,
    TextReply,
    ToolCallsReply,
)
from ._mockllm import Reply as ChatReply
from ._script import FakeReply, FakeShell, FakeToolUse, FakeTurn

__all__ = ["chat_reply", "load_script", "main"]

_TURN_KEYS = {"text", "tool", "tools", "shell", "chunk_size", "delay", "stall"}
_MAX_TURNS = 10_000


def load_script(data: Any) -> list[FakeReply]:
    """Builds a script from its JSON form: a list of turns, each an object.

    - ``{"text": "…"}`` — a text answer; with ``"chunk_size"``, ``"delay"`` and
      ``"stall": true`` as in :class:`~omnigent.testing.FakeTurn`;
    - ``{"shell": "echo hi"}`` — run a command with the client's shell tool;
    - ``{"tool": {"name": "Read", "input": {…}}}`` — one tool use (``input`` may be a
      string for a freeform tool such as Codex's ``apply_patch``); ``"tools": […]``
      several, each ``{"name", "input"}`` or ``{"shell": "…"}``;
    - text and tools combine (text first); ``"id"`` in a tool sets its call id;
    - ``{"error": {"status": 429, "message": "…", "retry_after": 1}}`` — an HTTP error;
    - ``{"hang": true}`` — headers, then nothing.

    Raises:
        TypeError: ``data`` is not a list.
        ValueError: naming the first bad turn (``turn 3: …``).
    """
    if not isinstance(data, list):
        raise TypeError("a script is a JSON list of turns")
    if len(data) > _MAX_TURNS:
        raise ValueError(f"a script has at most {_MAX_TURNS} turns")
    script: list[FakeReply] = []
    for number, entry in enumerate(data, 1):
        try:
            script.append(_entry(entry))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"turn {number}: {exc}") from exc
    return script


def _entry(entry: Any) -> FakeReply:
    if not isinstance(entry, dict):
        raise TypeError("a turn is a JSON object")
    if "error" in entry:
        error = entry["error"]
        if not isinstance(error, dict) or not isinstance(error.get("status"), int):
            raise ValueError('"error" needs an integer "status"')
        retry_after = error.get("retry_after")
        return ErrorReply(error["status"], str(error.get("message", "")), retry_after)
    if entry.get("hang") is True:
        return HangReply()
    unknown = set(entry) - _TURN_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    tools = [entry["tool"]] if "tool" in entry else list(entry.get("tools", []))
    if "shell" in entry:
        tools.append({"shell": entry["shell"]})
    text = entry.get("text")
    if text is not None and not isinstance(text, str):
        raise ValueError('"text" must be a string')
    if text is None and not tools:
        raise ValueError('a turn needs "text", "shell", "tool" or "tools"')
    options = {k: entry[k] for k in ("chunk_size", "delay", "stall") if k in entry}
    return FakeTurn(text, tuple(_tool(t) for t in tools), **options)


def _tool(tool: Any) -> FakeToolUse | FakeShell:
    if isinstance(tool, dict) and isinstance(tool.get("shell"), str):
        return FakeShell(tool["shell"], tool.get("id"))
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise TypeError('a tool is {"name": …, "input": {…}} or {"shell": "…"}')
    arguments = tool.get("input", {})
    if not isinstance(arguments, dict | str):
        raise TypeError(f'tool {tool["name"]}: "input" must be an object or a string')
    return FakeToolUse(tool["name"], arguments, tool.get("id"))


def chat_reply(reply: FakeReply) -> ChatReply:
    """The Chat Completions form of a turn, for ``MockLLM`` (which has no shell tool).

    Raises:
        ValueError: the turn uses ``stall`` or ``shell``, which the chat server lacks.
    """
    if not isinstance(reply, FakeTurn):
        return reply
    if reply.stall:
        raise ValueError('"stall" is not available with the chat server (use "hang")')
    if not reply.tools:
        return TextReply(reply.text or "", reply.chunk_size, reply.delay)
    calls = []
    for tool in reply.tools:
        if isinstance(tool, FakeShell):
            raise ValueError('"shell" needs the anthropic or responses server')  # noqa: TRY004
        calls.append(MockToolCall(tool.name, tool.input, tool.call_id))
    return ToolCallsReply(tuple(calls), reply.text, reply.delay)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m omnigent.testing {anthropic,responses,chat} [--script FILE] …``."""
    parser = argparse.ArgumentParser(
        prog="python -m omnigent.testing",
        description="Serve a scripted fake model API on a local port.",
    )
    parser.add_argument(
        "api",
        choices=["anthropic", "responses", "chat"],
        help="anthropic: Messages API (Claude Code); responses: OpenAI Responses API "
        "(Codex); chat: OpenAI Chat Completions (the loop harness)",
    )
    parser.add_argument("--script", type=Path, help="a JSON list of turns (default: none)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="default: any free port")
    parser.add_argument("--log", type=Path, help="append each model request here as JSON")
    args = parser.parse_args(argv)
    if args.log is not None and args.api == "chat":
        print("Error: --log needs the anthropic or responses server", file=sys.stderr)
        return 2
    try:
        script = load_script(json.loads(args.script.read_text())) if args.script else []
        fake = _build(args.api, script)
    except (OSError, TypeError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    trio.run(_serve, fake, args.host, args.port, args.log)
    return 0


def _build(api: str, script: list[FakeReply]) -> FakeAnthropic | FakeResponses | MockLLM:
    if api == "anthropic":
        return FakeAnthropic(script)
    if api == "responses":
        return FakeResponses(script)
    mock = MockLLM()
    for reply in script:
        mock.reply(chat_reply(reply))
    return mock


async def _serve(
    fake: FakeAnthropic | FakeResponses | MockLLM, host: str, port: int, log: Path | None
) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with fake.serve(host=host, port=port) as url, trio.open_nursery() as nursery:
            print(url, flush=True)
            if log is not None and not isinstance(fake, MockLLM):
                nursery.start_soon(_log_requests, fake, log.open("a"))
            async for _ in signals:
                break
            nursery.cancel_scope.cancel()  # the logger; the server then closes gracefully


async def _log_requests(fake: FakeAnthropic | FakeResponses, out: TextIO) -> None:
    """Appends each model request to ``out`` as it arrives.

    Cancellation: requests that arrived but were not written yet are written (no
    await involved), then ``out`` is closed — a request answered just before SIGTERM
    is still logged.
    """
    written = 0
    try:
        while True:
            await fake.wait_requests(written + 1)
            for body in fake.requests[written:]:
                out.write(json.dumps(body) + "\n")
                written += 1
            out.flush()
    finally:
        with out:
            for body in fake.requests[written:]:
                out.write(json.dumps(body) + "\n")
