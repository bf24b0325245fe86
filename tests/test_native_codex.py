"""The real Codex CLI (`codex app-server`) against FakeResponses, offline.

These pin down the facts the codex harness is built on (docs/harnesses-native.md):
the JSON-RPC handshake, approvals for every command and file change, interrupt, and
resuming a thread in a new process.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.testing import FakeResponses, FakeTurn
from tests.codex_driver import (
    CODEX_MODEL,
    CodexAppServer,
    CodexRpcError,
    items,
    open_codex_app_server,
)
from tests.native_helpers import codex_binary, group_alive, require

CODEX = codex_binary()
pytestmark = require(CODEX, "codex", "codex")
TIMEOUT = 30


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@contextlib.asynccontextmanager
async def codex_serving(
    fake: FakeResponses, tmp_path: Path, workdir: Path
) -> AsyncIterator[CodexAppServer]:
    """``fake`` on loopback, and a Codex app-server in ``workdir`` that uses it."""
    assert CODEX is not None
    async with (
        fake.serve() as base_url,
        open_codex_app_server(
            CODEX,
            base_url=base_url,
            home=tmp_path / "codex",
            cwd=workdir,
            stderr_to=tmp_path / "stderr",
        ) as codex,
    ):
        yield codex


def accept(decisions: list[str], seen: list[dict[str, Any]] | None = None) -> Any:
    """An approval answerer that gives ``decisions`` in order and records requests."""
    remaining = iter(decisions)

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        if seen is not None:
            seen.append(request)
        return {"decision": next(remaining)}

    return answer


async def test_a_turn_streams_the_scripted_text(tmp_path: Path, workdir: Path) -> None:
    assert CODEX is not None
    fake = FakeResponses([FakeTurn("Hello from the fake model.", chunk_size=6)])
    with trio.fail_after(TIMEOUT):
        async with codex_serving(fake, tmp_path, workdir) as codex:
            thread_id = await codex.start_thread(workdir)
            turn, seen = await codex.turn(thread_id, "Say hello")
    assert turn["status"] == "completed"
    deltas = [m["params"]["delta"] for m in seen if m["method"] == "item/agentMessage/delta"]
    assert "".join(deltas) == "Hello from the fake model."
    assert len(deltas) == 5
    [message] = items(seen, "item/completed", "agentMessage")
    assert message["text"] == "Hello from the fake model."
    assert [m["method"] for m in seen if m["method"].startswith("turn/")] == [
        "turn/started",
        "turn/completed",
    ]
    [request] = fake.requests
    assert request["model"] == CODEX_MODEL
    assert request["stream"] is True
    assert "exec_command" in {t.get("name") for t in request["tools"]}
    warnings = [m for m in seen if m["method"] == "warning"]
    assert warnings == []  # a model in Codex's catalog: no "metadata not found"


async def test_untrusted_asks_for_every_command_and_output_reaches_the_model(
    tmp_path: Path, workdir: Path
) -> None:
    fake = FakeResponses()
    fake.reply_shell("pwd")
    fake.reply_shell("ls")  # read-only commands are asked about too
    fake.reply_text("You are in the work directory.")
    asked: list[dict[str, Any]] = []
    with trio.fail_after(TIMEOUT):
        async with codex_serving(fake, tmp_path, workdir) as codex:
            thread_id = await codex.start_thread(workdir)
            turn, seen = await codex.turn(
                thread_id, "where am I?", answer=accept(["accept", "accept"], asked)
            )
    assert turn["status"] == "completed"
    assert [r["method"] for r in asked] == ["item/commandExecution/requestApproval"] * 2
    params = asked[0]["params"]
    assert params["threadId"] == thread_id
    assert params["turnId"] == turn["id"]
    assert params["command"] == "/bin/bash -lc pwd"
    assert params["cwd"] == str(workdir)
    assert params["itemId"] == "call_fake1"
    assert "accept" in params["availableDecisions"]
    [pwd, ls] = items(seen, "item/completed", "commandExecution")
    assert (pwd["status"], pwd["exitCode"], pwd["aggregatedOutput"]) == (
        "completed",
        0,
        f"{workdir}\n",
    )
    assert ls["status"] == "completed"
    results = fake.tool_results()
    assert [r.call_id for r in results] == ["call_fake1", "call_fake2"]
    assert f"Output:\n{workdir}\n" in results[0].output


async def test_declined_command_does_not_run_and_the_model_is_told(
    tmp_path: Path, workdir: Path
) -> None:
    fake = FakeResponses()
    fake.reply_shell("touch declined.txt")
    fake.reply_text("OK, I will not.")
    with trio.fail_after(TIMEOUT):
        async with codex_serving(fake, tmp_path, workdir) as codex:
            thread_id = await codex.start_thread(workdir)
            turn, seen = await codex.turn(thread_id, "touch it", answer=accept(["decline"]))
    assert turn["status"] == "completed"  # decline continues the turn; "cancel" would end it
    assert not (workdir / "declined.txt").exists()
    [item] = items(seen, "item/completed", "commandExecution")
    assert item["status"] == "declined"
    [result] = fake.tool_results()
    assert "rejected by user" in result.output


async def test_file_changes_ask_for_approval(tmp_path: Path, workdir: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi there\n*** End Patch\n"
    fake = FakeResponses()
    fake.reply_tool_use("apply_patch", patch)
    fake.reply_text("Written.")
    asked: list[dict[str, Any]] = []
    with trio.fail_after(TIMEOUT):
        async with codex_serving(fake, tmp_path, workdir) as codex:
            thread_id = await codex.start_thread(workdir)
            turn, seen = await codex.turn(thread_id, "write it", answer=accept(["accept"], asked))
    assert turn["status"] == "completed"
    [request] = asked
    assert request["method"] == "item/fileChange/requestApproval"
    assert request["params"]["itemId"] == "call_fake1"
    # the approval names no path: the paths are on the fileChange item started before it
    [started] = items(seen, "item/started", "fileChange")
    assert started["id"] == request["params"]["itemId"]
    assert started["changes"] == [
        {"path": str(workdir / "hello.txt"), "kind": {"type": "add"}, "diff": "hi there\n"}
    ]
    assert (workdir / "hello.txt").read_text() == "hi there\n"
    [result] = fake.tool_results()
    assert "A hello.txt" in result.output


async def test_interrupt_ends_the_turn_and_the_thread_goes_on(
    tmp_path: Path, workdir: Path
) -> None:
    fake = FakeResponses([FakeTurn("partial", stall=True), FakeTurn("second turn")])
    with trio.fail_after(TIMEOUT):
        async with codex_serving(fake, tmp_path, workdir) as codex:
            thread_id = await codex.start_thread(workdir)
            acks: list[dict[str, Any]] = []

            async def interrupt_on_delta(message: dict[str, Any]) -> None:
                if message["method"] == "item/agentMessage/delta" and not acks:
                    params = {"threadId": thread_id, "turnId": message["params"]["turnId"]}
                    acks.append(await codex.request("turn/interrupt", params))

            started = trio.current_time()
            turn, _ = await codex.turn(thread_id, "one", watch=interrupt_on_delta)
            took = trio.current_time() - started
            second, _ = await codex.turn(thread_id, "two")
    assert acks == [{}]
    assert turn["status"] == "interrupted"
    assert took < 5
    assert second["status"] == "completed"


async def test_interrupt_kills_a_running_command(tmp_path: Path, workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply_shell("sleep 60")
    with trio.fail_after(TIMEOUT):
        async with codex_serving(fake, tmp_path, workdir) as codex:
            thread_id = await codex.start_thread(workdir)
            turn_ids: list[str] = []

            async def answer(request: dict[str, Any]) -> dict[str, Any]:
                turn_ids.append(request["params"]["turnId"])
                return {"decision": "accept"}

            async def interrupt_once_running(message: dict[str, Any]) -> None:
                if message["method"] == "serverRequest/resolved":
                    while not sleep_running(workdir):  # no event says "the command runs"
                        await trio.sleep(0.05)
                    params = {"threadId": thread_id, "turnId": turn_ids[0]}
                    await codex.request("turn/interrupt", params)

            turn, seen = await codex.turn(
                thread_id, "wait", answer=answer, watch=interrupt_once_running
            )
            assert turn["status"] == "interrupted"
            # no commandExecution item completes, and the command dies with the turn
            assert items(seen, "item/completed", "commandExecution") == []
            while sleep_running(workdir):
                await trio.sleep(0.05)


def sleep_running(workdir: Path) -> bool:
    """Whether the scripted `sleep 60` runs in ``workdir`` (read from /proc)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            cwd = (proc / "cwd").resolve()
        except (OSError, RuntimeError):
            continue
        if b"sleep\x0060" in cmdline.replace(b"sleep 60", b"sleep\x0060") and cwd == workdir:
            return True
    return False


async def test_interrupt_withdraws_a_pending_approval(tmp_path: Path, workdir: Path) -> None:
    fake = FakeResponses()
    fake.reply_shell("touch never.txt")
    with trio.fail_after(TIMEOUT):
        async with codex_serving(fake, tmp_path, workdir) as codex:
            thread_id = await codex.start_thread(workdir)
            params = {"threadId": thread_id, "input": [{"type": "text", "text": "go"}]}
            turn_id = (await codex.request("turn/start", params))["turn"]["id"]
            while True:  # the approval request is left unanswered, as a person thinks
                message = await codex.receive()
                if "id" in message:
                    pending = message["id"]
                    await codex.request(
                        "turn/interrupt", {"threadId": thread_id, "turnId": turn_id}
                    )
                    break
            after: list[dict[str, Any]] = []
            wanted = {"serverRequest/resolved", "turn/completed"}
            while not wanted <= {m["method"] for m in after}:
                after.append(await codex.receive())
    # observed (0.163.0): turn/completed first, then the withdrawal
    [resolved] = [m for m in after if m["method"] == "serverRequest/resolved"]
    assert resolved["params"] == {"threadId": thread_id, "requestId": pending}
    [completed] = [m for m in after if m["method"] == "turn/completed"]
    assert completed["params"]["turn"]["status"] == "interrupted"
    assert not (workdir / "never.txt").exists()


async def test_a_thread_resumes_in_a_new_process(tmp_path: Path, workdir: Path) -> None:
    assert CODEX is not None
    fake = FakeResponses([FakeTurn("I will remember 42."), FakeTurn("It was 42.")])
    home = tmp_path / "codex"
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as base_url:
            async with open_codex_app_server(
                CODEX, base_url=base_url, home=home, cwd=workdir, stderr_to=tmp_path / "stderr"
            ) as codex:
                thread_id = await codex.start_thread(workdir)
                await codex.turn(thread_id, "remember 42")
                first_pgid = codex.process.pid
            assert not group_alive(first_pgid)
            async with open_codex_app_server(
                CODEX, base_url=base_url, home=home, cwd=workdir, stderr_to=tmp_path / "stderr2"
            ) as codex:
                params = {
                    "threadId": thread_id,
                    "approvalPolicy": "untrusted",
                    "excludeTurns": True,
                }
                resumed = await codex.request("thread/resume", params)
                assert resumed["thread"]["id"] == thread_id
                turn, _ = await codex.turn(thread_id, "which number?")
    assert turn["status"] == "completed"
    texts = [
        (item.get("role"), part.get("text"))
        for item in fake.requests[1]["input"]
        if item.get("type") == "message" and item.get("role") != "developer"
        for part in item["content"]
    ]
    assert ("user", "remember 42") in texts
    assert ("assistant", "I will remember 42.") in texts
    assert texts[-1] == ("user", "which number?")


async def test_resuming_an_unknown_thread_is_an_error(tmp_path: Path, workdir: Path) -> None:
    fake = FakeResponses()
    with trio.fail_after(TIMEOUT):
        async with codex_serving(fake, tmp_path, workdir) as codex:
            with pytest.raises(CodexRpcError) as caught:
                params = {"threadId": "01a230c3-0000-7000-8000-000000000000"}
                await codex.request("thread/resume", params)
    assert caught.value.error["message"]
