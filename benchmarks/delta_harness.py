"""The benchmark's external harness: each turn streams N one-word deltas (N = the message).

Written with omnigent's scaffold; started by ``benchmarks/external_relay.py``.
"""

from __future__ import annotations

from omnigent.harnesses.scaffold import HarnessTurn, run


async def turn(t: HarnessTurn) -> None:
    async with t.message() as stream:
        for i in range(int(t.text)):
            await stream.write(f"w{i:06d} ")  # as external_relay.word(i)


if __name__ == "__main__":
    run(turn)
