"""Drivers for the real Claude Code and Codex CLIs in integration tests.

They speak each CLI's own protocol directly — Claude Code's stream-json lines with its
control protocol, Codex's app-server JSON-RPC — against the fake model servers of
``omnigent.testing``, with a private, hermetic environment per test (no inherited
keys, no network: see docs/harnesses-native.md). Every process runs in its own
process group and is reaped (SIGKILL after a grace) when its block exits.

A CLI that is not installed skips its tests with the package to install — unless
``OMNIGENT_REQUIRE_NATIVE_CLIS=1`` (set by ``.ci/run``), where it fails them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

MAX_LINE = 16 * 1024 * 1024
REAP_GRACE = 3.0


# -- finding the binaries ---------------------------------------------------------------


def claude_binary() -> Path | None:
    """The ``claude`` CLI: bundled in the ``claude-agent-sdk`` wheel, else on PATH."""
    spec = importlib.util.find_spec("claude_agent_sdk")  # finds it without importing it
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "_bundled" / "claude"
        if bundled.is_file():
            return bundled
    found = shutil.which("claude")
    return Path(found) if found else None


def codex_binary() -> Path | None:
    """The ``codex`` CLI: in the ``openai-codex-cli-bin`` wheel, else on PATH."""
    spec = importlib.util.find_spec("codex_cli_bin")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "codex"
        if bundled.is_file():
            return bundled
    found = shutil.which("codex")
    return Path(found) if found else None


def require(binary: Path | None, name: str, extra: str) -> pytest.MarkDecorator:
    """Skips (or, under ``OMNIGENT_REQUIRE_NATIVE_CLIS=1``, fails) without ``binary``."""
    reason = f"the {name} CLI is not installed (pip install 'omnigent[{extra}]')"
    if binary is None and os.environ.get("OMNIGENT_REQUIRE_NATIVE_CLIS") == "1":
        pytest.fail(f"{reason}, and OMNIGENT_REQUIRE_NATIVE_CLIS=1", pytrace=False)
    return pytest.mark.skipif(binary is None, reason=reason)


# -- processes ------------------------------------------------------------------------


class JsonLines:
    """Newline-delimited JSON objects read from a byte stream, each line bounded."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def receive(self) -> dict[str, Any]:
        """The next object. Raises EOFError when the stream ends."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if line.strip():
                    message = json.loads(line)
                    assert isinstance(message, dict), line
                    return message
                continue
            if len(self._buffer) > MAX_LINE:
                raise ValueError("a line longer than MAX_LINE")
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                raise EOFError("the process closed its stdout")
            self._buffer += chunk


@contextlib.asynccontextmanager
async def open_process(
    command: list[str], *, cwd: Path, env: dict[str, str], stderr_to: Path
) -> AsyncIterator[trio.Process]:
    """A child with piped stdin/stdout in its own process group, reaped on exit.

    Cancellation: the reaping is shielded and bounded — stdin is closed, the child
    gets ``REAP_GRACE`` seconds to exit, then its whole group is SIGKILLed.
    """
    with stderr_to.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            with trio.CancelScope(shield=True):
                await reap(process)


async def reap(process: trio.Process) -> None:
    """Closes stdin, waits ``REAP_GRACE`` s, then SIGKILLs the process group."""
    if process.stdin is not None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await process.stdin.aclose()
    with trio.move_on_after(REAP_GRACE):
        await process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the leader, or what it left behind
    await process.wait()


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# -- Claude Code ---------------------------------------------------------------------------


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


Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Watch = Callable[[dict[str, Any]], Awaitable[None]]


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


# -- Codex -------------------------------------------------------------------------------------

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
