"""Spans of the OpenTelemetry GenAI conventions, paid for only when tracing is on.

The core opens three kinds of span, named and attributed as the OpenTelemetry GenAI
semantic conventions say:

- ``invoke_agent {agent}`` for a turn (:func:`agent_span`),
- ``chat {model}`` for one model call (:func:`chat_span`),
- ``execute_tool {tool}`` for one tool call (:func:`tool_span`).

Tracing is a process-wide switch, as OpenTelemetry's tracer provider is: it is on
once :func:`enable_tracing` was called (the command line does it from the standard
``OTEL_*`` variables, :func:`open_tracing`). While it is off every span function
returns one shared no-op object after a single global read, and **nothing of
OpenTelemetry is imported** — the ``otel`` extra (``pip install 'omnigent[otel]'``)
is needed only to turn it on, and :mod:`._otel` is where it is imported.

Spans cross process boundaries as W3C trace context (``traceparent``, ``tracestate``)
in a small string mapping, the *carrier*: :func:`carrier` captures the current span
into one (empty while tracing is off), :func:`continued` makes a carrier the parent of
the spans opened inside it. The runner protocol, external harness requests and MCP
``_meta`` carry it; a sub-agent's turn is parented to the tool call that dispatched it
the same way (``docs/observability.md``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..model import Usage

if TYPE_CHECKING:
    from ._otel import OtelTracing

__all__ = [
    "Carrier",
    "Span",
    "agent_span",
    "carrier",
    "chat_span",
    "continued",
    "disable_tracing",
    "enable_tracing",
    "open_tracing",
    "tool_span",
    "tracing_enabled",
]

log = logging.getLogger(__name__)

AttributeValue = str | int | float | bool | tuple[str, ...]
"""What a span attribute may hold."""

Carrier = Mapping[str, str]
"""W3C trace context as a string mapping: ``{"traceparent": …, "tracestate"?: …}``."""

_MAX_CARRIER_VALUE = 512  # traceparent is 55 characters; tracestate at most 512


class Span(Protocol):
    """What the core tells an open span (every method is a no-op while tracing is off)."""

    def set_usage(self, usage: Usage) -> None:
        """``gen_ai.usage.input_tokens`` / ``output_tokens`` (and the cost, if priced)."""
        ...

    def set_attribute(self, key: str, value: AttributeValue) -> None: ...

    def name_agent(self, agent: str, model: str | None, harness: str) -> None:
        """An agent span learns its agent once the turn is prepared: its name becomes
        ``invoke_agent {agent}``, with ``gen_ai.agent.name`` and the model."""
        ...

    def fail(self, code: str, message: str) -> None:
        """Mark the span failed: status ERROR with ``message``, ``error.type`` ``code``."""
        ...


class _NoSpan:
    __slots__ = ()

    def set_usage(self, usage: Usage) -> None:
        return None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        return None

    def name_agent(self, agent: str, model: str | None, harness: str) -> None:
        return None

    def fail(self, code: str, message: str) -> None:
        return None


_NO_SPAN = _NoSpan()


class _NoSpanContext:
    """A reusable ``with`` that yields the no-op span: nothing allocated per use."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return _NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _NoSpanContext()

# The one switch: the OpenTelemetry side while tracing is on, else None. A process-wide
# value because OpenTelemetry's tracer provider is one (and the carrier crosses
# processes that each configure their own).
_tracing: OtelTracing | None = None


def tracing_enabled() -> bool:
    """Whether spans are being recorded."""
    return _tracing is not None


def enable_tracing(provider: Any = None) -> None:
    """Record spans through ``provider`` (an OpenTelemetry ``TracerProvider``; ``None``:
    the global one, as an application set it up with ``trace.set_tracer_provider``).

    Raises:
        ModuleNotFoundError: OpenTelemetry's API is not installed.
    """
    global _tracing
    from ._otel import OtelTracing

    _tracing = OtelTracing(provider)


def disable_tracing() -> None:
    """Stop recording spans (those open end as they would)."""
    global _tracing
    _tracing = None


_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


@contextlib.contextmanager
def open_tracing(environ: Mapping[str, str] | None = None) -> Iterator[bool]:
    """Trace to the OTLP HTTP endpoint the standard variables name, for the block.

    On when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is
    set and ``OTEL_SDK_DISABLED`` is not ``true``; ``OTEL_SERVICE_NAME`` (default
    ``omnigent``), ``OTEL_TRACES_SAMPLER`` and the exporter's own variables apply as the
    SDK reads them. Yields whether tracing is on. Without the ``otel`` extra a set
    endpoint is a warning, never an error: the program runs untraced.

    Resource handling: leaving the block flushes the spans still queued (at most a
    few seconds, in the exporter's thread) and shuts the provider down.
    """
    env = os.environ if environ is None else environ
    wanted = any(env.get(name) for name in _ENDPOINT_VARIABLES)
    if not wanted or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        yield False
        return
    try:
        from ._otel import open_exporting_provider
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry's SDK is not installed: "
            "pip install 'omnigent[otel]' to export traces"
        )
        yield False
        return
    with open_exporting_provider(env) as provider:
        enable_tracing(provider)
        try:
            yield True
        finally:
            disable_tracing()


def agent_span(
    agent: str,
    *,
    session_id: str,
    model: str | None,
    harness: str,
    response_id: str,
    parent: Carrier | None = None,
) -> contextlib.AbstractContextManager[Span]:
    """``invoke_agent {agent}``: one turn of ``session_id`` (``gen_ai.conversation.id``).

    ``parent`` (a carrier) is the span it belongs under — the tool call that
    dispatched a sub-agent's message — else the current span, if any.
    """
    tracing = _tracing
    if tracing is None:
        return _OFF
    return tracing.agent_span(agent, session_id, model, harness, response_id, parent)


def chat_span(
    model: str, *, provider: str | None = None
) -> contextlib.AbstractContextManager[Span]:
    """``chat {model}``: one model call of the current turn."""
    tracing = _tracing
    if tracing is None:
        return _OFF
    return tracing.chat_span(model, provider)


def tool_span(tool: str, *, call_id: str) -> contextlib.AbstractContextManager[Span]:
    """``execute_tool {tool}``: one tool call (``gen_ai.tool.call.id`` ``call_id``)."""
    tracing = _tracing
    if tracing is None:
        return _OFF
    return tracing.tool_span(tool, call_id)


def carrier() -> dict[str, str]:
    """The current span as W3C trace context (``traceparent``, ``tracestate``); ``{}``
    while tracing is off or no span is open. Put it in the message that crosses."""
    tracing = _tracing
    if tracing is None:
        return {}
    return tracing.inject()


def continued(received: Any) -> contextlib.AbstractContextManager[None]:
    """Spans opened inside the block are children of ``received``, a carrier read from
    the other side (anything else — ``None``, a malformed value — is ignored: a trace
    context is advisory and never fails a request)."""
    tracing = _tracing
    if tracing is None or not _valid_carrier(received):
        return contextlib.nullcontext()
    return tracing.attached(received)


def _valid_carrier(value: Any) -> bool:
    if not isinstance(value, Mapping) or not value:
        return False
    return all(
        isinstance(k, str) and isinstance(v, str) and len(v) <= _MAX_CARRIER_VALUE
        for k, v in value.items()
    )
