"""A harness double for tests of code built on the runtime: :class:`RecordingHarness`.

Register it under a name and name that harness in an agent's spec; every turn of every
session that runs it is recorded (its :class:`~omnigent.harnesses.base.TurnRequest`:
the history, the input, the model, the tools) and played by a body you write — or, by
default, answered ``echo N`` (N counts the turns). :func:`run_turn` and
:func:`collect_turn` drive one turn and gather its events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..harnesses.base import Harness, HarnessEnv, TurnContext, TurnRequest
from ..model import Event, SessionStatusChanged

if TYPE_CHECKING:
    from .. import Runtime

__all__ = ["RecordingHarness", "TurnBody", "collect_turn", "run_turn", "scripted_agent"]

TurnBody = Callable[[TurnRequest, TurnContext], Awaitable[None]]
"""What a :class:`RecordingHarness` does in a turn: the request and the turn's context
in; whatever it streams, calls or asks through the context is the turn."""


class RecordingHarness:
    """A harness double: records every request and runs ``body`` for each turn.

    Register :meth:`factory` (``rt.register_harness("rec", double.factory)``, or
    ``open_runtime(harnesses={"rec": double.factory})``) and name ``rec`` in a spec.

    Attributes:
        requests: every turn's request, in order, across the sessions that run it.
        body: what a turn does (``None``: it writes ``echo N``, N the turn's count).
        created: how many harness instances were made (one per session actor).
        closed: how many of them were closed.
    """

    def __init__(self, body: TurnBody | None = None) -> None:
        self.requests: list[TurnRequest] = []
        self.body = body
        self.created = 0
        self.closed = 0

    def factory(self, env: HarnessEnv) -> Harness:
        """A harness instance for one session actor (the factory to register)."""
        self.created += 1
        return _Recording(self)


class _Recording:
    def __init__(self, double: RecordingHarness) -> None:
        self._double = double

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        self._double.requests.append(request)
        if self._double.body is not None:
            await self._double.body(request, ctx)
        else:
            async with ctx.open_message() as message:
                await message.write(f"echo {len(self._double.requests)}")

    async def aclose(self) -> None:
        self._double.closed += 1


def scripted_agent(
    name: str = "bot", script: list[Any] | None = None, **config: Any
) -> dict[str, Any]:
    """An agent spec (as a dict) whose harness is ``scripted`` (or ``config["harness"]``).

    ``script`` is the scripted harness's steps (``{say: …}``, ``{call: …, args: …}``,
    …); other keyword arguments go to ``executor.config``.
    """
    executor: dict[str, Any] = {"harness": "scripted", **config}
    if script is not None:
        executor["script"] = script
    return {"name": name, "executor": {"type": "omnigent", "config": executor}}


async def collect_turn(events: AsyncIterator[Event]) -> list[Event]:
    """Events up to and including the next terminal ``session.status``.

    Raises:
        AssertionError: the stream ended first.
    """
    seen: list[Event] = []
    async for event in events:
        seen.append(event)
        if isinstance(event, SessionStatusChanged) and event.status.terminal:
            return seen
    raise AssertionError(f"the stream ended without a terminal status: {seen}")


async def run_turn(rt: Runtime, session_id: str, content: Any = "hi") -> list[Event]:
    """Send a message and collect the events of the turn it starts (see :func:`collect_turn`)."""
    async with rt.subscribe(session_id) as events:
        await rt.send_message(session_id, content)
        return await collect_turn(events)
