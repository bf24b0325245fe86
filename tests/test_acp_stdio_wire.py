"""``omnigent stdio`` as an editor drives it, byte for byte: nothing asked goes unanswered.

Regression tests for issue 29's four stdio defects, each against a real ``omnigent
stdio`` process written to with raw NDJSON (:mod:`.acp_stdio_raw`), every line it
prints checked against the ACP schema:

- stdin closed right after a request: the request is still answered;
- requests written back to back (pipelined) are handled in the order they arrived where
  order matters (``initialize`` before the rest; ``session/load`` before a prompt);
- SIGTERM during a prompt: the prompt answers ``stopReason: cancelled``, then the
  process exits 0;
- more permission requests than a connection keeps open: the one past the bound is an
  explicit error (refused, and the editor is told on its tool call), never dropped.
"""

from __future__ import annotations

import signal
from pathlib import Path

import trio

from .acp_stdio_raw import INITIALIZE, open_stdio, request, scripted_spec

ASK_SHELL = [{"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"], "reason": "ok?"}]
TALKER = scripted_spec("talker", [{"say": "hello from omnigent"}])
SLEEPER = scripted_spec("sleeper", [{"say": "working on it"}, {"sleep": 30}])
ASKER = scripted_spec(
    "asker", [{"call": "sys_os_shell", "args": {"command": "echo approved"}}], policies=ASK_SHELL
)


def new(request_id: int, cwd: Path) -> dict[str, object]:
    return request(request_id, "session/new", {"cwd": str(cwd), "mcpServers": []})


def prompt(request_id: int, session_id: str, text: str = "hi") -> dict[str, object]:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    return request(request_id, "session/prompt", params)


async def test_a_request_followed_at_once_by_eof_is_answered(tmp_path: Path) -> None:
    """Regression: ``echo '{…initialize…}' | omnigent stdio`` printed nothing."""
    with trio.fail_after(60):
        async with open_stdio(tmp_path, TALKER) as agent:
            await agent.send(INITIALIZE, new(1, tmp_path), request(2, "session/list", {}))
            await agent.close_stdin()
            received = await agent.read_to_end()
            assert await agent.wait() == 0
        answers = {m["id"]: m for m in received if "id" in m}
        assert answers[0]["result"]["protocolVersion"] == 1
        assert answers[1]["result"]["sessionId"].startswith("conv_")
        assert "sessions" in answers[2]["result"]


async def test_a_prompt_in_flight_at_eof_answers_cancelled(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with open_stdio(tmp_path, SLEEPER) as agent:
            await agent.send(INITIALIZE, new(1, tmp_path))
            session_id = (await agent.answer(1))["result"]["sessionId"]
            await agent.send(prompt(2, session_id))
            await agent.until("session/update")  # the turn is running
            await agent.close_stdin()
            assert (await agent.answer(2))["result"] == {"stopReason": "cancelled"}
            await agent.read_to_end()
            assert await agent.wait() == 0


async def test_pipelined_requests_are_handled_in_the_order_they_arrived(tmp_path: Path) -> None:
    """Regression: ``session/new`` right behind ``initialize`` was refused (2 runs in 3)."""
    with trio.fail_after(90):
        async with open_stdio(tmp_path, TALKER) as agent:
            # Sixteen chances for a session/new to overtake initialize, in one write.
            await agent.send(INITIALIZE, *(new(i, tmp_path) for i in range(1, 17)))
            answers = [await agent.answer(i) for i in range(17)]
            assert all("result" in answer for answer in answers), answers
            session_id = answers[1]["result"]["sessionId"]
            await agent.close_stdin()
            await agent.read_to_end()
        # A new process: load, then prompt the loaded session, both in one write.
        async with open_stdio(tmp_path, TALKER) as agent:
            load = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            await agent.send(INITIALIZE, request(1, "session/load", load), prompt(2, session_id))
            assert "result" in await agent.answer(1)
            assert (await agent.answer(2)).get("result") == {"stopReason": "end_turn"}
            await agent.close_stdin()
            await agent.read_to_end()


async def test_sigterm_mid_prompt_answers_cancelled_then_exits(tmp_path: Path) -> None:
    """Regression: a prompt in flight at SIGTERM was never answered."""
    with trio.fail_after(60):
        async with open_stdio(tmp_path, SLEEPER) as agent:
            await agent.send(INITIALIZE, new(1, tmp_path))
            session_id = (await agent.answer(1))["result"]["sessionId"]
            await agent.send(prompt(2, session_id))
            await agent.until("session/update")  # "working on it": the turn sleeps now
            agent.signal(signal.SIGTERM)
            assert (await agent.answer(2))["result"] == {"stopReason": "cancelled"}
            await agent.read_to_end()
            assert await agent.wait() == 0


async def test_the_permission_request_past_the_bound_is_an_explicit_error(
    tmp_path: Path,
) -> None:
    """Regression: the 33rd concurrent permission request was dropped without a word."""
    sessions = 33
    with trio.fail_after(120):
        async with open_stdio(tmp_path, ASKER) as agent:
            await agent.send(INITIALIZE, *(new(i, tmp_path) for i in range(1, sessions + 1)))
            ids = [(await agent.answer(i))["result"]["sessionId"] for i in range(1, sessions + 1)]
            await agent.send(*(prompt(100 + i, sid) for i, sid in enumerate(ids)))
            asked: set[str] = set()
            refused: list[dict[str, object]] = []
            while len(asked) + len(refused) < sessions:
                message = await agent.next_message()
                assert message is not None, "stdout ended"
                if message.get("method") == "session/request_permission":
                    asked.add(message["params"]["sessionId"])
                update = message.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "tool_call_update" and "32" in str(update):
                    refused.append(message["params"])
            assert len(asked) == 32 and len(refused) == 1
            refused_session = refused[0]["sessionId"]
            assert refused_session not in asked
            text = refused[0]["update"]["content"][0]["content"]["text"]  # type: ignore[index]
            assert "32 permission requests" in text and refused[0]["update"]["status"] == "failed"  # type: ignore[index]
            # That session's turn went on without the call and ended; the others wait.
            index = ids.index(str(refused_session))
            assert (await agent.answer(100 + index))["result"] == {"stopReason": "end_turn"}
            await agent.close_stdin()
            received = await agent.read_to_end()
            answers = [m for m in received if m.get("id") in range(100, 100 + sessions)]
            assert all(a.get("result", {}).get("stopReason") for a in answers)
            assert await agent.wait() == 0
        assert "32 permission requests" in (tmp_path / "stderr.log").read_text()
