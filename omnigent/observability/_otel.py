"""The OpenTelemetry side of :mod:`._tracing`: imported only when tracing is turned on.

Span names and attributes follow the OpenTelemetry GenAI semantic conventions
(``gen_ai.operation.name``, ``gen_ai.agent.name``, ``gen_ai.conversation.id``,
``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``); omnigent's own are under
``omnigent.*``. A failure is the span's status (``ERROR`` with the message) and
``error.type`` (the error's code); a cancelled turn or tool call is not an error
(``omnigent.cancelled``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .._version import __version__
from ..model import Usage

if TYPE_CHECKING:  # a type only: _tracing imports this module when tracing is on
    from ._tracing import AttributeValue

__all__ = ["OtelTracing", "open_exporting_provider"]

_PROPAGATOR = TraceContextTextMapPropagator()
# Seconds the provider gets to export what is queued when the program ends.
_SHUTDOWN_TIMEOUT_MS = 5_000


class _OtelSpan:
    """A :class:`~._tracing.Span` over an OpenTelemetry span."""

    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set_usage(self, usage: Usage) -> None:
        span = self._span
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if usage.cached_input_tokens:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_input_tokens)
        if usage.cost_usd is not None:
            span.set_attribute("omnigent.usage.cost_usd", usage.cost_usd)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self._span.set_attribute(key, value)

    def name_agent(self, agent: str, model: str | None, harness: str) -> None:
        span = self._span
        span.update_name(f"invoke_agent {agent}")
        span.set_attribute("gen_ai.agent.name", agent)
        span.set_attribute("omnigent.harness", harness)
        if model:
            span.set_attribute("gen_ai.request.model", model)

    def fail(self, code: str, message: str) -> None:
        self._span.set_attribute("error.type", code)
        self._span.set_status(Status(StatusCode.ERROR, message))


class OtelTracing:
    """Opens the GenAI spans on one tracer provider (the global one if ``None``)."""

    def __init__(self, provider: Any = None) -> None:
        source = provider if provider is not None else trace.get_tracer_provider()
        self._tracer = source.get_tracer("omnigent", __version__)

    @contextlib.contextmanager
    def _span(
        self, name: str, kind: SpanKind, attributes: dict[str, Any], parent: Any = None
    ) -> Iterator[_OtelSpan]:
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            wrapped = _OtelSpan(span)
            try:
                yield wrapped
            except BaseException as exc:
                _mark(span, exc)
                raise

    def agent_span(
        self,
        agent: str,
        session_id: str,
        model: str | None,
        harness: str,
        response_id: str,
        parent: Mapping[str, str] | None,
    ) -> contextlib.AbstractContextManager[_OtelSpan]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": session_id,
            "omnigent.harness": harness,
            "omnigent.response.id": response_id,
        }
        if model:
            attributes["gen_ai.request.model"] = model
        context = _PROPAGATOR.extract(parent) if parent else None
        return self._span(f"invoke_agent {agent}", SpanKind.INTERNAL, attributes, context)

    def chat_span(
        self, model: str, provider: str | None
    ) -> contextlib.AbstractContextManager[_OtelSpan]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
        }
        if provider:
            attributes["gen_ai.provider.name"] = provider
        return self._span(f"chat {model}", SpanKind.CLIENT, attributes)

    def tool_span(self, tool: str, call_id: str) -> contextlib.AbstractContextManager[_OtelSpan]:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        return self._span(f"execute_tool {tool}", SpanKind.INTERNAL, attributes)

    def inject(self) -> dict[str, str]:
        out: dict[str, str] = {}
        _PROPAGATOR.inject(out)
        return out

    @contextlib.contextmanager
    def attached(self, received: Mapping[str, str]) -> Iterator[None]:
        token = otel_context.attach(_PROPAGATOR.extract(received))
        try:
            yield
        finally:
            otel_context.detach(token)


def _mark(span: trace.Span, exc: BaseException) -> None:
    """How an exception leaving a span shows on it: a cancellation is not an error."""
    import trio  # the runtime's; imported here so the module stays light to import

    if isinstance(exc, trio.Cancelled) or (
        isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None
    ):
        span.set_attribute("omnigent.cancelled", True)
        return
    span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))


@contextlib.contextmanager
def open_exporting_provider(env: Mapping[str, str]) -> Iterator[Any]:
    """A tracer provider exporting over OTLP HTTP (protobuf) in batches, for the block.

    Its resource's ``service.name`` is ``OTEL_SERVICE_NAME``, else ``omnigent``; the
    endpoint is ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``; the sampler
    (``OTEL_TRACES_SAMPLER``) and the exporter's headers and timeouts are read from
    the process's environment by the SDK itself.

    Resource handling: the batch processor exports from a thread of its own; leaving
    the block flushes it and shuts it down (at most :data:`_SHUTDOWN_TIMEOUT_MS`).
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create(
        {
            "service.name": env.get("OTEL_SERVICE_NAME") or "omnigent",
            "service.version": __version__,
        }
    )
    provider = TracerProvider(resource=resource)
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if not traces:
        traces = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/") + "/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
    try:
        yield provider
    finally:
        provider.force_flush(_SHUTDOWN_TIMEOUT_MS)
        provider.shutdown()
