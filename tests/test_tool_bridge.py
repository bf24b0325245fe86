"""The tool bridge: the runtime's socket, and the stdio MCP shim the CLIs launch.

The shim runs as the CLIs run it (``python -I -S _shim.py SOCKET VERSION``, the token
in its environment) and is driven with MCP lines on its stdin; the bridge serves a
turn double. The harness tests drive both through the real CLIs.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.errors import HarnessError
from omnigent.harnesses.base import ToolSchema
from omnigent.harnesses.bridge import (
    TOKEN_VARIABLE,
    BridgeAddress,
    CallTool,
    CheckTool,
    serve_bridge,
    shim_command,
)
from omnigent.harnesses.bridge import _server as bridge_server
from omnigent.harnesses.bridge._protocol import MAX_REQUEST

TIMEOUT = 10

ECHO = ToolSchema(
    "sys_echo",
    "Echo text back.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


class TurnDouble:
    """A turn as the bridge sees it: one tool, a policy that refuses ``rm``."""

    def __init__(self) -> None:
        self.calls: list[CallTool] = []
        self.hold = False
        self.held = trio.Event()
        self.cancelled = trio.Event()

    @property
    def tools(self) -> tuple[ToolSchema, ...]:
        return (ECHO,)

    async def call(self, request: CallTool) -> str:
        self.calls.append(request)
        if self.hold:
            self.held.set()
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled.set()
                raise
        return f"echo {request.arguments.get('text')}"

    async def check(self, request: CheckTool) -> tuple[bool, str]:
        if request.tool_name == "rm":
            return False, "no_rm: never"
        return True, ""


@pytest.fixture
def address(tmp_path: Path) -> BridgeAddress:
    return BridgeAddress.new(tmp_path / "bridge.sock")


class ShimClient:
    """The shim as a CLI drives it: MCP lines on its stdin, answers on its stdout."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = b""
        self._ids = 0

    async def send(self, message: dict[str, Any]) -> None:
        await self._stdin.send_all(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        self._ids += 1
        await self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids

    async def answer(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = await self._stdout.receive_some(65536)
            assert chunk, "the shim closed its stdout"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = await self.request(method, params)
        answer = await self.answer()
        assert answer["id"] == request_id
        return answer


@asynccontextmanager
async def shim(address: BridgeAddress, token: str | None = None) -> AsyncIterator[ShimClient]:
    env = {"PATH": os.environ["PATH"], TOKEN_VARIABLE: token or address.token}
    process = await trio.lowlevel.open_process(
        list(shim_command(address, "9.9")), stdin=-1, stdout=-1, env=env
    )
    client = ShimClient(process)
    try:
        yield client
    finally:
        with trio.CancelScope(shield=True):
            await client._stdin.aclose()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_the_shim_serves_the_turns_tools_over_mcp(address: BridgeAddress) -> None:
    turn = TurnDouble()
    with trio.fail_after(TIMEOUT):
        async with serve_bridge(address, turn), shim(address) as client:
            hello = await client.call("initialize", {"protocolVersion": "2025-06-18"})
            assert hello["result"]["protocolVersion"] == "2025-06-18"
            assert hello["result"]["serverInfo"] == {"name": "omnigent", "version": "9.9"}
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert (await client.call("ping"))["result"] == {}
            listed = await client.call("tools/list")
            assert listed["result"]["tools"] == [
                {
                    "name": "sys_echo",
                    "description": "Echo text back.",
                    "inputSchema": ECHO.parameters,
                }
            ]
            meta = {"claudecode/toolUseId": "toolu_01", "progressToken": 2}
            called = await client.call(
                "tools/call", {"name": "sys_echo", "arguments": {"text": "hi"}, "_meta": meta}
            )
            assert called["result"] == {
                "content": [{"type": "text", "text": "echo hi"}],
                "isError": False,
            }
            assert turn.calls == [CallTool("sys_echo", {"text": "hi"}, "toolu_01")]
            # Codex names the model's call id ``callId``.
            await client.call(
                "tools/call",
                {"name": "sys_echo", "arguments": {"text": "x"}, "_meta": {"callId": "call_7"}},
            )
            assert turn.calls[-1].call_id == "call_7"
            unknown = await client.call("resources/list")
            assert unknown["error"]["code"] == -32601


async def test_an_unknown_protocol_version_gets_the_newest(address: BridgeAddress) -> None:
    with trio.fail_after(TIMEOUT):
        async with shim(address) as client:
            hello = await client.call("initialize", {"protocolVersion": "1999-01-01"})
            assert hello["result"]["protocolVersion"] == "2025-11-25"


async def test_between_turns_a_call_says_no_turn_is_running(address: BridgeAddress) -> None:
    with trio.fail_after(TIMEOUT):
        async with shim(address) as client:
            called = await client.call("tools/call", {"name": "sys_echo", "arguments": {}})
            [content] = called["result"]["content"]
            assert called["result"]["isError"] is True
            assert content["text"].startswith("Error: omnigent is not running a turn")
            listed = await client.call("tools/list")
            assert "cannot reach the bridge" in listed["error"]["message"]


async def test_a_wrong_token_is_refused(address: BridgeAddress) -> None:
    turn = TurnDouble()
    with trio.fail_after(TIMEOUT):
        async with serve_bridge(address, turn), shim(address, token="forged") as client:
            called = await client.call("tools/call", {"name": "sys_echo", "arguments": {}})
            [content] = called["result"]["content"]
            assert content["text"] == "Error: unauthorized"
            assert turn.calls == []


async def exchange(address: BridgeAddress, request: dict[str, Any] | bytes) -> dict[str, Any]:
    """One raw exchange on the bridge socket."""
    stream = await trio.open_unix_socket(str(address.path))
    async with stream:
        line = request if isinstance(request, bytes) else json.dumps(request).encode() + b"\n"
        await stream.send_all(line)
        data = b""
        while b"\n" not in data:
            chunk = await stream.receive_some(65536)
            assert chunk, "closed without an answer"
            data += chunk
        answer: dict[str, Any] = json.loads(data)
        return answer


async def test_checks_answer_from_the_turns_policies(address: BridgeAddress) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve_bridge(address, TurnDouble()):
            token = address.token
            request = {"token": token, "op": "check", "tool_name": "rm", "tool_input": {}}
            assert await exchange(address, request) == {"allow": False, "reason": "no_rm: never"}
            request["tool_name"] = "ls"
            assert await exchange(address, request) == {"allow": True, "reason": ""}


@pytest.mark.parametrize(
    ("request_body", "error"),
    [
        (b"not json\n", "the request is not JSON"),
        (b"[1]\n", "the request must be a JSON object"),
        ({"op": "list"}, "unauthorized"),
        ({"op": "drop"}, "unknown op 'drop' (expected list, call or check)"),
        ({"op": "call", "name": ""}, "name must be a tool name"),
        ({"op": "call", "name": "x", "arguments": []}, "arguments must be an object"),
        ({"op": "check", "tool_name": "x", "call_id": 3}, "call_id must be a non-empty string"),
    ],
)
async def test_bad_requests_are_answered_with_an_error(
    address: BridgeAddress, request_body: dict[str, Any] | bytes, error: str
) -> None:
    if isinstance(request_body, dict) and request_body != {"op": "list"}:
        request_body = {"token": address.token, **request_body}
    with trio.fail_after(TIMEOUT):
        async with serve_bridge(address, TurnDouble()):
            assert await exchange(address, request_body) == {"error": error}


async def test_an_oversized_request_is_refused(address: BridgeAddress) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve_bridge(address, TurnDouble()):
            answer = await exchange(address, b"x" * (MAX_REQUEST + 70_000))
            assert answer == {"error": f"the request is over {MAX_REQUEST} bytes"}


async def test_a_silent_connection_is_dropped(
    address: BridgeAddress, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bridge_server, "READ_TIMEOUT", 0.2)
    with trio.fail_after(TIMEOUT):
        async with serve_bridge(address, TurnDouble()):
            answer = await exchange(address, b"")
            assert answer == {"error": "no request within 0.2 s"}


async def test_a_call_the_client_cancels_is_cancelled_in_the_turn(
    address: BridgeAddress,
) -> None:
    turn = TurnDouble()
    turn.hold = True
    with trio.fail_after(TIMEOUT):
        async with serve_bridge(address, turn), shim(address) as client:
            request_id = await client.request("tools/call", {"name": "sys_echo", "arguments": {}})
            await turn.held.wait()
            cancel = {"requestId": request_id, "reason": "interrupted"}
            await client.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
            )
            await turn.cancelled.wait()
            # No answer is due for a cancelled request: the next one is answered next.
            assert (await client.call("ping"))["result"] == {}


async def test_a_call_in_flight_when_the_turn_ends_is_cancelled(address: BridgeAddress) -> None:
    turn = TurnDouble()
    turn.hold = True
    with trio.fail_after(TIMEOUT):
        async with shim(address) as client:
            async with serve_bridge(address, turn):
                request_id = await client.request(
                    "tools/call", {"name": "sys_echo", "arguments": {}}
                )
                await turn.held.wait()
            assert turn.cancelled.is_set()
            answer = await client.answer()
            assert answer["id"] == request_id
            [content] = answer["result"]["content"]
            assert "the turn ended" in content["text"]
            assert not address.path.exists()


async def test_a_stale_socket_is_replaced_and_anything_else_refused(
    address: BridgeAddress,
) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(address.path))
    stale.close()
    with trio.fail_after(TIMEOUT):
        async with serve_bridge(address, TurnDouble()):
            assert (await exchange(address, {"token": address.token, "op": "list"}))["tools"]
        address.path.write_text("not a socket")
        with pytest.raises(HarnessError, match="not a socket"):
            async with serve_bridge(address, TurnDouble()):
                pass
        assert address.path.read_text() == "not a socket"
