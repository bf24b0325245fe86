"""The codex harness end to end: a runtime, the real ``codex app-server``, FakeResponses.

What the harness promises (docs/harnesses.md, "Codex"): text relayed; every command
and file change through omnigent's policies (DENY / ALLOW without asking, ASK — or no
opinion — as a ``codex_command_approval`` / ``codex_file_change_approval``
elicitation); later turns — also after a restart — on the same thread; interrupt
through ``turn/interrupt``; no process left after stop, delete or shutdown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.model import ElicitationRequest, ElicitationResolved, OutputTextDelta
from omnigent.testing import FakeResponses, FakeShell, FakeToolUse, FakeTurn, collect_turn

from .external_helpers import alive
from .native_helpers import codex_binary, require
from .native_session_helpers import (
    CODEX_MODEL,
    accept_all,
    asked,
    calls,
    decline_all,
    native_spec,
    outputs,
    private_home,
    process_of,
    said,
    statuses,
    turn,
    wait_dead,
)

pytestmark = require(codex_binary(), "codex", "codex")
TIMEOUT = 60
HARNESS = "codex"
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi there\n*** End Patch\n"

__all__ = ["private_home"]


def user_texts(request: dict[str, Any]) -> list[str]:
    """The texts of the user messages a Responses request carries, oldest first."""
    texts = []
    for item in request["input"]:
        if item.get("role") != "user":
            continue
        content = item["content"]
        blocks = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
        texts += [b["text"] for b in blocks if b.get("type") == "input_text"]
    # Codex adds its own context (<environment_context>, …) as user text.
    return [t for t in texts if not t.startswith("<")]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


async def session(rt: omnigent.Runtime, url: str, workdir: Path, **extra: Any) -> str:
    agent = await rt.create_agent(native_spec("codex", url, cwd=workdir, **extra))
    return (await rt.create_session(agent.id)).id


async def test_a_turn_is_relayed_as_omnigent_events(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply_text("Hello from Codex, streamed in pieces.", chunk_size=5)
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "hi")
            assert statuses(events) == ["running", "launching", "running", "idle"]
            assert said(events) == "Hello from Codex, streamed in pieces."
            request = fake.requests[0]
            assert request["model"] == CODEX_MODEL
            assert "You are a careful coding agent." in json.dumps(request["input"])
            assert user_texts(request) == ["hi"]
            snapshot = await rt.get_session(sid)
            assert snapshot.harness == HARNESS
            # The model's usage, as Codex reported it (thread/tokenUsage/updated).
            (reported,) = fake.usages
            usage = snapshot.usage
            assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (
                1,
                reported["input_tokens"],
                reported["output_tokens"],
            )


async def test_a_command_is_approved_on_the_omnigent_stream(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply(FakeTurn("Creating it.", [FakeShell("touch made-by-codex.txt && pwd")]))
    fake.reply_text("Done.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "make a file", accept_all)
            [request] = asked(events)
            assert request.params.phase == "codex_command_approval"
            assert request.params.command is not None
            assert "touch made-by-codex.txt" in request.params.command
            assert request.params.tool_name == "exec_command"
            assert "waiting" in statuses(events) and statuses(events)[-1] == "idle"
            assert (workdir / "made-by-codex.txt").exists()
            [result] = fake.tool_results()
            assert str(workdir) in result.output
            assert [c.name for c in calls(events)] == ["exec_command"]
            assert str(workdir) in outputs(events)[0]


async def test_a_declined_command_does_not_run_and_the_model_is_told(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply(FakeTurn(None, [FakeShell("touch declined.txt")]))
    fake.reply_text("Understood.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "make a file", decline_all)
            assert len(asked(events)) == 1 and statuses(events)[-1] == "idle"
            assert not (workdir / "declined.txt").exists()
            [result] = fake.tool_results()
            assert "rejected" in result.output
            assert outputs(events)[0].startswith("Error:")


async def test_a_deny_policy_refuses_without_asking(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply(FakeTurn(None, [FakeShell("touch denied.txt")]))
    fake.reply_text("Refused.")
    policy = {"name": "no_shell", "type": "deny_tools", "tools": ["exec_command"]}
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=[policy])
            events = await turn(rt, sid, "make a file")  # any elicitation fails the test
            assert statuses(events)[-1] == "idle"
            assert not (workdir / "denied.txt").exists()
            assert "rejected" in fake.tool_results()[0].output


async def test_an_allow_policy_runs_without_asking(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply(FakeTurn(None, [FakeShell("touch allowed.txt")]))
    fake.reply_text("Made.")
    policy = {"name": "shell_ok", "type": "allow_tools", "tools": ["exec_command"]}
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=[policy])
            events = await turn(rt, sid, "make a file")
            assert statuses(events)[-1] == "idle"
            assert (workdir / "allowed.txt").exists()


async def test_an_ask_policy_asks_in_the_codex_phase(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply(FakeTurn(None, [FakeShell("echo hello-codex")]))
    fake.reply_text("Echoed.")
    policy = {"name": "ask_shell", "type": "ask_tools", "tools": ["exec_*"], "reason": "ok?"}
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=[policy])
            events = await turn(rt, sid, "echo", accept_all)
            [request] = asked(events)
            assert request.params.phase == "codex_command_approval"
            assert request.params.policy_name == "ask_shell"
            assert request.params.message == "ask_shell: ok?"
            assert "echo hello-codex" in (request.params.command or "")
            assert "hello-codex" in fake.tool_results()[0].output


async def test_a_file_change_is_approved_with_what_it_changes(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply(FakeTurn(None, [FakeToolUse("apply_patch", PATCH)]))
    fake.reply_text("Written.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "write hello.txt", accept_all)
            [request] = asked(events)
            assert request.params.phase == "codex_file_change_approval"
            assert request.params.tool_name == "apply_patch"
            [change] = (request.params.tool_input or {})["changes"]
            assert change["path"] == str(workdir / "hello.txt") and change["kind"] == "add"
            assert (workdir / "hello.txt").read_text() == "hi there\n"
            assert outputs(events) == [f"Applied:\nA {workdir / 'hello.txt'}"]


async def test_a_second_turn_continues_the_thread_in_the_same_process(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply_text("First answer.")
    fake.reply_text("Second answer.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            await turn(rt, sid, "first question")
            pid = process_of(rt, HARNESS, sid).pid
            second = await turn(rt, sid, "second question")
            assert "launching" not in statuses(second) and said(second) == "Second answer."
            assert process_of(rt, HARNESS, sid).pid == pid
            assert user_texts(fake.requests[1]) == ["first question", "second question"]
            assert "First answer." in json.dumps(fake.requests[1]["input"])


async def test_a_restart_resumes_the_thread(tmp_path: Path, workdir: Path) -> None:
    db = f"sqlite:///{tmp_path / 'omnigent.db'}"
    fake = FakeResponses()
    fake.reply_text("Before the restart.")
    fake.reply_text("After the restart.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url:
            async with omnigent.open_runtime(db) as rt:
                sid = await session(rt, url, workdir)
                await turn(rt, sid, "remember blue")
                pid = process_of(rt, HARNESS, sid).pid
            assert not alive(pid)
            async with omnigent.open_runtime(db) as rt:
                events = await turn(rt, sid, "what did I say?")
                assert "launching" in statuses(events) and said(events) == "After the restart."
            assert user_texts(fake.requests[1]) == ["remember blue", "what did I say?"]
            assert "Before the restart." in json.dumps(fake.requests[1]["input"])


async def test_interrupt_mid_stream_cancels_and_the_thread_goes_on(workdir: Path) -> None:
    fake = FakeResponses()
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
            assert statuses(rest)[-1] == "cancelled" and trio.current_time() - started < 5
            assert alive(pid)
            after = await turn(rt, sid, "again")
            assert said(after) == "Fresh start." and process_of(rt, HARNESS, sid).pid == pid


async def test_interrupt_withdraws_an_open_approval(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply(FakeTurn(None, [FakeShell("touch never.txt")]))
    fake.reply_text("Next turn.")
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
            assert not (workdir / "never.txt").exists()
            # What the interrupted turn left behind does not leak into the next one.
            after = await turn(rt, sid, "go on")
            assert said(after) == "Next turn." and asked(after) == []


async def test_stop_delete_and_shutdown_leave_no_codex_process(workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply(FakeTurn("Working", stall=True))
    fake.reply_text("idle one")
    fake.reply_text("idle two")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url:
            async with omnigent.open_runtime() as rt:
                agent = await rt.create_agent(native_spec("codex", url, cwd=workdir))
                stopped, deleted, kept = [(await rt.create_session(agent.id)).id for _ in range(3)]
                async with rt.subscribe(stopped) as events:
                    await rt.send_message(stopped, "work")
                    async for event in events:
                        if isinstance(event, OutputTextDelta):
                            break
                    pid = process_of(rt, HARNESS, stopped).pid
                    await rt.stop_session(stopped)
                    assert statuses(await collect_turn(events))[-1] == "cancelled"
                await wait_dead([pid])
                await turn(rt, deleted, "hello")
                pid = process_of(rt, HARNESS, deleted).pid
                await rt.delete_session(deleted)
                await wait_dead([pid])
                await turn(rt, kept, "hello")
                pid = process_of(rt, HARNESS, kept).pid
            assert not alive(pid)
