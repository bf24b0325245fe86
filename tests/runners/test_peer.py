"""The server's side of a runner's calls: each is served inside its turn, checked as wire
input, and a turn that ends under a call answers that call an error (never a stray
cancellation in the link's own tasks)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from omnigent.errors import BudgetExceeded
from omnigent.harnesses.base import MemoryHarnessState
from omnigent.model import Usage
from omnigent.rpc import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from omnigent.transports.runner.remote import RunnerPeer, ServedTurn


class Ctx:
    """A turn context double: records what it was asked; tool calls block."""

    session_id = "conv_1"
    response_id = "resp_1"

    def __init__(self) -> None:
        self.emitted: list[Any] = []
        self.calls = 0
        self.usages: list[tuple[Usage, str | None]] = []
        self.budget_left = True

    def record_usage(self, usage: Usage, model: str | None = None) -> None:
        self.usages.append((usage, model))

    def check_budget(self) -> None:
        if not self.budget_left:
            raise BudgetExceeded("the session's token budget is used up")

    async def emit(self, event: Any) -> None:
        self.emitted.append(event)

    async def call_tool(self, name: str, arguments: Any, *, call_id: str | None = None) -> str:
        self.calls += 1
        await trio.sleep_forever()
        raise AssertionError("unreachable")


def _no_admit() -> None:
    """The ``admit`` of an unordered call: nothing waits on it."""


async def test_a_turn_that_ends_under_a_call_answers_it_an_error() -> None:
    """Regression: the call's cancellation (its turn's nursery) was handed to the link's
    task as a ``trio.Cancelled``, which ended the runner's whole link."""
    peer, ctx = RunnerPeer("laptop"), Ctx()
    with trio.fail_after(5):
        async with trio.open_nursery() as link_tasks:
            async with trio.open_nursery() as turn_nursery:
                turn = ServedTurn("rturn_1", ctx, turn_nursery, MemoryHarnessState())  # type: ignore[arg-type]
                with peer.serving(turn):
                    answered: list[BaseException] = []

                    async def call() -> None:
                        try:
                            await peer.handle_request(
                                "turn/call_tool",
                                {"turn": "rturn_1", "name": "x", "arguments": {}},
                                _no_admit,
                            )
                        except RpcError as exc:
                            answered.append(exc)

                    link_tasks.start_soon(call)
                    await trio.testing.wait_all_tasks_blocked()
                    assert ctx.calls == 1
                    turn_nursery.cancel_scope.cancel()  # the turn ends (an interrupt)
            await trio.testing.wait_all_tasks_blocked()
        assert len(answered) == 1 and answered[0].code == RESOURCE_NOT_FOUND  # type: ignore[attr-defined]


async def test_calls_for_unknown_turns_and_core_events_are_refused() -> None:
    peer, ctx = RunnerPeer("laptop"), Ctx()
    with pytest.raises(RpcError) as unknown:
        await peer.handle_request("turn/emit", {"turn": "rturn_nope", "event": {}}, _no_admit)
    assert unknown.value.code == RESOURCE_NOT_FOUND
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            turn = ServedTurn("rturn_2", ctx, nursery, MemoryHarnessState())  # type: ignore[arg-type]
            with peer.serving(turn):
                for event in (
                    {"type": "session.status", "status": "idle"},
                    {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
                ):
                    with pytest.raises(RpcError) as refused:
                        await peer.handle_request(
                            "turn/emit", {"turn": "rturn_2", "event": event}, _no_admit
                        )
                    assert refused.value.code == INVALID_PARAMS
                with pytest.raises(RpcError) as bad:
                    await peer.handle_request(
                        "turn/add_item", {"turn": "rturn_2", "item": {"type": "x"}}, _no_admit
                    )
                assert bad.value.code == INVALID_PARAMS
                # Deltas are published one event each, in order.
                await peer.handle_notification(
                    "turn/deltas", {"turn": "rturn_2", "item_id": "item_1", "deltas": ["a", "b"]}
                )
        assert [e.delta for e in ctx.emitted] == ["a", "b"]
        assert not any(e.type == "session.status" for e in ctx.emitted)


async def test_a_runner_turns_usage_is_recorded_on_the_server_and_answers_the_budget() -> None:
    """A model call's usage on the runner is recorded in the server's turn, and the
    answer tells the runner whether the next call is allowed (the budget stays the
    server's)."""
    peer, ctx = RunnerPeer("laptop"), Ctx()
    usage = {"input_tokens": 12, "output_tokens": 3}
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            turn = ServedTurn("rturn_3", ctx, nursery, MemoryHarnessState())  # type: ignore[arg-type]
            with peer.serving(turn):
                call = {"turn": "rturn_3", "usage": usage, "model": "m1"}
                assert await peer.handle_request("turn/usage", call, _no_admit) == {
                    "budget_exceeded": None
                }
                ctx.budget_left = False
                answer = await peer.handle_request("turn/usage", call, _no_admit)
                assert answer == {"budget_exceeded": "the session's token budget is used up"}
                with pytest.raises(RpcError) as bad:
                    await peer.handle_request(
                        "turn/usage", {"turn": "rturn_3", "usage": "lots"}, _no_admit
                    )
                assert bad.value.code == INVALID_PARAMS
    assert [(u.input_tokens, u.output_tokens, m) for u, m in ctx.usages] == [
        (12, 3, "m1"),
        (12, 3, "m1"),
    ]
