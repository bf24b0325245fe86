"""The real Claude Code CLI against FakeAnthropic, offline.

These pin down the facts the claude-code harness is built on (docs/harnesses-native.md):
what `-p` streams, which approval path sees which tool call, resume, and interrupt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.testing import FakeAnthropic, FakeToolUse, FakeTurn
from tests.claude_driver import (
    ClaudeSession,
    claude_env,
    claude_print,
    of_type,
    open_claude_session,
    tool_results,
)
from tests.native_helpers import claude_binary, open_process, require

CLAUDE = claude_binary()
pytestmark = require(CLAUDE, "claude", "claude")
TIMEOUT = 30

HOOK = """\
import json, sys
log, decision = sys.argv[1], sys.argv[2]
payload = json.load(sys.stdin)
with open(log, "a") as f:
    f.write(json.dumps(payload) + "\\n")
event = payload["hook_event_name"]
if event == "PreToolUse":
    output = {"hookEventName": event, "permissionDecision": decision,
              "permissionDecisionReason": f"the hook says {decision}"}
else:
    output = {"hookEventName": event, "decision": {"behavior": decision}}
    if decision == "deny":
        output["decision"]["message"] = "the hook says deny"
print(json.dumps({"hookSpecificOutput": output}))
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


async def print_over(
    fake: FakeAnthropic, tmp_path: Path, workdir: Path, prompt: str, *args: str
) -> tuple[int, list[dict[str, Any]]]:
    """``claude -p PROMPT ARGS`` in ``workdir`` against ``fake`` (served on loopback)."""
    assert CLAUDE is not None
    async with fake.serve() as base_url:
        env = claude_env(base_url, tmp_path)
        return await claude_print(CLAUDE, prompt, *args, cwd=workdir, env=env)


@asynccontextmanager
async def session_over(
    fake: FakeAnthropic, tmp_path: Path, workdir: Path
) -> AsyncIterator[ClaudeSession]:
    """A stream-json ``claude`` session in ``workdir`` against ``fake`` (on loopback)."""
    assert CLAUDE is not None
    async with fake.serve() as base_url:
        env = claude_env(base_url, tmp_path)
        async with open_claude_session(
            CLAUDE, cwd=workdir, env=env, stderr_to=tmp_path / "stderr"
        ) as claude:
            yield claude


def command_hook(tmp_path: Path, event: str, decision: str) -> tuple[Path, Path]:
    """A `--settings` file with a command hook for `event`; returns it and the hook's log."""
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    log = tmp_path / f"{event}.jsonl"
    hook = {"type": "command", "command": f"{sys.executable} {script} {log} {decision}"}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {event: [{"matcher": "*", "hooks": [hook]}]}}))
    return settings, log


def hook_calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def result_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    [result] = of_type(messages, "result")
    return result


async def test_print_streams_a_scripted_text_answer(tmp_path: Path, workdir: Path) -> None:
    fake = FakeAnthropic([FakeTurn("Hello from the fake model.", chunk_size=5)])
    with trio.fail_after(TIMEOUT):
        code, lines = await print_over(
            fake, tmp_path, workdir, "Say hello", "--include-partial-messages"
        )
    assert code == 0
    init = lines[0]
    assert (init["type"], init["subtype"]) == ("system", "init")
    assert init["cwd"] == str(workdir)
    assert "Bash" in init["tools"]
    assert init["permissionMode"] == "default"
    deltas = [
        m["event"]["delta"]["text"]
        for m in of_type(lines, "stream_event")
        if m["event"]["type"] == "content_block_delta"
    ]
    assert deltas == ["Hello", " from", " the ", "fake ", "model", "."]
    [assistant] = of_type(lines, "assistant")
    assert assistant["message"]["content"] == [
        {"type": "text", "text": "Hello from the fake model."}
    ]
    result = result_of(lines)
    assert result["subtype"] == "success"
    assert result["is_error"] is False
    assert result["result"] == "Hello from the fake model."
    assert result["session_id"] == init["session_id"]
    [request] = fake.requests
    assert request["stream"] is True
    assert request["messages"][0]["content"][-1] == {"type": "text", "text": "Say hello"}


async def test_pretooluse_command_hook_sees_even_read_only_commands(
    tmp_path: Path, workdir: Path
) -> None:
    fake = FakeAnthropic()
    fake.reply_shell("echo hi-from-bash")  # read-only: Claude Code would not ask anyone
    fake.reply_text("It printed hi.")
    settings, log = command_hook(tmp_path, "PreToolUse", "allow")
    with trio.fail_after(TIMEOUT):
        code, lines = await print_over(
            fake, tmp_path, workdir, "run it", "--settings", str(settings)
        )
    assert code == 0
    [call] = hook_calls(log)
    assert call["hook_event_name"] == "PreToolUse"
    assert call["tool_name"] == "Bash"
    assert call["tool_input"] == {"command": "echo hi-from-bash"}
    assert call["tool_use_id"] == "toolu_fake01"
    assert call["cwd"] == str(workdir)
    [result] = fake.tool_results()
    assert (result.output, result.is_error) == ("hi-from-bash", False)
    assert result_of(lines)["result"] == "It printed hi."


async def test_pretooluse_deny_refuses_and_tells_the_model(tmp_path: Path, workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply_shell("touch refused.txt")
    fake.reply_text("Understood.")
    settings, log = command_hook(tmp_path, "PreToolUse", "deny")
    with trio.fail_after(TIMEOUT):
        code, lines = await print_over(
            fake, tmp_path, workdir, "run it", "--settings", str(settings)
        )
    assert code == 0
    assert len(hook_calls(log)) == 1
    assert not (workdir / "refused.txt").exists()
    [result] = fake.tool_results()
    assert result.is_error
    assert result.output == "PreToolUse:Bash hook error: the hook says deny"
    assert result_of(lines)["permission_denials"] == [
        {
            "tool_name": "Bash",
            "tool_use_id": "toolu_fake01",
            "tool_input": {"command": "touch refused.txt"},
        }
    ]


async def test_permission_request_hook_sees_only_what_claude_asks_about(
    tmp_path: Path, workdir: Path
) -> None:
    fake = FakeAnthropic()
    fake.reply_shell("echo read-only")
    fake.reply_shell("touch made.txt")
    fake.reply_text("Done.")
    settings, log = command_hook(tmp_path, "PermissionRequest", "allow")
    with trio.fail_after(TIMEOUT):
        code, _ = await print_over(fake, tmp_path, workdir, "run both", "--settings", str(settings))
    assert code == 0
    calls = hook_calls(log)
    # `echo` ran without asking: this path does not see every call
    assert [c["tool_input"] for c in calls] == [{"command": "touch made.txt"}]
    assert calls[0]["hook_event_name"] == "PermissionRequest"
    assert calls[0]["permission_suggestions"]
    assert (workdir / "made.txt").exists()
    assert [r.output for r in fake.tool_results()] == [
        "read-only",
        "(Bash completed with no output)",
    ]


async def test_permission_request_hook_deny(tmp_path: Path, workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply_shell("touch denied.txt")
    fake.reply_text("OK.")
    settings, _ = command_hook(tmp_path, "PermissionRequest", "deny")
    with trio.fail_after(TIMEOUT):
        await print_over(fake, tmp_path, workdir, "go", "--settings", str(settings))
    assert not (workdir / "denied.txt").exists()
    [result] = fake.tool_results()
    assert (result.output, result.is_error) == ("the hook says deny", True)


async def test_can_use_tool_asks_only_what_claude_would_ask(tmp_path: Path, workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply_shell("echo not-asked")
    fake.reply_shell("touch asked.txt")
    fake.reply_text("Fine.")
    asked: list[dict[str, Any]] = []

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"behavior": "deny", "message": "omnigent says no"}

    with trio.fail_after(TIMEOUT):
        async with session_over(fake, tmp_path, workdir) as claude:
            await claude.initialize()
            messages = await claude.turn("go", answer=answer)
    [request] = asked
    assert request["subtype"] == "can_use_tool"
    assert request["tool_name"] == "Bash"
    assert request["input"] == {"command": "touch asked.txt"}
    assert request["tool_use_id"] == "toolu_fake02"
    assert request["permission_suggestions"]
    assert not (workdir / "asked.txt").exists()
    results = tool_results(messages)
    assert [(r["content"], r["is_error"]) for r in results] == [
        ("not-asked", False),
        ("omnigent says no", True),
    ]


async def test_sdk_pretooluse_callback_sees_every_call_and_ask_defers(
    tmp_path: Path, workdir: Path
) -> None:
    """The recommended path: a PreToolUse hook callback registered at initialize."""
    fake = FakeAnthropic()
    fake.reply_shell("echo one")  # allowed by the hook
    fake.reply_shell("echo two")  # denied by the hook
    fake.reply_shell("echo three")  # "ask": Claude Code then sends can_use_tool
    fake.reply_text("All done.")
    decisions = iter(["allow", "deny", "ask"])
    requests: list[dict[str, Any]] = []

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        if request["subtype"] == "hook_callback":
            decision = next(decisions)
            output = {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": f"policy: {decision}",
            }
            return {"hookSpecificOutput": output}
        return {"behavior": "allow", "updatedInput": request["input"]}

    hooks = {"PreToolUse": [{"matcher": None, "hookCallbackIds": ["omnigent_pre_tool_use"]}]}
    with trio.fail_after(TIMEOUT):
        async with session_over(fake, tmp_path, workdir) as claude:
            await claude.initialize(hooks)
            messages = await claude.turn("go", answer=answer)
    assert [(r["subtype"], r.get("callback_id")) for r in requests] == [
        ("hook_callback", "omnigent_pre_tool_use"),
        ("hook_callback", "omnigent_pre_tool_use"),
        ("hook_callback", "omnigent_pre_tool_use"),
        ("can_use_tool", None),
    ]
    hook_input = requests[0]["input"]
    assert hook_input["hook_event_name"] == "PreToolUse"
    assert hook_input["tool_input"] == {"command": "echo one"}
    assert hook_input["tool_use_id"] == requests[0]["tool_use_id"] == "toolu_fake01"
    assert requests[3]["decision_reason"] == "policy: ask"
    assert requests[3]["decision_reason_hook_event"] == "PreToolUse"
    assert [(r["content"], r["is_error"]) for r in tool_results(messages)] == [
        ("one", False),
        ("PreToolUse:Bash hook error: policy: deny", True),
        ("three", False),
    ]
    assert result_of(messages)["result"] == "All done."


async def test_ask_user_question_is_answered_through_can_use_tool(
    tmp_path: Path, workdir: Path
) -> None:
    question = {
        "question": "Which color?",
        "header": "Color",
        "options": [
            {"label": "Red", "description": "warm"},
            {"label": "Blue", "description": "cool"},
        ],
        "multiSelect": False,
    }
    fake = FakeAnthropic()
    fake.reply(FakeTurn(tools=(FakeToolUse("AskUserQuestion", {"questions": [question]}),)))
    fake.reply_text("Blue it is.")
    asked: list[dict[str, Any]] = []

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        answers = {"Which color?": "Blue"}
        return {"behavior": "allow", "updatedInput": {**request["input"], "answers": answers}}

    with trio.fail_after(TIMEOUT):
        async with session_over(fake, tmp_path, workdir) as claude:
            await claude.initialize()
            await claude.turn("ask me", answer=answer)
    [request] = asked
    assert request["tool_name"] == "AskUserQuestion"
    assert request["requires_user_interaction"] is True
    assert request["input"] == {"questions": [question]}
    [result] = fake.tool_results()
    assert '"Which color?"="Blue"' in result.output


async def test_resume_continues_the_conversation(tmp_path: Path, workdir: Path) -> None:
    assert CLAUDE is not None
    fake = FakeAnthropic([FakeTurn("I will remember 42."), FakeTurn("It was 42.")])
    session_id = str(uuid.uuid4())
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as base_url:
            env = claude_env(base_url, tmp_path)
            code, first = await claude_print(
                CLAUDE, "remember 42", "--session-id", session_id, cwd=workdir, env=env
            )
            assert code == 0
            code, second = await claude_print(
                CLAUDE, "which number?", "--resume", session_id, cwd=workdir, env=env
            )
            assert code == 0
            code, unknown = await claude_print(
                CLAUDE, "hello?", "--resume", str(uuid.uuid4()), cwd=workdir, env=env
            )
    assert result_of(first)["session_id"] == session_id
    assert result_of(second)["session_id"] == session_id  # the same conversation, not a fork
    assert result_of(second)["result"] == "It was 42."
    history = fake.requests[1]["messages"]
    assistant = [m for m in history if m["role"] == "assistant"]
    assert assistant == [
        {"role": "assistant", "content": [{"type": "text", "text": "I will remember 42."}]}
    ]
    assert history[-1]["content"][-1]["text"] == "which number?"
    assert code == 1
    assert result_of(unknown)["subtype"] == "error_during_execution"
    assert "No conversation found" in result_of(unknown)["errors"][0]
    assert len(fake.requests) == 2  # the unknown session never reached the model


async def test_sigint_ends_a_print_turn(tmp_path: Path, workdir: Path) -> None:
    assert CLAUDE is not None
    fake = FakeAnthropic([FakeTurn("thinking…", stall=True)])
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as base_url:
            env = claude_env(base_url, tmp_path)
            command = [str(CLAUDE), "-p", "go", "--output-format", "stream-json", "--verbose"]
            async with open_process(
                command, cwd=workdir, env=env, stderr_to=tmp_path / "stderr"
            ) as process:
                assert process.stdin is not None
                assert process.stdout is not None
                # -p also reads stdin: an open, silent pipe costs a 3 s wait
                await process.stdin.aclose()
                out = b""
                while b'"type":"assistant"' not in out:  # mid-turn: the text was streamed
                    chunk = await process.stdout.receive_some(65536)
                    assert chunk, out
                    out += chunk
                process.send_signal(signal.SIGINT)
                with trio.fail_after(5):
                    while chunk := await process.stdout.receive_some(65536):
                        out += chunk
                    assert await process.wait() == 0
    lines = [json.loads(line) for line in out.splitlines()]
    interrupted = [{"type": "text", "text": "[Request interrupted by user]"}]
    assert [m["message"]["content"] for m in of_type(lines, "user")] == [interrupted], lines
    # Usually a `result` follows; under load the process has exited without one
    # (1 run in 40): the process exit, not a result, is what marks the end.
    for result in of_type(lines, "result"):
        assert result["subtype"] == "error_during_execution"
        assert result["terminal_reason"] == "aborted_streaming"
        assert result["is_error"] is True


async def test_control_interrupt_ends_the_turn_and_the_process_stays(
    tmp_path: Path, workdir: Path
) -> None:
    fake = FakeAnthropic([FakeTurn("partial answer", stall=True), FakeTurn("second turn")])
    interrupts: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with session_over(fake, tmp_path, workdir) as claude:
            await claude.initialize()

            async def interrupt_on_text(message: dict[str, Any]) -> None:
                if message["type"] == "assistant" and not interrupts:
                    interrupts.append(await claude.control({"subtype": "interrupt"}))

            started = trio.current_time()
            first = await claude.turn("one", watch=interrupt_on_text)
            took = trio.current_time() - started
            second = await claude.turn("two")
    [request_id] = interrupts
    [ack] = [m for m in first if m["type"] == "control_response"]
    assert ack["response"]["request_id"] == request_id
    assert ack["response"]["subtype"] == "success"
    result = result_of(first)
    assert result["subtype"] == "error_during_execution"
    assert result["terminal_reason"] == "aborted_streaming"
    assert took < 5
    interrupted = [m["message"]["content"] for m in of_type(first, "user")]
    assert interrupted == [[{"type": "text", "text": "[Request interrupted by user]"}]]
    assert result_of(second)["result"] == "second turn"
    assert result_of(second)["session_id"] == result["session_id"]


async def test_interrupt_withdraws_a_pending_hook_callback(tmp_path: Path, workdir: Path) -> None:
    assert CLAUDE is not None
    fake = FakeAnthropic()
    fake.reply_shell("touch never.txt")
    pending: str | None = None

    hooks = {"PreToolUse": [{"matcher": None, "hookCallbackIds": ["pre"]}]}
    with trio.fail_after(TIMEOUT):
        async with session_over(fake, tmp_path, workdir) as claude:
            await claude.initialize(hooks)
            user = {"role": "user", "content": "go"}
            await claude.send({"type": "user", "message": user, "parent_tool_use_id": None})
            seen: list[dict[str, Any]] = []
            while True:  # the hook callback is left unanswered, as a person thinks
                message = await claude.receive()
                seen.append(message)
                if message["type"] == "control_request" and pending is None:
                    pending = message["request_id"]
                    await claude.control({"subtype": "interrupt"})
                if message["type"] == "result":
                    break
    cancels = [m for m in seen if m["type"] == "control_cancel_request"]
    assert cancels == [{"type": "control_cancel_request", "request_id": pending}]
    assert result_of(seen)["terminal_reason"] == "aborted_tools"
    assert not (workdir / "never.txt").exists()


def test_bypass_permissions_is_refused_as_root_without_is_sandbox(
    tmp_path: Path, workdir: Path
) -> None:
    assert CLAUDE is not None
    if os.geteuid() != 0:
        pytest.skip("the root check only applies to root")
    env = claude_env("http://127.0.0.1:9", tmp_path)
    done = subprocess.run(
        [str(CLAUDE), "-p", "x", "--dangerously-skip-permissions"],
        cwd=workdir,
        env=env,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 1
    assert b"cannot be used with root/sudo privileges" in done.stderr + done.stdout
