"""One turn: the harness run in a cancel scope, with exactly one terminal status.

:class:`Turn` is the :class:`~omnigent.harnesses.base.TurnContext` a harness talks
to, and :meth:`Turn.run` is the whole life of a turn: ``session.status running``,
``response.created``, the harness, then — in a shielded ``finally``, whatever happened
— one terminal ``response.*`` event and one terminal ``session.status``:

============================================  ==================================================
how the harness ended                         terminal status
============================================  ==================================================
returned (last in-stream report not failed)   ``idle``
returned after reporting ``failed``           ``failed`` with its message
raised an ``OmnigentError`` (setup or run)    ``failed`` with its message and code
raised anything else (setup or run)           ``failed``: a fixed sentence, ``harness_crashed``
cancelled (interrupt, stop, shutdown)         ``cancelled``
============================================  ==================================================

The text of an unexpected exception is never published (it may hold secrets); it is
logged with the session id (see :func:`describe_failure`).

What a turn is seen as from outside is one piece with it: an ``invoke_agent`` span
around the whole turn (``chat`` spans of its model calls and ``execute_tool`` spans of
its tool calls inside), the model usage its harness reports (:meth:`Turn.record_usage`:
priced, held to the session's budget by :meth:`Turn.check_budget`, carried on the
terminal event as ``response.usage`` and added to the session's stored sums), the
turn and tool counters of the runtime's metrics, and one log line when it ends.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..._cancellation import only_exceptions, split_cancellation
from ..._ids import new_id
from ...errors import HarnessError, InternalError, OmnigentError, SpecUnresolved
from ...harnesses import Harness, MessageWriter, TurnRequest, open_streamed_message
from ...model import (
    ElicitationParams,
    ErrorInfo,
    Event,
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    MessageItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseCancelled,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseInfo,
    SessionStatus,
    SessionStatusChanged,
    TurnStatus,
    Usage,
    item_text,
    unstructure,
)
from ...observability import TURNS_LOGGER, Carrier, Span, agent_span, log_fields, tool_span
from ..work import TurnOutcome
from ._history import History
from ._services import ActorServices
from ._usage import TurnUsage

if TYPE_CHECKING:
    from ..tools.session import SessionTools

__all__ = [
    "CRASHED_MESSAGE",
    "Turn",
    "describe_failure",
]

log = logging.getLogger(__name__)
turns_log = logging.getLogger(TURNS_LOGGER)

# How long the shielded end of a turn may take to publish its terminal events.
_FINALISE_TIMEOUT = 10.0


def _is_cancellation(exc: BaseException) -> bool:
    return split_cancellation(exc)[1] is None


def _first_error(exc: BaseException) -> BaseException:
    """The first non-cancellation leaf of a (possibly grouped) exception."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if not _is_cancellation(inner):
                return _first_error(inner)
    return exc


CRASHED_MESSAGE = "the harness failed unexpectedly; the cause is in the server log"
"""What a stream says about an unexpected exception in a harness or in turn setup."""
_INTERNAL_MESSAGE = "the turn failed because of an internal error; the cause is in the server log"


def describe_failure(exc: BaseException) -> ErrorInfo:
    """What a failed turn tells everyone who can read its stream.

    An :class:`~omnigent.errors.OmnigentError` raised on purpose (a harness's
    ``HarnessError``, a model endpoint's failure) keeps its message and code: it was
    written for the user. Anything else is a bug, and its text may hold secrets (a
    connection string, a path, a key): the stream gets a fixed sentence with the code
    ``harness_crashed`` and the cause goes to the log only. ``InternalError`` is a bug
    by definition and is told the same way, with its own code.
    """
    leaf = _first_error(exc)
    if isinstance(leaf, SpecUnresolved):  # the original's sentence, and what failed
        return ErrorInfo(leaf.message, leaf.code, leaf.type)
    if isinstance(leaf, InternalError):
        return ErrorInfo(_INTERNAL_MESSAGE, leaf.code)
    if isinstance(leaf, OmnigentError):
        return ErrorInfo(leaf.message, leaf.code)
    return ErrorInfo(CRASHED_MESSAGE, "harness_crashed")


class Turn:
    """A running turn, and the context its harness talks to.

    Args:
        session_id: the session whose turn it is.
        harness_name: the harness that runs it (the actor's, once it knows).
        services: what the session's actor stands on.
        parent: the trace context the turn's span belongs under (the tool call that
            dispatched the message it answers, for a sub-agent); None: the current.
    """

    def __init__(
        self,
        session_id: str,
        harness_name: str,
        services: ActorServices,
        parent: Carrier | None = None,
    ) -> None:
        self.session_id = session_id
        self.response_id = new_id("resp")
        self.harness_name = harness_name
        self.scope = trio.CancelScope()
        self._services = services
        self._parent = parent
        self.usage = TurnUsage()
        self.agent_name = "unknown"
        self.model: str | None = None
        self._reported: tuple[str, str | None] | None = None
        self._tools: SessionTools | None = None
        self._take_injections: Callable[[], Awaitable[list[MessageItem]]] | None = None
        self._wait_injection: Callable[[], Awaitable[None]] | None = None
        self._last_text = ""
        # Set when the turn has ended (see :meth:`run`).
        self.outcome: TurnOutcome | None = None
        self.status = TurnStatus.FAILED
        self.error: ErrorInfo | None = None
        self._history: History | None = None

    def bind(
        self,
        tools: SessionTools,
        take_injections: Callable[[], Awaitable[list[MessageItem]]],
        wait_injection: Callable[[], Awaitable[None]] | None = None,
        history: History | None = None,
        usage: TurnUsage | None = None,
    ) -> None:
        """Attach the session's tools, message buffer and kept history, and the turn's
        usage and budget (while preparing)."""
        self._tools = tools
        self._take_injections = take_injections
        self._wait_injection = wait_injection
        self._history = history
        if usage is not None:
            self.usage = usage

    # -- TurnContext -----------------------------------------------------------------

    async def emit(self, event: Event) -> None:
        await self._services.bus.publish(self.session_id, event)

    async def add_item(self, item: Item) -> None:
        if isinstance(item, MessageItem) and item.role == "assistant":
            self._last_text = item_text(item)
        history = self._history
        if history is not None:
            # Recorded before the write, so the kept history has the store's order
            # even when two writes of this turn overlap; a failed write casts doubt.
            history.record(item)
        try:
            await self._services.store.put_items(self.session_id, [unstructure(item, Item)])
        except BaseException:
            if history is not None:
                history.doubt()
            raise
        await self.emit(OutputItemDone(item=item, response_id=self.response_id))

    def open_message(self) -> AbstractAsyncContextManager[MessageWriter]:
        # What streamed and could not be kept is lost: a warning.
        return open_streamed_message(self._send_delta, self.add_item, log=log)

    async def _send_delta(self, item_id: str, delta: str) -> None:
        await self.emit(OutputTextDelta(response_id=self.response_id, item_id=item_id, delta=delta))

    async def call_tool(
        self, name: str, arguments: str | Mapping[str, Any], *, call_id: str | None = None
    ) -> str:
        text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        call = FunctionCallItem(call_id=call_id or new_id("call"), name=name, arguments=text)
        await self.add_item(call)
        with tool_span(name, call_id=call.call_id) as span:
            if self._tools is None:
                output = "Error: no tools are available in this turn"
            else:
                output = await self._tools.call(name, arguments)
            if output.startswith("Error:"):
                span.fail("tool_error", output[:200])
        # A tool that ran has its output recorded, even if the turn is being cancelled:
        # it may have had effects (or drained the inbox) the history must show.
        with trio.move_on_after(_FINALISE_TIMEOUT, shield=True):
            await self.add_item(attrs.evolve(call, status="completed"))
            await self.add_item(FunctionCallOutputItem(call_id=call.call_id, output=output))
        return output

    async def take_injections(self) -> list[MessageItem]:
        take = self._take_injections
        return [] if take is None else await take()

    async def wait_for_injection(self) -> None:
        if self._wait_injection is None:
            await trio.sleep_forever()
        else:
            await self._wait_injection()

    @asynccontextmanager
    async def launching(self) -> AsyncIterator[None]:
        await self.emit(SessionStatusChanged(status=SessionStatus.LAUNCHING))
        yield
        await self.emit(SessionStatusChanged(status=SessionStatus.RUNNING))

    async def elicit(self, params: ElicitationParams) -> tuple[str, Any]:
        answer = await self._services.elicitations.ask(self.session_id, params)
        return answer.action, answer.content

    async def evaluate_policy(
        self, event: Mapping[str, Any], *, ask: ElicitationParams | None = None
    ) -> Mapping[str, Any]:
        if self._tools is None:
            raise HarnessError("no policies are available in this turn")
        verdict = await self._tools.evaluate(event, ask=ask)
        return verdict.wire()

    def report_response_status(self, status: str, error: str | None = None) -> None:
        self._reported = (status, error)

    def record_usage(self, usage: Usage, model: str | None = None) -> None:
        priced = self.usage.record(usage, model)
        metrics = self._services.metrics
        if metrics is not None:
            metrics.usage_recorded(model or self.model, priced)

    def check_budget(self) -> None:
        self.usage.check()

    # -- the life of a turn ------------------------------------------------------------

    async def run(
        self, prepare: Callable[[], Awaitable[tuple[Harness, TurnRequest]]]
    ) -> TurnStatus:
        """Run the turn to its end; returns how it ended.

        ``prepare`` builds the harness and the request (inside the turn, so a setup
        failure is a failed turn, not a lost one).

        Cancellation: a cancel from outside (stop, shutdown) ends the turn
        ``cancelled`` and is re-raised after the terminal events are published.
        """
        started = time.monotonic()
        with agent_span(
            "unknown",
            session_id=self.session_id,
            model=None,
            harness=self.harness_name,
            response_id=self.response_id,
            parent=self._parent,
        ) as span:
            try:
                return await self._run(prepare, span)
            finally:
                span.set_attribute("omnigent.turn.status", str(self.status))
                if not self.usage.turn.empty:
                    span.set_usage(self.usage.turn)
                self._ended(self.status, time.monotonic() - started)

    async def _run(
        self, prepare: Callable[[], Awaitable[tuple[Harness, TurnRequest]]], span: Span
    ) -> TurnStatus:
        status = TurnStatus.FAILED
        error: ErrorInfo | None = ErrorInfo("the turn ended unexpectedly", "internal_error")
        try:
            await self.emit(SessionStatusChanged(status=SessionStatus.RUNNING))
            with self.scope:
                await self.emit(
                    ResponseCreated(
                        response=ResponseInfo(id=self.response_id, status=TurnStatus.IN_PROGRESS)
                    )
                )
                harness, request = await prepare()
                self.agent_name, self.model = request.spec.name, request.model
                span.name_agent(request.spec.name, request.model, self.harness_name)
                self.check_budget()  # a session already at its limit makes no call
                await harness.run_turn(request, self)
                status, error = self._outcome()
            if self.scope.cancelled_caught:
                status, error = TurnStatus.CANCELLED, None
        except BaseException as exc:
            cancel, failure = split_cancellation(exc)
            if failure is None or not only_exceptions(failure):
                status, error = TurnStatus.CANCELLED, None
                raise
            status, error = TurnStatus.FAILED, describe_failure(failure)
            leaf = _first_error(failure)
            if not isinstance(leaf, OmnigentError) or isinstance(leaf, InternalError):
                log.exception(
                    "session %s: turn %s: harness %r crashed",
                    self.session_id,
                    self.response_id,
                    self.harness_name,
                    exc_info=failure,
                )
            elif not isinstance(leaf, HarnessError):
                log.warning(
                    "session %s: turn %s failed: %s", self.session_id, self.response_id, leaf
                )
            if cancel is not None:
                # The turn failed while being cancelled (a harness nursery whose child
                # raised during a stop): it ends ``failed``, and the cancellation goes
                # on to the scope that asked for it.
                raise cancel from None
        finally:
            if error is not None:
                span.fail(error.code, error.message)
            self.status, self.error = status, error
            with trio.move_on_after(_FINALISE_TIMEOUT, shield=True):
                await self._finalise(status, error)
        return status

    def _ended(self, status: TurnStatus, seconds: float) -> None:
        """Count the turn, and write its one log line (ids, numbers, codes: no text)."""
        metrics = self._services.metrics
        if metrics is not None:
            metrics.turn_ended(str(status), self.harness_name, seconds)
        usage = self.usage.turn
        code = self.error.code if self.error is not None else None
        turns_log.info(
            "turn %s of %s (%s) ended %s in %.3fs: %d tokens in, %d out%s%s",
            self.response_id,
            self.session_id,
            self.agent_name,
            status,
            seconds,
            usage.input_tokens,
            usage.output_tokens,
            f", ${usage.cost_usd:.6f}" if usage.cost_usd is not None else "",
            f" ({code})" if code else "",
            extra=log_fields(
                session_id=self.session_id,
                response_id=self.response_id,
                agent=self.agent_name,
                harness=self.harness_name,
                model=self.model,
                status=str(status),
                duration_s=round(seconds, 6),
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost_usd=usage.cost_usd,
                error_code=code,
            ),
        )

    def _outcome(self) -> tuple[TurnStatus, ErrorInfo | None]:
        if self._reported is not None and self._reported[0] == TurnStatus.FAILED:
            message = self._reported[1] or "the harness reported a failed response"
            return TurnStatus.FAILED, ErrorInfo(message, "harness_error")
        return TurnStatus.COMPLETED, None

    async def _finalise(self, status: TurnStatus, error: ErrorInfo | None) -> None:
        """Add the turn's usage to the session's sums, then publish the turn's terminal
        pair: its ``response.*`` (with ``usage``, when any was reported) and
        ``session.status``."""
        usage = self.usage.turn
        if not usage.empty:
            try:
                await self._services.store.add_usage(self.session_id, usage)
            except Exception:
                log.warning(
                    "could not add the usage of turn %s to its session's sums",
                    self.response_id,
                    exc_info=True,
                )
        info = ResponseInfo(
            id=self.response_id, status=status, usage=None if usage.empty else usage
        )
        terminal: Event
        if status is TurnStatus.COMPLETED:
            terminal = ResponseCompleted(response=info)
        elif status is TurnStatus.CANCELLED:
            terminal = ResponseCancelled(response=info)
        else:
            assert error is not None
            terminal = ResponseFailed(response=info, error=error)
        ended = SessionStatusChanged(status=status.session_status(), error=error)
        self.outcome = TurnOutcome(status, error.message if error else None, self._last_text)
        try:
            # Together and without waiting for room: a turn always ends, and never
            # with half of its terminal pair.
            await self._services.bus.publish_now(self.session_id, terminal, ended)
        except Exception:
            log.exception("could not publish the end of turn %s", self.response_id)
