"""The claude-code harness end to end: a runtime, the real Claude Code CLI, FakeAnthropic.

What the harness promises (docs/harnesses.md, "Claude Code"): text relayed; every
tool call through omnigent's policies (DENY refuses without asking, ALLOW runs without
asking, ASK asks); what Claude Code itself asks about as an elicitation; later turns
— also after a restart — continuing the same conversation; interrupt through the
CLI's own interrupt (the group killed after 3 s if it does not stop); no process left
after stop, delete or shutdown.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.model import (
    ElicitationRequest,
    ElicitationResolved,
    OutputTextDelta,
    ResponseFailed,
)
from omnigent.testing import FakeAnthropic, FakeShell, FakeToolUse, FakeTurn, collect_turn

from .external_helpers import alive
from .native_helpers import claude_binary, require
from .native_session_helpers import (
    CLAUDE_MODEL,
    accept_all,
    asked,
    calls,
    decline_all,
    native_processes,
    native_spec,
    outputs,
    private_home,
    process_of,
    said,
    statuses,
    turn,
    wait_dead,
)

pytestmark = require(claude_binary(), "claude", "claude")
TIMEOUT = 60
HARNESS = "claude-code"

__all__ = ["private_home"]


def user_texts(request: dict[str, Any]) -> list[str]:
    """Every text the model request carries from the user, oldest first."""
    texts = []
    for message in request["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts += [b["text"] for b in blocks if b.get("type") == "text"]
    # Claude Code adds its own context (the environment, reminders) as user text.
    return [t for t in texts if not t.startswith("<system-reminder>")]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


async def session(rt: omnigent.Runtime, url: str, workdir: Path, **extra: Any) -> str:
    agent = await rt.create_agent(native_spec(HARNESS, url, cwd=workdir, **extra))
    return (await rt.create_session(agent.id)).id


async def test_a_turn_is_relayed_as_omnigent_events(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply_text("Hello from Claude Code, streamed in pieces.", chunk_size=6)
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "hi")
            assert statuses(events) == ["running", "launching", "running", "idle"]
            assert said(events) == "Hello from Claude Code, streamed in pieces."
            assert len([e for e in events if isinstance(e, OutputTextDelta)]) >= 1
            request = fake.requests[0]
            assert request["model"] == CLAUDE_MODEL
            assert "You are a careful coding agent." in json.dumps(request["system"])
            assert user_texts(request)[-1] == "hi"
            snapshot = await rt.get_session(sid)
            assert snapshot.harness == HARNESS and snapshot.status == "idle"
            # The model's usage, as Claude Code streamed it on (cache reads and writes
            # count as input).
            (reported,) = fake.usages
            usage = snapshot.usage
            assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (
                1,
                reported["input_tokens"]
                + reported["cache_read_input_tokens"]
                + reported["cache_creation_input_tokens"],
                reported["output_tokens"],
            )


async def test_a_command_claude_code_asks_about_is_approved_on_the_omnigent_stream(
    workdir: Path,
) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn("Creating it.", [FakeShell("touch made-by-claude.txt && pwd")]))
    fake.reply_text("Done.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "make a file", accept_all)
            [request] = asked(events)
            assert request.params.phase == "permission_request"
            assert request.params.tool_name == "Bash"
            assert request.params.tool_input == {"command": "touch made-by-claude.txt && pwd"}
            assert "waiting" in statuses(events) and statuses(events)[-1] == "idle"
            # It ran in the session's directory, and its output reached the model.
            assert (workdir / "made-by-claude.txt").exists()
            [result] = fake.tool_results()
            assert not result.is_error and str(workdir) in result.output
            [call] = calls(events)
            assert call.name == "Bash" and str(workdir) in outputs(events)[0]
            assert said(events) == "Creating it.Done."


async def test_a_declined_command_does_not_run_and_the_model_is_told(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn(None, [FakeShell("touch declined.txt")]))
    fake.reply_text("Understood.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "make a file", decline_all)
            assert len(asked(events)) == 1 and statuses(events)[-1] == "idle"
            assert not (workdir / "declined.txt").exists()
            [result] = fake.tool_results()
            assert result.is_error and "declined" in result.output
            assert outputs(events)[0].startswith("Error:")


async def test_a_deny_policy_refuses_without_asking(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn(None, [FakeShell("echo never")]))
    fake.reply_text("Refused, then.")
    # A pattern: Claude Code still offers Bash, and the hook refuses each call.
    policy = {"name": "no_shell", "type": "deny_tools", "tools": ["B?sh"], "reason": "no shell"}
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=[policy])
            events = await turn(rt, sid, "run echo")  # any elicitation fails the test
            assert statuses(events)[-1] == "idle"
            [result] = fake.tool_results()
            assert result.is_error and "no shell" in result.output
            assert "never" not in result.output


async def test_a_tool_a_deny_policy_names_is_not_offered_at_all(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply_text("No shell here.")
    policy = {"name": "no_shell", "type": "deny_tools", "tools": ["Bash"]}
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=[policy])
            assert statuses(await turn(rt, sid, "hi"))[-1] == "idle"
    offered = [tool["name"] for tool in fake.requests[0]["tools"]]
    assert "Bash" not in offered and "Read" in offered


async def test_an_allow_policy_runs_what_claude_code_would_ask_about(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn(None, [FakeShell("touch allowed.txt")]))
    fake.reply_text("Made.")
    policy = {"name": "shell_ok", "type": "allow_tools", "tools": ["Bash"]}
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=[policy])
            events = await turn(rt, sid, "make a file")  # nobody is asked
            assert statuses(events)[-1] == "idle"
            assert (workdir / "allowed.txt").exists()


async def test_an_ask_policy_sees_even_what_claude_code_runs_unasked(workdir: Path) -> None:
    # `echo` is read-only: Claude Code's default mode runs it without asking anyone.
    fake = FakeAnthropic()
    fake.reply(FakeTurn(None, [FakeShell("echo seen-by-omnigent")]))
    fake.reply_text("Echoed.")
    policy = {"name": "ask_shell", "type": "ask_tools", "tools": ["Bash"], "reason": "shell?"}
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=[policy])
            events = await turn(rt, sid, "echo it", accept_all)
            [request] = asked(events)
            assert request.params.phase == "tool_call"
            assert request.params.policy_name == "ask_shell"
            assert request.params.message == "ask_shell: shell?"
            assert fake.tool_results()[0].output.startswith("seen-by-omnigent")


async def test_ask_user_question_is_an_elicitation_and_the_answers_reach_the_model(
    workdir: Path,
) -> None:
    questions = [
        {
            "question": "Which color?",
            "header": "Color",
            "options": [
                {"label": "Blue", "description": "the sky"},
                {"label": "Red", "description": "a rose"},
            ],
            "multiSelect": False,
        }
    ]
    fake = FakeAnthropic()
    fake.reply(FakeTurn(None, [FakeToolUse("AskUserQuestion", {"questions": questions})]))
    fake.reply_text("Blue it is.")

    async def answer(request: ElicitationRequest) -> tuple[str, Any]:
        assert request.params.phase == "ask_user_question"
        assert request.params.ask_user_question == {"questions": questions}
        return "accept", {"Which color?": "Blue"}

    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "ask me", answer)
            assert len(asked(events)) == 1 and statuses(events)[-1] == "idle"
            [result] = fake.tool_results()
            assert '"Which color?"="Blue"' in result.output


async def test_a_second_turn_continues_the_conversation_in_the_same_process(
    workdir: Path,
) -> None:
    fake = FakeAnthropic()
    fake.reply_text("First answer.")
    fake.reply_text("Second answer.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            await turn(rt, sid, "first question")
            pid = process_of(rt, HARNESS, sid).pid
            second = await turn(rt, sid, "second question")
            assert "launching" not in statuses(second)
            assert process_of(rt, HARNESS, sid).pid == pid
            assert said(second) == "Second answer."
            assert user_texts(fake.requests[1]) == ["first question", "second question"]
            assistant = [m for m in fake.requests[1]["messages"] if m["role"] == "assistant"]
            assert "First answer." in json.dumps(assistant)


async def test_a_restart_continues_the_conversation_with_resume(
    tmp_path: Path, workdir: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'omnigent.db'}"
    fake = FakeAnthropic()
    fake.reply_text("Before the restart.")
    fake.reply_text("After the restart.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url:
            async with omnigent.open_runtime(db) as rt:
                sid = await session(rt, url, workdir)
                await turn(rt, sid, "remember blue")
                pid = process_of(rt, HARNESS, sid).pid
            assert not alive(pid)  # shutdown ended it
            async with omnigent.open_runtime(db) as rt:
                events = await turn(rt, sid, "what did I say?")
                assert "launching" in statuses(events) and said(events) == "After the restart."
                argv = process_of(rt, HARNESS, sid).spec.argv
                assert "--resume" in argv
            assert user_texts(fake.requests[1]) == ["remember blue", "what did I say?"]


async def test_a_conversation_claude_code_lost_starts_afresh_with_the_history(
    tmp_path: Path, workdir: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'omnigent.db'}"
    fake = FakeAnthropic()
    fake.reply_text("Noted.")
    fake.reply_text("You said blue.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url:
            async with omnigent.open_runtime(db, home=tmp_path / "home") as rt:
                sid = await session(rt, url, workdir)
                await turn(rt, sid, "remember blue")
            # Claude Code's transcripts are gone (a wiped config directory).
            for transcript in (tmp_path / "home").rglob("*.jsonl"):
                transcript.unlink()
            async with omnigent.open_runtime(db, home=tmp_path / "home") as rt:
                events = await turn(rt, sid, "what did I say?")
                assert said(events) == "You said blue."
            texts = user_texts(fake.requests[1])
            assert "Earlier in this conversation" in texts[0]
            assert "user: remember blue" in texts[0] and "assistant: Noted." in texts[0]
            assert texts[-1] == "what did I say?"


async def test_a_new_model_override_switches_the_running_process(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply_text("one")
    fake.reply_text("ok")  # Claude Code's set_model probes the new model (max_tokens 1)
    fake.reply_text("two")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            await turn(rt, sid, "a")
            pid = process_of(rt, HARNESS, sid).pid
            await rt.update_session(sid, model_override="claude-haiku-4-5")
            assert said(await turn(rt, sid, "b")) == "two"
            assert process_of(rt, HARNESS, sid).pid == pid
            models = [r["model"] for r in fake.requests]
            assert models == [CLAUDE_MODEL, "claude-haiku-4-5", "claude-haiku-4-5"]


async def test_interrupt_mid_stream_cancels_and_the_process_serves_the_next_turn(
    workdir: Path,
) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn("Thinking very hard", stall=True))
    fake.reply_text("Fresh start.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "think")
                async for event in events:
                    if isinstance(event, OutputTextDelta):
                        break
                pid = process_of(rt, HARNESS, sid).pid
                started = trio.current_time()
                assert await rt.interrupt(sid)
                rest = await collect_turn(events)
            assert statuses(rest)[-1] == "cancelled"
            assert trio.current_time() - started < 5
            assert alive(pid)  # the CLI's own interrupt: the process stays
            after = await turn(rt, sid, "again")
            assert said(after) == "Fresh start." and process_of(rt, HARNESS, sid).pid == pid


async def test_interrupt_kills_a_running_command(workdir: Path) -> None:
    script = "import os,time; open('cmd.pid','w').write(str(os.getpid())); time.sleep(60)"
    fake = FakeAnthropic()
    fake.reply(FakeTurn(None, [FakeShell(f'python3 -c "{script}"')]))
    fake.reply_text("unused")
    policy = {"name": "shell_ok", "type": "allow_tools", "tools": ["Bash"]}
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=[policy])
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "sleep")
                pid_file = workdir / "cmd.pid"
                while not pid_file.exists() or not pid_file.read_text():
                    await trio.sleep(0.02)
                command = int(pid_file.read_text())
                started = trio.current_time()
                assert await rt.interrupt(sid)
                rest = await collect_turn(events)
            assert statuses(rest)[-1] == "cancelled" and trio.current_time() - started < 5
            await wait_dead([command], timeout=5)


async def test_an_interrupt_the_cli_ignores_kills_its_group_after_3_seconds(
    workdir: Path,
) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn("Stuck", stall=True))
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "hang")
                async for event in events:
                    if isinstance(event, OutputTextDelta):
                        break
                pid = process_of(rt, HARNESS, sid).pid
                os.kill(pid, signal.SIGSTOP)  # it can no longer read its interrupt
                started = trio.current_time()
                assert await rt.interrupt(sid)
                rest = await collect_turn(events)
            took = trio.current_time() - started
            assert statuses(rest)[-1] == "cancelled" and 2.5 < took < 5
            await wait_dead([pid], timeout=2)
            assert native_processes(rt) == []


async def test_interrupt_withdraws_an_open_approval(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn(None, [FakeShell("touch never.txt")]))
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "touch")
                async for event in events:
                    if isinstance(event, ElicitationRequest):
                        break
                assert await rt.interrupt(sid)
                rest = await collect_turn(events)
            assert any(isinstance(e, ElicitationResolved) for e in rest)
            assert statuses(rest)[-1] == "cancelled"
            assert (await rt.get_session(sid)).pending_elicitations == ()
            assert not (workdir / "never.txt").exists()


async def test_a_crash_mid_turn_fails_the_turn_and_the_next_one_resumes(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply_text("Remembered.")
    fake.reply(FakeTurn("About to", stall=True))
    fake.reply_text("Back again.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            await turn(rt, sid, "remember")
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "crash")
                async for event in events:
                    if isinstance(event, OutputTextDelta):
                        break
                os.killpg(process_of(rt, HARNESS, sid).pid, signal.SIGKILL)
                rest = await collect_turn(events)
            failure = next(e for e in rest if isinstance(e, ResponseFailed))
            assert "SIGKILL" in failure.error.message
            again = await turn(rt, sid, "still there?")
            assert said(again) == "Back again." and "launching" in statuses(again)
            assert "remember" in user_texts(fake.requests[-1])


async def test_stop_delete_and_shutdown_leave_no_claude_process(workdir: Path) -> None:
    fake = FakeAnthropic()
    fake.reply(FakeTurn("Working", stall=True))
    fake.reply_text("idle one")
    fake.reply_text("idle two")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url:
            async with omnigent.open_runtime() as rt:
                agent = await rt.create_agent(native_spec(HARNESS, url, cwd=workdir))
                stopped, deleted, kept = [(await rt.create_session(agent.id)).id for _ in range(3)]
                # stop, mid-turn
                async with rt.subscribe(stopped) as events:
                    await rt.send_message(stopped, "work")
                    async for event in events:
                        if isinstance(event, OutputTextDelta):
                            break
                    pid = process_of(rt, HARNESS, stopped).pid
                    await rt.stop_session(stopped)
                    assert statuses(await collect_turn(events))[-1] == "cancelled"
                await wait_dead([pid])
                # delete, idle with its process alive
                await turn(rt, deleted, "hello")
                pid = process_of(rt, HARNESS, deleted).pid
                await rt.delete_session(deleted)
                await wait_dead([pid])
                # shutdown, idle with its process alive
                await turn(rt, kept, "hello")
                pid = process_of(rt, HARNESS, kept).pid
            assert not alive(pid)


async def test_without_a_key_the_turn_fails_saying_how_to_give_one(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    fake = FakeAnthropic()
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            spec = native_spec(HARNESS, url, cwd=workdir)
            del spec["executor"]["config"]["api_key"]
            sid = (await rt.create_session((await rt.create_agent(spec)).id)).id
            events = await turn(rt, sid, "hi")
            failure = next(e for e in events if isinstance(e, ResponseFailed))
            assert "ANTHROPIC_API_KEY or executor.config.api_key" in failure.error.message
            assert fake.requests == []


async def test_the_provider_configuration_gives_the_endpoint_and_its_key(
    workdir: Path, omnigent_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither the spec nor the environment names an endpoint or a key: the provider of
    ``config.yaml`` that serves claude-code does (issue 14), its key read from the
    variable it names (without a key the turn fails: see the test above)."""
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEAM_ANTHROPIC_KEY", "sk-omnigent-fake")
    fake = FakeAnthropic()
    fake.reply_text("Hello through the provider.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url:
            provider = {
                "name": "team",
                "kind": "key",
                "family": "anthropic",
                "base_url": url,
                "api_key_env": "TEAM_ANTHROPIC_KEY",
                "harnesses": [HARNESS],
            }
            (omnigent_home / "config.yaml").write_text(json.dumps({"providers": [provider]}))
            async with omnigent.open_runtime() as rt:
                spec = native_spec(HARNESS, url, cwd=workdir)
                del spec["executor"]["config"]["api_key"], spec["executor"]["config"]["base_url"]
                sid = (await rt.create_session((await rt.create_agent(spec)).id)).id
                events = await turn(rt, sid, "hi")
    assert said(events) == "Hello through the provider."
    assert statuses(events)[-1] == "idle"
    assert len(fake.requests) == 1
