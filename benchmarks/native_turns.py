"""What a native coding agent costs per turn: the claude-code and codex harnesses on
the real CLIs against the fake model servers of ``omnigent.testing``.

For each harness, on a real SQLite file, timed from ``send_message`` to the turn's
terminal status as a live subscriber sees it:

* ``first turn``: spawn the CLI, initialize, a short text answer;
* ``later turn``: a short text answer from the same process;
* ``approval``: a shell command that asks, answered at once on the omnigent stream;
* ``N-chunk stream``: an answer streamed in N small chunks, and how many
  ``output_text.delta`` events the relay published for it (bursts are coalesced);
* ``interrupt``: from ``interrupt()`` to ``cancelled`` during a stalled model stream.

Usage: ``python benchmarks/native_turns.py [N]`` (default 2000; needs
``pip install 'omnigent[claude,codex]'``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

import omnigent
from omnigent.model import ElicitationRequest, OutputTextDelta, SessionStatusChanged
from omnigent.testing import FakeAnthropic, FakeResponses, FakeShell, FakeTurn

MODELS = {"claude-code": "claude-sonnet-4-5", "codex": "gpt-5.5"}


async def timed(rt: omnigent.Runtime, sid: str, text: str, *, interrupt: bool = False) -> Any:
    """(seconds, delta events) of one turn; elicitations are accepted at once."""
    deltas = 0
    async with rt.subscribe(sid) as events:
        started = time.perf_counter()
        await rt.send_message(sid, text)
        async for event in events:
            if isinstance(event, OutputTextDelta):
                deltas += 1
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
                return time.perf_counter() - started, deltas
    raise AssertionError("the stream ended early")


async def bench(harness: str, n: int, root: Path) -> dict[str, Any]:
    fake: FakeAnthropic | FakeResponses = (
        FakeAnthropic() if harness == "claude-code" else FakeResponses()
    )
    fake.reply_text("Hello.")
    fake.reply_text("Again.")
    fake.reply(FakeTurn("Running.", [FakeShell("touch bench.txt")]))
    fake.reply_text("Done.")
    fake.reply_text("".join(f"w{i:05d} " for i in range(n)), chunk_size=7)
    fake.reply(FakeTurn("Thinking", stall=True))
    db = f"sqlite:///{root / f'{harness}.db'}"
    async with fake.serve() as url, omnigent.open_runtime(db, home=root / "home") as rt:
        config = {"harness": harness, "model": MODELS[harness], "base_url": url, "api_key": "x"}
        agent = await rt.create_agent({"name": f"bench-{harness}", "executor": {"config": config}})
        sid = (await rt.create_session(agent.id)).id
        return {
            "first turn": (await timed(rt, sid, "hi"))[0],
            "later turn": (await timed(rt, sid, "again"))[0],
            "approval": (await timed(rt, sid, "touch"))[0],
            f"{n}-chunk stream": await timed(rt, sid, "stream"),
            "interrupt": (await timed(rt, sid, "stall", interrupt=True))[0],
        }


async def main(n: int) -> None:
    for harness in ("claude-code", "codex"):
        with tempfile.TemporaryDirectory() as tmp:
            results = await bench(harness, n, Path(tmp))
        print(harness)
        for name, value in results.items():
            if isinstance(value, tuple):
                print(f"  {name:<18} {value[0]:.3f} s, {value[1]} delta events")
            else:
                print(f"  {name:<18} {value:.3f} s")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
