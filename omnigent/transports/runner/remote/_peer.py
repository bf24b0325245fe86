"""What a runner may call on the server: its running turns' contexts, and the person
behind a session whose stdio MCP servers it holds — nothing else.

:class:`RunnerPeer` is the JSON-RPC handler of one runner's link. Every call names a
*turn* the server asked this runner to run (``turn/run``); the call is served by that
turn's real :class:`~omnigent.harnesses.base.TurnContext` on the server — so a delta is
published through the server's bus, a tool call passes the server's policies, an
elicitation is the server's — inside the turn's own nursery (:class:`ServedTurn`), so an
interrupt or a stop of the turn cancels what it serves. A call naming a turn that is not
running (it ended, or another runner's) is refused with ``-32002``; so is an
``mcp/elicit`` for a session whose MCP servers this runner does not hold.

What arrives is checked as any wire input: items and events by the strict converter
(``-32602`` naming the field); an event the core alone may publish (a status, a
response's lifecycle, an elicitation) is refused, so a runner cannot end a turn or forge
its terminal status.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import attrs
import outcome
import trio

from ....errors import BudgetExceeded, InvalidInput
from ....harnesses.base import HarnessState, TurnContext
from ....link import field, optional_str
from ....model import (
    ElicitationParams,
    Item,
    MessageItem,
    OutputText,
    OutputTextDelta,
    SessionStatus,
    SessionStatusChanged,
    Usage,
    event_from_dict,
    item_from_dict,
    structure,
    unstructure,
)
from ....observability import Carrier, continued
from ....rpc import INVALID_PARAMS, RESOURCE_NOT_FOUND, Admit, RpcError

__all__ = ["McpElicit", "RunnerPeer", "ServedTurn"]

log = logging.getLogger("omnigent.transports.runner")

T = TypeVar("T")


class McpElicit(Protocol):
    """A session whose stdio MCP servers a runner holds: their questions are asked here."""

    async def elicit(self, params: ElicitationParams, in_turn: bool) -> tuple[str, Any]:
        """The person's ``(action, content)``."""
        ...


# Events only the core publishes (each has its own call, or none at all).
_CORE_EVENTS = frozenset(
    {
        "session.status",
        "response.created",
        "response.completed",
        "response.failed",
        "response.cancelled",
        "response.output_item.done",
        "response.output_text.delta",
        "response.elicitation_request",
        "response.elicitation_resolved",
    }
)
_MAX_DELTAS = 65_536
_FINALISE_TIMEOUT = 10.0


class ServedTurn:
    """One turn a runner runs for this server, and the server-side context it talks to.

    Created by the proxy harness for the length of its ``run_turn``, with a nursery of
    that ``run_turn``: every call the runner makes for the turn runs there, inside the
    turn's trace context (``trace``, the turn's span as a carrier).

    It also remembers each assistant message being streamed (its deltas) until the
    runner adds it: if the turn ends first (cancelled here, or the runner vanished),
    :meth:`keep_partial_messages` stores what streamed as ``incomplete``, as a local
    turn does.
    """

    def __init__(
        self,
        turn_id: str,
        ctx: TurnContext,
        nursery: trio.Nursery,
        state: HarnessState,
        trace: Carrier | None = None,
    ) -> None:
        self.id = turn_id
        self.ctx = ctx
        self.state = state
        self._nursery = nursery
        self._trace = trace
        self._streaming: dict[str, list[str]] = {}
        self.ended = False

    async def serve(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` in the turn's nursery and return what it returns.

        Raises:
            RpcError: -32002 if the turn has ended (or ends meanwhile). Whatever
                ``call`` raises.

        Cancellation: cancels ``call``.
        """
        if self.ended:
            raise _gone(self.id)
        done = trio.Event()
        scope = trio.CancelScope()
        result: outcome.Outcome[T] | None = None

        async def run() -> None:
            # A cancellation (of the turn, or of this call) stays in this task: only
            # a value or an error is handed to the caller, which answers -32002.
            nonlocal result
            try:
                # The turn's trace context: what the call opens (an execute_tool
                # span) is a child of the turn's span, as in a local turn.
                with scope, continued(self._trace):
                    result = outcome.Value(await call())
            except Exception as exc:
                result = outcome.Error(exc)
            finally:
                done.set()

        self._nursery.start_soon(run)
        try:
            await done.wait()
        finally:
            scope.cancel()
        if result is None:
            raise _gone(self.id)  # the turn's nursery was cancelled under it
        return result.unwrap()

    async def deltas(self, item_id: str, deltas: list[str]) -> None:
        parts = self._streaming.setdefault(item_id, [])
        response_id = self.ctx.response_id
        for delta in deltas:
            if delta:
                parts.append(delta)
                await self.ctx.emit(
                    OutputTextDelta(response_id=response_id, item_id=item_id, delta=delta)
                )

    async def add_item(self, item: Item) -> None:
        if isinstance(item, MessageItem):
            self._streaming.pop(item.id, None)
        await self.ctx.add_item(item)

    async def keep_partial_messages(self) -> None:
        """Store each message that streamed text but was never added, ``incomplete``."""
        streaming, self._streaming = self._streaming, {}
        for item_id, parts in streaming.items():
            if not parts:
                continue
            item = MessageItem(
                role="assistant",
                content=(OutputText("".join(parts)),),
                id=item_id,
                status="incomplete",
            )
            try:
                await self.ctx.add_item(item)
            except Exception:
                log.warning("could not keep a partial message of turn %s", self.id, exc_info=True)


def _gone(turn_id: str) -> RpcError:
    return RpcError(RESOURCE_NOT_FOUND, f"turn {turn_id} is not running here")


def _usage_recorded(ctx: TurnContext, params: Mapping[str, Any]) -> dict[str, Any]:
    """``turn/usage``: one model call's usage, recorded in the server's turn (priced,
    summed, counted, traced) as if the harness ran here; answers whether the session's
    budget still allows the next call (``budget_exceeded``: why not), which the runner's
    turn then enforces (:meth:`omnigent.runner.RemoteTurn.check_budget`).

    Raises:
        InvalidInput: ``usage`` is not a usage object.
    """
    raw = params.get("usage")
    if not isinstance(raw, dict):
        raise InvalidInput.at("usage", "must be an object")
    try:
        usage = structure(raw, Usage)
    except (TypeError, ValueError, KeyError) as exc:
        raise InvalidInput.at("usage", f"not a usage object: {exc}") from None
    ctx.record_usage(usage, optional_str(params, "model"))
    try:
        ctx.check_budget()
    except BudgetExceeded as exc:
        return {"budget_exceeded": exc.message}
    return {"budget_exceeded": None}


def _invalid(exc: InvalidInput) -> RpcError:
    details = [attrs.asdict(d) for d in exc.details]
    return RpcError(INVALID_PARAMS, f"Invalid params: {exc.message}", {"details": details})


class RunnerPeer:
    """The server's JSON-RPC handler for one runner link (see the module docstring)."""

    methods = frozenset(
        {
            "turn/add_item",
            "turn/emit",
            "turn/call_tool",
            "turn/take_injections",
            "turn/wait_for_injection",
            "turn/launching",
            "turn/elicit",
            "turn/evaluate_policy",
            "turn/state_get",
            "turn/state_set",
            "turn/usage",
            "mcp/elicit",
        }
    )
    notifications = frozenset({"turn/deltas"})
    # Calls stand alone; notifications (in the reader) keep their arrival order anyway.
    ordered: frozenset[str] = frozenset()

    def __init__(
        self,
        runner_id: str,
        mcp_sessions: Callable[[str, str], McpElicit | None] = lambda runner, session: None,
    ) -> None:
        self.runner_id = runner_id
        self._turns: dict[str, ServedTurn] = {}
        self._mcp_sessions = mcp_sessions

    @contextmanager
    def serving(self, turn: ServedTurn) -> Iterator[None]:
        """Serve ``turn``'s calls for the length of the block."""
        self._turns[turn.id] = turn
        try:
            yield
        finally:
            turn.ended = True
            self._turns.pop(turn.id, None)

    def _turn(self, params: Any) -> ServedTurn:
        turn_id: str = field(params, "turn", str)
        turn = self._turns.get(turn_id)
        if turn is None:
            raise _gone(turn_id)
        return turn

    async def handle_notification(self, method: str, params: Any) -> None:
        # In the reader, in order: a batch of deltas is published before the call
        # that follows it on the link (an add_item, a tool call) is read.
        try:
            turn = self._turn(params)
            item_id: str = field(params, "item_id", str)
            deltas: list[Any] = field(params, "deltas", list)
        except RpcError as error:
            log.warning("runner %s: %s refused: %s", self.runner_id, method, error.message)
            return
        if len(deltas) > _MAX_DELTAS or not all(isinstance(d, str) for d in deltas):
            log.warning("runner %s: %s refused: deltas must be strings", self.runner_id, method)
            return
        await turn.deltas(item_id, deltas)

    async def input_ended(self) -> None:
        """The runner is gone for good (the link ended): nothing here waits on its
        next word, and the connection cancels what is in flight at once."""

    async def handle_request(self, method: str, params: Any, admit: Admit) -> Any:
        if method == "mcp/elicit":
            return await self._mcp_elicit(params)
        turn = self._turn(params)
        try:
            return await turn.serve(lambda: self._answer(turn, method, params))
        except InvalidInput as exc:
            raise _invalid(exc) from None

    async def _mcp_elicit(self, params: Any) -> dict[str, Any]:
        """An MCP server on the runner asks the session's person (``mcp/elicit``)."""
        session_id: str = field(params, "session_id", str)
        held = self._mcp_sessions(self.runner_id, session_id)
        if held is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"no MCP servers of {session_id} run there")
        try:
            asked = structure(params.get("params"), ElicitationParams)
        except InvalidInput as exc:
            raise _invalid(exc) from None
        action, content = await held.elicit(asked, params.get("in_turn") is True)
        return {"action": action, "content": content}

    async def _answer(self, turn: ServedTurn, method: str, params: Mapping[str, Any]) -> Any:
        ctx = turn.ctx
        if method == "turn/add_item":
            await turn.add_item(item_from_dict(params.get("item")))
            return {}
        if method == "turn/emit":
            event = event_from_dict(params.get("event"))
            if event.type in _CORE_EVENTS:
                raise InvalidInput.at("event.type", f"a runner may not publish {event.type}")
            await ctx.emit(event)
            return {}
        if method == "turn/call_tool":
            arguments = params.get("arguments")
            if not isinstance(arguments, str | dict):
                raise InvalidInput.at("arguments", "must be an object or JSON text")
            name: str = field(params, "name", str)
            output = await ctx.call_tool(name, arguments, call_id=optional_str(params, "call_id"))
            return {"output": output}
        if method == "turn/take_injections":
            taken = await ctx.take_injections()
            return {"messages": [unstructure(m, Item) for m in taken]}
        if method == "turn/wait_for_injection":
            await ctx.wait_for_injection()
            return {}
        if method == "turn/launching":
            phase = params.get("phase")
            if phase not in ("start", "end"):
                raise InvalidInput.at("phase", "must be 'start' or 'end'")
            status = SessionStatus.LAUNCHING if phase == "start" else SessionStatus.RUNNING
            await ctx.emit(SessionStatusChanged(status=status))
            return {}
        if method == "turn/elicit":
            elicit = structure(params.get("params"), ElicitationParams)
            action, content = await ctx.elicit(elicit)
            return {"action": action, "content": content}
        if method == "turn/evaluate_policy":
            policy_event = params.get("event")
            if not isinstance(policy_event, dict):
                raise InvalidInput.at("event", "must be an object")
            raw_ask = params.get("ask")
            ask = None if raw_ask is None else structure(raw_ask, ElicitationParams)
            return dict(await ctx.evaluate_policy(policy_event, ask=ask))
        if method == "turn/usage":
            return _usage_recorded(ctx, params)
        key: str = field(params, "key", str)
        if method == "turn/state_get":
            return {"value": await turn.state.get(key)}
        await turn.state.set(key, optional_str(params, "value"))
        return {}
