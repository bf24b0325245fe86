"""ACP's mcpServers in process: raw JSON-RPC over memory streams, a real stdio MCP server.

The connection's modes (operator: stdio; client: /v1/ws; off: --no-client-mcp), the
answer's ``_meta.omnigent`` notices, bounds and malformed entries, and the server's
lifetime: the connection's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
import omnigent.rpc as rpc
from omnigent.testing import scripted_agent
from omnigent.transports.acp._mcp_servers import slug

from .acp_helpers import Editor, open_acp
from .external_helpers import HARNESSES, alive, wait_gone

SERVER = str(HARNESSES / "mcp_server.py")
ADD = [{"call": "mcp__calc__add", "args": {"a": 20, "b": 22}}]


def stdio_server(name: str = "calc", pid_file: Path | None = None, **extra: Any) -> dict[str, Any]:
    env = [{"name": "MCP_PID_FILE", "value": str(pid_file)}] if pid_file is not None else []
    return {"name": name, "command": sys.executable, "args": [SERVER], "env": env, **extra}


async def new_session(editor: Editor, cwd: Path, servers: list[Any]) -> dict[str, Any]:
    result: dict[str, Any] = await editor.call(
        "session/new", {"cwd": str(cwd), "mcpServers": servers}
    )
    return result


def tool_outputs(editor: Editor, session_id: str) -> str:
    return json.dumps(editor.session_updates(session_id, "tool_call_update"))


async def test_the_editors_stdio_server_serves_the_session_while_connected(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    await rt.create_agent(scripted_agent("adder", ADD))
    pid_file = tmp_path / "pid"
    with trio.fail_after(60):
        async with open_acp(rt, "adder", client_mcp="operator") as editor:
            result = await new_session(editor, tmp_path, [stdio_server("Calc", pid_file)])
            assert "_meta" not in result  # nothing left out
            sid = result["sessionId"]
            assert await editor.prompt(sid) == {"stopReason": "end_turn"}
            assert '"42"' in tool_outputs(editor, sid)
            pid = int(pid_file.read_text())
            assert alive(pid)
            await editor.close()
        # The connection ended: so did the server.
        await wait_gone(pid, timeout=0.1)


async def test_a_deny_policy_refuses_the_editors_tools(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    policies = [{"name": "no_calc", "type": "deny_tools", "tools": ["mcp__calc__*"]}]
    await rt.create_agent({**scripted_agent("adder", ADD), "policies": policies})
    with trio.fail_after(60):
        async with open_acp(rt, "adder", client_mcp="operator") as editor:
            sid = (await new_session(editor, tmp_path, [stdio_server()]))["sessionId"]
            assert await editor.prompt(sid) == {"stopReason": "end_turn"}
            outputs = tool_outputs(editor, sid)
    assert "denied by policy no_calc" in outputs and '"42"' not in outputs


async def test_load_on_a_new_connection_brings_that_connections_servers(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    await rt.create_agent(scripted_agent("adder", ADD))
    with trio.fail_after(60):
        async with open_acp(rt, "adder", client_mcp="operator") as first:
            sid = (await new_session(first, tmp_path, []))["sessionId"]
            assert await first.prompt(sid) == {"stopReason": "end_turn"}
            assert "unknown tool" in tool_outputs(first, sid)
        async with open_acp(rt, "adder", client_mcp="operator") as second:
            load = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": [stdio_server()]}
            assert "_meta" not in await second.call("session/load", load)
            before = len(second.session_updates(sid, "tool_call_update"))
            assert await second.prompt(sid) == {"stopReason": "end_turn"}
            assert '"42"' in json.dumps(second.session_updates(sid, "tool_call_update")[before:])


async def test_over_a_remote_connection_only_allowed_programs_run(tmp_path: Path) -> None:
    servers = [
        stdio_server("listed"),
        {"name": "Shell", "command": "bash", "args": ["-c", "true"], "env": []},
        {"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp", "headers": []},
        {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []},
    ]
    async with omnigent.open_runtime(allowed_commands=[sys.executable]) as rt:
        await rt.create_agent(scripted_agent("adder", [{"call": "mcp__listed__add", "args": {}}]))
        with trio.fail_after(60):
            async with open_acp(rt, "adder", client_mcp="client") as editor:
                init = await editor.initialize()
                assert init["agentCapabilities"]["mcpCapabilities"] == {"http": False, "sse": False}
                result = await new_session(editor, tmp_path, servers)
                ignored = result["_meta"]["omnigent"]["ignoredMcpServers"]
                assert sorted(ignored) == ["Shell", "old", "web"]
                sid = result["sessionId"]
                assert await editor.prompt(sid) == {"stopReason": "end_turn"}
                # Connected: the call reached the server (which wanted arguments).
                assert "unknown tool" not in tool_outputs(editor, sid)


async def test_capabilities_say_what_each_mode_connects(tmp_path: Path) -> None:
    async with omnigent.open_runtime(allowed_mcp_urls=["https://mcp.example/"]) as rt:
        with trio.fail_after(10):
            for mode, http in [("operator", True), ("client", True), ("off", False)]:
                async with open_acp(rt, client_mcp=mode, initialize=False) as editor:  # type: ignore[arg-type]
                    caps = (await editor.initialize())["agentCapabilities"]
                    assert caps["mcpCapabilities"] == {"http": http, "sse": False}, mode


async def test_a_server_that_fails_is_named_with_its_message(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    await rt.create_agent(scripted_agent("plain", [{"say": "hi"}]))
    broken = stdio_server("broken", args=[SERVER, "--fail"])
    with trio.fail_after(60):
        async with open_acp(rt, "plain", client_mcp="operator") as editor:
            result = await new_session(editor, tmp_path, [broken])
            [failed] = result["_meta"]["omnigent"]["failedMcpServers"]
            assert failed["name"] == "broken" and "abacus" in failed["message"]
            assert await editor.prompt(result["sessionId"]) == {"stopReason": "end_turn"}


def test_server_names_become_tool_prefixes() -> None:
    assert slug("GitHub") == "github"
    assert slug("my tools (work)") == "my_tools_work"
    assert slug("!!!") == "server"


@pytest.mark.parametrize(
    ("servers", "loc"),
    [
        ("none", "mcpServers"),
        ([stdio_server(f"s{i}") for i in range(33)], "mcpServers"),
        (["calc"], "mcpServers[0]"),
        ([{"command": "x"}], "mcpServers[0].name"),
        ([{"name": "  ", "command": "x"}], "mcpServers[0].name"),
        ([{"name": "a"}], "mcpServers[0].command"),
        ([{"name": "a", "command": ""}], "mcpServers[0].command"),
        ([{"name": "a", "command": "x" * 5000}], "mcpServers[0].command"),
        ([{"name": "a", "command": "x", "args": ["ok", 3]}], "mcpServers[0].args[1]"),
        ([{"name": "a", "command": "x", "args": ["a"] * 257}], "mcpServers[0].args"),
        ([{"name": "a", "command": "x", "args": [""]}], "mcpServers[0].args[0]"),
        ([{"name": "a", "command": "x", "env": [{"name": "A"}]}], "mcpServers[0].env[0].value"),
        (
            [{"name": "a", "command": "x", "env": [{"name": "A=B", "value": ""}]}],
            "mcpServers[0].env[0].name",
        ),
        ([{"name": "a", "command": "x", "env": ["A=B"]}], "mcpServers[0].env[0]"),
        ([{"type": "http", "name": "h", "url": "file:///etc"}], "mcpServers[0].url"),
        (
            [
                {
                    "type": "http",
                    "name": "h",
                    "url": "https://x",
                    "headers": [{"name": "X", "value": "a\r\nb"}],
                }
            ],
            "mcpServers[0].headers[0].value",
        ),
        ([{"type": 7, "name": "h"}], "mcpServers[0].type"),
        (
            [stdio_server(), {"name": "b", "command": "x", "args": ["y" * 20000]}],
            "mcpServers[1].args[0]",
        ),
    ],
)
async def test_malformed_servers_are_refused_with_their_path(
    rt: omnigent.Runtime, tmp_path: Path, servers: Any, loc: str
) -> None:
    await rt.create_agent(scripted_agent("plain", [{"say": "hi"}]))
    with trio.fail_after(10):
        async with open_acp(rt, "plain", client_mcp="operator") as editor:
            with pytest.raises(rpc.RpcError) as bad:
                await new_session(editor, tmp_path, servers)
            assert bad.value.code == rpc.INVALID_PARAMS
            assert bad.value.data["details"][0]["loc"] == loc
            # Nothing was created, and the connection is still up.
            assert (await rt.list_sessions()).data == ()
            assert "sessionId" in await new_session(editor, tmp_path, [])
