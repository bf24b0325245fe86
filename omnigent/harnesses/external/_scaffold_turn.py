"""One turn of a scaffolded harness: what the harness author's function is given.

A :class:`HarnessTurn` holds the turn's request (the conversation, model, prompt and
tools the runtime sent) and the calls that talk back to the runtime: streaming text,
asking the runtime to run a tool, to ask a person, or to evaluate its policies. Each
such call emits a frame on the turn's stream and, where it needs an answer, waits for
the matching ``tool_result`` / ``approval`` / ``policy_verdict`` event.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

__all__ = ["HarnessTurn", "MessageStream", "TurnBody", "TurnFailed"]

log = logging.getLogger("omnigent.harnesses.external")

TurnBody = Callable[["HarnessTurn"], Awaitable[None]]
"""The harness author's function: runs one turn."""

_MAX_INJECTIONS = 256
_ids = itertools.count(1)


class TurnFailed(Exception):
    """Raise it to end the turn ``failed`` with this message (any exception does)."""


@attrs.define(eq=False)
class _Waiter:
    done: trio.Event = attrs.field(factory=trio.Event)
    answer: dict[str, Any] | None = None


class MessageStream:
    """An assistant message being streamed; made by :meth:`HarnessTurn.message`."""

    def __init__(self, turn: HarnessTurn, item_id: str) -> None:
        self._turn = turn
        self.item_id = item_id
        self.parts: list[str] = []

    async def write(self, delta: str) -> None:
        """Stream one piece of text."""
        if delta:
            self.parts.append(delta)
            await self._turn.emit(
                {"type": "response.output_text.delta", "item_id": self.item_id, "delta": delta}
            )


class HarnessTurn:
    """A turn in progress. Made by the scaffold for each ``message`` that starts one.

    Attributes:
        items: the whole conversation the runtime sent, oldest first, ending with the
            message this turn answers (item dicts, as on the wire).
        model: the session's effective model (``None`` if it has none).
        instructions: the agent's prompt.
        tools: the tools the runtime offers, as function schemas.
    """

    def __init__(self, event: Mapping[str, Any], frames: trio.MemorySendChannel[bytes]) -> None:
        self.items: list[dict[str, Any]] = list(event.get("content") or [])
        self.model: str | None = event.get("model")
        self.instructions: str = event.get("instructions") or ""
        self.tools: list[dict[str, Any]] = list(event.get("tools") or [])
        self.response_id: str = event.get("response_id") or f"resp_{next(_ids)}"
        self._frames = frames
        self._scope = trio.CancelScope()
        self._waiters: dict[tuple[str, str], _Waiter] = {}
        self._injected: list[dict[str, Any]] = []
        self._injection_arrived = trio.Event()

    # -- reading the request -----------------------------------------------------------

    @property
    def text(self) -> str:
        """The text of the last user message (what this turn answers)."""
        for item in reversed(self.items):
            if item.get("type") == "message" and item.get("role") == "user":
                return "".join(
                    str(block.get("text", ""))
                    for block in item.get("content") or ()
                    if isinstance(block, dict)
                )
        return ""

    # -- talking back ----------------------------------------------------------------

    async def emit(self, frame: Mapping[str, Any]) -> None:
        """Send one frame (``{type, ...}``) on the turn's stream."""
        data = json.dumps(frame, separators=(",", ":"))
        await self._frames.send(f"event: {frame['type']}\ndata: {data}\n\n".encode())

    @asynccontextmanager
    async def message(self) -> AsyncIterator[MessageStream]:
        """Stream an assistant message; it is sent as done when the block exits."""
        stream = MessageStream(self, f"msg_{next(_ids)}")
        yield stream
        item = {
            "type": "message",
            "id": stream.item_id,
            "role": "assistant",
            "content": [{"type": "output_text", "text": "".join(stream.parts)}],
        }
        await self.emit({"type": "response.output_item.done", "item": item})

    async def say(self, text: str) -> None:
        """Stream ``text`` as one assistant message (in one delta)."""
        async with self.message() as stream:
            await stream.write(text)

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Ask the runtime to run a tool (through its policies); returns the output."""
        call_id = f"call_{next(_ids)}"
        text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        item = {
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": text,
            "status": "action_required",
        }
        answer = await self._ask(
            ("tool_result", call_id), {"type": "response.output_item.done", "item": item}
        )
        return str(answer.get("output", ""))

    async def elicit(
        self,
        message: str,
        *,
        requested_schema: Mapping[str, Any] | None = None,
        mode: str = "form",
        **extra: Any,
    ) -> tuple[str, Any]:
        """Ask the person behind the session; returns ``(action, content)``."""
        elicitation_id = f"elicit_{next(_ids)}"
        params: dict[str, Any] = {"mode": mode, "message": message, **extra}
        if requested_schema is not None:
            params["requestedSchema"] = dict(requested_schema)
        frame = {
            "type": "response.elicitation_request",
            "elicitation_id": elicitation_id,
            "params": params,
        }
        answer = await self._ask(("approval", elicitation_id), frame)
        return str(answer.get("action")), answer.get("content")

    async def evaluate_policy(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The runtime's policy verdict on ``event`` (``{type: PHASE_TOOL_CALL, data}``).

        Returns ``{action: POLICY_ACTION_ALLOW | POLICY_ACTION_DENY, reason?, data?}``.
        """
        evaluation_id = f"eval_{next(_ids)}"
        frame = {
            "type": "policy_evaluation.requested",
            "evaluation_id": evaluation_id,
            "event": dict(event),
        }
        answer = await self._ask(("policy_verdict", evaluation_id), frame)
        return {k: v for k, v in answer.items() if k not in ("type", "evaluation_id")}

    async def next_injection(self) -> list[dict[str, Any]]:
        """Wait for messages the user sent during this turn; returns their items."""
        while not self._injected:
            self._injection_arrived = trio.Event()
            await self._injection_arrived.wait()
        taken, self._injected = self._injected, []
        return taken

    def injections_nowait(self) -> list[dict[str, Any]]:
        """Messages that arrived during this turn and were not taken yet (maybe none)."""
        taken, self._injected = self._injected, []
        return taken

    async def _ask(self, key: tuple[str, str], frame: Mapping[str, Any]) -> dict[str, Any]:
        waiter = self._waiters[key] = _Waiter()
        try:
            await self.emit(frame)
            await waiter.done.wait()
        finally:
            del self._waiters[key]
        assert waiter.answer is not None
        return waiter.answer

    # -- called by the app -----------------------------------------------------------

    def answer(self, event: Mapping[str, Any]) -> bool:
        """Deliver a ``tool_result`` / ``approval`` / ``policy_verdict``; False if unawaited."""
        kind = str(event.get("type"))
        ident = {"tool_result": "call_id", "approval": "elicitation_id"}.get(kind, "evaluation_id")
        waiter = self._waiters.get((kind, str(event.get(ident))))
        if waiter is None or waiter.done.is_set():
            return False
        waiter.answer = dict(event)
        waiter.done.set()
        return True

    def inject(self, items: list[Any]) -> None:
        """Messages sent mid-turn (the oldest are dropped past 256 waiting)."""
        self._injected.extend(i for i in items if isinstance(i, dict))
        del self._injected[:-_MAX_INJECTIONS]
        self._injection_arrived.set()

    def cancel(self) -> None:
        self._scope.cancel()

    async def run(self, body: TurnBody) -> None:
        """Run ``body`` and end the stream with exactly one terminal frame."""
        info = {"id": self.response_id, "status": "in_progress"}
        async with self._frames:
            await self.emit({"type": "response.created", "response": info})
            terminal: dict[str, Any]
            try:
                with self._scope:
                    await body(self)
                if self._scope.cancelled_caught:
                    terminal = {
                        "type": "response.cancelled",
                        "response": {**info, "status": "cancelled"},
                    }
                else:
                    terminal = {
                        "type": "response.completed",
                        "response": {**info, "status": "completed"},
                    }
            except Exception as exc:
                if not isinstance(exc, TurnFailed):
                    log.exception("the turn failed")
                error = {"code": "harness_error", "message": str(exc) or type(exc).__name__}
                terminal = {
                    "type": "response.failed",
                    "response": {**info, "status": "failed"},
                    "error": error,
                }
            with trio.move_on_after(5, shield=True):
                await self.emit(terminal)
