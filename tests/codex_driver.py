"""A driver for the real Codex CLI: ``codex app-server`` over JSON-RPC on stdio."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from tests.native_helpers import Answer, JsonLines, Watch, open_process, reap

CODEX_MODEL = "gpt-5.5"
"""A model in Codex's bundled catalog: known metadata (no fallback warning), and the
``apply_patch`` freeform tool that file changes need."""


def codex_config(base_url: str, model: str = CODEX_MODEL) -> str:
    """A ``config.toml`` that points Codex at ``base_url`` and keeps it offline."""
    return f"""model = "{model}"
model_provider = "omnigent-fake"

[features]
plugins = false  # else it looks up chatgpt.com and github.com at startup

[model_providers.omnigent-fake]
name = "omnigent fake"
base_url = "{base_url}"
wire_api = "responses"
env_key = "OMNIGENT_FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"""


def codex_env(home: Path) -> dict[str, str]:
    """A hermetic environment for ``codex``: a private ``CODEX_HOME``."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CODEX_HOME": str(home),
        "OMNIGENT_FAKE_API_KEY": "sk-omnigent-fake",
    }


class CodexRpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error


class CodexAppServer:
    """A JSON-RPC client for ``codex app-server`` on stdio.

    A reader task (in the caller's nursery) resolves responses to :meth:`request`
    and queues notifications and server requests in a bounded channel for
    :meth:`receive`.
    """

    def __init__(self, process: trio.Process, nursery: trio.Nursery) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._lines = JsonLines(process.stdout)
        self._ids = itertools.count(1)
        self._waiting: dict[int, list[Any]] = {}
        self._send, self._incoming = trio.open_memory_channel[dict[str, Any]](1000)
        nursery.start_soon(self._read)

    async def _read(self) -> None:
        async with self._send:
            while True:
                try:
                    message = await self._lines.receive()
                except EOFError:
                    return
                if "method" not in message:
                    slot = self._waiting.pop(message["id"])
                    slot[1] = message
                    slot[0].set()
                else:
                    await self._send.send(message)

    async def _write(self, message: dict[str, Any]) -> None:
        await self._stdin.send_all(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self._ids)
        slot: list[Any] = [trio.Event(), None]
        self._waiting[request_id] = slot
        await self._write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        await slot[0].wait()
        response = slot[1]
        if "error" in response:
            raise CodexRpcError(response["error"])
        return dict(response["result"])

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)

    async def respond(self, request_id: Any, result: dict[str, Any]) -> None:
        await self._write({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def receive(self) -> dict[str, Any]:
        """The next notification or server request."""
        return await self._incoming.receive()

    async def start_thread(self, cwd: Path, **params: Any) -> str:
        """``thread/start`` asking approval for everything; returns the thread id."""
        params = {"cwd": str(cwd), "approvalPolicy": "untrusted", **params}
        result = await self.request("thread/start", params)
        return str(result["thread"]["id"])

    async def turn(
        self,
        thread_id: str,
        text: str,
        *,
        answer: Answer | None = None,
        watch: Watch | None = None,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """``turn/start``; returns the completed turn and every message until then.

        ``answer`` builds the result for each server request (approvals); ``watch``
        sees every message as it arrives.
        """
        params = {"threadId": thread_id, "input": [{"type": "text", "text": text}]}
        turn_id = (await self.request("turn/start", params))["turn"]["id"]
        seen: list[dict[str, Any]] = []
        while True:
            message = await self.receive()
            seen.append(message)
            if watch is not None:
                await watch(message)
            if "id" in message:  # a server request
                if answer is None:
                    raise AssertionError(f"an unexpected server request: {message}")
                await self.respond(message["id"], await answer(message))
            if message["method"] == "turn/completed":
                turn = message["params"]["turn"]
                if turn["id"] == turn_id:
                    return dict(turn), seen


@contextlib.asynccontextmanager
async def open_codex_app_server(
    codex: Path, *, base_url: str, home: Path, cwd: Path, stderr_to: Path
) -> AsyncIterator[CodexAppServer]:
    """``codex app-server`` with a private ``CODEX_HOME``, initialized."""
    env = codex_env(home)
    (home / "config.toml").write_text(codex_config(base_url))
    command = [str(codex), "app-server"]
    async with (
        open_process(command, cwd=cwd, env=env, stderr_to=stderr_to) as process,
        trio.open_nursery() as nursery,
    ):
        server = CodexAppServer(process, nursery)
        client = {"name": "omnigent-tests", "title": None, "version": "0"}
        await server.request("initialize", {"clientInfo": client})
        await server.notify("initialized")
        try:
            yield server
        finally:
            with trio.CancelScope(shield=True):
                await reap(process)
            nursery.cancel_scope.cancel()


def items(messages: list[dict[str, Any]], method: str, kind: str) -> list[dict[str, Any]]:
    """The ``item`` of each ``method`` notification whose item type is ``kind``."""
    return [
        m["params"]["item"]
        for m in messages
        if m["method"] == method and m["params"]["item"]["type"] == kind
    ]
