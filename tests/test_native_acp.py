"""The native harnesses driven over ACP: an editor's prompt runs Claude Code or Codex in
the editor's directory, their approvals arrive as ``session/request_permission``, and
``session/cancel`` ends the turn ``cancelled``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.testing import FakeAnthropic, FakeResponses, FakeShell, FakeTurn

from .acp_helpers import open_acp
from .native_helpers import claude_binary, codex_binary
from .native_session_helpers import native_spec, private_home, process_of
from .test_acp import prompt_in_background, until

TIMEOUT = 60
HARNESSES = [
    pytest.param(
        "claude-code",
        marks=pytest.mark.skipif(claude_binary() is None, reason="claude is not installed"),
    ),
    pytest.param(
        "codex", marks=pytest.mark.skipif(codex_binary() is None, reason="codex is not installed")
    ),
]

__all__ = ["private_home"]


def fake_for(harness: str) -> FakeAnthropic | FakeResponses:
    return FakeAnthropic() if harness == "claude-code" else FakeResponses()


@pytest.mark.parametrize("harness", HARNESSES)
@pytest.mark.parametrize(("option", "ran"), [("allow_once", True), ("reject_once", False)])
async def test_an_editor_prompt_runs_the_cli_and_answers_its_approval(
    harness: str, option: str, ran: bool, tmp_path: Path
) -> None:
    fake = fake_for(harness)
    fake.reply(FakeTurn("On it.", [FakeShell("touch from-the-editor.txt")]))
    fake.reply_text("Done." if ran else "Not done.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            await rt.create_agent(native_spec(harness, url, name="native"))
            async with open_acp(rt, "native") as editor, trio.open_nursery() as nursery:
                sid = await editor.new_session(str(tmp_path))
                outcome = await prompt_in_background(editor, sid, nursery, "make a file")
                asked = await editor.next_request("session/request_permission")
                assert asked.params["sessionId"] == sid
                assert "touch from-the-editor.txt" in str(asked.params["toolCall"])
                asked.choose(option)
                await until(lambda: outcome)
            assert outcome == [{"stopReason": "end_turn"}]
            assert editor.text(sid) == "On it." + ("Done." if ran else "Not done.")
            assert (tmp_path / "from-the-editor.txt").exists() is ran
            tool_calls = editor.session_updates(sid, "tool_call")
            assert len(tool_calls) >= 1


@pytest.mark.parametrize("harness", HARNESSES)
async def test_an_editor_cancel_interrupts_the_cli(harness: str, tmp_path: Path) -> None:
    fake = fake_for(harness)
    fake.reply(FakeTurn("Thinking", stall=True))
    fake.reply_text("Again.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            await rt.create_agent(native_spec(harness, url, name="native"))
            async with open_acp(rt, "native") as editor, trio.open_nursery() as nursery:
                sid = await editor.new_session(str(tmp_path))
                outcome: list[Any] = await prompt_in_background(editor, sid, nursery, "think")
                await editor.wait_for_update(
                    lambda u: u["update"]["sessionUpdate"] == "agent_message_chunk"
                )
                pid = process_of(rt, harness, sid).pid
                started = trio.current_time()
                await editor.notify("session/cancel", {"sessionId": sid})
                await until(lambda: outcome)
                assert trio.current_time() - started < 5
                assert outcome == [{"stopReason": "cancelled"}]
                assert await editor.prompt(sid, "again") == {"stopReason": "end_turn"}
                assert process_of(rt, harness, sid).pid == pid
