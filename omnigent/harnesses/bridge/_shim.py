"""The MCP server a native CLI launches for omnigent's tools: a stdio shim to the bridge.

Claude Code and Codex are handed an MCP server named ``omnigent`` whose command runs
this file (``python -I -S _shim.py SOCKET VERSION``, the bridge's token in
``$OMNIGENT_BRIDGE_TOKEN``). It speaks MCP on stdin/stdout — newline-delimited
JSON-RPC — and relays each ``tools/list`` and ``tools/call`` over its own connection
to the runtime's bridge socket, where the running turn answers it (see
:mod:`omnigent.harnesses.bridge`). It holds no state: ``initialize`` and ``ping`` it
answers itself, everything a tool does happens in the runtime.

It imports nothing but the standard library (it is run as a file, not as part of the
``omnigent`` package, so it starts in milliseconds), answers each request in a
thread of its own (at most :data:`MAX_INFLIGHT`), and drops a request's connection
when the client cancels it (``notifications/cancelled``), which cancels the call in
the runtime.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from typing import Any, BinaryIO

MAX_INFLIGHT = 32
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
CONNECT_TIMEOUT = 5.0
MAX_ANSWER = 64 * 1024 * 1024
NO_TURN = (
    "Error: omnigent is not running a turn for this session right now, "
    "so its tools cannot be called"
)


class _BridgeDown(Exception):
    """The bridge could not be reached, or broke off."""


class Shim:
    """One MCP session on ``stdin`` / ``stdout``, relayed to the bridge at ``path``."""

    def __init__(
        self, path: str, token: str, version: str, stdin: BinaryIO, stdout: BinaryIO
    ) -> None:
        self._path = path
        self._token = token
        self._version = version
        self._stdin = stdin
        self._stdout = stdout
        self._write_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_INFLIGHT)
        self._open: dict[Any, socket.socket] = {}
        self._given_up: set[Any] = set()  # requests the client cancelled
        self._open_lock = threading.Lock()

    def run(self) -> None:
        """Serve until stdin closes."""
        for line in self._stdin:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self._dispatch(message)
        with self._open_lock:
            for sock in self._open.values():
                _drop(sock)

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if "id" not in message:
            if method == "notifications/cancelled":
                params = message.get("params")
                if isinstance(params, dict):
                    self._cancel(params.get("requestId"))
            return
        request_id = message["id"]
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            self._result(request_id, self._initialize(params))
        elif method == "ping":
            self._result(request_id, {})
        elif method in ("tools/list", "tools/call"):
            if not self._slots.acquire(blocking=False):
                self._error(request_id, -32000, "too many requests at once")
                return
            worker = threading.Thread(
                target=self._relay, args=(request_id, method, params), daemon=True
            )
            worker.start()
        else:
            self._error(request_id, -32601, f"method not found: {method}")

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "omnigent", "version": self._version},
        }

    def _relay(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        try:
            if method == "tools/list":
                self._list(request_id)
            else:
                self._call(request_id, params)
        finally:
            self._slots.release()

    def _list(self, request_id: Any) -> None:
        try:
            answer = self._exchange(request_id, {"op": "list"})
        except _BridgeDown as exc:
            self._error(request_id, -32603, str(exc))
            return
        if answer is None:
            return
        tools = answer.get("tools")
        if not isinstance(tools, list):
            self._error(request_id, -32603, str(answer.get("error", "no tools")))
            return
        self._result(request_id, {"tools": tools})

    def _call(self, request_id: Any, params: dict[str, Any]) -> None:
        request: dict[str, Any] = {
            "op": "call",
            "name": params.get("name"),
            "arguments": params.get("arguments", {}),
        }
        call_id = _call_id(params.get("_meta"))
        if call_id is not None:
            request["call_id"] = call_id
        try:
            answer = self._exchange(request_id, request)
        except _BridgeDown as exc:
            output = f"{NO_TURN} ({exc})"
        else:
            if answer is None:
                return  # cancelled by the client: no answer is due
            found = answer.get("output")
            output = found if isinstance(found, str) else f"Error: {answer.get('error')}"
        self._result(
            request_id,
            {"content": [{"type": "text", "text": output}], "isError": output.startswith("Error:")},
        )

    def _exchange(self, request_id: Any, request: dict[str, Any]) -> dict[str, Any] | None:
        """One request to the bridge, its answer; ``None`` if the client cancelled it.

        Raises:
            _BridgeDown: no bridge listens, or it broke off.
        """
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with self._open_lock:
            self._open[request_id] = sock
        try:
            sock.settimeout(CONNECT_TIMEOUT)
            try:
                sock.connect(self._path)
            except OSError as exc:
                raise _BridgeDown(f"cannot reach the bridge: {exc.strerror or exc}") from exc
            sock.settimeout(None)  # a call may wait for a person's answer
            line = json.dumps({"token": self._token, **request}).encode() + b"\n"
            try:
                sock.sendall(line)
                data = _read_line(sock)
            except OSError as exc:
                if self._cancelled(request_id):
                    return None
                raise _BridgeDown(f"the bridge broke off: {exc}") from exc
            if data is None:
                if self._cancelled(request_id):
                    return None
                raise _BridgeDown("the bridge closed the connection (the turn ended)")
            try:
                answer = json.loads(data)
            except ValueError as exc:
                raise _BridgeDown("the bridge answered something that is not JSON") from exc
            return answer if isinstance(answer, dict) else {"error": "a malformed answer"}
        finally:
            with self._open_lock:
                self._open.pop(request_id, None)
                self._given_up.discard(request_id)
            sock.close()

    def _cancel(self, request_id: Any) -> None:
        with self._open_lock:
            sock = self._open.get(request_id)
            if sock is not None:
                self._given_up.add(request_id)
                _drop(sock)

    def _cancelled(self, request_id: Any) -> bool:
        with self._open_lock:
            return request_id in self._given_up

    def _result(self, request_id: Any, result: dict[str, Any]) -> None:
        self._write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _error(self, request_id: Any, code: int, message: str) -> None:
        self._write(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        )

    def _write(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            self._stdout.write(data)
            self._stdout.flush()


def _drop(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _read_line(sock: socket.socket) -> bytes | None:
    """The answer line, or ``None`` if the connection closed first."""
    buffer = bytearray()
    while b"\n" not in buffer:
        if len(buffer) > MAX_ANSWER:
            raise OSError("the answer is too long")
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    return bytes(buffer[: buffer.index(b"\n")])


def _call_id(meta: Any) -> str | None:
    """The model's id for a call, as the CLI tells it in ``_meta``: Claude Code's
    ``claudecode/toolUseId``, Codex's ``callId``."""
    if not isinstance(meta, dict):
        return None
    for key in ("claudecode/toolUseId", "callId"):
        value = meta.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: _shim.py SOCKET [VERSION]\n")
        return 2
    version = argv[2] if len(argv) > 2 else "0"
    token = os.environ.get("OMNIGENT_BRIDGE_TOKEN", "")
    Shim(argv[1], token, version, sys.stdin.buffer, sys.stdout.buffer).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
