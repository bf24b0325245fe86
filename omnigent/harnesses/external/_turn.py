"""One external-harness turn's wire: the connection to the process and the relay of
its SSE answer into the turn (see :mod:`omnigent.harnesses.external._harness`).

:class:`TurnRelay` reads the stream as raw chunks, coalesces text deltas, runs
``action_required`` calls through the core's tool path and posts their results back,
forwards the harness's elicitations and policy evaluations, and injects messages that
arrive mid-turn. A process that dies, or a stream that ends without a terminal event,
fails the turn; it never hangs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, suppress
from typing import Any

import attrs
import httpx
import trio

from ...errors import HarnessError
from ...model import FunctionCallItem, FunctionCallOutputItem, Item, MessageItem, structure
from ...observability import carrier
from ...processes import (
    ManagedProcess,
)
from ..base import MessageWriter, TurnContext, TurnRequest
from ._protocol import (
    DELTA,
    FrameReader,
    elicitation_params,
    error_message,
    injection_body,
    turn_body,
)

__all__ = ["Connection", "TurnRelay", "is_cancelled"]

# How long a broken stream waits to learn whether the process died.
_EXIT_WAIT = 1.0
_TERMINAL = ("response.completed", "response.failed", "response.cancelled")


@attrs.define(eq=False)
class Connection:
    """A live harness process and the HTTP client that talks to it."""

    process: ManagedProcess
    client: httpx.AsyncClient

    async def post(self, session_id: str, body: Mapping[str, Any]) -> Any:
        """POST a flat event; the harness's answer as it came (``None`` for a 204).

        Raises:
            HarnessError: the harness refused it or cannot be reached.
        """
        try:
            response = await self.client.post(f"/v1/sessions/{session_id}/events", json=body)
        except httpx.TransportError as exc:
            raise HarnessError(f"the external harness cannot be reached: {exc}") from exc
        if response.status_code >= 300:
            raise HarnessError(
                f"the external harness answered {response.status_code} to "
                f"{body.get('type')!r}: {response.text[:500]}"
            )
        if response.status_code == 204 or not response.content:
            return None
        return response.json()


def is_cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is (or holds) a ``trio.Cancelled``."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[0] is not None
    return isinstance(exc, trio.Cancelled)


class TurnRelay:
    """One turn's stream from the harness, relayed into the turn's context."""

    def __init__(self, connection: Connection, request: TurnRequest, ctx: TurnContext) -> None:
        self._connection = connection
        self._request = request
        self._ctx = ctx
        self._stack = AsyncExitStack()
        self._writer: MessageWriter | None = None
        self._writer_item: Any = None
        self._dispatched: set[str] = set()
        self._finished = False
        self._failed = False  # a response.failed was seen (a later completed overrides it)

    async def run(self) -> None:
        process = self._connection.process
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_process, nursery.cancel_scope)
            async with self._stack:
                await self._relay_stream(nursery)
            nursery.cancel_scope.cancel()
        if not self._finished and not self._failed:
            # A stream that broke off is usually a process that died: the socket closes
            # as it exits, a moment before its exit is seen. Wait that moment.
            with trio.move_on_after(_EXIT_WAIT):
                await process.exited.wait()
            if not process.alive:
                raise HarnessError(f"the external harness {process.describe_exit()}")
            raise HarnessError("the external harness ended the stream without finishing the turn")

    async def _watch_process(self, scope: trio.CancelScope) -> None:
        await self._connection.process.exited.wait()
        scope.cancel()  # run() then reports how the process ended

    async def _relay_stream(self, nursery: trio.Nursery) -> None:
        client = self._connection.client
        path = f"/v1/sessions/{self._request.session_id}/events"
        try:
            # W3C trace context: the harness's own spans may continue the turn's.
            trace = carrier()
            async with client.stream(
                "POST", path, json=turn_body(self._request), headers=trace or None
            ) as response:
                if response.status_code != 200:
                    body = (await response.aread())[:500].decode("utf-8", "replace")
                    raise HarnessError(
                        f"the external harness answered {response.status_code} to the turn: {body}"
                    )
                nursery.start_soon(self._forward_injections)
                reader = FrameReader()
                chunks = response.aiter_raw()
                try:
                    async for chunk in chunks:
                        for frame in reader.feed(chunk):
                            await self._handle(frame)
                            if self._finished:
                                return
                finally:
                    await _abandon(chunks)
        except httpx.TransportError as exc:
            if self._connection.process.alive:
                raise HarnessError(f"the external harness stream broke: {exc}") from exc

    async def _forward_injections(self) -> None:
        while True:
            await self._ctx.wait_for_injection()
            messages = await self._ctx.take_injections()
            if messages:
                await self._connection.post(self._request.session_id, injection_body(messages))

    # -- frames ------------------------------------------------------------------------

    async def _handle(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == DELTA:
            await self._delta(frame)
        elif kind == "response.output_item.done":
            await self._item_done(frame.get("item"))
        elif kind == "response.elicitation_request":
            await self._elicitation(frame)
        elif kind == "policy_evaluation.requested":
            await self._policy(frame)
        elif kind == "response.failed":
            # Not the end yet: a harness may recover and still complete the response
            # (then the turn succeeded, ends idle). The stream's end settles it.
            await self._close_message()
            default = "the external harness reported response.failed"
            self._ctx.report_response_status("failed", error_message(frame, default))
            self._failed = True
        elif kind in _TERMINAL:
            await self._close_message()
            if kind == "response.completed":
                self._ctx.report_response_status("completed")
            else:
                default = f"the external harness reported {kind}"
                self._ctx.report_response_status("failed", error_message(frame, default))
            self._finished = True
        elif kind == "error":
            raise HarnessError(error_message(frame, "the external harness reported an error"))
        # Anything else (response.created, response.in_progress, heartbeats) carries
        # nothing the core does not publish itself.

    async def _delta(self, frame: Mapping[str, Any]) -> None:
        delta = frame.get("delta")
        if not isinstance(delta, str):
            raise HarnessError("the external harness sent a delta without text")
        item = frame.get("item_id")
        if self._writer is None or item != self._writer_item:
            await self._close_message()
            self._writer = await self._stack.enter_async_context(self._ctx.open_message())
            self._writer_item = item
        await self._writer.write(delta)

    async def _close_message(self) -> None:
        if self._writer is not None:
            self._writer = None
            await self._stack.aclose()  # persists the message
            self._stack = AsyncExitStack()

    async def _item_done(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            raise HarnessError("the external harness sent an item that is not an object")
        kind = raw.get("type")
        if kind == "message" and self._writer is not None:
            await self._close_message()  # the streamed message, now complete
            return
        await self._close_message()
        try:
            item: Item = structure(_without_extras(raw), Item)
        except Exception as exc:
            raise HarnessError(f"the external harness sent an invalid item: {exc}") from exc
        if isinstance(item, FunctionCallItem) and item.status == "action_required":
            self._dispatched.add(item.call_id)
            output = await self._ctx.call_tool(item.name, item.arguments, call_id=item.call_id)
            body = {"type": "tool_result", "call_id": item.call_id, "output": output}
            await self._connection.post(self._request.session_id, body)
        elif isinstance(item, FunctionCallItem | FunctionCallOutputItem) and (
            item.call_id in self._dispatched
        ):
            return  # the runtime ran it and recorded it already
        elif isinstance(item, MessageItem | FunctionCallItem | FunctionCallOutputItem):
            await self._ctx.add_item(item)

    async def _elicitation(self, frame: Mapping[str, Any]) -> None:
        elicitation_id = frame.get("elicitation_id")
        if not isinstance(elicitation_id, str):
            raise HarnessError("the external harness sent an elicitation without an id")
        await self._close_message()
        action, content = await self._ctx.elicit(elicitation_params(frame.get("params")))
        body: dict[str, Any] = {
            "type": "approval",
            "elicitation_id": elicitation_id,
            "action": action,
        }
        if content is not None:
            body["content"] = content
        await self._connection.post(self._request.session_id, body)

    async def _policy(self, frame: Mapping[str, Any]) -> None:
        evaluation_id = frame.get("evaluation_id")
        if not isinstance(evaluation_id, str):
            raise HarnessError("the external harness sent a policy evaluation without an id")
        try:
            verdict = dict(await self._ctx.evaluate_policy(frame.get("event") or {}))
        except HarnessError:
            raise
        except Exception as exc:  # a malformed event: the harness gets a DENY saying why
            reason = getattr(exc, "message", str(exc))
            verdict = {"result": "POLICY_ACTION_DENY", "reason": f"invalid policy event: {reason}"}
        body = {"type": "policy_verdict", "evaluation_id": evaluation_id}
        body["action"] = verdict.pop("result")
        body.update(verdict)
        await self._connection.post(self._request.session_id, body)


async def _abandon(chunks: AsyncIterator[bytes]) -> None:
    """End httpx's nested body generators instead of dropping them mid-``yield``.

    Dropped, each would be collected unfinished (and Trio warns); read on in a
    cancelled scope, they all finish with the ``Cancelled`` at their next await. The
    loop is bounded for chunks that come back without an await.
    """
    with trio.CancelScope() as scope, suppress(Exception):
        scope.cancel()
        for _ in range(64):
            await chunks.__anext__()


_ITEM_KEYS = {
    "message": {"type", "role", "content", "id", "status"},
    "function_call": {"type", "call_id", "name", "arguments", "id", "status"},
    "function_call_output": {"type", "call_id", "output", "id"},
}


def _without_extras(raw: dict[str, Any]) -> dict[str, Any]:
    """An item with only the keys omnigent knows (harnesses add their own, like ``agent``)."""
    keys = _ITEM_KEYS.get(str(raw.get("type")))
    if keys is None:
        return raw
    item = {k: v for k, v in raw.items() if k in keys}
    if isinstance(item.get("arguments"), dict):
        item["arguments"] = json.dumps(item["arguments"])
    return item
