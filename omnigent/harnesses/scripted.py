"""The ``scripted`` harness: a deterministic stand-in for a model.

It plays ``config.script`` on every turn, or ``config.turns[N]`` on turn N (the last
list repeating). Steps: ``say`` streams text (in word-sized deltas) and records an
assistant message; ``call`` makes a real tool call through the core (policies
included); ``sleep`` waits; ``fail`` ends the turn ``failed`` with its message. Used for
demos, tests and as the reference for how a harness talks to its context.
"""

from __future__ import annotations

import re

import trio

from ..errors import HarnessError
from ..spec import CallStep, FailStep, SayStep, ScriptStep, SleepStep
from .base import HarnessEnv, TurnContext, TurnRequest

__all__ = ["ScriptedHarness", "split_words"]

_WORDS = re.compile(r"\S+\s*|\s+")


def split_words(text: str) -> list[str]:
    """Word-sized pieces of ``text`` (each with its trailing space), as a model streams."""
    return _WORDS.findall(text)


class ScriptedHarness:
    """Plays a fixed script; see the module docstring."""

    def __init__(self, env: HarnessEnv) -> None:
        config = env.config
        if config.turns is not None:
            self._turns: tuple[tuple[ScriptStep, ...], ...] = config.turns
        else:
            self._turns = (config.script or (),)

    def steps_for(self, turn_number: int) -> tuple[ScriptStep, ...]:
        return self._turns[min(turn_number, len(self._turns) - 1)]

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        for step in self.steps_for(request.turn_number):
            if isinstance(step, SayStep):
                async with ctx.open_message() as message:
                    for piece in split_words(step.say):
                        await message.write(piece)
            elif isinstance(step, CallStep):
                await ctx.call_tool(step.call, step.args)
            elif isinstance(step, SleepStep):
                await trio.sleep(step.sleep)
            elif isinstance(step, FailStep):
                raise HarnessError(step.fail)
            await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        return None
