"""The native harnesses' pure halves: what Claude Code's and Codex's messages mean, and
what omnigent sends them. No CLI needed (the line channel runs a tiny Python child)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.errors import HarnessError
from omnigent.harnesses.bridge import SHIM, BridgeAddress, shim_command
from omnigent.harnesses.claude import _protocol as claude
from omnigent.harnesses.claude import _stream as claude_stream
from omnigent.harnesses.codex import _protocol as codex
from omnigent.harnesses.codex import _stream as codex_stream
from omnigent.harnesses.native._cli import ModelEndpoint
from omnigent.harnesses.native._input import MAX_PREAMBLE, preamble, split_data_url
from omnigent.harnesses.native._ndjson import ChannelClosed, LineChannel
from omnigent.harnesses.native._relay import (
    Call,
    CallOutput,
    EndMessage,
    Finished,
    Say,
    merge_text,
)
from omnigent.model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    MessageItem,
    OutputText,
)
from omnigent.processes._manager import ProcessSpec, base_environment, open_process_manager

# -- Claude Code: the stream -------------------------------------------------------------


def stream(event: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    return {"type": "stream_event", "event": event, "parent_tool_use_id": parent}


def text_block(index: int) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": {"type": "text"}}


def delta(index: int, text: str) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def assistant(message_id: str, *blocks: dict[str, Any], parent: str | None = None) -> Any:
    return {
        "type": "assistant",
        "message": {"id": message_id, "content": list(blocks)},
        "parent_tool_use_id": parent,
    }


def test_streamed_text_is_relayed_once_and_deltas_are_merged() -> None:
    reader = claude_stream.StreamReader()
    lines = [
        stream({"type": "message_start", "message": {"id": "msg_1"}}),
        stream(text_block(0)),
        stream(delta(0, "Hel")),
        stream(delta(0, "lo")),
        stream({"type": "content_block_stop", "index": 0}),
        assistant("msg_1", {"type": "text", "text": "Hello"}),
    ]
    assert reader.feed(lines) == [Say("msg_1:0", "Hello"), EndMessage()]


def test_text_that_was_not_streamed_comes_from_the_assistant_line() -> None:
    reader = claude_stream.StreamReader()
    tool = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    out = reader.feed([assistant("msg_2", {"type": "text", "text": "Whole."}, tool)])
    assert out == [
        Say("msg_2:whole1", "Whole."),
        EndMessage(),
        Call("toolu_1", "Bash", '{"command": "ls"}'),
    ]


def test_tool_results_become_outputs_and_errors_say_so() -> None:
    reader = claude_stream.StreamReader()
    user = {
        "type": "user",
        "parent_tool_use_id": None,
        "message": {
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "fine"},
                {
                    "type": "tool_result",
                    "tool_use_id": "b",
                    "content": [{"type": "text", "text": "no"}, {"type": "image"}],
                    "is_error": True,
                },
                {"type": "text", "text": "not a result"},
            ]
        },
    }
    assert reader.feed([user]) == [CallOutput("a", "fine"), CallOutput("b", "Error: no")]


def test_sub_agent_lines_and_noise_are_not_relayed() -> None:
    reader = claude_stream.StreamReader()
    lines = [
        assistant("m", {"type": "text", "text": "inside a Task"}, parent="toolu_task"),
        stream(delta(0, "x"), parent="toolu_task"),
        {"type": "tool_progress", "heartbeat": True},
        {"type": "system", "subtype": "status", "status": "requesting"},
        {"type": "rate_limit_event"},
        {"type": "user", "message": {"role": "user", "content": "[Request interrupted by user]"}},
        {"type": "stream_event", "event": "not an object"},
    ]
    assert reader.feed(lines) == []


def test_the_result_ends_the_turn() -> None:
    reader = claude_stream.StreamReader()
    ok = {"type": "result", "subtype": "success", "is_error": False, "result": "done"}
    assert reader.feed([ok]) == [EndMessage(), Finished(None)]
    failed = {"type": "result", "subtype": "error_during_execution", "errors": ["boom"]}
    assert reader.feed([failed])[-1] == Finished("Claude Code: boom")
    api = {"type": "result", "subtype": "success", "is_error": True, "result": "API Error: 400"}
    assert reader.feed([api])[-1] == Finished("Claude Code: API Error: 400")
    bare = {"type": "result", "subtype": "error_max_turns"}
    assert reader.feed([bare])[-1] == Finished("Claude Code ended the turn with error_max_turns")


def test_control_messages_and_the_session_id_are_read() -> None:
    reader = claude_stream.StreamReader()
    request = {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}}
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s-1"},
        {"type": "control_request", "request_id": "r1", "request": request},
        {"type": "control_cancel_request", "request_id": "r1"},
        {"type": "control_response", "response": {"subtype": "success", "request_id": "q1"}},
        {
            "type": "control_response",
            "response": {"subtype": "error", "request_id": "q2", "error": "no"},
        },
        {"type": "control_request", "request_id": 5, "request": {}},  # malformed
    ]
    assert reader.feed(lines) == [
        claude_stream.SessionStarted("s-1"),
        claude_stream.ControlRequest("r1", "can_use_tool", request),
        claude_stream.ControlCancel("r1"),
        claude_stream.ControlResponse("q1", True, None),
        claude_stream.ControlResponse("q2", False, "no"),
    ]


# -- Claude Code: approvals --------------------------------------------------------------


def hook(tool: str = "Bash", tool_input: Any = None) -> dict[str, Any]:
    body = {"tool_name": tool, "tool_input": tool_input or {"command": "ls"}, "tool_use_id": "t"}
    return {"subtype": "hook_callback", "callback_id": claude.HOOK_ID, "input": body}


def test_a_hook_call_is_a_policy_event() -> None:
    event = claude.hook_event(hook())
    assert event is not None
    assert event["type"] == "PHASE_TOOL_CALL"
    assert event["data"] == {"tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert event["context"]["harness"] == "claude-code"
    assert claude.hook_event({"input": {"tool_name": "Bash", "tool_input": "ls"}}) is None
    assert claude.hook_event({}) is None


def test_verdicts_become_hook_decisions() -> None:
    allow = claude.hook_answer({"result": "POLICY_ACTION_ALLOW"})
    assert allow["hookSpecificOutput"]["permissionDecision"] == "allow"
    deny = claude.hook_answer({"result": "POLICY_ACTION_DENY", "reason": "no shell"})
    assert deny["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "no shell",
    }
    # No opinion: Claude Code's own rules decide (and may ask through can_use_tool).
    assert claude.hook_answer({"result": "POLICY_ACTION_UNSPECIFIED"}) == {}


QUESTIONS = [{"question": "Which?", "options": [{"label": "A"}, {"label": "B"}]}]


def test_what_claude_code_asks_becomes_an_elicitation() -> None:
    body = {
        "subtype": "can_use_tool",
        "tool_name": "Bash",
        "display_name": "Bash",
        "input": {"command": "touch x"},
        "description": "touch x",
    }
    params = claude.permission_params(body)
    assert params is not None
    assert params.phase == "permission_request" and params.tool_name == "Bash"
    assert params.message == "Claude Code wants to use Bash: touch x"
    assert params.tool_input == {"command": "touch x"}
    question = {"tool_name": "AskUserQuestion", "input": {"questions": QUESTIONS}}
    params = claude.permission_params(question)
    assert params is not None
    assert params.phase == "ask_user_question"
    assert params.ask_user_question == {"questions": QUESTIONS}
    assert params.message == "Claude Code asks: Which?"
    assert claude.permission_params({"tool_name": "AskUserQuestion", "input": {}}) is None
    assert claude.permission_params({"tool_name": "", "input": {}}) is None


def test_answers_go_back_as_allow_or_deny() -> None:
    body = {"tool_name": "Bash", "input": {"command": "touch x"}}
    assert claude.permission_answer("accept", None, body) == {
        "behavior": "allow",
        "updatedInput": {"command": "touch x"},
    }
    assert claude.permission_answer("decline", None, body) == {
        "behavior": "deny",
        "message": "The user declined this Bash request.",
    }
    assert "cancelled" in claude.permission_answer("cancel", None, body)["message"]
    question = {"tool_name": "AskUserQuestion", "input": {"questions": QUESTIONS}}
    answer = claude.permission_answer("accept", {"Which?": ["A", "B"], "Other": 3}, question)
    assert answer["updatedInput"] == {
        "questions": QUESTIONS,
        "answers": {"Which?": "A, B", "Other": "3"},
    }
    assert claude.permission_answer("accept", "junk", question)["updatedInput"]["answers"] == {}


# -- Claude Code: what is sent -----------------------------------------------------------


def test_a_user_message_carries_text_and_images() -> None:
    message = MessageItem(
        role="user",
        content=(
            InputText("look"),
            InputImage(image_url="data:image/png;base64,AAAA"),
            InputImage(image_url="https://example.com/a.png"),
        ),
    )
    sent = claude.user_message([message], "Earlier: hi")
    assert sent["type"] == "user" and sent["parent_tool_use_id"] is None
    assert sent["message"]["content"] == [
        {"type": "text", "text": "Earlier: hi"},
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
    ]
    empty = claude.user_message([MessageItem(role="user", content=(InputText(""),))], None)
    assert empty["message"]["content"] == [{"type": "text", "text": ""}]


def test_the_command_line_starts_or_resumes_a_conversation() -> None:
    argv = claude.claude_argv(
        "claude", conversation="u-1", resume=False, model="sonnet", instructions="Be brief."
    )
    assert argv[:9] == (
        "claude",
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
        "--permission-prompt-tool",
        "stdio",
        "--include-partial-messages",
    )
    assert argv[9:] == (
        "--strict-mcp-config",  # never a repository's .mcp.json
        "--model",
        "sonnet",
        "--append-system-prompt",
        "Be brief.",
        "--session-id",
        "u-1",
    )
    resumed = claude.claude_argv(
        "claude", conversation="u-1", resume=True, model=None, instructions=""
    )
    assert resumed[9:] == ("--strict-mcp-config", "--resume", "u-1")


def test_omnigent_tools_come_as_the_mcp_server_omnigent(tmp_path: Path) -> None:
    address = BridgeAddress(tmp_path / "b.sock", "tok")
    shim = shim_command(address, "1.2")
    config = claude.mcp_config(shim)
    assert config == {
        "mcpServers": {
            "omnigent": {
                "type": "stdio",
                "command": sys.executable,
                "args": ["-I", "-S", str(SHIM), str(tmp_path / "b.sock"), "1.2"],
                "alwaysLoad": True,
                "timeout": 86_400_000,
            }
        }
    }
    argv = claude.claude_argv(
        "claude", conversation="u", resume=False, model=None, instructions="", mcp_config=config
    )
    given = argv[argv.index("--mcp-config") + 1]
    assert json.loads(given) == config and "tok" not in " ".join(argv)
    env = claude.claude_environment(
        {}, config_dir=tmp_path, endpoint=ModelEndpoint(None, None), extra={}, bridge_token="tok"
    )
    assert env["OMNIGENT_BRIDGE_TOKEN"] == "tok"
    assert claude.bridged_name("mcp__omnigent__sys_session_send")
    assert not claude.bridged_name("mcp__fs__read") and not claude.bridged_name("Bash")
    hook = {"input": {"tool_name": "mcp__omnigent__sys_read_inbox", "tool_input": {}}}
    assert claude.bridged_hook(hook)
    assert not claude.bridged_hook({"input": {"tool_name": "Bash", "tool_input": {}}})


def test_the_environment_is_built_not_inherited(tmp_path: Path) -> None:
    env = claude.claude_environment(
        {"PATH": "/bin"},
        config_dir=tmp_path,
        endpoint=ModelEndpoint("http://127.0.0.1:1", "sk-x"),
        extra={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "9", "DISABLE_TELEMETRY": "0"},
    )
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1" and env["ANTHROPIC_API_KEY"] == "sk-x"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["DISABLE_TELEMETRY"] == "0"  # the spec's env has the last word
    assert set(env) - set(claude.QUIET) == {
        "PATH",
        "CLAUDE_CONFIG_DIR",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    }
    bare = claude.claude_environment(
        {}, config_dir=tmp_path, endpoint=ModelEndpoint(None, None), extra={}
    )
    assert "ANTHROPIC_BASE_URL" not in bare and "ANTHROPIC_API_KEY" not in bare


# -- Codex: the thread's notifications ----------------------------------------------------


def note(method: str, **params: Any) -> dict[str, Any]:
    return {"method": method, "params": {"threadId": "th", **params}}


def item(method: str, turn: str = "t1", **fields: Any) -> dict[str, Any]:
    return note(method, turnId=turn, item=fields)


def test_agent_messages_stream_once() -> None:
    reader = codex_stream.CodexReader("th")
    reader.turn_id = "t1"
    out = reader.feed(
        [
            note("item/agentMessage/delta", turnId="t1", itemId="m1", delta="Hi "),
            note("item/agentMessage/delta", turnId="t1", itemId="m1", delta="there"),
            item("item/completed", type="agentMessage", id="m1", text="Hi there"),
            item("item/completed", type="agentMessage", id="m2", text="Unstreamed"),
        ]
    )
    assert out == [Say("m1", "Hi there"), EndMessage(), Say("m2", "Unstreamed"), EndMessage()]


def test_commands_and_file_changes_are_calls_with_outputs() -> None:
    reader = codex_stream.CodexReader("th")
    reader.turn_id = "t1"
    changes = [{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "hi\n"}]
    out = reader.feed(
        [
            item("item/started", type="commandExecution", id="c1", command="ls", cwd="/w"),
            item("item/started", type="fileChange", id="f1", changes=changes),
        ]
    )
    assert out == [
        Call("c1", "exec_command", '{"command": "ls", "cwd": "/w"}'),
        Call(
            "f1",
            "apply_patch",
            json.dumps({"changes": [{"path": "/w/a.txt", "kind": "add", "diff": "hi\n"}]}),
        ),
    ]
    assert reader.changes["f1"][0]["path"] == "/w/a.txt"
    done = reader.feed(
        [
            item(
                "item/completed",
                type="commandExecution",
                id="c1",
                status="completed",
                aggregatedOutput="a\n",
                exitCode=0,
            ),
            item("item/completed", type="commandExecution", id="c2", status="declined"),
            item(
                "item/completed",
                type="commandExecution",
                id="c3",
                status="failed",
                aggregatedOutput="oops",
                exitCode=2,
            ),
            item("item/completed", type="fileChange", id="f1", status="completed", changes=changes),
            item("item/completed", type="fileChange", id="f2", status="declined"),
        ]
    )
    assert done == [
        CallOutput("c1", "a\n"),
        CallOutput("c2", "Error: the command was declined and did not run"),
        CallOutput("c3", "Error: exit code 2\noops"),
        CallOutput("f1", "Applied:\nA /w/a.txt"),
        CallOutput("f2", "Error: the file change was declined and not applied"),
    ]
    assert "f1" not in reader.changes


def test_other_turns_and_threads_are_ignored() -> None:
    reader = codex_stream.CodexReader("th")
    assert reader.feed([note("turn/started", turn={"id": "t2"})]) == [
        codex_stream.TurnStarted("t2")
    ]
    assert reader.turn_id == "t2"
    stale = item("item/completed", turn="t1", type="agentMessage", id="m", text="old")
    other = {
        "method": "item/agentMessage/delta",
        "params": {"threadId": "x", "itemId": "m", "delta": "y"},
    }
    assert (
        reader.feed(
            [stale, other, note("turn/completed", turn={"id": "t1", "status": "completed"})]
        )
        == []
    )


def test_the_turn_ends_with_its_status() -> None:
    reader = codex_stream.CodexReader("th")
    reader.turn_id = "t1"
    done = note("turn/completed", turn={"id": "t1", "status": "completed", "error": None})
    assert reader.feed([done]) == [EndMessage(), Finished(None)]
    failed = note(
        "turn/completed", turn={"id": "t1", "status": "failed", "error": {"message": "bad"}}
    )
    assert reader.feed([failed])[-1] == Finished("Codex: bad")
    reader.feed([note("error", turnId="t1", error={"message": "stream broke"}, willRetry=False)])
    bare = note("turn/completed", turn={"id": "t1", "status": "failed"})
    assert reader.feed([bare])[-1] == Finished("Codex: stream broke")
    retrying = codex_stream.CodexReader("th")
    retrying.turn_id = "t1"
    retrying.feed([note("error", turnId="t1", error={"message": "again"}, willRetry=True)])
    assert retrying.feed([bare])[-1] == Finished("Codex: the turn ended failed")


def test_requests_responses_and_withdrawals_are_read() -> None:
    reader = codex_stream.CodexReader("th")
    out = reader.feed(
        [
            {
                "id": 0,
                "method": codex.COMMAND_APPROVAL,
                "params": {"threadId": "th", "itemId": "c"},
            },
            {"id": 7, "result": {"turn": {"id": "t1"}}},
            {"id": 8, "error": {"code": -1, "message": "nope"}},
            note("serverRequest/resolved", requestId=0),
            {"unrelated": True},
        ]
    )
    assert out == [
        codex_stream.ServerRequest(0, codex.COMMAND_APPROVAL, {"threadId": "th", "itemId": "c"}),
        codex_stream.Response(7, {"turn": {"id": "t1"}}),
        codex_stream.Response(8, error="nope"),
        codex_stream.Withdrawn(0),
    ]


# -- Codex: approvals and what is sent -----------------------------------------------------


def test_a_command_approval_is_a_policy_event_and_an_elicitation() -> None:
    reader = codex_stream.CodexReader("th")
    request = codex_stream.ServerRequest(
        3,
        codex.COMMAND_APPROVAL,
        {
            "itemId": "c1",
            "command": "/bin/bash -lc 'echo hi'",
            "cwd": "/w",
            "commandActions": [{"type": "unknown", "command": "echo hi"}],
            "reason": "to test",
        },
    )
    event = codex.approval_event(request, reader)
    assert event["data"] == {
        "tool_name": "exec_command",
        "tool_input": {"command": "echo hi", "cwd": "/w"},
    }
    params = codex.approval_params(request, event)
    assert params.phase == "codex_command_approval"
    assert params.command == "echo hi"
    assert params.message == "Codex wants to run: echo hi (to test)"
    raw = codex_stream.ServerRequest(4, codex.COMMAND_APPROVAL, {"command": ["ls", "-la"]})
    assert codex.approval_event(raw, reader)["data"]["tool_input"]["command"] == "ls -la"


def test_a_file_approval_says_what_would_change() -> None:
    reader = codex_stream.CodexReader("th")
    reader.changes["f1"] = [{"path": "/w/a.txt", "kind": "add"}]
    request = codex_stream.ServerRequest(5, codex.FILE_APPROVAL, {"itemId": "f1", "reason": None})
    event = codex.approval_event(request, reader)
    assert event["data"] == {
        "tool_name": "apply_patch",
        "tool_input": {"changes": [{"path": "/w/a.txt", "kind": "add"}]},
    }
    params = codex.approval_params(request, event)
    assert params.phase == "codex_file_change_approval"
    assert params.message == "Codex wants to change /w/a.txt"
    assert codex.decision(True) == {"decision": "accept"}
    assert codex.decision(False) == {"decision": "decline"}


def test_the_command_line_names_omnigents_provider() -> None:
    argv = codex.codex_argv(
        "codex", endpoint=ModelEndpoint('http://h:1/v1"x', "k"), model="gpt-5.5"
    )
    assert argv[:2] == ("codex", "app-server")
    assert 'model_provider="omnigent"' in argv and "features.plugins=false" in argv
    table = next(a for a in argv if a.startswith("model_providers.omnigent="))
    assert table == (
        'model_providers.omnigent={name="omnigent", base_url="http://h:1/v1\\"x", '
        'wire_api="responses", env_key="OMNIGENT_MODEL_KEY"}'
    )
    assert argv[-2:] == ("-c", 'model="gpt-5.5"')
    keyless = codex.codex_argv("codex", endpoint=ModelEndpoint(None, None), model=None)
    assert "env_key" not in " ".join(keyless) and codex.DEFAULT_BASE_URL in " ".join(keyless)
    env = codex.codex_environment({}, home=Path("/h"), endpoint=ModelEndpoint(None, "k"), extra={})
    assert env == {"CODEX_HOME": "/h", "OMNIGENT_MODEL_KEY": "k"}
    assert not [a for a in argv if a.startswith("mcp_servers.")]


def test_codex_gets_omnigent_tools_as_the_mcp_server_omnigent() -> None:
    shim = ("/py", "-I", "-S", "/shim.py", '/tmp/s "x".sock', "1.2")
    argv = codex.codex_argv("codex", endpoint=ModelEndpoint(None, None), model=None, shim=shim)
    overrides = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    server = [o.removeprefix("mcp_servers.omnigent.") for o in overrides if "mcp_servers" in o]
    assert server == [
        'command="/py"',
        'args=["-I", "-S", "/shim.py", "/tmp/s \\"x\\".sock", "1.2"]',
        'env_vars=["OMNIGENT_BRIDGE_TOKEN"]',
        'default_tools_approval_mode="approve"',
        "startup_timeout_sec=30",
        "tool_timeout_sec=86400",
    ]
    env = codex.codex_environment(
        {}, home=Path("/h"), endpoint=ModelEndpoint(None, None), extra={}, bridge_token="t"
    )
    assert env == {"CODEX_HOME": "/h", "OMNIGENT_BRIDGE_TOKEN": "t"}


def test_thread_params_ask_about_everything() -> None:
    start = codex.thread_params(
        cwd=Path("/w"),
        sandbox="workspace-write",
        instructions="Hi.",
        model="gpt-5.5",
        thread_id=None,
    )
    assert start == {
        "cwd": "/w",
        "approvalPolicy": "untrusted",
        "sandbox": "workspace-write",
        "developerInstructions": "Hi.",
        "model": "gpt-5.5",
    }
    resume = codex.thread_params(
        cwd=Path("/w"), sandbox="read-only", instructions="", model=None, thread_id="th"
    )
    assert resume["threadId"] == "th" and resume["excludeTurns"] is True
    assert "developerInstructions" not in resume
    message = MessageItem(
        role="user", content=(InputText("a"), InputImage(image_url="data:x;base64,Y"))
    )
    assert codex.turn_input([message], "before") == [
        {"type": "text", "text": "before"},
        {"type": "text", "text": "a"},
        {"type": "image", "url": "data:x;base64,Y"},
    ]


# -- shared --------------------------------------------------------------------------------


def test_merge_text_joins_only_adjacent_pieces_of_one_message() -> None:
    actions = [Say("a", "1"), Say("a", "2"), Say("b", "3"), EndMessage(), Say("b", "4")]
    assert merge_text(actions) == [Say("a", "12"), Say("b", "3"), EndMessage(), Say("b", "4")]


def test_the_preamble_tells_the_earlier_conversation_bounded() -> None:
    assert preamble([]) is None
    history = [
        MessageItem(role="user", content=(InputText("remember blue"),)),
        FunctionCallItem(call_id="c", name="Bash", arguments="{}", status="completed"),
        FunctionCallItem(call_id="d", name="Bash", arguments="{}"),  # never ran
        FunctionCallOutputItem(call_id="c", output="ok"),
        MessageItem(role="assistant", content=(OutputText("Noted."),)),
    ]
    text = preamble(history)
    assert text is not None
    assert "user: remember blue" in text and "assistant: Noted." in text
    assert "(tool call Bash {})" in text and "(tool output: ok)" in text
    assert text.count("tool call") == 1
    long = [MessageItem(role="user", content=(InputText("x" * 3000),)) for _ in range(60)]
    bounded = preamble(long)
    assert bounded is not None and len(bounded) < MAX_PREAMBLE + 200


def test_data_urls_are_split() -> None:
    assert split_data_url("data:image/png;base64,QUJD") == ("image/png", "QUJD")
    assert split_data_url("data:;base64,QQ") == ("application/octet-stream", "QQ")
    assert split_data_url("data:text/plain,hello") is None
    assert split_data_url("https://x") is None


# -- the line channel, over a real child ----------------------------------------------------

CHILD = r"""
import sys
out = sys.stdout.buffer
out.write(b'{"a": 1}\n{"b": 2}\nnot json\n[1, 2]\n{"c":')
out.flush()
line = sys.stdin.buffer.readline()
out.write(b' 3}\n' + line)
out.flush()
if sys.argv[1] == "long":
    out.write(b"x" * 3000)
    out.flush()
    sys.stdin.buffer.readline()
"""


@pytest.mark.parametrize("mode", ["short", "long"])
async def test_the_line_channel_batches_skips_and_bounds(tmp_path: Path, mode: str) -> None:
    with trio.fail_after(10):
        async with open_process_manager(tmp_path, sweep=False) as manager:
            spec = ProcessSpec(
                argv=(sys.executable, "-c", CHILD, mode), env=base_environment(), pipes=True
            )
            process = await manager.spawn(spec)
            channel = LineChannel.of(process, name="child")
            assert LineChannel.of(process, name="child") is channel
            assert await channel.receive_batch() == [{"a": 1}, {"b": 2}]
            await channel.send({"echo": "é"})
            batch: list[Any] = []
            while len(batch) < 2:
                batch += await channel.receive_batch()
            assert batch == [{"c": 3}, {"echo": "é"}]
            if mode == "long":
                channel._max_line = 1000  # a broken CLI's endless line
                with pytest.raises(HarnessError, match="longer than 1000 bytes"):
                    await channel.receive_batch()
                await channel.send({})
            else:
                with pytest.raises(ChannelClosed):
                    await channel.receive_batch()
            await process.exited.wait()
            with pytest.raises(HarnessError, match="stopped reading"):
                await channel.send({"late": True})
            await channel.aclose()
