"""``omnigent mock-llm``: the MockLLM as a standalone OpenAI-compatible server.

For trying a ``loop`` agent with no key and no network: it serves ``GET /v1/models``
and streaming (or whole) ``POST /v1/chat/completions`` on a loopback port. Without a
script every answer echoes the last user message (``You said: …``); with ``--script
FILE`` it plays the file's turns in order, then echoes.

The script is a JSON list of turns — the format of ``python -m omnigent.testing``, read
by its parser — each an object:

* ``{"text": "…"}`` — a text answer (``"chunk_size"`` characters per delta, default 8;
  ``"delay"`` seconds between deltas; without one, each delta is its own network write,
  as real model servers stream, unless ``--writes packed`` sends a whole answer in one);
* ``{"tool": {"name": "sys_os_shell", "input": {"command": "ls"}}}`` — one tool call
  (``"id"`` sets its call id); ``{"tools": [...]}`` several; ``"text"`` may come too;
* ``{"error": {"status": 429, "message": "…", "retry_after": 1}}`` — an HTTP error;
* ``{"hang": true}`` — the headers, then nothing until the client goes away.

Memory stays bounded however long it runs: the MockLLM's record of requests (kept for
tests to read) is dropped at every answer.
"""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import trio

from ..errors import BadRequest
from ..testing import MockLLM, Reply, TextReply, Writes, chat_reply, load_script

__all__ = ["declare_mock_llm", "load_chat_script", "run_mock_llm"]

DEFAULT_PORT: Final = 8000


def declare_mock_llm(parser: argparse.ArgumentParser) -> None:
    """The ``mock-llm`` options (``handler=run_mock_llm``)."""
    parser.description = (
        "Serve the MockLLM: an OpenAI-compatible Chat Completions endpoint that "
        "echoes the last user message, or plays a script."
    )
    parser.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="0 for any free port (default: %(default)s)"
    )
    parser.add_argument(
        "--script",
        metavar="FILE",
        type=Path,
        help="a JSON list of turns to play before echoing (see docs/cli.md)",
    )
    parser.add_argument(
        "--writes",
        choices=[w.value for w in Writes],
        default=Writes.DELTA.value,
        help="delta: one network write per streamed delta, as real model servers send "
        "(default); packed: a whole answer in one write",
    )
    parser.set_defaults(handler=run_mock_llm)


def run_mock_llm(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; prints ``omnigent mock-llm serving on URL`` when ready.

    Raises:
        BadRequest: a bad port, an unreadable or invalid script, an address that
            cannot be listened on (printed as one ``Error:`` line).
    """
    if not 0 <= args.port <= 65535:
        raise BadRequest(f"--port must be between 0 and 65535, got {args.port}")
    script: list[Reply] = []
    if args.script is not None:
        try:
            data = json.loads(args.script.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise BadRequest(f"--script {args.script}: {exc}") from exc
        try:
            script = load_chat_script(data)
        except (TypeError, ValueError) as exc:
            raise BadRequest(f"--script {args.script}: {exc}") from exc
    trio.run(_serve, _mock(script, Writes(args.writes)), args.host, args.port)
    return 0


def load_chat_script(data: Any) -> list[Reply]:
    """The replies a script's JSON form describes (see the module docstring).

    The format and its parser are ``python -m omnigent.testing``'s, so one script
    serves both; the turns the chat server cannot play (``shell``, ``stall``) are
    refused.

    Raises:
        TypeError: ``data`` is not a list. ValueError: naming the first bad turn
            (``turn 3: …``).
    """
    replies = []
    for number, turn in enumerate(load_script(data), 1):
        try:
            replies.append(chat_reply(turn))
        except ValueError as exc:
            raise ValueError(f"turn {number}: {exc}") from exc
    return replies


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last user message of a chat request (text parts joined)."""
    messages = body.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
    return ""


def _mock(script: list[Reply], writes: Writes) -> MockLLM:
    """A MockLLM that plays ``script``, then echoes forever, keeping no requests."""
    mock = MockLLM(writes=writes)

    def scripted(reply: Reply) -> Callable[[dict[str, Any]], Reply]:
        def answer(body: dict[str, Any]) -> Reply:
            mock.requests.clear()  # kept for tests to read; a server runs for days
            return reply

        return answer

    def echo(body: dict[str, Any]) -> Reply:
        mock.requests.clear()
        mock.reply(echo)  # back in the queue: every later request echoes too
        return TextReply(f"You said: {last_user_text(body)}")

    for reply in script:
        mock.reply(scripted(reply))
    mock.reply(echo)
    return mock


async def _serve(mock: MockLLM, host: str, port: int) -> None:
    from ..transports.http import listen_error

    listening = False
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        try:
            async with mock.serve(host=host, port=port) as url:
                listening = True
                print(f"omnigent mock-llm serving on {url}", flush=True)
                async for _ in signals:
                    break
        except (OSError, OverflowError, BaseExceptionGroup) as exc:
            error = exc if listening else listen_error(exc, host, port)
            if error is exc:
                raise
            raise error from exc
