"""The ACP agent in process: raw JSON-RPC over memory streams against a real runtime."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import omnigent
import omnigent.rpc as rpc
from omnigent.model import ElicitationRequest, SessionStatusChanged
from omnigent.rpc import ConnectionClosed
from omnigent.testing import MockLLM, scripted_agent

from .acp_helpers import Editor, open_acp
from .conftest import all_tasks, wait_quiet

ASK_SHELL = [{"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"], "reason": "ok?"}]


def spec(name: str, script: list[Any], **extra: Any) -> dict[str, Any]:
    out = scripted_agent(name, script)
    out.update(extra)
    return out


async def agent(rt: omnigent.Runtime, name: str, script: list[Any], **extra: Any) -> str:
    await rt.create_agent(spec(name, script, **extra))
    return name


async def prompt_in_background(
    editor: Editor, session_id: str, nursery: trio.Nursery, text: str = "go"
) -> list[Any]:
    """Start a prompt; the list gets its result (or its RpcError) when it ends."""
    outcome: list[Any] = []

    async def run() -> None:
        try:
            outcome.append(await editor.prompt(session_id, text))
        except (rpc.RpcError, ConnectionClosed) as error:
            outcome.append(error)

    nursery.start_soon(run)
    return outcome


async def until(predicate: Any) -> None:
    while not predicate():
        await trio.sleep(0.005)


def outputs(editor: Editor, session_id: str) -> list[dict[str, Any]]:
    return [
        u
        for u in editor.session_updates(session_id, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    ]


# -- initialize, prompt, stop reasons -----------------------------------------------------


async def test_initialize_negotiates_and_nothing_runs_before_it(rt: omnigent.Runtime) -> None:
    with trio.fail_after(5):
        async with open_acp(rt, initialize=False) as editor:
            with pytest.raises(rpc.RpcError) as early:
                await editor.call("session/new", {"cwd": "/tmp", "mcpServers": []})
            assert early.value.code == rpc.INVALID_REQUEST
            result = await editor.initialize(read=True)
    assert result["protocolVersion"] == 1
    assert result["agentInfo"] == {
        "name": "omnigent",
        "title": "omnigent",
        "version": omnigent.__version__,
    }
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": True, "audio": False, "embeddedContext": True}
    assert caps["sessionCapabilities"] == {
        "list": {},
        "resume": {},
        "close": {},
        "delete": {},
        "fork": {},
    }
    assert caps["_meta"]["omnigent"]["methods"] == [
        "_omnigent/elicitation/resolve",
        "_omnigent/session/info",
        "_omnigent/session/list",
    ]
    [method] = result["authMethods"]
    assert method["id"] == "model-api-key" and "OPENAI_API_KEY" in method["description"]


async def test_a_prompt_streams_its_answer_and_ends_the_turn(rt: omnigent.Runtime) -> None:
    name = await agent(rt, "talker", [{"say": "hello there friend"}])
    with trio.fail_after(5):
        async with open_acp(rt, name) as editor:
            sid = await editor.new_session()
            assert await editor.prompt(sid, "Fix the bug\nin main.py") == {"stopReason": "end_turn"}
            assert editor.text(sid) == "hello there friend"
            [info] = editor.session_updates(sid, "session_info_update")
            assert info["title"] == "Fix the bug"
            assert (await rt.get_session(sid)).title == "Fix the bug"
            assert await editor.prompt(sid, "again") == {"stopReason": "end_turn"}
            assert len(editor.session_updates(sid, "session_info_update")) == 1


async def test_tool_calls_stream_as_tool_call_then_tool_call_update(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    script = [
        {"call": "sys_os_write", "args": {"path": "a.txt", "content": "new text"}},
        {"call": "sys_os_read", "args": {"path": "missing.txt"}},
    ]
    name = await agent(rt, "writer", script)
    with trio.fail_after(5):
        async with open_acp(rt, name) as editor:
            sid = await editor.new_session(str(tmp_path))
            assert (await editor.prompt(sid))["stopReason"] == "end_turn"
    write, read = editor.session_updates(sid, "tool_call")
    assert write["kind"] == "edit" and write["title"] == "Write a.txt"
    assert write["status"] == "pending"
    assert write["rawInput"] == {"path": "a.txt", "content": "new text"}
    assert write["locations"] == [{"path": str(tmp_path / "a.txt")}]
    assert write["content"] == [
        {"type": "diff", "path": str(tmp_path / "a.txt"), "oldText": None, "newText": "new text"}
    ]
    assert read["kind"] == "read" and read["title"] == "Read missing.txt"
    done_write, done_read = outputs(editor, sid)
    assert done_write["toolCallId"] == write["toolCallId"]
    assert done_write["status"] == "completed"
    assert json.loads(done_write["rawOutput"])["bytes_written"] == 8
    assert done_read["status"] == "failed"
    assert done_read["content"][0]["content"]["text"].startswith("Error:")
    assert (tmp_path / "a.txt").read_text() == "new text"  # the session worked in cwd


async def test_a_failed_turn_answers_an_error_with_its_message(rt: omnigent.Runtime) -> None:
    name = await agent(rt, "failing", [{"say": "trying"}, {"fail": "the model is down"}])
    with trio.fail_after(5):
        async with open_acp(rt, name) as editor:
            sid = await editor.new_session()
            with pytest.raises(rpc.RpcError) as failed:
                await editor.prompt(sid)
            assert failed.value.code == rpc.INTERNAL_ERROR
            assert failed.value.message == "the model is down"
            assert failed.value.data == {"code": "harness_error"}
            assert editor.text(sid) == "trying"  # what streamed before the failure


@pytest.mark.parametrize(
    ("finish_reason", "reason"), [("length", "max_tokens"), ("content_filter", "refusal")]
)
async def test_output_limits_and_refusals_are_stop_reasons(finish_reason: str, reason: str) -> None:
    mock = MockLLM()
    mock.reply_text("partial answ", finish_reason=finish_reason)
    for _ in range(2):
        mock.reply_tool_call("sys_os_read", {"path": "x"})
    spec = {
        "name": "modeled",
        "executor": {
            "type": "omnigent",
            "config": {
                "harness": "loop",
                "model": "mock-model",
                "base_url": "http://mock/v1",
                "max_steps": 2,
            },
        },
    }
    with trio.fail_after(10):
        async with (
            httpx.AsyncClient(transport=mock.transport()) as http,
            omnigent.open_runtime(http_client=http) as rt,
        ):
            await rt.create_agent(spec)
            async with open_acp(rt, "modeled") as editor:
                sid = await editor.new_session()
                assert await editor.prompt(sid) == {"stopReason": reason}
                assert editor.text(sid) == "partial answ"
                # Two steps of tool calls and the loop's limit is reached.
                assert await editor.prompt(sid) == {"stopReason": "max_turn_requests"}


# -- cancel ---------------------------------------------------------------------------------


async def test_cancel_answers_cancelled_at_once(rt: omnigent.Runtime) -> None:
    name = await agent(rt, "sleeper", [{"say": "working"}, {"sleep": 30}])
    with trio.fail_after(10):
        async with open_acp(rt, name) as editor, trio.open_nursery() as nursery:
            sid = await editor.new_session()
            outcome = await prompt_in_background(editor, sid, nursery)
            await editor.wait_for_update(
                lambda u: u["update"]["sessionUpdate"] == "agent_message_chunk"
            )
            started = trio.current_time()
            await editor.notify("session/cancel", {"sessionId": sid})
            await until(lambda: outcome)
            assert trio.current_time() - started < 0.5
            assert outcome == [{"stopReason": "cancelled"}]
            assert (await rt.get_session(sid)).status == "cancelled"


async def test_cancel_withdraws_the_pending_permission_request(rt: omnigent.Runtime) -> None:
    name = await agent(
        rt, "asker", [{"call": "sys_os_shell", "args": {"command": "echo hi"}}], policies=ASK_SHELL
    )
    with trio.fail_after(10):
        async with open_acp(rt, name) as editor, trio.open_nursery() as nursery:
            sid = await editor.new_session()
            outcome = await prompt_in_background(editor, sid, nursery)
            asked = await editor.next_request("session/request_permission")
            await editor.notify("session/cancel", {"sessionId": sid})
            await asked.cancelled.wait()  # the agent sent $/cancel_request for it
            await until(lambda: outcome)
            assert outcome == [{"stopReason": "cancelled"}]
    assert rt.statistics()["elicitations"] == 0


# -- permissions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "ran"),
    [("allow_once", True), ("reject_once", False), (None, False), ("made_up", False)],
)
async def test_a_permission_answer_resolves_the_elicitation(
    rt: omnigent.Runtime, tmp_path: Path, option: str | None, ran: bool
) -> None:
    script = [{"call": "sys_os_shell", "args": {"command": "echo ran > proof.txt"}}]
    name = await agent(rt, "asker", script, policies=ASK_SHELL)
    with trio.fail_after(10):
        async with open_acp(rt, name) as editor, trio.open_nursery() as nursery:
            sid = await editor.new_session(str(tmp_path))
            outcome = await prompt_in_background(editor, sid, nursery)
            asked = await editor.next_request("session/request_permission")
            params = asked.params
            assert params["sessionId"] == sid
            assert [o["optionId"] for o in params["options"]] == [
                "allow_once",
                "allow_always",
                "reject_once",
                "reject_always",
            ]
            assert [o["kind"] for o in params["options"]] == [
                o["optionId"] for o in params["options"]
            ]
            [call] = editor.session_updates(sid, "tool_call")
            assert params["toolCall"]["toolCallId"] == call["toolCallId"]  # the same call
            assert params["toolCall"]["kind"] == "execute"
            assert params["toolCall"]["title"] == "Run: echo ran > proof.txt"
            meta = params["_meta"]["omnigent"]
            assert meta["message"] == "ask_shell: ok?" and meta["sessionId"] == sid
            asked.choose(option)
            await until(lambda: outcome)
    assert outcome == [{"stopReason": "end_turn"}]
    assert (tmp_path / "proof.txt").exists() is ran
    [done] = outputs(editor, sid)
    assert (done["status"] == "completed") is ran


async def test_allow_always_is_remembered_for_that_tool_in_that_session(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    name = await agent(
        rt, "asker", [{"call": "sys_os_shell", "args": {"command": "echo hi"}}], policies=ASK_SHELL
    )
    with trio.fail_after(10):
        async with open_acp(rt, name) as editor, trio.open_nursery() as nursery:
            sid = await editor.new_session(str(tmp_path))
            outcome = await prompt_in_background(editor, sid, nursery)
            (await editor.next_request("session/request_permission")).choose("allow_always")
            await until(lambda: outcome)
            # The next prompt asks nobody, and the tool runs.
            assert await editor.prompt(sid) == {"stopReason": "end_turn"}
            assert [u["status"] for u in outputs(editor, sid)] == ["completed", "completed"]
            # Another session of the same agent still asks.
            other = await editor.new_session(str(tmp_path))
            outcome = await prompt_in_background(editor, other, nursery)
            (await editor.next_request("session/request_permission")).choose("reject_always")
            await until(lambda: outcome)
            assert await editor.prompt(other) == {"stopReason": "end_turn"}
            denied = outputs(editor, other)
            assert [u["status"] for u in denied] == ["failed", "failed"]
            assert "denied by policy ask_shell" in denied[1]["rawOutput"]
    assert editor.requests.statistics().current_buffer_used == 0  # asked twice in all


async def test_a_client_error_is_a_refusal(rt: omnigent.Runtime) -> None:
    name = await agent(
        rt, "asker", [{"call": "sys_os_shell", "args": {"command": "echo hi"}}], policies=ASK_SHELL
    )
    with trio.fail_after(10):
        async with open_acp(rt, name) as editor:

            async def unsupported(method: str, params: dict[str, Any]) -> Any:
                raise rpc.RpcError(rpc.METHOD_NOT_FOUND, "no permissions here")

            editor.answerers["session/request_permission"] = unsupported
            sid = await editor.new_session()
            assert await editor.prompt(sid) == {"stopReason": "end_turn"}
            [done] = outputs(editor, sid)
            assert "denied by policy" in done["rawOutput"]


async def test_a_child_sessions_elicitation_reaches_the_editor_naming_the_child(
    rt: omnigent.Runtime,
) -> None:
    await agent(rt, "parent", [{"say": "delegating"}])
    child_agent = await rt.create_agent(
        spec(
            "researcher",
            [{"call": "sys_os_shell", "args": {"command": "echo hi"}}],
            policies=ASK_SHELL,
        )
    )
    with trio.fail_after(10):
        async with open_acp(rt, "parent") as editor:
            parent = await editor.new_session()
            child = await rt.create_session(
                child_agent.id, parent_session_id=parent, title="digging"
            )
            async with rt.subscribe(child.id) as events:
                await rt.send_message(child.id, "research")
                asked = await editor.next_request("session/request_permission")
                assert asked.params["sessionId"] == parent
                meta = asked.params["_meta"]["omnigent"]
                assert meta["sessionId"] == child.id
                assert meta["childSession"] == {"id": child.id, "label": "digging"}
                assert asked.params["toolCall"]["title"] == "[digging] Run: echo hi"
                asked.choose("allow_once")
                async for event in events:
                    if isinstance(event, SessionStatusChanged) and event.status == "idle":
                        break
            items = (await rt.list_items(child.id)).data
            assert '"exit_code": 0' in items[-1].output  # type: ignore[union-attr]


# -- the client's files and terminal ----------------------------------------------------


async def test_fs_capabilities_send_reads_and_writes_through_the_editor(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    script = [
        {"call": "sys_os_read", "args": {"path": "main.py", "offset": 1, "limit": 1}},
        {"call": "sys_os_write", "args": {"path": "out/new.py", "content": "print(1)\n"}},
        {"call": "sys_os_read", "args": {"path": "../etc/passwd"}},
    ]
    name = await agent(rt, "editing", script)
    asked: list[tuple[str, dict[str, Any]]] = []

    async def editor_fs(method: str, params: dict[str, Any]) -> Any:
        asked.append((method, params))
        if method == "fs/read_text_file":
            return {"content": "line one\nunsaved line two\nline three\n"}
        return None

    with trio.fail_after(10):
        async with open_acp(rt, name, read=True, write=True) as editor:
            editor.answerers["fs/read_text_file"] = editor_fs
            editor.answerers["fs/write_text_file"] = editor_fs
            sid = await editor.new_session(str(tmp_path))
            assert (await editor.prompt(sid))["stopReason"] == "end_turn"
    read, write, escape = (
        json.loads(u["rawOutput"]) if u["status"] == "completed" else u["rawOutput"]
        for u in outputs(editor, sid)
    )
    assert read["content"] == "unsaved line two\n"
    assert (read["returned_lines"], read["total_lines"]) == (1, 3)
    assert write["bytes_written"] == 9
    assert escape.startswith("Error: path '../etc/passwd' is outside the working directory")
    assert asked == [
        ("fs/read_text_file", {"sessionId": sid, "path": str(tmp_path / "main.py")}),
        (
            "fs/write_text_file",
            {"sessionId": sid, "path": str(tmp_path / "out/new.py"), "content": "print(1)\n"},
        ),
    ]
    assert not (tmp_path / "out").exists()  # the editor wrote it, not omnigent
    # Each tool call was announced before the editor was asked to run it.
    read_call = editor.session_updates(sid, "tool_call")[0]
    assert read_call["locations"] == [{"path": str(tmp_path / "main.py")}]


async def test_the_terminal_capability_runs_the_shell_in_the_editor(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    name = await agent(rt, "shell", [{"call": "sys_os_shell", "args": {"command": "make test"}}])
    calls: list[str] = []

    async def terminal(method: str, params: dict[str, Any]) -> Any:
        calls.append(method)
        if method == "terminal/create":
            assert params["command"] == "/bin/sh" and params["args"] == ["-c", "make test"]
            assert params["cwd"] == str(tmp_path)
            return {"terminalId": "term-1"}
        if method == "terminal/wait_for_exit":
            return {"exitCode": 2}
        if method == "terminal/output":
            return {"output": "1 failed\n", "truncated": False, "exitStatus": {"exitCode": 2}}
        return {}

    with trio.fail_after(10):
        async with open_acp(rt, name, terminal=True) as editor:
            for method in ("create", "wait_for_exit", "output", "release", "kill"):
                editor.answerers[f"terminal/{method}"] = terminal
            sid = await editor.new_session(str(tmp_path))
            assert (await editor.prompt(sid))["stopReason"] == "end_turn"
    assert calls == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    shown = [
        u for u in editor.session_updates(sid, "tool_call_update") if u["status"] == "in_progress"
    ]
    assert shown[0]["content"] == [{"type": "terminal", "terminalId": "term-1"}]
    [done] = outputs(editor, sid)
    result = json.loads(done["rawOutput"])
    assert (result["stdout"], result["exit_code"], result["terminal"]) == ("1 failed\n", 2, True)


# -- list, load, config ---------------------------------------------------------------------


async def test_list_filters_by_cwd_and_pages_with_a_cursor(rt: omnigent.Runtime) -> None:
    name = await agent(rt, "lister", [{"say": "hi"}])
    with trio.fail_after(20):
        async with open_acp(rt, name) as editor:
            mine = {await editor.new_session("/work/a") for _ in range(3)}
            theirs = [await editor.new_session("/work/b") for _ in range(52)]
            await rt.create_session((await rt.get_agent_by_name(name)).id)  # no cwd: not listed
            listed = await editor.call("session/list", {"cwd": "/work/a"})
            assert {s["sessionId"] for s in listed["sessions"]} == mine
            assert "nextCursor" not in listed
            assert {s["cwd"] for s in listed["sessions"]} == {"/work/a"}
            assert all(s["updatedAt"].endswith("Z") for s in listed["sessions"])
            first = await editor.call("session/list", {"cwd": "/work/b"})
            second = await editor.call(
                "session/list", {"cwd": "/work/b", "cursor": first["nextCursor"]}
            )
            assert "nextCursor" not in second
            seen = [s["sessionId"] for s in first["sessions"] + second["sessions"]]
            assert seen == list(reversed(theirs))  # newest first, each once
            everything = await editor.call("session/list", {})
            # A page holds at most 50; one without a cwd is skipped, not counted.
            assert len(everything["sessions"]) == 49 and "nextCursor" in everything
            with pytest.raises(rpc.RpcError) as bad:
                await editor.call("session/list", {"cursor": "conv_nope"})
            assert bad.value.code == rpc.INVALID_PARAMS


async def test_load_replays_the_history_then_answers(rt: omnigent.Runtime, tmp_path: Path) -> None:
    script = [{"call": "sys_os_read", "args": {"path": "x.txt"}}, {"say": "all done"}]
    name = await agent(rt, "loader", script)
    with trio.fail_after(10):
        async with open_acp(rt, name) as first:
            sid = await first.new_session(str(tmp_path))
            await first.prompt(sid, "read x")
        async with open_acp(rt, name) as second:
            answer = await second.call(
                "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
            )
            kinds = [u["sessionUpdate"] for u in second.session_updates(sid)]
            assert kinds == [
                "user_message_chunk",
                "tool_call",
                "tool_call_update",
                "agent_message_chunk",
            ]
            replayed = second.session_updates(sid)
            assert replayed[0]["content"] == {"type": "text", "text": "read x"}
            assert replayed[3]["content"] == {"type": "text", "text": "all done"}
            assert answer["configOptions"][0]["id"] == "model"
            # The loaded session works like a new one.
            assert await second.prompt(sid, "again") == {"stopReason": "end_turn"}
            with pytest.raises(rpc.RpcError) as missing:
                await second.call(
                    "session/load", {"sessionId": "conv_nope", "cwd": "/tmp", "mcpServers": []}
                )
            assert missing.value.code == rpc.RESOURCE_NOT_FOUND


async def test_set_config_option_picks_the_model(rt: omnigent.Runtime) -> None:
    name = await agent(rt, "modeled", [{"say": "hi"}])
    spec_with_model = spec("modeled", [{"say": "hi"}])
    spec_with_model["executor"]["config"]["model"] = "small-1"
    await rt.create_agent(spec_with_model)
    with trio.fail_after(5):
        async with open_acp(rt, name) as editor:
            result = await editor.call("session/new", {"cwd": "/tmp", "mcpServers": []})
            sid = result["sessionId"]
            [model] = result["configOptions"]
            assert (model["id"], model["category"], model["type"]) == ("model", "model", "select")
            assert model["currentValue"] == "small-1"
            changed = await editor.call(
                "session/set_config_option",
                {"sessionId": sid, "configId": "model", "value": "large-2"},
            )
            [model] = changed["configOptions"]
            assert model["currentValue"] == "large-2"
            assert [o["value"] for o in model["options"]] == ["small-1", "large-2"]
            assert (await rt.get_session(sid)).model_override == "large-2"
            await editor.call(
                "session/set_config_option",
                {"sessionId": sid, "configId": "model", "value": "small-1"},
            )
            assert (await rt.get_session(sid)).model_override is None
            for params in (
                {"sessionId": sid, "configId": "mode", "value": "x"},
                {"sessionId": sid, "configId": "model", "value": "bad model!"},
                {"sessionId": sid, "configId": "model", "type": "boolean", "value": True},
            ):
                with pytest.raises(rpc.RpcError) as bad:
                    await editor.call("session/set_config_option", params)
                assert bad.value.code == rpc.INVALID_PARAMS


async def test_omnigent_extension_methods(rt: omnigent.Runtime) -> None:
    name = await agent(
        rt, "asker", [{"call": "sys_os_shell", "args": {"command": "echo hi"}}], policies=ASK_SHELL
    )
    with trio.fail_after(10):
        async with open_acp(rt, name) as editor, trio.open_nursery() as nursery:
            sid = await editor.new_session()
            listed = await editor.call("_omnigent/session/list", {"agentName": name})
            assert [s["id"] for s in listed["data"]] == [sid] and listed["has_more"] is False
            info = await editor.call("_omnigent/session/info", {"sessionId": sid})
            assert info["object"] == "session" and info["cwd"] == "/tmp"
            outcome = await prompt_in_background(editor, sid, nursery)
            asked = await editor.next_request("session/request_permission")
            eid = asked.params["_meta"]["omnigent"]["elicitationId"]
            resolved = await editor.call(
                "_omnigent/elicitation/resolve",
                {"sessionId": sid, "elicitationId": eid, "action": "accept"},
            )
            assert resolved == {"resolved": True}
            await asked.cancelled.wait()  # answered elsewhere: the request is withdrawn
            await until(lambda: outcome)
            assert outcome == [{"stopReason": "end_turn"}]
            with pytest.raises(rpc.RpcError) as bad:
                await editor.call(
                    "_omnigent/elicitation/resolve",
                    {"sessionId": sid, "elicitationId": eid, "action": "maybe"},
                )
            assert bad.value.code == rpc.INVALID_PARAMS


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "loc"),
    [
        ("session/new", {"cwd": "relative", "mcpServers": []}, "cwd"),
        ("session/new", {"mcpServers": []}, "cwd"),
        (
            "session/new",
            {"cwd": "/tmp", "mcpServers": "none"},
            "mcpServers",
        ),
        ("session/new", [1, 2], "params"),
        (
            "session/prompt",
            {
                "sessionId": "SID",
                "prompt": [{"type": "audio", "data": "", "mimeType": "audio/wav"}],
            },
            "prompt[0].type",
        ),
        (
            "session/prompt",
            {
                "sessionId": "SID",
                "prompt": [{"type": "image", "data": "!!", "mimeType": "image/png"}],
            },
            "prompt[0].data",
        ),
        (
            "session/prompt",
            {
                "sessionId": "SID",
                "prompt": [{"type": "image", "data": "", "mimeType": "text/html"}],
            },
            "prompt[0].mimeType",
        ),
        ("session/prompt", {"sessionId": "SID", "prompt": []}, "prompt"),
        (
            "session/prompt",
            {"sessionId": "SID", "prompt": [{"type": "text", "text": 7}]},
            "prompt[0].text",
        ),
        ("initialize", {"protocolVersion": "one"}, "protocolVersion"),
    ],
)
async def test_bad_params_are_invalid_params_naming_the_field(
    rt: omnigent.Runtime, method: str, params: Any, loc: str
) -> None:
    name = await agent(rt, "strict", [{"say": "hi"}])
    with trio.fail_after(5):
        async with open_acp(rt, name) as editor:
            sid = await editor.new_session()
            if isinstance(params, dict) and params.get("sessionId") == "SID":
                params["sessionId"] = sid
            with pytest.raises(rpc.RpcError) as bad:
                await editor.call(method, params)
            assert bad.value.code == rpc.INVALID_PARAMS
            assert bad.value.data["details"][0]["loc"] == loc
            # Nothing happened, and the connection is still up.
            assert (await rt.list_items(sid)).data == ()
            assert await editor.prompt(sid) == {"stopReason": "end_turn"}


async def test_with_client_mcp_off_the_servers_are_left_out_and_named(
    rt: omnigent.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "omnigent.transports.acp")
    name = await agent(rt, "plain", [{"say": "hi"}])
    servers = [{"name": "github", "command": "gh-mcp", "args": [], "env": []}]
    with trio.fail_after(5):
        async with open_acp(rt, name) as editor:
            result = await editor.call("session/new", {"cwd": "/tmp", "mcpServers": servers})
            assert result["_meta"] == {"omnigent": {"ignoredMcpServers": ["github"]}}
            assert await editor.prompt(result["sessionId"]) == {"stopReason": "end_turn"}
    assert "gh-mcp" not in caplog.text and "github" in caplog.text


async def test_prompts_and_images_reach_the_session_as_content(rt: omnigent.Runtime) -> None:
    name = await agent(rt, "viewer", [{"say": "seen"}])
    blocks = [
        {"type": "text", "text": "look"},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///a.py", "text": "x = 1"}},
        {"type": "resource_link", "uri": "file:///b.py", "name": "b.py"},
    ]
    with trio.fail_after(5):
        async with open_acp(rt, name) as editor:
            sid = await editor.new_session()
            result = await editor.call("session/prompt", {"sessionId": sid, "prompt": blocks})
            assert result == {"stopReason": "end_turn"}
    message = (await rt.list_items(sid)).data[0]
    content = message.content  # type: ignore[union-attr]
    assert content[0].text == "look"
    assert content[1].image_url == "data:image/png;base64,aGk="
    assert content[2].text == '<context ref="file:///a.py">\nx = 1\n</context>'
    assert content[3].text == "[@b.py](file:///b.py)"


async def test_unknown_and_unopened_sessions_are_not_found(rt: omnigent.Runtime) -> None:
    name = await agent(rt, "finder", [{"say": "hi"}])
    with trio.fail_after(5):
        async with open_acp(rt, name) as editor:
            elsewhere = await rt.create_session((await rt.get_agent_by_name(name)).id)
            for sid in ("conv_nope", elsewhere.id):
                with pytest.raises(rpc.RpcError) as missing:
                    await editor.prompt(sid)
                assert missing.value.code == rpc.RESOURCE_NOT_FOUND
            await editor.notify("session/cancel", {"sessionId": "conv_nope"})  # ignored
            await editor.notify("session/cancel", {"nonsense": True})
            with pytest.raises(rpc.RpcError) as missing:
                await editor.call("_omnigent/session/info", {"sessionId": "conv_nope"})
            assert missing.value.code == rpc.RESOURCE_NOT_FOUND


async def test_a_two_mebibyte_prompt_arrives_whole(rt: omnigent.Runtime) -> None:
    name = await agent(rt, "reader", [{"say": "read it"}])
    text = "x" * (2 * 1024 * 1024)
    with trio.fail_after(10):
        async with open_acp(rt, name) as editor:
            sid = await editor.new_session()
            assert await editor.prompt(sid, text) == {"stopReason": "end_turn"}
    message = (await rt.list_items(sid)).data[0]
    assert message.content[0].text == text  # type: ignore[union-attr]


# -- lifetimes and access -----------------------------------------------------------------


async def test_a_closed_connection_cancels_its_turn_and_leaves_no_task(
    rt: omnigent.Runtime,
) -> None:
    name = await agent(
        rt,
        "long",
        [{"say": "working"}, {"call": "sys_os_shell", "args": {"command": "sleep 30"}}],
        policies=ASK_SHELL,
    )
    before = all_tasks()
    with trio.fail_after(10):
        async with rt.subscribe(session_id := await _new_session(rt, name)) as events:
            async with open_acp(rt, name) as editor, trio.open_nursery() as nursery:
                await editor.call(
                    "session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
                )
                await prompt_in_background(editor, session_id, nursery)
                await editor.next_request("session/request_permission")
                await editor.close()
            statuses = []
            async for event in events:
                if isinstance(event, SessionStatusChanged):
                    statuses.append(event.status)
                    if event.status in ("idle", "failed", "cancelled"):
                        break
        assert statuses == ["running", "waiting", "cancelled"]
        await wait_quiet(rt)
    # No task that was not there before (one that ended meanwhile — the runtime's
    # cgroup probe, run while it opened — is none left behind).
    assert all_tasks() <= before
    assert rt.statistics()["elicitations"] == 0
    assert rt.statistics()["subscribers"] == 0


async def _new_session(rt: omnigent.Runtime, name: str) -> str:
    agent_id = (await rt.get_agent_by_name(name)).id
    return (await rt.create_session(agent_id, cwd="/tmp")).id


async def test_with_access_checks_a_user_sees_and_does_only_what_grants_allow(
    rt: omnigent.Runtime,
) -> None:
    name = await agent(
        rt, "shared", [{"call": "sys_os_shell", "args": {"command": "echo"}}], policies=ASK_SHELL
    )
    agent_id = (await rt.get_agent_by_name(name)).id
    alices = await rt.create_session(agent_id, owner="alice", cwd="/work")
    with trio.fail_after(10):
        async with open_acp(rt, name, user="bob", check_access=True) as bob:
            load = {"sessionId": alices.id, "cwd": "/work", "mcpServers": []}
            with pytest.raises(rpc.RpcError) as hidden:
                await bob.call("session/load", load)
            assert hidden.value.code == rpc.RESOURCE_NOT_FOUND
            assert (await bob.call("session/list", {}))["sessions"] == []
            await rt.grant(alices.id, "bob", 1)
            await bob.call("session/load", load)
            assert [s["sessionId"] for s in (await bob.call("session/list", {}))["sessions"]] == [
                alices.id
            ]
            with pytest.raises(rpc.RpcError) as read_only:
                await bob.prompt(alices.id)
            assert read_only.value.data == {"code": "forbidden"}
            # Alice's turn asks; a reader is not asked to approve it.
            async with rt.subscribe(alices.id) as events:
                await rt.send_message(alices.id, "go")
                async for event in events:
                    if isinstance(event, ElicitationRequest):
                        break
            with trio.move_on_after(0.2):
                await bob.next_request()
                raise AssertionError("a reader was asked to approve")
            await rt.resolve_elicitation(alices.id, event.elicitation_id, "decline")
            # Bob's own sessions are his.
            sid = await bob.new_session("/work")
            assert (await rt.get_session(sid)).cwd == "/work"
            assert await rt.access_level(sid, "bob") == 3
        await wait_quiet(rt)
