"""An in-process ACP client for the agent's tests: raw JSON-RPC over memory streams.

:func:`open_acp` serves :func:`~omnigent.transports.acp._agent.serve_acp` on one end of a
memory stream pair and gives the test an :class:`Editor` on the other: it sends
requests, collects every ``session/update``, and hands each request the agent makes
(``session/request_permission``, ``fs/*``, ``terminal/*``) to the test through a
channel — or to an automatic answerer — so the test decides what the editor says.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
import trio.testing

import omnigent
from omnigent.rpc import NdjsonStream, RpcConnection, RpcError
from omnigent.transports.acp._agent import AcpAgent, serve_acp
from omnigent.transports.acp._mcp_servers import ClientMcpMode

from .acp_schema import CheckedStream

Answerer = Callable[[str, dict[str, Any]], Awaitable[Any]]


@attrs.define(eq=False)
class AgentRequest:
    """A request the agent made; answer it with :meth:`reply` (or :meth:`fail`)."""

    method: str
    params: dict[str, Any]
    answered: trio.Event = attrs.field(factory=trio.Event)
    cancelled: trio.Event = attrs.field(factory=trio.Event)
    result: Any = None
    error: RpcError | None = None

    def reply(self, result: Any) -> None:
        self.result = result
        self.answered.set()

    def fail(self, code: int, message: str) -> None:
        self.error = RpcError(code, message)
        self.answered.set()

    def choose(self, option: str | None) -> None:
        """Answer a permission request: an option id, or None for ``cancelled``."""
        if option is None:
            self.reply({"outcome": {"outcome": "cancelled"}})
        else:
            self.reply({"outcome": {"outcome": "selected", "optionId": option}})


class _EditorSide:
    methods = frozenset(
        {
            "session/request_permission",
            "elicitation/create",
            "fs/read_text_file",
            "fs/write_text_file",
            "terminal/create",
            "terminal/output",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/release",
        }
    )
    notifications = frozenset({"session/update"})
    ordered: frozenset[str] = frozenset()

    def __init__(self, editor: Editor) -> None:
        self._editor = editor

    async def input_ended(self) -> None:
        pass

    async def handle_request(self, method: str, params: Any, admit: Any) -> Any:
        editor = self._editor
        if method in editor.answerers:
            return await editor.answerers[method](method, params)
        request = AgentRequest(method, params)
        await editor._send_request.send(request)
        try:
            await request.answered.wait()
        except trio.Cancelled:  # the agent sent $/cancel_request
            request.cancelled.set()
            raise
        if request.error is not None:
            raise request.error
        return request.result

    async def handle_notification(self, method: str, params: Any) -> None:
        self._editor.updates.append(params)
        self._editor._updated.set()
        self._editor._updated = trio.Event()


class Editor:
    """The test's side of an ACP connection."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.answerers: dict[str, Answerer] = {}
        self._send_request, self.requests = trio.open_memory_channel[AgentRequest](100)
        self._updated = trio.Event()
        self.connection: RpcConnection | None = None
        self.agent: AcpAgent | None = None
        self.stream: trio.abc.Stream | None = None

    async def close(self) -> None:
        """Hang up, as an editor that quits does."""
        assert self.stream is not None
        await self.stream.aclose()

    async def call(self, method: str, params: Any = None) -> Any:
        assert self.connection is not None
        return await self.connection.request(method, params)

    async def notify(self, method: str, params: Any = None) -> None:
        assert self.connection is not None
        await self.connection.notify(method, params)

    async def initialize(self, **caps: Any) -> dict[str, Any]:
        """``read``, ``write``, ``terminal`` flags; ``form`` (elicitation.form) and
        ``boolean`` (session.configOptions.boolean) advertise those capabilities."""
        fs = {"readTextFile": caps.get("read", False), "writeTextFile": caps.get("write", False)}
        client: dict[str, Any] = {"fs": fs, "terminal": caps.get("terminal", False)}
        if caps.get("form"):
            client["elicitation"] = {"form": {}}
        if caps.get("boolean"):
            client["session"] = {"configOptions": {"boolean": {}}}
        params = {"protocolVersion": 1, "clientCapabilities": client}
        result: dict[str, Any] = await self.call("initialize", params)
        return result

    async def new_session(self, cwd: str = "/tmp") -> str:
        result = await self.call("session/new", {"cwd": cwd, "mcpServers": []})
        session_id: str = result["sessionId"]
        return session_id

    async def prompt(self, session_id: str, text: str = "hi") -> dict[str, Any]:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        result: dict[str, Any] = await self.call("session/prompt", params)
        return result

    def session_updates(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            u["update"]
            for u in self.updates
            if u["sessionId"] == session_id
            and (kind is None or u["update"]["sessionUpdate"] == kind)
        ]

    def text(self, session_id: str) -> str:
        return "".join(
            u["content"]["text"] for u in self.session_updates(session_id, "agent_message_chunk")
        )

    async def wait_for_update(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        seen = 0
        while True:
            for update in self.updates[seen:]:
                if predicate(update):
                    return update
            seen = len(self.updates)
            await self._updated.wait()

    async def next_request(self, method: str | None = None) -> AgentRequest:
        request = await self.requests.receive()
        assert method is None or request.method == method, (request.method, request.params)
        return request


@asynccontextmanager
async def open_acp(
    rt: omnigent.Runtime,
    agent_name: str | None = None,
    *,
    user: str = "local",
    check_access: bool = False,
    initialize: bool = True,
    client_mcp: ClientMcpMode = "off",
    **caps: Any,
) -> AsyncIterator[Editor]:
    """An editor connected to an ACP agent over ``rt`` (``agent_name``: the agent used)."""

    async def resolve() -> omnigent.Agent:
        if agent_name is None:
            raise omnigent.AgentNotFound("no agent in this test")
        return await rt.get_agent_by_name(agent_name)

    ours, theirs = trio.testing.memory_stream_pair()
    editor = Editor()
    # Every message the agent sends is checked against the ACP schema.
    connection = RpcConnection(CheckedStream(NdjsonStream(theirs, theirs)), _EditorSide(editor))
    editor.connection = connection
    editor.stream = theirs
    async with trio.open_nursery() as nursery:
        editor.agent = await nursery.start(
            lambda task_status: serve_acp(
                rt,
                NdjsonStream(ours, ours),
                resolve,
                user=user,
                check_access=check_access,
                client_mcp=client_mcp,
                task_status=task_status,
            )
        )
        await nursery.start(connection.run)
        if initialize:
            await editor.initialize(**caps)
        yield editor
        await theirs.aclose()
        nursery.cancel_scope.cancel()
