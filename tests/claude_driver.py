"""A driver for the real Claude Code CLI: print mode and stream-json sessions."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from tests.native_helpers import Answer, JsonLines, Watch, open_process


def claude_env(base_url: str, root: Path) -> dict[str, str]:
    """A hermetic environment for ``claude``: its own config, temp dir and endpoint.

    ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` alone stops every connection but the
    model endpoint (checked with strace, see docs/harnesses-native.md).
    """
    dirs = {name: root / name for name in ("home", "config", "tmp")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(dirs["home"]),
        "CLAUDE_CONFIG_DIR": str(dirs["config"]),
        "TMPDIR": str(dirs["tmp"]),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-omnigent-fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


async def claude_print(
    claude: Path, prompt: str, *args: str, cwd: Path, env: dict[str, str]
) -> tuple[int, list[dict[str, Any]]]:
    """Runs ``claude -p PROMPT --output-format stream-json --verbose ARGS``."""
    command = [str(claude), "-p", prompt, "--output-format", "stream-json", "--verbose", *args]
    done = await trio.run_process(
        command, cwd=cwd, env=env, capture_stdout=True, capture_stderr=True, check=False
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, lines


class ClaudeSession:
    """One ``claude`` process in stream-json mode: user messages in, messages out."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._lines = JsonLines(process.stdout)
        self._ids = itertools.count(1)

    async def send(self, message: dict[str, Any]) -> None:
        await self._stdin.send_all(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        return await self._lines.receive()

    async def control(self, request: dict[str, Any]) -> str:
        """Sends a ``control_request``; returns its request id (the answer comes in
        the message stream as a ``control_response``)."""
        request_id = f"req_{next(self._ids)}"
        await self.send({"type": "control_request", "request_id": request_id, "request": request})
        return request_id

    async def initialize(self, hooks: dict[str, Any] | None = None) -> dict[str, Any]:
        """The SDK's opening handshake; ``hooks`` registers hook callbacks."""
        request_id = await self.control({"subtype": "initialize", "hooks": hooks})
        while True:
            message = await self.receive()
            response = message.get("response", {})
            if message["type"] == "control_response" and response["request_id"] == request_id:
                assert response["subtype"] == "success", message
                return dict(response["response"])

    async def turn(
        self, text: str, *, answer: Answer | None = None, watch: Watch | None = None
    ) -> list[dict[str, Any]]:
        """Sends one user message; returns every message up to its ``result``.

        ``answer`` builds the response to each ``control_request`` the CLI sends
        (``can_use_tool``, ``hook_callback``); ``watch`` sees every message as it
        arrives (to interrupt, say).
        """
        user = {"role": "user", "content": text}
        await self.send({"type": "user", "message": user, "parent_tool_use_id": None})
        seen: list[dict[str, Any]] = []
        while True:
            message = await self.receive()
            seen.append(message)
            if watch is not None:
                await watch(message)
            if message["type"] == "control_request":
                if answer is None:
                    raise AssertionError(f"an unexpected control request: {message}")
                response = await answer(message["request"])
                await self.send(
                    {
                        "type": "control_response",
                        "response": {
                            "subtype": "success",
                            "request_id": message["request_id"],
                            "response": response,
                        },
                    }
                )
            if message["type"] == "result":
                return seen


@contextlib.asynccontextmanager
async def open_claude_session(
    claude: Path, *args: str, cwd: Path, env: dict[str, str], stderr_to: Path
) -> AsyncIterator[ClaudeSession]:
    """``claude`` with ``--input-format stream-json`` and the permission prompts on
    stdio (``--permission-prompt-tool stdio``), as the Agent SDK runs it."""
    command = [
        str(claude),
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
        "--permission-prompt-tool",
        "stdio",
        *args,
    ]
    async with open_process(command, cwd=cwd, env=env, stderr_to=stderr_to) as process:
        yield ClaudeSession(process)


def of_type(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == kind]


def tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks in the ``user`` messages Claude Code emitted."""
    return [
        block
        for m in of_type(messages, "user")
        if isinstance(m["message"]["content"], list)
        for block in m["message"]["content"]
        if block.get("type") == "tool_result"
    ]
