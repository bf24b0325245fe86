"""MCP servers a client supplies for a session while connected
(Runtime.open_client_mcp_servers): a real stdio MCP server, its tools through the
policies, its process's lifetime (the block, a stop), the trust rule, bounds."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.errors import InvalidInput
from omnigent.model import ElicitationRequest, FunctionCallOutputItem
from omnigent.outbound import UrlAllowList
from omnigent.spec import McpServerSpec
from omnigent.testing import collect_turn, run_turn, scripted_agent

from .conftest import statuses
from .external_helpers import HARNESSES, alive, wait_gone

SERVER = (sys.executable, str(HARNESSES / "mcp_server.py"))


def calc(
    pid_file: Path | None = None, *, name: str = "calc", env: dict[str, str] | None = None
) -> McpServerSpec:
    env = dict(env or {})
    if pid_file is not None:
        env["MCP_PID_FILE"] = str(pid_file)
    return McpServerSpec(name=name, command=SERVER, env=env)


def outputs(events: list[Any]) -> list[str]:
    return [
        e.item.output
        for e in events
        if e.type == "response.output_item.done" and isinstance(e.item, FunctionCallOutputItem)
    ]


async def session(rt: omnigent.Runtime, script: list[Any], cwd: Path, **spec: Any) -> str:
    agent = await rt.create_agent({**scripted_agent("editor-user", script), **spec})
    return (await rt.create_session(agent.id, cwd=str(cwd))).id


def add(a: int = 2, b: int = 3) -> dict[str, Any]:
    return {"call": "mcp__calc__add", "args": {"a": a, "b": b}}


async def test_the_tools_join_the_session_while_the_block_runs(
    rt: omnigent.Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pid_file = tmp_path / "pid"
    with trio.fail_after(60):
        sid = await session(rt, [add()], tmp_path)
        async with rt.open_client_mcp_servers(sid, [calc(pid_file)]) as report:
            assert report.connected == ("calc",)
            assert "mcp__calc__add" in report.tools
            assert "mcp__calc__add" in {t.name for t in await rt.session_tools(sid)}
            events = await run_turn(rt, sid)
            assert outputs(events) == ["5"]
            pid = int(pid_file.read_text())
            assert alive(pid)
        # The block ended: its process is gone, and the next turn is not offered the tool.
        await wait_gone(pid, timeout=0.1)
        [output] = outputs(await run_turn(rt, sid))
        assert output.startswith("Error: unknown tool 'mcp__calc__add'")
    # Closing is clean (it once corrupted trio's cancel scopes, logged as a failure).
    assert "MCP connections of a session failed" not in caplog.text
    snapshot = json.dumps((await rt.get_session(sid)).to_dict())
    assert "mcp_server.py" not in snapshot and "MCP_PID_FILE" not in snapshot


async def test_the_session_policies_apply_to_them(rt: omnigent.Runtime, tmp_path: Path) -> None:
    policies = [{"name": "no_calc", "type": "deny_tools", "tools": ["mcp__calc__*"]}]
    with trio.fail_after(60):
        sid = await session(rt, [add()], tmp_path, policies=policies)
        async with rt.open_client_mcp_servers(sid, [calc()]):
            [output] = outputs(await run_turn(rt, sid))
    assert output == "Error: denied by policy no_calc: tool mcp__calc__add is denied"


async def test_a_stop_ends_the_process_and_the_next_turn_starts_it_again(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    with trio.fail_after(60):
        sid = await session(rt, [add(1, 1)], tmp_path)
        async with rt.open_client_mcp_servers(sid, [calc(pid_file)]):
            first = int(pid_file.read_text())
            await rt.stop_session(sid)
            await wait_gone(first, timeout=0.1)  # stop_session waited for it
            assert outputs(await run_turn(rt, sid)) == ["2"]
            second = int(pid_file.read_text())
            assert second != first and alive(second)
        await wait_gone(second, timeout=0.1)


async def test_a_deleted_session_takes_its_servers_down(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    with trio.fail_after(60):
        sid = await session(rt, [], tmp_path)
        async with rt.open_client_mcp_servers(sid, [calc(pid_file)]):
            pid = int(pid_file.read_text())
            await rt.delete_session(sid)
            await wait_gone(pid, timeout=0.1)


async def test_the_server_runs_in_the_session_directory_with_a_minimal_environment(
    rt: omnigent.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "server-secret")
    where = [
        {"call": "mcp__calc__where", "args": {"name": "OPENAI_API_KEY"}},
        {"call": "mcp__calc__where", "args": {"name": "GREETING"}},
    ]
    with trio.fail_after(60):
        sid = await session(rt, where, tmp_path)
        async with rt.open_client_mcp_servers(sid, [calc(env={"GREETING": "hello"})]):
            events = await run_turn(rt, sid)
    here = await trio.to_thread.run_sync(os.path.realpath, tmp_path)
    assert outputs(events) == [f"{here} -", f"{here} hello"]


async def test_a_server_that_fails_to_start_is_reported_and_the_rest_go_on(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    broken = McpServerSpec(name="broken", command=(*SERVER, "--fail"))
    with trio.fail_after(60):
        sid = await session(rt, [add()], tmp_path)
        async with rt.open_client_mcp_servers(sid, [broken, calc()]) as report:
            assert report.connected == ("calc",)
            [(name, message)] = report.failed
            assert name == "broken" and "cannot open the abacus" in message
            events = await run_turn(rt, sid)
    assert statuses(events)[-1] == "idle" and outputs(events) == ["5"]


async def test_a_remote_client_gets_only_what_the_operator_allowed(tmp_path: Path) -> None:
    url = McpServerSpec(name="remote", url="http://127.0.0.1:9/mcp")
    async with omnigent.open_runtime(allowed_commands=[sys.executable]) as rt:
        with trio.fail_after(60):
            sid = await session(rt, [], tmp_path)
            unlisted = McpServerSpec(name="shell", command=("bash", "-c", "true"))
            servers = [calc(), unlisted, url]
            async with rt.open_client_mcp_servers(sid, servers, from_client=True) as report:
                assert report.connected == ("calc",)
                refused = dict(report.refused)
                assert set(refused) == {"shell", "remote"}
                assert "serve --allow-command bash" in refused["shell"]
                assert "serve --allow-mcp-url" in refused["remote"]
                assert report.failed == ()


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://mcp.example/tools/a", True),
        ("https://mcp.example:443/tools", True),
        ("https://mcp.example/toolsx", False),
        ("https://mcp.example.evil.test/tools", False),
        ("https://mcp.example@evil.test/tools", False),
        ("http://mcp.example/tools", False),
        ("https://mcp.example:8443/tools", False),
        ("https://other.example/tools", False),
    ],
)
def test_url_prefixes_compare_origin_and_path(url: str, allowed: bool) -> None:
    assert UrlAllowList(["https://mcp.example/tools/"]).admits(url) is allowed


async def test_bad_arguments_are_refused(rt: omnigent.Runtime, tmp_path: Path) -> None:
    with trio.fail_after(10):
        sid = await session(rt, [], tmp_path)
        with pytest.raises(InvalidInput) as twice:
            async with rt.open_client_mcp_servers(sid, [calc(), calc()]):
                pass
        assert twice.value.details[0].loc == "servers[1].name"
        many = [calc(name=f"s{i}") for i in range(33)]
        with pytest.raises(InvalidInput):
            async with rt.open_client_mcp_servers(sid, many):
                pass
        with pytest.raises(omnigent.SessionNotFound):
            async with rt.open_client_mcp_servers("conv_nope", [calc()]):
                pass
    with pytest.raises(InvalidInput) as bad_prefix:
        async with omnigent.open_runtime(allowed_mcp_urls=["ftp://x"]):
            pass
    assert bad_prefix.value.details[0].loc == "allowed_mcp_urls[0]"


async def test_the_servers_elicitations_reach_the_session(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    with trio.fail_after(60):
        sid = await session(rt, [{"call": "mcp__calc__confirm", "args": {"what": "x"}}], tmp_path)
        async with rt.open_client_mcp_servers(sid, [calc()]), rt.subscribe(sid) as events:
            await rt.send_message(sid, "go")
            async for event in events:
                if isinstance(event, ElicitationRequest):
                    break
            assert event.params.phase == "mcp_elicitation"
            assert await rt.resolve_elicitation(sid, event.elicitation_id, "accept", {"ok": True})
            rest = await collect_turn(events)
    assert outputs(rest) == ["accept: x (True)"]
