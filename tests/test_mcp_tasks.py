"""MCP's tasks extension on ``POST /v1/sessions/{id}/mcp``: a slow call becomes a task a
client polls, answers and cancels; the session's event log keeps it, so a task is found
again after the server restarted. Raw JSON-RPC over a real loopback server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

import omnigent
from omnigent.model import ToolTaskUpdated

from .http_helpers import Server, open_server, scripted

TASKS = {"io.modelcontextprotocol/tasks": {}}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": TASKS},
}
PLAIN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def ask_on_result(event: dict[str, Any]) -> dict[str, Any]:
    """A function policy: asks once a call's result is there (so, inside a task)."""
    if event["type"] == "tool_result":
        return {"result": "ASK", "reason": "keep this output?"}
    return {"result": "ALLOW"}


class Gates:
    """Tools that wait until the test opens them: ``gate(name)`` answers ``opened name``."""

    def __init__(self) -> None:
        self.opened: dict[str, trio.Event] = {}

    def event(self, name: str) -> trio.Event:
        return self.opened.setdefault(name, trio.Event())

    def register(self, rt: omnigent.Runtime) -> None:
        async def gate(name: str) -> str:
            """Wait until the test opens this gate."""
            await self.event(name).wait()
            return f"opened {name}"

        rt.register_tool(gate)


class Mcp:
    def __init__(self, server: Server, session_id: str) -> None:
        self.server = server
        self.path = f"/v1/sessions/{session_id}/mcp"
        self.ids = 0

    async def call(self, method: str, params: dict[str, Any], meta: Any = META) -> Any:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": {**params}}
        if meta is not None:
            body["params"]["_meta"] = meta
        return (await self.server.client.post(self.path, json=body)).json()

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await self.call(method, params)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result


async def task_ended(rt: omnigent.Runtime, session_id: str, task_id: str) -> None:
    """Wait for the log to say the task ended."""
    async with rt.subscribe(session_id, after=0) as events:
        async for event in events:
            ours = isinstance(event, ToolTaskUpdated) and event.call_id == task_id
            if ours and event.status != "working":
                return


async def test_a_slow_call_becomes_a_task_the_client_polls() -> None:
    gates = Gates()
    with trio.fail_after(30):
        async with open_server() as server:
            gates.register(server.runtime)
            sid = await server.session(scripted("host", [{"say": "hi"}]))
            mcp = Mcp(server, sid)
            discover = await mcp.result("server/discover", {})
            assert discover["capabilities"]["extensions"] == TASKS
            created = await mcp.result("tools/call", {"name": "gate", "arguments": {"name": "a"}})
            assert created["resultType"] == "task" and created["status"] == "working"
            task_id = created["taskId"]
            assert created["ttlMs"] is None and created["pollIntervalMs"] > 0
            polled = await mcp.result("tasks/get", {"taskId": task_id})
            assert (polled["resultType"], polled["status"]) == ("complete", "working")
            gates.event("a").set()
            await task_ended(server.runtime, sid, task_id)
            done = await mcp.result("tasks/get", {"taskId": task_id})
            assert done["status"] == "completed"
            assert done["result"]["content"] == [{"type": "text", "text": "opened a"}]
            assert done["result"]["isError"] is False
            # A fast call is answered at once, even to a client that takes tasks.
            fast = await mcp.result("tools/call", {"name": "sys_os_read", "arguments": {}})
            assert fast["resultType"] == "complete"


async def test_tasks_need_the_capability_and_a_known_id() -> None:
    gates = Gates()
    with trio.fail_after(30):
        async with open_server() as server:
            gates.register(server.runtime)
            sid = await server.session(scripted("host", [{"say": "hi"}]))
            mcp = Mcp(server, sid)
            unknown = await mcp.call("tasks/get", {"taskId": "call_nope"})
            assert unknown["error"]["code"] == -32602
            undeclared = await mcp.call("tasks/get", {"taskId": "call_nope"}, meta=PLAIN)
            assert undeclared["error"]["code"] == -32021
            assert undeclared["error"]["data"] == {"requiredCapabilities": {"extensions": TASKS}}
            # Without the capability a slow call is simply waited for.
            async with trio.open_nursery() as nursery:
                answer: list[Any] = []

                async def plain() -> None:
                    params = {"name": "gate", "arguments": {"name": "b"}}
                    answer.append(await mcp.call("tools/call", params, meta=PLAIN))

                nursery.start_soon(plain)
                with trio.move_on_after(1.5):  # longer than TASK_AFTER: no task came
                    while not answer:
                        await trio.sleep(0.05)
                assert answer == []
                gates.event("b").set()
            assert answer[0]["result"]["resultType"] == "complete"


async def test_a_task_asks_through_tasks_get_and_is_answered_by_tasks_update() -> None:
    gates = Gates()
    spec = {
        **scripted("host", [{"say": "hi"}]),
        "policies": [{"name": "keep", "type": "function", "function": "tests.x:ask"}],
    }
    with trio.fail_after(30):
        options = {"policy_functions": {"tests.x:ask": ask_on_result}}
        async with open_server(runtime_options=options) as server:
            gates.register(server.runtime)
            sid = await server.session(spec, by_operator=True)
            mcp = Mcp(server, sid)
            created = await mcp.result("tools/call", {"name": "gate", "arguments": {"name": "c"}})
            task_id = created["taskId"]
            async with server.runtime.subscribe(sid) as events:
                gates.event("c").set()
                async for event in events:
                    if event.type == "response.elicitation_request":
                        break
            asking = await mcp.result("tasks/get", {"taskId": task_id})
            assert asking["status"] == "input_required"
            [(key, request)] = asking["inputRequests"].items()
            assert request["method"] == "elicitation/create"
            assert request["params"]["message"] == "keep: keep this output?"
            answer = {"taskId": task_id, "inputResponses": {key: {"action": "accept"}}}
            assert await mcp.result("tasks/update", answer) == {"resultType": "complete"}
            await task_ended(server.runtime, sid, task_id)
            done = await mcp.result("tasks/get", {"taskId": task_id})
            assert done["status"] == "completed"
            assert done["result"]["content"][0]["text"] == "opened c"


async def test_a_cancelled_task_stays_cancelled() -> None:
    gates = Gates()
    with trio.fail_after(30):
        async with open_server() as server:
            gates.register(server.runtime)
            sid = await server.session(scripted("host", [{"say": "hi"}]))
            mcp = Mcp(server, sid)
            created = await mcp.result("tools/call", {"name": "gate", "arguments": {"name": "d"}})
            task_id = created["taskId"]
            assert await mcp.result("tasks/cancel", {"taskId": task_id}) == {
                "resultType": "complete"
            }
            await task_ended(server.runtime, sid, task_id)
            cancelled = await mcp.result("tasks/get", {"taskId": task_id})
            assert cancelled["status"] == "cancelled" and "result" not in cancelled
            # Cancelling it again changes nothing.
            await mcp.result("tasks/cancel", {"taskId": task_id})
            assert (await mcp.result("tasks/get", {"taskId": task_id}))["status"] == "cancelled"


async def test_a_task_survives_a_restart_of_its_server(tmp_path: Path) -> None:
    """The log is where a task is found: a finished one keeps its result across a
    restart, and one its server took down with it says it failed."""
    db = f"sqlite:///{tmp_path / 'tasks.db'}"
    gates = Gates()
    with trio.fail_after(30):
        async with open_server(db) as server:
            gates.register(server.runtime)
            sid = await server.session(scripted("host", [{"say": "hi"}]))
            mcp = Mcp(server, sid)
            finished = await mcp.result("tools/call", {"name": "gate", "arguments": {"name": "e"}})
            running = await mcp.result("tools/call", {"name": "gate", "arguments": {"name": "f"}})
            gates.event("e").set()
            await task_ended(server.runtime, sid, finished["taskId"])
        # The server is gone with "f" still running; a new one opens the same store.
        async with open_server(db) as server:
            gates.register(server.runtime)
            mcp = Mcp(server, sid)
            kept = await mcp.result("tasks/get", {"taskId": finished["taskId"]})
            assert kept["status"] == "completed"
            assert kept["result"]["content"][0]["text"] == "opened e"
            lost = await mcp.result("tasks/get", {"taskId": running["taskId"]})
            assert lost["status"] == "failed"
            assert lost["error"]["code"] == -32603 and "interrupted" in lost["statusMessage"]
