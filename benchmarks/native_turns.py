"""What a native agent costs per turn: the claude-code, codex, pi and openai-agents-sdk
harnesses on the real CLIs (and the real Agents SDK) against the fake model servers
of ``omnigent.testing``, beside a direct run of the same program.

For each harness, on a real SQLite file, timed from ``send_message`` as a live
subscriber sees it:

* ``first turn``: spawn the agent, start it up, a short text answer — to its first
  ``output_text.delta`` and to the terminal status;
* ``later turn``: the same from the same process;
* ``approval``: a tool call that asks, answered at once on the omnigent stream;
* ``N-chunk stream``: an answer streamed in N small chunks, and how many
  ``output_text.delta`` events the relay published for it (bursts are coalesced);
* ``interrupt``: from ``interrupt()`` to ``cancelled`` during a stalled model stream.

The baseline (``benchmarks/_native_direct.py``) drives the same program directly —
its own protocol, the same fake, no runtime — and times the first and a later turn
the same two ways; the table shows both and the difference (omnigent's overhead).

Usage: ``python benchmarks/native_turns.py [N] [--only HARNESS]`` (default 2000; needs
``pip install 'omnigent[claude,codex,openai-agents]'`` and pi from npm).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import omnigent
from benchmarks._native_direct import direct_agents, direct_claude, direct_codex, direct_pi
from omnigent.model import ElicitationRequest, OutputTextDelta, SessionStatusChanged
from omnigent.testing import (
    FakeAnthropic,
    FakeResponses,
    FakeShell,
    FakeTurn,
    MockLLM,
    TextReply,
    ToolCallsReply,
)
from omnigent.testing import MockToolCall as Call

HARNESSES = ("claude-code", "codex", "pi", "openai-agents-sdk")
MODELS = {
    "claude-code": "claude-sonnet-4-5",
    "codex": "gpt-5.5",
    "pi": "mock-model",
    "openai-agents-sdk": "mock-model",
}
AGENT_MODULE = "tests.harnesses.sdk_agents"
ANSWER = "Hello there: a short answer, streamed in a few pieces."
Direct = Callable[[str, Path, str], Awaitable[dict[str, float]]]
DIRECT: dict[str, Direct] = {
    "claude-code": direct_claude,
    "codex": direct_codex,
    "pi": direct_pi,
    "openai-agents-sdk": direct_agents,
}


def script(harness: str, n: int, *, direct: bool) -> Any:
    """The fake model server, scripted for the bench (two text turns first)."""
    stream = "".join(f"w{i:05d} " for i in range(n))
    if harness in ("pi", "openai-agents-sdk"):
        mock = MockLLM()
        mock.reply(TextReply(ANSWER, chunk_size=8))
        mock.reply(TextReply(ANSWER, chunk_size=8))
        if not direct:
            if harness == "pi":
                mock.reply(ToolCallsReply((Call("bash", {"command": "touch bench.txt"}),)))
            else:
                mock.reply(ToolCallsReply((Call("write_note", {"name": "b.txt", "text": "x"}),)))
            mock.reply_text("Done.")
            mock.reply(TextReply(stream, chunk_size=7))
            mock.reply(TextReply("Thinking " * 1000, chunk_size=9, delay=0.05))  # stalls
        return mock
    fake: FakeAnthropic | FakeResponses = (
        FakeAnthropic() if harness == "claude-code" else FakeResponses()
    )
    fake.reply_text(ANSWER)
    fake.reply_text(ANSWER)
    if not direct:
        fake.reply(FakeTurn("Running.", [FakeShell("touch bench.txt")]))
        fake.reply_text("Done.")
        fake.reply_text(stream, chunk_size=7)
        fake.reply(FakeTurn("Thinking", stall=True))
    return fake


async def timed(
    rt: omnigent.Runtime, sid: str, text: str, *, interrupt: bool = False
) -> tuple[float, float | None, int]:
    """(seconds to the end, seconds to the first delta, delta events) of one turn;
    elicitations are accepted at once."""
    deltas = 0
    first: float | None = None
    async with rt.subscribe(sid) as events:
        started = time.perf_counter()
        await rt.send_message(sid, text)
        async for event in events:
            if isinstance(event, OutputTextDelta):
                deltas += 1
                if first is None:
                    first = time.perf_counter() - started
                if interrupt and deltas == 1:
                    started = time.perf_counter()
                    await rt.interrupt(sid)
            if isinstance(event, ElicitationRequest):
                await rt.resolve_elicitation(sid, event.elicitation_id, "accept")
            if isinstance(event, SessionStatusChanged) and event.status in (
                "idle",
                "failed",
                "cancelled",
            ):
                assert event.status == ("cancelled" if interrupt else "idle"), event
                return time.perf_counter() - started, first, deltas
    raise AssertionError("the stream ended early")


def spec(harness: str, url: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "harness": harness,
        "model": MODELS[harness],
        "base_url": url,
        "api_key": "x",
    }
    extra: dict[str, Any] = {}
    if harness == "openai-agents-sdk":
        config["agent"] = f"{AGENT_MODULE}:assistant"
    if harness == "pi":
        extra["policies"] = [{"name": "ask", "type": "ask_tools", "tools": ["bash"]}]
    return {"name": f"bench-{harness.replace('-', '')}", "executor": {"config": config}, **extra}


async def bench(harness: str, n: int, root: Path) -> dict[str, Any]:
    fake = script(harness, n, direct=False)
    db = f"sqlite:///{root / 'bench.db'}"
    runtime = omnigent.open_runtime(
        db, home=root / "home", workspace=root, policy_modules=[AGENT_MODULE]
    )
    async with fake.serve() as url, runtime as rt:
        agent = await rt.create_agent(spec(harness, url))
        sid = (await rt.create_session(agent.id)).id
        first = await timed(rt, sid, "hi")
        later = await timed(rt, sid, "again")
        assert first[1] is not None and later[1] is not None
        return {
            "first to first text": first[1],
            "first turn": first[0],
            "later to first text": later[1],
            "later turn": later[0],
            "approval": (await timed(rt, sid, "approve"))[0],
            f"{n}-chunk stream": await timed(rt, sid, "stream"),
            "interrupt": (await timed(rt, sid, "stall", interrupt=True))[0],
        }


async def direct(harness: str, root: Path) -> dict[str, float]:
    fake = script(harness, 0, direct=True)
    async with fake.serve() as url:
        return await DIRECT[harness](url, root, MODELS[harness])


def report(harness: str, ours: dict[str, Any], base: dict[str, float]) -> None:
    print(harness)
    for name in ("first to first text", "first turn", "later to first text", "later turn"):
        baseline = base[name]
        print(
            f"  {name:<22} {ours[name] * 1000:7.0f} ms  direct {baseline * 1000:7.0f} ms  "
            f"overhead {(ours[name] - baseline) * 1000:+6.0f} ms"
        )
    for name, value in ours.items():
        if name.startswith(("first", "later")):
            continue
        if isinstance(value, tuple):
            print(f"  {name:<22} {value[0] * 1000:7.0f} ms, {value[2]} delta events")
        else:
            print(f"  {name:<22} {value * 1000:7.0f} ms")


async def main(n: int, only: list[str]) -> None:
    for harness in only or HARNESSES:
        with tempfile.TemporaryDirectory() as tmp:
            base = await direct(harness, Path(tmp) / "direct")
            ours = await bench(harness, n, Path(tmp))
        report(harness, ours, base)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=2000)
    parser.add_argument("--only", action="append", default=[], choices=HARNESSES)
    arguments = parser.parse_args()
    trio.run(main, arguments.n, arguments.only)
